package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/tierlog/tierlog/tierstate"
)

// Result is one random run: the seed, the steps taken, the trace, and
// the first violation (nil if none).
type Result struct {
	Seed      uint64
	Steps     int
	Trace     []string
	Violation *Violation
	// Errors counts actions that returned an error other than a
	// violation (each is in the trace).
	Errors int
	// Actions are the steps taken, as script actions (Replay, Shrink).
	Actions []Action
	// StoreFaults are the object-store faults injected (shrink.go).
	StoreFaults StoreFaults
	// ControlPlaneFaults are the control-plane faults injected (faults.go).
	ControlPlaneFaults ControlPlaneFaults
	// Swarm is the run's swarm configuration (nil with NoSwarm).
	Swarm *Swarm
	// WALFaults count the hostile WAL read answers injected, by kind
	// (walfaults.go).
	WALFaults map[string]int
}

// Failed reports whether the run broke an invariant.
func (r *Result) Failed() bool { return r.Violation != nil }

// TraceTail is the last n trace lines, joined.
func (r *Result) TraceTail(n int) string {
	l := r.Trace
	if len(l) > n {
		l = l[len(l)-n:]
	}
	out := ""
	for _, s := range l {
		out += s + "\n"
	}
	return out
}

// RunOptions configure Run.
type RunOptions struct {
	// Steps is the number of steps of the run. Default 500.
	Steps int
	// Cluster configures the cluster (its Seed is set to the run's).
	Cluster Options
	// Weights replaces the weight of the scheduler's actions by name
	// ("produce", "lose-disk", ...; 0 removes one). Nil: the default
	// menu. The swarm configuration scales these weights. A name of the
	// form "action@phase" weighs the action only while the partition's
	// switch is in that phase (classic, seal-pending, phase-1, phase-2:
	// tierstate.Phase's names), over its plain weight: so a menu can
	// order what a scenario needs, e.g. unclean elections and tiering
	// in the classic phase, brokers that stay down through the seal,
	// forced leaders in phase 2 (phaseMenus).
	Weights map[string]int
	// NoSwarm turns swarm testing off: every seed takes the menu as
	// Weights leaves it. By default each seed draws its swarm
	// configuration (DrawSwarm: which fault kinds are on, and how much
	// each weighs), prints it as its first trace line and records it in
	// Result.Swarm.
	NoSwarm bool
}

// choice is one weighted action of the scheduler.
type choice struct {
	name   string
	weight int
	run    func(c *Cluster, rng *rand.Rand) error
}

func anyBroker(c *Cluster, rng *rand.Rand) int32 { return int32(1 + rng.IntN(len(c.brokers))) }

// choices is the scheduler's menu. Every entry calls one Cluster
// method, the same ones a scripted run calls.
var choices = []choice{
	{"produce", 20, func(c *Cluster, rng *rand.Rand) error { return c.Produce(1 + rng.IntN(5)) }},
	// Idempotent producers (producer.go): a new batch, its answer lost
	// one time in four, and the retry of the oldest unacknowledged one.
	{"produce-idempotent", 10, func(c *Cluster, rng *rand.Rand) error {
		return c.ProduceIdempotent(1+rng.IntN(producerCount), 1+rng.IntN(5), rng.IntN(4) == 0)
	}},
	{"retry-produce", 6, func(c *Cluster, rng *rand.Rand) error {
		return c.RetryProduce(1+rng.IntN(producerCount), rng.IntN(4) == 0)
	}},
	{"replicate", 25, func(c *Cluster, rng *rand.Rand) error { return c.Replicate(anyBroker(c, rng)) }},
	{"consolidate", 12, func(c *Cluster, rng *rand.Rand) error { return c.Consolidate(anyBroker(c, rng)) }},
	{"consume", 8, func(c *Cluster, rng *rand.Rand) error { return c.Consume(rng.Int64N(c.model.end + 1)) }},
	{"copy", 8, func(c *Cluster, rng *rand.Rand) error { return c.Copy(anyBroker(c, rng)) }},
	{"expire", 4, func(c *Cluster, rng *rand.Rand) error { return c.Expire(anyBroker(c, rng)) }},
	{"prune", 4, func(c *Cluster, rng *rand.Rand) error { return c.Prune() }},
	{"elect", 3, func(c *Cluster, rng *rand.Rand) error { return c.ElectLeader(anyBroker(c, rng)) }},
	{"shrink-isr", 2, func(c *Cluster, rng *rand.Rand) error { return c.ShrinkISR(anyBroker(c, rng)) }},
	{"crash", 2, func(c *Cluster, rng *rand.Rand) error { return c.Crash(anyBroker(c, rng)) }},
	{"restart", 4, func(c *Cluster, rng *rand.Rand) error { return c.Restart(anyBroker(c, rng)) }},
	// A crash at an arbitrary file operation of what the broker does
	// next (crashfs.go), most often within its next few operations. The
	// image keeps none (a quarter of the cuts), half (a quarter) or all
	// of the unsynced data (crashImage draws the same items for a seed in
	// every run). IntN(4)'s low bit is the IntN(2) of the menu that drew
	// only none or all, so a seed keeps its schedule and its cuts that
	// kept all.
	{"arm-crash", 2, func(c *Cluster, rng *rand.Rand) error {
		return c.ArmCrash(anyBroker(c, rng), 1+rng.IntN(1+rng.IntN(60)), []int{0, 100, 50, 100}[rng.IntN(4)])
	}},
	// A controlled shutdown (rolling restarts): the log manager's managed
	// close, its clean-shutdown markers and checkpoints.
	{"stop", 2, func(c *Cluster, rng *rand.Rand) error { return c.Stop(anyBroker(c, rng), -1) }},
	// The topic's flush.messages (swarm kind flush): 1, or Kafka's
	// default of no flush per message, where the records of a replica
	// are durable only once a roll, a clean close or a recovery point
	// flushes them (each broker takes the setting at its next restart).
	// It weighs 0 by default (-weights flush=2 takes it) for open
	// findings. Fixed: a hole a roll left below the recovered log end
	// (guard roll-sync-order, scripts flush_unlimited_hole_after_crash
	// and flush_unlimited_producers_lost_after_restart) and a log start
	// checkpointed above the durable log end (guard
	// log-start-data-first, script
	// flush_unlimited_producers_lost_after_delete_records). Open, with
	// weight 2 in seeds 1 to 300: seed 53 (a restart drops the snapshot
	// a later recovery from the stale recovery point needs, Duplicate)
	// and seed 263 (LostRecord, not shrinkable: a crash that
	// keeps part of the unsynced data can keep a rolled-to segment's
	// entry and data while losing the rolled segment's unsynced tail, a
	// hole no fsync order prevents, only a sync before the new segment
	// is created). A weight here shifts every seed's draws (simCatches).
	{"flush", 0, func(c *Cluster, rng *rand.Rand) error {
		if c.flushUnlimited {
			return c.SetFlush(1)
		}
		return c.SetFlush(0)
	}},
	// Kafka's periodic high-watermark checkpoint (every 5 s): a crash
	// after it restores the high watermarks it wrote. Swarm kind
	// hw-checkpoint: runs without it lose the high watermark at every
	// crash.
	{"checkpoint-hw", 1, func(c *Cluster, rng *rand.Rand) error {
		return c.CheckpointHighWatermark(anyBroker(c, rng))
	}},
	// An admin's DeleteRecords up to the high watermark, most often
	// inside a segment (producer.go); followers raise their log start in
	// their next fetch. The raise is durable when it returns (the
	// offsets checkpoint before the epoch checkpoint: script
	// delete_records_log_start_after_crash), and the reseal's range
	// starts at the log start (script reseal_below_log_start). When it
	// reaches the seal, the classic prefix is empty: start-phase-2 records
	// no epoch, and the replica check recreates a replica holding records
	// below the seal (script start_phase_2_below_cross_tier_start).
	{"delete-records", 2, func(c *Cluster, rng *rand.Rand) error {
		lb := c.leaderBroker()
		if lb == nil {
			return ErrNotApplicable
		}
		l := lb.Log()
		return c.DeleteRecords(l.LogStartOffset() + 1 + rng.Int64N(max(1, l.HighWatermark()-l.LogStartOffset())))
	}},
	{"lose-disk", 1, func(c *Cluster, rng *rand.Rand) error { return c.LoseDisk(anyBroker(c, rng)) }},
	{"faults", 2, func(c *Cluster, rng *rand.Rand) error {
		if c.store.rate() > 0 {
			return c.SetFaults(0)
		}
		return c.SetFaults(c.swarm.storeFaultRate())
	}},
	// Hostile answers on the WAL's read path (walfaults.go): wrong
	// bytes from the object store, a stale or buggy FindBatches.
	{"wal-read-faults", 1, func(c *Cluster, rng *rand.Rand) error {
		if r, _ := c.walFaults.rates(); r > 0 {
			return c.SetWALReadFaults(0)
		}
		return c.SetWALReadFaults(0.3)
	}},
	{"plane-faults", 1, func(c *Cluster, rng *rand.Rand) error {
		if _, r := c.walFaults.rates(); r > 0 {
			return c.SetPlaneFaults(0)
		}
		return c.SetPlaneFaults(0.3)
	}},
	// The liveness check: catch-up rounds on a quiet cluster must bring
	// the replicas to the high watermarks (check_progress.go).
	{"settle", 1, func(c *Cluster, rng *rand.Rand) error { return c.Settle() }},
	// An incident ends (allClear): the injected faults stop, the network
	// heals, the brokers that are down come back, and then the cluster
	// must make progress (Settle). Settle alone finds a quiet cluster
	// only when every random fault happens to be off at once. It weighs
	// 0 by default (-weights all-clear=1 takes it): the default menu's
	// seeds stay as docs/simulation.md gives them. A seal lowered below
	// the one InitDisklessLog set leaves a hole in no tier up to the WAL's
	// high watermark, which the progress check accepts (walHoleAtSeal,
	// script lowered_seal_consolidation_stuck: seeds 115, 128, 222 and
	// 256 of 1 to 300 with weight 1); seed 372 (script
	// empty_prefix_recreated_leader_rebuild) was a library bug.
	{"all-clear", 0, func(c *Cluster, rng *rand.Rand) error { return c.allClear() }},
	{"arm-switch", 1, func(c *Cluster, rng *rand.Rand) error {
		if c.step < 60 {
			return ErrNotApplicable
		}
		return c.ArmSwitch()
	}},
	{"switch-step", 6, func(c *Cluster, rng *rand.Rand) error { return c.SwitchStep() }},
	// The operator's undo (undo.go) where Inkless's switch document allows
	// it: while the seal is pending.
	{"undo-switch", 1, func(c *Cluster, rng *rand.Rand) error {
		if c.ctrl.rec.State.Phase() != tierstate.PhaseSealPending {
			return ErrNotApplicable
		}
		return c.UndoSwitch()
	}},
	{"rearm-switch", 1, func(c *Cluster, rng *rand.Rand) error {
		if c.ctrl.rec.State.Phase() != tierstate.PhaseSealPending || c.ctrl.rec.Leader < 0 {
			return ErrNotApplicable
		}
		return c.RearmSwitch()
	}},
	// Controller elections a request or the controller's periodic task
	// asks for: refused (not applicable) when Kafka refuses them.
	{"elect-preferred", 1, func(c *Cluster, rng *rand.Rand) error { return c.ElectLeaders(ElectPreferred) }},
	// Unclean ElectLeaders requests weigh 0 by default (-weights
	// elect-unclean=1 takes them): with weight 1, seeds 1 to 700 pass
	// with every guard on (8 broke before the seal lineage, tag 105; see
	// simCatches' seal-epoch-lineage). The default menu keeps them out
	// so that its seeds stay the guard table's.
	{"elect-unclean", 0, func(c *Cluster, rng *rand.Rand) error { return c.ElectLeaders(ElectUnclean) }},
	{"rebalance", 1, func(c *Cluster, rng *rand.Rand) error { return c.RebalanceLeaders() }},
	// The operator's kafka-topic-switch.sh commands, where they apply:
	// describe once a seal is committed, the recovery commands in phase
	// 1, a forced seal also while the seal is pending (the tool's
	// refusals are the action's errors).
	{"describe", 1, func(c *Cluster, rng *rand.Rand) error {
		id := anyBroker(c, rng)
		if !c.ctrl.rec.State.SealCommitted() || !c.running(id) {
			return ErrNotApplicable
		}
		_, err := c.Describe(id)
		return err
	}},
	{"elect-replica", 1, func(c *Cluster, rng *rand.Rand) error {
		id := anyBroker(c, rng)
		if c.ctrl.rec.State.Phase() != tierstate.PhaseOne || !c.running(id) {
			return ErrNotApplicable
		}
		return c.ElectReplica(id)
	}},
	{"start-phase-2", 1, func(c *Cluster, rng *rand.Rand) error {
		if c.ctrl.rec.State.Phase() != tierstate.PhaseOne {
			return ErrNotApplicable
		}
		return c.StartPhaseTwo(rng.IntN(2) == 0)
	}},
	{"reseal", 1, func(c *Cluster, rng *rand.Rand) error {
		st := c.ctrl.rec.State
		lb := c.leaderBroker()
		pending := st.Phase() == tierstate.PhaseSealPending
		if (st.Phase() != tierstate.PhaseOne && !pending) || lb == nil {
			return ErrNotApplicable
		}
		// A seal lowered below S: the leader's log end
		// (github.com/aiven/inkless/pull/871's recovery), the end of the
		// prefix in remote storage (the seal start-phase-2 of /pull/855
		// sets), or any offset of the leader's log (the tool checks only
		// the range, so an operator may name one inside a batch, which
		// PlanReseal refuses: tierstate.SealBatchError). PlanReseal
		// refuses one outside [X, leader's log end].
		l := lb.Log()
		var seal int64
		switch rng.IntN(3) {
		case 0:
			seal = l.LogEndOffset()
		case 1:
			seal = c.HighestRemoteOffset() + 1
		default:
			lo := l.LogStartOffset()
			seal = lo + rng.Int64N(max(1, l.LogEndOffset()-lo))
		}
		// While the seal is pending the operator forces it (the tool's
		// seal S from seal-pending): PlanReseal takes only the leader's
		// log end there (tierstate.ForcedSealError, script
		// reseal_while_pending), and only at the leader's high watermark
		// (tierstate.UnreplicatedSealError, script
		// forced_seal_above_high_watermark).
		if !pending && seal >= st.Seal() {
			return ErrNotApplicable
		}
		return c.Reseal(seal)
	}},
	// Log directory moves (kafka-reassign-partitions.sh
	// --reassignment-json-file with log_dirs: alterReplicaLogDirs): a
	// move starts on any running replica, its fetcher copies in rounds of
	// its own, so a move runs across leader changes, the seal, phase 2,
	// crashes (the future log stays on the disk) and the truncations of
	// the current log; the future log replaces the current one once both
	// end at the same offset (moveChoices).
	moveChoices[0], moveChoices[1], moveChoices[2],
	{"force-leader", 1, func(c *Cluster, rng *rand.Rand) error {
		if c.ctrl.rec.State.Phase() != tierstate.PhaseTwo {
			return ErrNotApplicable
		}
		return c.ForceLeaderInPhaseTwo(anyBroker(c, rng))
	}},
	// A remote log task in two steps: the lookup of the highest offset
	// in remote storage (the follower task's, or the copy task's before
	// it uploads), made without the log lock after reading the log's
	// truncation count, and its install. The task runs concurrently with
	// the broker, and a slow disk or metadata read makes it lag, so
	// truncations, elections and consolidation fall between the two.
	{"task-lookup", 3, func(c *Cluster, rng *rand.Rand) error {
		id := anyBroker(c, rng)
		off, err := c.remoteTaskOffset(id)
		if err != nil {
			return err
		}
		return c.remoteTaskLookup(id, off, false) // just derived: no second lookup
	}},
	{"task-install", 2, func(c *Cluster, rng *rand.Rand) error { return c.RemoteTaskInstall(anyBroker(c, rng)) }},
	// The WAL control plane's faults (faultCP): an outage refusing
	// commits and reads for a while, and commits that take effect but
	// lose their answer. Each toggles.
	{"cp-outage", 1, func(c *Cluster, rng *rand.Rand) error {
		on, _ := c.walCP.state()
		return c.ControlPlaneOutage(!on)
	}},
	{"cp-ambiguous", 1, func(c *Cluster, rng *rand.Rand) error {
		_, on := c.walCP.state()
		return c.ControlPlaneLostAnswers(!on)
	}},
	// A network partition cutting one broker off from the others, then
	// its heal (the row toggles).
	{"partition", 1, func(c *Cluster, rng *rand.Rand) error {
		if c.cut != 0 {
			return c.Heal()
		}
		return c.PartitionBroker(anyBroker(c, rng))
	}},
	{"clock-jump", 1, func(c *Cluster, rng *rand.Rand) error {
		return c.ClockJump(clockJumps[rng.IntN(len(clockJumps))])
	}},
	// Late PUTs (lateputs.go, swarm kind late-puts): the store applies a
	// PUT the copy cancelled at the end of the step. It toggles; weight 0
	// by default (a weight shifts every seed's draws: simCatches takes
	// it in its own menu).
	{"late-puts", 0, func(c *Cluster, rng *rand.Rand) error { return c.SetLatePuts(!c.store.late()) }},
	// A commit that fails inside its step of the control plane's group
	// commit (faultCP.stepFault, swarm kind cp-step-fault): weight 0 by
	// default, as late-puts.
	{"cp-step-fault", 0, func(c *Cluster, rng *rand.Rand) error { return c.ArmCommitStepFault() }},
	// The topic deleted and created again under its name with a new
	// topic id (recreate.go), in the classic phase: the new log takes the
	// deleted one's directory name, which the log manager's checkpoints
	// key. Weight 0 by default, as late-puts (simCatches takes it).
	{"recreate-topic", 0, func(c *Cluster, rng *rand.Rand) error { return c.RecreateTopic() }},
	// Incidents as chains of the actions above (scenario.go), weight 0
	// by default.
	scenarioChoices[0],
}

// remoteTaskOffset is what a remote log task of broker id would look up
// now: the highest offset of its log's lineage in remote storage
// (remote.Manager.HighestRemoteOffset, as the follower and copy tasks
// find it: an epoch's highest offset whose segments a leader of another
// lineage deleted does not count). Not applicable
// while the broker is down, has no log, already runs a task, or remote
// storage holds nothing of its lineage.
func (c *Cluster) remoteTaskOffset(id int32) (int64, error) {
	b, l, err := c.upLog(id)
	if err != nil {
		return 0, err
	}
	if b.task != nil || b.Prior().Offline {
		return 0, notApplicable("broker %d runs a task or is offline", id)
	}
	off, err := b.mgr.HighestRemoteOffset(c.tp, l)
	if err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, notApplicable("broker %d: nothing of its lineage in remote storage", id)
	}
	return off, nil
}

// allClear is the end of an incident, each part its own step as the
// other rows take it: the object-store, WAL read and control-plane faults
// off, the partitioned broker healed, every broker that is down
// restarted (on its disk as the crash or stop left it), then Settle. It
// stops at the first violation; a crash armed at a file operation stays
// armed (Settle then does not apply).
func (c *Cluster) allClear() error {
	var errs []error
	var v *Violation
	step := func(err error) bool {
		if errors.As(err, &v) {
			return false
		}
		if err != nil && !errors.Is(err, ErrNotApplicable) {
			errs = append(errs, err)
		}
		return true
	}
	read, plane := c.walFaults.rates()
	outage, lost := c.walCP.state()
	ok := (c.store.rate() == 0 || step(c.SetFaults(0))) &&
		(read == 0 || step(c.SetWALReadFaults(0))) &&
		(plane == 0 || step(c.SetPlaneFaults(0))) &&
		(!outage || step(c.ControlPlaneOutage(false))) &&
		(!lost || step(c.ControlPlaneLostAnswers(false))) &&
		(c.cut == 0 || step(c.Heal()))
	for _, b := range c.brokers {
		if ok && !b.up {
			ok = step(c.Restart(b.ID))
		}
	}
	if ok {
		step(c.Settle())
	}
	if v != nil {
		return v
	}
	return errors.Join(errs...)
}

// phaseMenu is the scheduler's menu while the switch is in the phase
// named phase: the choices with w's plain weights, then w's weights for
// that phase, scaled by the swarm configuration sw (nil: none).
func phaseMenu(w map[string]int, phase string, sw *Swarm) ([]choice, int, error) {
	out := slices.Clone(choices)
	set := func(name string, weight int) error {
		i := slices.IndexFunc(out, func(ch choice) bool { return ch.name == name })
		if i < 0 || weight < 0 {
			return fmt.Errorf("sim: weight %d for action %q", weight, name)
		}
		out[i].weight = weight
		return nil
	}
	for name, weight := range w {
		if !strings.Contains(name, "@") {
			if err := set(name, weight); err != nil {
				return nil, 0, err
			}
		}
	}
	for name, weight := range w {
		action, ph, ok := strings.Cut(name, "@")
		if !ok {
			continue
		}
		if !slices.Contains(phaseNames[:], ph) {
			return nil, 0, fmt.Errorf("sim: weight %q: no phase %q (one of %s)", name, ph, strings.Join(phaseNames[:], ", "))
		}
		if ph != phase {
			continue
		}
		if err := set(action, weight); err != nil {
			return nil, 0, err
		}
	}
	if sw != nil {
		sw.apply(out)
	}
	total := 0
	for _, ch := range out {
		total += ch.weight
	}
	if total == 0 {
		return nil, 0, fmt.Errorf("sim: every action weighs 0 (phase %q)", phase)
	}
	return out, total, nil
}

// phaseNames are the switch's phases by tierstate.Phase, as weights name
// them.
var phaseNames = [...]string{
	tierstate.PhaseClassic:     tierstate.PhaseClassic.String(),
	tierstate.PhaseSealPending: tierstate.PhaseSealPending.String(),
	tierstate.PhaseOne:         tierstate.PhaseOne.String(),
	tierstate.PhaseTwo:         tierstate.PhaseTwo.String(),
}

// phaseMenus are the scheduler's menus by the switch's phase. Without a
// weight "action@phase" they are one menu, and a seed draws the same
// schedule as before phase weights existed.
type phaseMenus struct {
	menus  [len(phaseNames)][]choice
	totals [len(phaseNames)]int
}

func newPhaseMenus(w map[string]int, sw *Swarm) (*phaseMenus, error) {
	m := &phaseMenus{}
	for p, name := range phaseNames {
		var err error
		if m.menus[p], m.totals[p], err = phaseMenu(w, name, sw); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// pick draws the next action from the menu of c's current phase.
func (m *phaseMenus) pick(c *Cluster, rng *rand.Rand) choice {
	p := int(c.ctrl.rec.State.Phase())
	if p < 0 || p >= len(m.menus) {
		p = 0
	}
	return pick(rng, m.menus[p], m.totals[p])
}

// Run is one random schedule: a cluster seeded with seed and steps
// actions chosen by a PCG source seeded with it. The same seed gives
// the same trace. It stops at the first violation; the error is for
// a cluster that could not be built or closed.
func Run(seed uint64, opts RunOptions) (*Result, error) {
	if opts.Steps == 0 {
		opts.Steps = 500
	}
	opts.Cluster.Seed = seed
	var sw *Swarm
	if !opts.NoSwarm {
		sw = DrawSwarm(seed)
	}
	menus, err := newPhaseMenus(opts.Weights, sw)
	if err != nil {
		return nil, err
	}
	c, err := New(opts.Cluster)
	if err != nil {
		return nil, err
	}
	res := &Result{Seed: seed, Swarm: sw}
	c.rec.on = true
	if sw != nil {
		c.swarm = sw
		c.trace.lines = append(c.trace.lines, sw.String())
		if c.trace.sink != nil {
			c.trace.sink(sw.String())
		}
	}
	rng := rand.New(rand.NewPCG(seed, 0x7363686564)) // "sched"
	for c.step < opts.Steps {
		err := menus.pick(c, rng).run(c, rng)
		var v *Violation
		switch {
		case errors.As(err, &v):
			res.Violation = v
		case err != nil && !errors.Is(err, ErrNotApplicable):
			res.Errors++
		}
		if res.Violation != nil {
			break
		}
	}
	res.Steps, res.Trace = c.step, c.Trace()
	res.Actions, res.StoreFaults, res.ControlPlaneFaults = c.rec.actions, c.store.faults(), c.walCP.faults()
	res.WALFaults = c.walFaults.Fired()
	if err := c.Close(); err != nil && res.Violation == nil {
		return res, fmt.Errorf("sim: close after seed %d: %w", seed, err)
	}
	return res, nil
}

func pick(rng *rand.Rand, menu []choice, total int) choice {
	n := rng.IntN(total)
	for _, ch := range menu {
		if n < ch.weight {
			return ch
		}
		n -= ch.weight
	}
	return menu[len(menu)-1]
}

// RunSeeds runs each seed in turn and returns the first failing run
// (nil when every seed passes) and how many ran.
func RunSeeds(seeds []uint64, opts RunOptions) (*Result, int, error) {
	for i, s := range seeds {
		res, err := Run(s, opts)
		if err != nil {
			return res, i + 1, err
		}
		if res.Failed() {
			return res, i + 1, nil
		}
	}
	return nil, len(seeds), nil
}
