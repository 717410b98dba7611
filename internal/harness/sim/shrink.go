package sim

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tierlog/tierlog/tierstate"
)

// Shrinking: a random run records each step it takes as a script-level
// Action (the command of testdata/scripts with its arguments); Replay
// runs such a list on a new cluster, and Shrink reduces a failing list —
// dropping steps, lowering counts and offsets — while the replay still
// breaks the same invariant, then Shrunk.Script prints it as a script.

// Action is one step as a script command: the command name (the trace's
// action name), the broker it names (0: none) and its other arguments.
type Action struct {
	Cmd    string
	Broker int32
	Args   []Arg
}

// Arg is one key=value argument of an Action (Val "": a bare flag).
type Arg struct{ Key, Val string }

// String is the action as a script line: "produce n=3",
// "crash broker=2 unsynced=50".
func (a Action) String() string {
	var sb strings.Builder
	sb.WriteString(a.Cmd)
	if a.Broker > 0 {
		fmt.Fprintf(&sb, " broker=%d", a.Broker)
	}
	for _, arg := range a.Args {
		sb.WriteByte(' ')
		sb.WriteString(arg.Key)
		if arg.Val != "" {
			sb.WriteByte('=')
			sb.WriteString(arg.Val)
		}
	}
	return sb.String()
}

// arg is the value of key, "" and false if a has none.
func (a Action) arg(key string) (string, bool) {
	for _, x := range a.Args {
		if x.Key == key {
			return x.Val, true
		}
	}
	return "", false
}

func (a Action) intArg(key string) (int64, bool, error) {
	v, ok := a.arg(key)
	if !ok {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, true, fmt.Errorf("sim: action %q: %s=%q is not an integer", a, key, v)
	}
	return n, true, nil
}

// withArg is a copy of a with key set to val.
func (a Action) withArg(key, val string) Action {
	b := a
	b.Args = slices.Clone(a.Args)
	for i := range b.Args {
		if b.Args[i].Key == key {
			b.Args[i].Val = val
			return b
		}
	}
	b.Args = append(b.Args, Arg{key, val})
	return b
}

// ErrUnreplayable is returned by Replay for an action it cannot run: a
// command it does not know, or one recorded without an argument it needs.
var ErrUnreplayable = errors.New("sim: action cannot be replayed")

// brokerActions are the commands whose only argument is the broker.
var brokerActions = map[string]func(*Cluster, int32) error{
	"replicate":       (*Cluster).Replicate,
	"catch-up":        (*Cluster).CatchUp,
	"elect":           (*Cluster).ElectLeader,
	"unclean-elect":   (*Cluster).UncleanElection,
	"roll":            (*Cluster).Roll,
	"task-install":    (*Cluster).RemoteTaskInstall,
	"shrink-isr":      (*Cluster).ShrinkISR,
	"lose-disk":       (*Cluster).LoseDisk,
	"restart":         (*Cluster).Restart,
	"copy":            (*Cluster).Copy,
	"expire":          (*Cluster).Expire,
	"consolidate":     (*Cluster).Consolidate,
	"restart-unclean": (*Cluster).RestartUnclean,
	"wipe-disk":       (*Cluster).WipeDisk,
	"log-dir-failure": (*Cluster).LogDirFailure,
	"elect-replica":   (*Cluster).ElectReplica,
	"start-move":      (*Cluster).StartMove,
	"move-copy":       (*Cluster).MoveCopy,
	"promote-future":  (*Cluster).PromoteFuture,
	"partition":       (*Cluster).PartitionBroker,
	"checkpoint-hw":   (*Cluster).CheckpointHighWatermark,
	"describe": func(c *Cluster, id int32) error {
		_, err := c.Describe(id)
		return err
	},
}

// clusterActions are the commands without arguments.
var clusterActions = map[string]func(*Cluster) error{
	"arm-switch": (*Cluster).ArmSwitch,
	// The operator's undo of a pending switch (undo.go).
	"undo-switch":  (*Cluster).UndoSwitch,
	"rearm-switch": (*Cluster).RearmSwitch,
	"switch-step":  (*Cluster).SwitchStep,
	"prune":        (*Cluster).Prune,
	"repair":       (*Cluster).Repair,
	"rebalance":    (*Cluster).RebalanceLeaders,
	"heal":         (*Cluster).Heal,
	// A commit failing inside its step (faults.go).
	"cp-step-fault": (*Cluster).ArmCommitStepFault,
	// The topic deleted and created again with a new topic id (recreate.go).
	"recreate-topic": (*Cluster).RecreateTopic,
}

// noBrokerArg are commands whose trace line names a broker (the leader)
// that the script command does not take.
var noBrokerArg = map[string]bool{"produce": true, "consume": true, "switch-step": true, "prune": true,
	"produce-idempotent": true, "retry-produce": true, "delete-records": true}

// apply runs a on c, the Cluster method its script command runs.
func (a Action) apply(c *Cluster) error {
	if f, ok := brokerActions[a.Cmd]; ok {
		return f(c, a.Broker)
	}
	if f, ok := clusterActions[a.Cmd]; ok {
		return f(c)
	}
	need := func(key string) (int64, error) {
		n, ok, err := a.intArg(key)
		if err == nil && !ok {
			err = fmt.Errorf("%w: %q has no %s", ErrUnreplayable, a, key)
		}
		return n, err
	}
	switch a.Cmd {
	case "produce":
		n, err := need("n")
		if err != nil {
			return err
		}
		return c.Produce(int(n))
	case "consume":
		off, err := need("offset")
		if err != nil {
			return err
		}
		return c.Consume(off)
	case "crash":
		pct, ok, err := a.intArg("unsynced")
		if err != nil {
			return err
		}
		if !ok {
			return c.Crash(a.Broker) // the share drawn from the cluster's seed
		}
		return c.CrashKeeping(a.Broker, int(pct))
	case "flush":
		n, err := need("messages")
		if err != nil {
			return err
		}
		return c.SetFlush(n)
	case "faults":
		v, ok := a.arg("rate")
		rate, err := strconv.ParseFloat(v, 64)
		if !ok || err != nil {
			return fmt.Errorf("%w: %q has no rate", ErrUnreplayable, a)
		}
		return c.SetFaults(rate)
	case "cp-outage", "cp-ambiguous", "late-puts":
		v, _ := a.arg("on")
		on, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%w: %q has no on=true|false", ErrUnreplayable, a)
		}
		switch a.Cmd {
		case "cp-outage":
			return c.ControlPlaneOutage(on)
		case "late-puts":
			return c.SetLatePuts(on)
		}
		return c.ControlPlaneLostAnswers(on)
	case "clock-jump":
		ms, err := need("ms")
		if err != nil {
			return err
		}
		return c.ClockJump(ms)
	case "force-leader":
		if _, ok := a.arg("phase-2"); ok {
			return c.ForceLeaderInPhaseTwo(a.Broker)
		}
		return c.ForceLeader(a.Broker)
	case "task-lookup":
		off, err := need("offset")
		if err != nil {
			return err
		}
		return c.RemoteTaskLookup(a.Broker, off)
	case "stop":
		from, ok, err := a.intArg("lose-tail-from")
		if err != nil {
			return err
		}
		if !ok {
			from = -1
		}
		return c.Stop(a.Broker, from)
	case "start-phase-2":
		_, loss := a.arg("accept-data-loss")
		return c.StartPhaseTwo(loss)
	case "elect-leaders":
		t := map[string]ElectionType{"preferred": ElectPreferred, "unclean": ElectUnclean}
		v, _ := a.arg("type")
		et, ok := t[v]
		if !ok {
			return fmt.Errorf("%w: %q has no type", ErrUnreplayable, a)
		}
		return c.ElectLeaders(et)
	case "delete-records":
		off, err := need("offset")
		if err != nil {
			return err
		}
		return c.DeleteRecords(off)
	case "arm-crash":
		ops, err := need("ops")
		if err != nil {
			return err
		}
		pct, err := need("unsynced")
		if err != nil {
			return err
		}
		return c.ArmCrash(a.Broker, int(ops), int(pct))
	case "produce-idempotent", "retry-produce":
		return a.applyProducer(c)
	case "reseal":
		seal, err := need("seal")
		if err != nil {
			return err
		}
		return c.Reseal(seal)
	}
	if ok, err := a.applyRate(c); ok {
		return err
	}
	return fmt.Errorf("%w: unknown command %q", ErrUnreplayable, a.Cmd)
}

// recorder records the steps a cluster takes as Actions (Cluster.do
// calls done after every action; the actions note their arguments while
// they run).
type recorder struct {
	on      bool
	args    []Arg
	actions []Action
}

// note adds an argument to the action being run.
func (r *recorder) note(key string, val any) {
	if r.on {
		r.args = append(r.args, Arg{key, fmt.Sprint(val)})
	}
}

// done ends the action named action (its trace broker, -1: none);
// applied is false when it took no step.
func (r *recorder) done(action string, broker int32, applied bool) {
	args := r.args
	r.args = nil
	if !applied || !r.on {
		return
	}
	if broker < 0 || noBrokerArg[action] {
		broker = 0
	}
	r.actions = append(r.actions, Action{Cmd: action, Broker: broker, Args: args})
}

// replayPreconditions are the scheduler's preconditions that keep an
// action from losing committed records by design: a replay (and so a
// shrink) skips the action where the scheduler would not take it, or a
// shrunk schedule could break an invariant through the action alone (a
// force-leader before phase 2 elects a replica that lacks the committed
// records, which scripts do on purpose).
var replayPreconditions = map[string]func(*Cluster) bool{
	"force-leader": func(c *Cluster) bool { return c.ctrl.rec.State.Phase() == tierstate.PhaseTwo },
}

// Replayed is one replay: the actions that took a step (those not
// applicable are left out), each one's output as a script prints it, and
// the violation that ended it (nil if none).
type Replayed struct {
	Applied   []Action
	Outputs   []string
	Violation *Violation
	// State is the new cluster's state, as the script's `new` prints it.
	State string
}

// Replay runs actions on a new cluster built with opts, as a script does
// (the initial record's delta is no step's detail), skipping actions that
// are not applicable, up to the first violation. Other errors of an
// action are part of its output; ErrUnreplayable and a cluster that
// cannot be built or closed are returned.
func Replay(opts Options, actions []Action) (*Replayed, error) {
	var lines []string
	opts.Trace = func(l string) { lines = append(lines, l) }
	c, err := New(opts)
	if err != nil {
		return nil, err
	}
	c.trace.dropDetails()
	r := &Replayed{State: c.stateString()}
	for _, a := range actions {
		lines = lines[:0]
		if pre, ok := replayPreconditions[a.Cmd]; ok && !pre(c) {
			continue // the scheduler would not take it here
		}
		err := a.apply(c)
		if errors.Is(err, ErrNotApplicable) {
			continue
		}
		if errors.Is(err, ErrUnreplayable) {
			return nil, errors.Join(err, c.Close())
		}
		r.Applied = append(r.Applied, a)
		r.Outputs = append(r.Outputs, formatStep(lines, err))
		if errors.As(err, &r.Violation) {
			break
		}
	}
	if err := c.Close(); err != nil && r.Violation == nil {
		return r, err
	}
	return r, nil
}

// formatStep is a step's output in a script: each trace line the action
// wrote (its details indented on lines of their own), then its outcome.
func formatStep(lines []string, err error) string {
	var sb strings.Builder
	for _, l := range lines {
		parts := strings.Split(l, " | ")
		sb.WriteString(strings.TrimLeft(parts[0], " "))
		sb.WriteByte('\n')
		for _, p := range parts[1:] {
			sb.WriteString("  ")
			sb.WriteString(p)
			sb.WriteByte('\n')
		}
	}
	if len(lines) == 0 && err == nil {
		sb.WriteString("(no step)\n")
	}
	var v *Violation
	switch {
	case errors.As(err, &v):
		fmt.Fprintf(&sb, "violation: %v\n", v)
	case errors.Is(err, ErrNotApplicable):
		fmt.Fprintf(&sb, "not applicable: %v\n", err)
	case err != nil:
		fmt.Fprintf(&sb, "error: %v\n", err)
	}
	return sb.String()
}

// stateString is the controller's record and the shared tiers, as the
// script command `state` prints them.
func (c *Cluster) stateString() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "leader=%d leader-epoch=%d partition-epoch=%d isr=%v\n", c.Leader(), c.LeaderEpoch(),
		c.PartitionEpoch(), c.ISR())
	fmt.Fprintf(&sb, "switch: %s\n", c.State())
	fmt.Fprintf(&sb, "seal=%d", c.Seal())
	if w, hw, ok := c.WAL(); ok {
		fmt.Fprintf(&sb, " wal: start=%d hw=%d", w, hw)
	} else {
		sb.WriteString(" wal: none")
	}
	fmt.Fprintf(&sb, " highest-remote-offset=%d committed-end=%d\n", c.HighestRemoteOffset(), c.Committed())
	return sb.String()
}

// ShrinkOptions configure Shrink.
type ShrinkOptions struct {
	// Cluster builds each replay's cluster (the failing run's options,
	// with its seed).
	Cluster Options
	// Before, if set, runs before each replay (a test fixes crypto/rand
	// to the seed there, as the script runner does).
	Before func()
	// MaxRuns bounds the replays. Default 2000.
	MaxRuns int
	// Deadline, if not zero, ends the search early with the smallest
	// list found so far.
	Deadline time.Time
}

// Shrunk is a shrunk schedule: its replay, the seed and the number of
// steps of the run it came from, and the replays it took.
type Shrunk struct {
	Replayed
	Seed     uint64
	Original int
	Runs     int
	Elapsed  time.Duration
	opts     Options
}

// ErrNotReproduced is Shrink's answer when the replay of the recorded
// actions does not break the invariant the run broke.
var ErrNotReproduced = errors.New("sim: the replay does not break the invariant")

// Shrink reduces actions, a schedule whose replay breaks invariant kind,
// to a shorter one that still breaks it: it cuts the schedule at the
// violation, removes chunks of steps (halves, quarters, ... single steps,
// repeated while any removal succeeds), then lowers arguments (produce
// n to 1, consume offsets to 0 or half, a crash keeping 0 or 100 % of
// unsynced data), removing steps again after a change. The result is
// the smallest failing list found within opts' budget.
func Shrink(actions []Action, kind Kind, opts ShrinkOptions) (*Shrunk, error) {
	if opts.MaxRuns == 0 {
		opts.MaxRuns = 2000
	}
	start := time.Now()
	s := &Shrunk{Seed: opts.Cluster.Seed, Original: len(actions), opts: opts.Cluster}
	budget := func() bool {
		return s.Runs < opts.MaxRuns && (opts.Deadline.IsZero() || time.Now().Before(opts.Deadline))
	}
	// try replays cand; on the violation of kind it becomes the current
	// schedule (cut at the violation).
	try := func(cand []Action) (bool, error) {
		s.Runs++
		if opts.Before != nil {
			opts.Before()
		}
		r, err := Replay(opts.Cluster, cand)
		if err != nil {
			return false, err
		}
		if r.Violation == nil || r.Violation.Kind != kind {
			return false, nil
		}
		s.Replayed = *r
		return true, nil
	}
	ok, err := try(actions)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w (%v, seed %d, %d actions)", ErrNotReproduced, kind, s.Seed, len(actions))
	}
	removeChunks := func() (bool, error) {
		shrunk := false
		for changed := true; changed && budget(); {
			changed = false
			for size := len(s.Applied) / 2; size >= 1 && budget(); size /= 2 {
				// The last step is the violation: keep it.
				for i := 0; i+size < len(s.Applied) && budget(); {
					cur := s.Applied
					cand := append(slices.Clone(cur[:i]), cur[i+size:]...)
					ok, err := try(cand)
					if err != nil {
						return shrunk, err
					}
					if ok {
						changed, shrunk = true, true
						continue
					}
					i += size
				}
			}
		}
		return shrunk, nil
	}
	if _, err := removeChunks(); err != nil {
		return nil, err
	}
	for changed := true; changed && budget(); {
		changed = false
		for i := 0; i < len(s.Applied) && budget(); i++ {
			for _, alt := range simpler(s.Applied[i]) {
				cand := slices.Clone(s.Applied)
				cand[i] = alt
				ok, err := try(cand)
				if err != nil {
					return nil, err
				}
				if ok {
					changed = true
					break
				}
			}
		}
		if changed {
			if _, err := removeChunks(); err != nil {
				return nil, err
			}
		}
	}
	s.Elapsed = time.Since(start)
	return s, nil
}

// simpler are a's simpler variants, simplest first: smaller counts and
// offsets, a crash with a fixed share of unsynced data kept.
func simpler(a Action) []Action {
	var out []Action
	lower := func(key string, floor int64) {
		n, ok, err := a.intArg(key)
		if !ok || err != nil || n <= floor {
			return
		}
		out = append(out, a.withArg(key, strconv.FormatInt(floor, 10)))
		if half := n / 2; half > floor {
			out = append(out, a.withArg(key, strconv.FormatInt(half, 10)))
		}
	}
	switch a.Cmd {
	case "produce":
		lower("n", 1)
	case "consume":
		lower("offset", 0)
	case "crash", "arm-crash":
		switch v, _ := a.arg("unsynced"); v {
		case "0":
		case "100":
			out = append(out, a.withArg("unsynced", "0"))
		default: // drawn from the seed, or 50
			out = append(out, a.withArg("unsynced", "0"), a.withArg("unsynced", "100"))
		}
	}
	return out
}

// Script is the shrunk schedule as a file of testdata/scripts: comment
// lines (header, each line prefixed with "# "), the cluster, then one
// command per step with the output the replay printed, the last one
// ending in the violation. TestScripts fails on it until the bug is
// fixed; then `go test ./internal/harness/sim -run TestScripts/NAME -rewrite`
// records the fixed output.
func (s *Shrunk) Script(header string) string {
	var sb strings.Builder
	for _, l := range strings.Split(strings.TrimRight(header, "\n"), "\n") {
		sb.WriteString(strings.TrimRight("# "+l, " "))
		sb.WriteByte('\n')
	}
	sb.WriteByte('\n')
	o := s.opts
	cmd := "new"
	if o.UncleanLeaderElection || o.MinInsyncReplicas != 0 {
		cmd = "new-kraft"
	}
	fmt.Fprintf(&sb, "%s seed=%d", cmd, s.Seed)
	if o.Brokers != 0 && o.Brokers != 3 {
		fmt.Fprintf(&sb, " brokers=%d", o.Brokers)
	}
	if o.SegmentBytes != 0 {
		fmt.Fprintf(&sb, " segment-bytes=%d", o.SegmentBytes)
	}
	if o.MinInsyncReplicas != 0 {
		fmt.Fprintf(&sb, " min-isr=%d", o.MinInsyncReplicas)
	}
	if o.DisableEligibleLeaderReplicas {
		sb.WriteString(" no-elr") // KIP-966 is on by default
	}
	if o.UncleanLeaderElection {
		sb.WriteString(" unclean")
	}
	fmt.Fprintf(&sb, "\n----\n%s", s.State)
	if cmd == "new-kraft" {
		// new-kraft also prints KIP-966's row, which the replay does
		// not: the first -rewrite adds it.
		sb.WriteString("(rewrite)\n")
	}
	for i, a := range s.Applied {
		fmt.Fprintf(&sb, "\n%s\n----\n%s", a, s.Outputs[i])
	}
	return sb.String()
}

// StoreFaults count the object-store faults a run injected: Puts and
// Deletes failed before taking effect, and those that took effect but
// lost their response.
type StoreFaults struct{ Failed, LostResponse int }

func (s *faultStore) faults() StoreFaults {
	s.mu.Lock()
	defer s.mu.Unlock()
	return StoreFaults{Failed: s.mu.fired - s.mu.lost, LostResponse: s.mu.lost}
}
