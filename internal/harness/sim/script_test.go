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
// brokers, seed 1). Other test files of the package add commands by
// registering them in scriptCommands from an init function.

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
			f, ok := scriptCommands[d.Cmd]
			if !ok {
				d.Fatalf(t, "unknown command %q", d.Cmd)
			}
			if d.Cmd != "new" && e.c == nil {
				e.newCluster(Options{Seed: 1})
			}
			return f(e, d)
		})
	})
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

// brokerAction is a command that runs one Cluster action on a broker.
func brokerAction(f func(c *Cluster, id int32) error) scriptCommand {
	return func(e *scriptEnv, d *datadriven.TestData) string {
		return e.result(f(e.c, scriptBroker(e.t, d)))
	}
}

// clusterAction is a command that runs one Cluster action without
// arguments.
func clusterAction(f func(c *Cluster) error) scriptCommand {
	return func(e *scriptEnv, _ *datadriven.TestData) string { return e.result(f(e.c)) }
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
	registerScriptCommand("produce", func(e *scriptEnv, d *datadriven.TestData) string {
		var n int
		d.ScanArgs(e.t, "n", &n)
		return e.result(e.c.Produce(n))
	})
	registerScriptCommand("consume", func(e *scriptEnv, d *datadriven.TestData) string {
		var off int64
		d.ScanArgs(e.t, "offset", &off)
		return e.result(e.c.Consume(off))
	})
	registerScriptCommand("crash", func(e *scriptEnv, d *datadriven.TestData) string {
		id := scriptBroker(e.t, d)
		var pct int
		if d.MaybeScanArgs(e.t, "unsynced", &pct) {
			return e.result(e.c.CrashKeeping(id, pct))
		}
		return e.result(e.c.Crash(id))
	})
	registerScriptCommand("task-lookup", func(e *scriptEnv, d *datadriven.TestData) string {
		var off int64
		d.ScanArgs(e.t, "offset", &off)
		return e.result(e.c.RemoteTaskLookup(scriptBroker(e.t, d), off))
	})
	registerScriptCommand("faults", func(e *scriptEnv, d *datadriven.TestData) string {
		var rate float64
		d.ScanArgs(e.t, "rate", &rate)
		return e.result(e.c.SetFaults(rate))
	})
	for name, f := range map[string]func(*Cluster, int32) error{
		"replicate":     (*Cluster).Replicate,
		"catch-up":      (*Cluster).CatchUp,
		"elect":         (*Cluster).ElectLeader,
		"force-leader":  (*Cluster).ForceLeader,
		"unclean-elect": (*Cluster).UncleanElection,
		"roll":          (*Cluster).Roll,
		"task-install":  (*Cluster).RemoteTaskInstall,
		"shrink-isr":    (*Cluster).ShrinkISR,
		"lose-disk":     (*Cluster).LoseDisk,
		"restart":       (*Cluster).Restart,
		"copy":          (*Cluster).Copy,
		"expire":        (*Cluster).Expire,
		"consolidate":   (*Cluster).Consolidate,
	} {
		registerScriptCommand(name, brokerAction(f))
	}
	for name, f := range map[string]func(*Cluster) error{
		"arm-switch":  (*Cluster).ArmSwitch,
		"switch-step": (*Cluster).SwitchStep,
		"prune":       (*Cluster).Prune,
	} {
		registerScriptCommand(name, clusterAction(f))
	}
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
