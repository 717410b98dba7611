package sim

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/cryptotest"

	"github.com/cockroachdb/datadriven"
)

// Scripted runs: each file of testdata/scripts is one cluster driven by
// hand, one command per Cluster action, with the trace lines each
// action wrote as its expected output (the step's summary, then each of
// its details on a line of its own). Invariants are checked after every
// step, as in random runs; a violation is printed and fails the test.
// Rewrite the expected output with -rewrite.
//
// Commands (broker ids are 1-based; `b=` is short for `broker=`):
//
//	new [brokers=N] [seed=N] [segment-bytes=N] [no-elr]
//	produce n=N          replicate broker=N     catch-up broker=N
//	consume offset=N     elect broker=N         force-leader broker=N
//	shrink-isr broker=N  crash broker=N [unsynced=0|50|100]
//	lose-disk broker=N   restart broker=N       arm-switch
//	switch-step          copy broker=N          expire broker=N
//	prune                consolidate broker=N   faults rate=F
//	unclean-elect broker=N                      roll broker=N
//	task-lookup broker=N offset=N               task-install broker=N
//	state                broker id=N            check
//
// Without `new`, the first command builds a default cluster (three
// brokers, seed 1). A command that is a Cluster action runs through the
// table random runs are replayed and shrunk with (Action.apply), so every
// action a random run records can be scripted; scriptCommands holds the
// others (the cluster's state, checks), and other test files of the
// package register more from an init function.

// scriptEnv is one script's cluster and test.
type scriptEnv struct {
	t *testing.T
	c *Cluster
	// lines are the trace lines written since the last command.
	lines []string
	// onViolation, if set, takes each violation instead of failing the
	// test (shrink_test.go runs scripts expected to fail).
	onViolation func(*Violation)
}

// violated fails the test with v, or hands it to onViolation.
func (e *scriptEnv) violated(v *Violation) {
	if e.onViolation != nil {
		e.onViolation(v)
		return
	}
	e.t.Errorf("invariant violated: %v", v)
}

// scriptCommand runs one command and returns its output.
type scriptCommand func(e *scriptEnv, d *datadriven.TestData) string

// scriptCommands is the command table, by command name. Register more
// from an init function of another _test.go file of the package.
var scriptCommands = map[string]scriptCommand{}

// registerScriptCommand adds a command, failing on a duplicate name.
func registerScriptCommand(name string, f scriptCommand) {
	if _, ok := scriptCommands[name]; ok {
		panic(fmt.Sprintf("sim: script command %q registered twice", name))
	}
	scriptCommands[name] = f
}

func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/scripts", func(t *testing.T, path string) {
		e := &scriptEnv{t: t}
		t.Cleanup(func() {
			if e.c != nil {
				_ = e.c.Close()
			}
		})
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			e.t = t
			return e.run(d)
		})
	})
}

// run runs one command of a script.
func (e *scriptEnv) run(d *datadriven.TestData) string {
	f, ok := scriptCommands[d.Cmd]
	if !ok {
		// Every other command is a Cluster action, run as a replayed
		// step is (Action.apply): one table for scripts, random runs'
		// replays and the shrinker.
		f = actionCommand
	}
	if d.Cmd != "new" && e.c == nil {
		e.newCluster(Options{Seed: 1})
	}
	return f(e, d)
}

// newCluster builds the script's cluster with crypto/rand fixed to its
// seed (WAL object keys and remote segment ids come from it).
func (e *scriptEnv) newCluster(opts Options) {
	if e.c != nil {
		e.t.Fatalf("the script has a cluster already")
	}
	cryptotest.SetGlobalRandom(e.t, opts.Seed)
	opts.Trace = func(line string) { e.lines = append(e.lines, line) }
	c, err := New(opts)
	if err != nil {
		e.t.Fatalf("new cluster: %v", err)
	}
	e.c = c
	// The initial record is no step: its delta is not any step's detail.
	c.trace.dropDetails()
	e.lines = nil
}

// broker is the command's broker argument (broker=N or b=N).
func scriptBroker(t *testing.T, d *datadriven.TestData) int32 {
	var id int
	if !d.MaybeScanArgs(t, "broker", &id) && !d.MaybeScanArgs(t, "b", &id) && !d.MaybeScanArgs(t, "id", &id) {
		d.Fatalf(t, "%s needs broker=N", d.Cmd)
	}
	return int32(id)
}

// result prints the trace lines the action wrote, then its outcome: a
// violation (which also fails the test), a precondition that did not
// hold, or another error.
func (e *scriptEnv) result(err error) string {
	var v *Violation
	if errors.As(err, &v) {
		e.violated(v)
	}
	s := formatStep(e.lines, err)
	e.lines = nil
	return s
}

// actionCommand runs a command that is a Cluster action: the line as an
// Action (broker=N, b=N or id=N its broker, the other arguments as
// written), run by Action.apply.
func actionCommand(e *scriptEnv, d *datadriven.TestData) string {
	a := Action{Cmd: d.Cmd}
	for _, arg := range d.CmdArgs {
		switch {
		case arg.Key == "broker" || arg.Key == "b" || arg.Key == "id":
			a.Broker = scriptBroker(e.t, d)
		case len(arg.Vals) == 0:
			a.Args = append(a.Args, Arg{Key: arg.Key})
		default:
			a.Args = append(a.Args, Arg{arg.Key, arg.Vals[0]})
		}
	}
	err := a.apply(e.c)
	if errors.Is(err, ErrUnreplayable) {
		d.Fatalf(e.t, "%v", err)
	}
	return e.result(err)
}

func init() {
	registerScriptCommand("new", func(e *scriptEnv, d *datadriven.TestData) string {
		opts := Options{Seed: 1}
		d.MaybeScanArgs(e.t, "brokers", &opts.Brokers)
		d.MaybeScanArgs(e.t, "seed", &opts.Seed)
		d.MaybeScanArgs(e.t, "segment-bytes", &opts.SegmentBytes)
		opts.DisableEligibleLeaderReplicas = d.HasArg("no-elr")
		e.newCluster(opts)
		return e.stateString()
	})
	registerScriptCommand("state", func(e *scriptEnv, _ *datadriven.TestData) string { return e.stateString() })
	registerScriptCommand("broker", func(e *scriptEnv, d *datadriven.TestData) string {
		return e.brokerString(scriptBroker(e.t, d))
	})
	registerScriptCommand("check", func(e *scriptEnv, _ *datadriven.TestData) string {
		if v := e.c.Check(); v != nil {
			e.violated(v)
			return fmt.Sprintf("violation: %v\n", v)
		}
		return "ok\n"
	})
}

// stateString is the controller's record and the shared tiers.
func (e *scriptEnv) stateString() string { return e.c.stateString() }

// brokerString is one broker's log and driver record.
func (e *scriptEnv) brokerString(id int32) string {
	b := e.c.Broker(id)
	if b == nil {
		e.t.Fatalf("no broker %d", id)
	}
	if !b.Up() {
		return fmt.Sprintf("b%d down\n", id)
	}
	var sb strings.Builder
	l := b.Log()
	if l == nil {
		fmt.Fprintf(&sb, "b%d up, no log\n", id)
	} else {
		ls, lls, leo, hw := b.Offsets()
		fmt.Fprintf(&sb, "b%d log-start=%d local-start=%d leo=%d hw=%d highest-remote=%d\n", id, ls, lls, leo, hw,
			l.HighestOffsetInRemoteStorage())
		fmt.Fprintf(&sb, "epochs: %s\n", formatEpochs(b.Epochs()))
	}
	p := b.Prior()
	var flags []string
	for _, f := range []struct {
		set  bool
		name string
	}{{p.Hosted, "hosted"}, {p.Offline, "offline"}, {p.Fenced, "fenced"}} {
		if f.set {
			flags = append(flags, f.name)
		}
	}
	if len(flags) == 0 {
		flags = append(flags, "new")
	}
	fetcher := "none"
	switch {
	case b.classic != nil && b.consolidating:
		fetcher = fmt.Sprintf("classic from b%d and consolidation", b.classic.leader)
	case b.classic != nil:
		fetcher = fmt.Sprintf("classic from b%d", b.classic.leader)
	case b.consolidating:
		fetcher = "consolidation"
	}
	fmt.Fprintf(&sb, "prior: %s leader-epoch=%d; fetcher: %s; in-isr=%t\n", strings.Join(flags, ","), p.LeaderEpoch,
		fetcher, slices.Contains(e.c.ISR(), id))
	return sb.String()
}
