package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tierlog/tierlog/consolidate"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/replica"
	"github.com/tierlog/tierlog/tierstate"
)

// partRecord is the controller's partition record: KRaft's PartitionRecord
// fields the brokers read, with the switch tags as a tierstate.State.
type partRecord struct {
	Leader         int32 // -1: no leader
	LeaderEpoch    int32
	PartitionEpoch int32
	ISR            []int32 // sorted
	// ELR is KIP-966's eligible leader replicas (sorted): replicas that
	// left the ISR while it was below min.insync.replicas, so they hold
	// every record committed up to then, and did not shut down
	// uncleanly since. Empty with Options.DisableEligibleLeaderReplicas.
	ELR []int32
	// LastKnownELR is KIP-966's last known leader: the leader when the
	// ISR became empty, cleared once the partition has a leader again.
	LastKnownELR []int32
	// Recovering is LeaderRecoveryState RECOVERING: the leader was
	// elected from outside the ISR and ELR (unclean or last-known-leader
	// election) and has not told the controller it recovered.
	Recovering bool
	State      tierstate.State
}

func (r partRecord) String() string {
	s := fmt.Sprintf("leader=%d epoch=%d pe=%d isr=%v", r.Leader, r.LeaderEpoch, r.PartitionEpoch, r.ISR)
	if len(r.ELR) > 0 || len(r.LastKnownELR) > 0 {
		s += fmt.Sprintf(" elr=%v last-known-elr=%v", r.ELR, r.LastKnownELR)
	}
	if r.Recovering {
		s += " RECOVERING"
	}
	return s + " " + r.State.String()
}

func (r partRecord) inISR(id int32) bool { return slices.Contains(r.ISR, id) }

// controller is the KRaft controller's part the simulation needs: the
// record, clean elections from the ISR, ISR changes, and the switch
// state's operations (every change validated by tierstate). It also
// holds what the leader knows of its followers: the log end of each
// one's last fetch in the current leader epoch.
type controller struct {
	rec partRecord
	// fetched is the leader's view of each follower's log end (from its
	// last fetch in this leader epoch).
	fetched map[int32]int64
	// replicas is the assignment: every broker, by id.
	replicas []int32
	// elr is KIP-966 on (not Options.DisableEligibleLeaderReplicas);
	// minISR and unclean are MinInsyncReplicas and UncleanLeaderElection.
	elr     bool
	minISR  int
	unclean bool
	// cleanStop records the brokers whose last stop was a controlled
	// shutdown (Cluster.Stop); any other stop is unclean. A broker
	// registering after an unclean shutdown leaves the ELR.
	cleanStop map[int32]bool
}

func (k *controller) init(opts Options) {
	k.rec = partRecord{Leader: 1}
	for id := 1; id <= opts.Brokers; id++ {
		k.rec.ISR = append(k.rec.ISR, int32(id))
	}
	k.replicas = slices.Clone(k.rec.ISR)
	k.fetched = map[int32]int64{}
	k.elr, k.minISR, k.unclean = !opts.DisableEligibleLeaderReplicas, opts.MinInsyncReplicas, opts.UncleanLeaderElection
	if k.minISR == 0 {
		k.minISR = 1
	}
	k.cleanStop = map[int32]bool{}
}

// newLeader moves leadership to id (-1: none) in a new leader epoch.
func (k *controller) newLeader(id int32) {
	k.rec.Leader = id
	k.rec.LeaderEpoch++
	k.rec.PartitionEpoch++
	k.fetched = map[int32]int64{}
}

func (k *controller) setISR(isr []int32) {
	isr = slices.Clone(isr)
	slices.Sort(isr)
	k.rec.ISR = slices.Compact(isr)
	k.rec.PartitionEpoch++
}

// delta is the record as broker id reads it.
func (k *controller) delta(id int32) replica.Delta {
	r := k.rec
	return replica.Delta{Leader: r.Leader == id, LeaderID: r.Leader, LeaderEpoch: r.LeaderEpoch,
		PartitionEpoch: r.PartitionEpoch, InIsr: r.inISR(id), State: r.State}
}

// publish sends the controller's record to every running broker (one
// metadata delta each, through its replica driver) and lets the leader
// take up its duties. It returns the first driver error; a failed
// delta takes that replica offline, which the trace shows.
func (c *Cluster) publish(why string) error {
	var first error
	var notes []string
	for _, b := range c.brokers {
		if !b.up {
			continue
		}
		plan, err := b.driver.Apply(c.ctx, c.ctrl.delta(b.ID))
		notes = append(notes, fmt.Sprintf("b%d:%s", b.ID, planSummary(plan)))
		if err != nil {
			notes = append(notes, fmt.Sprintf("(b%d error: %v)", b.ID, err))
			if first == nil {
				first = fmt.Errorf("broker %d: %w", b.ID, err)
			}
			continue
		}
		c.afterDelta(b, plan)
	}
	c.trace.detail("delta %s (%s): %s", c.ctrl.rec, why, strings.Join(notes, " "))
	return first
}

// planSummary is a plan's action kinds, compact.
func planSummary(p replica.Plan) string {
	parts := make([]string, len(p))
	for i, a := range p {
		parts[i] = a.Kind.String()
		if a.Offset >= 0 {
			parts[i] += fmt.Sprintf("@%d", a.Offset)
		}
	}
	return strings.Join(parts, ",")
}

// afterDelta is what the broker does around a delta the driver does
// not: a new classic leader assigns its epoch at its log end (Kafka's
// makeLeader), the leader's classic gate and switch steps follow the
// state, and a consolidating leader arms its pruner at the seal.
func (c *Cluster) afterDelta(b *Broker, plan replica.Plan) {
	rec := c.ctrl.rec
	l := b.Log()
	if rec.Leader != b.ID || l == nil || b.Prior().Fenced {
		b.sw, b.gate, b.gateFor = nil, nil, nil
		return
	}
	if plan.Has(replica.BecomeLeader) && b.epochStart.epoch != rec.LeaderEpoch {
		b.epochStart.epoch, b.epochStart.offset = rec.LeaderEpoch, l.LogEndOffset()
	}
	classic := rec.State.Phase() == tierstate.PhaseClassic || rec.State.Phase() == tierstate.PhaseSealPending
	if classic && plan.Has(replica.BecomeLeader) {
		if e, ok := l.LatestEpoch(); !ok || e < rec.LeaderEpoch {
			_ = l.AssignEpochStartOffset(rec.LeaderEpoch, l.LogEndOffset())
		}
	}
	if b.gateFor != l {
		b.gate, b.gateFor = consolidate.NewClassicGate(l, rec.State), l
		b.sw = nil
	}
	b.gate.SetState(rec.State)
	if b.sw == nil || b.swEpoch != rec.LeaderEpoch {
		b.sw = &consolidate.LeaderSwitch{TP: c.tp, BrokerID: b.ID, LeaderEpoch: rec.LeaderEpoch, Log: l,
			Gate: b.gate, Controller: switchController{c}, ControlPlane: c.cp, NowMs: func() int64 { return c.nowMs }}
		b.swEpoch = rec.LeaderEpoch
	}
	if rec.State.SealCommitted() && b.consolidating {
		b.pruner.Arm(c.tp, rec.State.Seal())
	}
}

// switchController is the controller's side of the leader's switch
// requests: the seal commit and the phase-2 commit, validated by
// tierstate and published as a delta.
type switchController struct{ c *Cluster }

func (s switchController) ProposeSeal(_ context.Context, _ remote.TopicIDPartition, epoch int32, p consolidate.SealProposal) error {
	k := &s.c.ctrl
	if epoch != k.rec.LeaderEpoch {
		return fmt.Errorf("sim: seal proposal in epoch %d, leader epoch %d: %w", epoch, k.rec.LeaderEpoch, tierstate.ErrInvalidTransition)
	}
	st, err := k.rec.State.CommitSealProposal(p)
	if err != nil {
		return err
	}
	k.rec.State = st
	k.rec.PartitionEpoch++
	s.c.trace.detail("controller commits seal %d", p.Seal)
	return s.c.publish("seal committed")
}

func (s switchController) SetClassicPrefixInRemoteStorage(_ context.Context, _ remote.TopicIDPartition, req tierstate.ClassicPrefixRequest) error {
	k := &s.c.ctrl
	st, err := k.rec.State.SetClassicPrefixInRemoteStorage(req, tierstate.Leadership{Leader: k.rec.Leader, LeaderEpoch: k.rec.LeaderEpoch})
	if err != nil {
		return err
	}
	// The flag goes through Kafka's PartitionChangeBuilder, which bumps
	// the leader epoch; E_d (tag 102) is the epoch the record produces
	// (github.com/aiven/inkless/pull/827).
	// The same record sets the ISR to the active assigned replicas
	// (phaseTwoISR), as the operator's start-phase-2 does.
	k.rec.State = st
	k.rec.LeaderEpoch = st.DisklessLeaderEpoch()
	k.changeISR(s.c.phaseTwoISR())
	s.c.trace.detail("controller commits phase 2: R=%d E_d=%d", st.LastClassicLeaderEpoch(), st.DisklessLeaderEpoch())
	return s.c.publish("phase 2 committed")
}

// phaseTwoISR is the ISR of a record that enters phase 2, the flag
// commit (SetClassicPrefixInRemoteStorage) and the operator's
// start-phase-2 alike: every assigned replica whose broker is active
// (registered and not fenced); a fenced broker stays out
// (github.com/aiven/inkless/pull/827). From phase 2 on every record is
// in remote storage or the WAL, so any active replica can serve: each
// one runs the phase-2 replica check on the record and rebuilds what it
// lacks.
func (c *Cluster) phaseTwoISR() []int32 {
	var isr []int32
	for _, id := range c.ctrl.replicas {
		if c.running(id) {
			isr = append(isr, id)
		}
	}
	return isr
}

// election is how the controller chose a leader, for the trace.
type election int8

const (
	noElection       election = iota // the leader stays
	cleanElection                    // from the ISR
	elrElection                      // from the ELR (KIP-966), ISR empty
	lastKnownLeader                  // KIP-966's last-known-leader election
	uncleanElection                  // unclean.leader.election.enable
	noLeaderElection                 // nobody can lead
)

func (e election) String() string {
	return [...]string{"none", "clean", "elr", "last-known-leader", "unclean", "no-leader"}[e]
}

// note is the election for a delta's reason: "" for none or a clean
// one (the trace of a run without KIP-966 stays as it was).
func (e election) note() string {
	if e == noElection || e == cleanElection {
		return ""
	}
	return "; " + e.String() + " election"
}

// without returns ids without x, sorted.
func without(ids []int32, x ...int32) []int32 {
	return slices.DeleteFunc(slices.Clone(ids), func(id int32) bool { return slices.Contains(x, id) })
}

func union(a, b []int32) []int32 {
	u := append(slices.Clone(a), b...)
	slices.Sort(u)
	return slices.Compact(u)
}

// changeISR is KRaft's PartitionChangeBuilder for a new ISR: with ELR
// on, an ISR at or above min.insync.replicas empties the ELR, and one
// below it puts every replica that leaves (ISR and ELR minus the new
// ISR) into the ELR (maybePopulateTargetElr); an ISR that becomes empty
// records the leader as the last known one (maybeUpdateLastKnownLeader,
// only the first time the partition becomes leaderless).
func (k *controller) changeISR(isr []int32) {
	isr = union(nil, isr)
	if k.elr {
		if len(isr) >= k.minISR {
			k.rec.ELR = nil
		} else {
			k.rec.ELR = without(union(k.rec.ISR, k.rec.ELR), isr...)
		}
		if len(isr) == 0 && k.rec.Leader >= 0 && !slices.Equal(k.rec.LastKnownELR, []int32{k.rec.Leader}) {
			k.rec.LastKnownELR = []int32{k.rec.Leader}
		}
	}
	k.rec.ISR = isr
	k.rec.PartitionEpoch++
}

// electLeader is PartitionChangeBuilder.electAnyLeader on the current
// record: the leader stays if it is in the ISR and running; else the
// first running ISR member; with ELR on and an empty ISR, the first
// running ELR member (clean: it holds every committed record) or, with
// ISR and ELR empty, the last known leader (canElectLastKnownLeader,
// checked before the election type, so phase 1 does not block it:
// github.com/aiven/inkless/pull/871); then, if unclean elections are
// on and the partition is not in phase 1, any running replica. An
// election from outside the ISR and ELR makes the ISR the leader alone,
// clears the ELR (not a clean election) and makes the leader RECOVERING; one from the ELR moves the leader to the
// ISR. A new leader gets a new leader epoch; one that stays does not.
func (k *controller) electLeader(running func(int32) bool) election {
	r := &k.rec
	if r.Leader >= 0 && r.inISR(r.Leader) && running(r.Leader) {
		return noElection
	}
	kind, next := k.electAnyLeader(running, k.unclean)
	return k.elect(kind, next)
}

// validLeader is PartitionChangeBuilder.isValidNewLeader: a running
// replica in the ISR, or, with ELR on and an empty ISR, in the ELR.
func (k *controller) validLeader(id int32, running func(int32) bool) bool {
	r := &k.rec
	return id >= 0 && running(id) && (r.inISR(id) || (k.elr && len(r.ISR) == 0 && slices.Contains(r.ELR, id)))
}

// validKind is the election that makes a valid leader lead: clean from
// the ISR, from the ELR when the ISR is empty.
func (k *controller) validKind(id int32) election {
	if k.rec.inISR(id) {
		return cleanElection
	}
	return elrElection
}

// lastKnownLeaderCandidate is canElectLastKnownLeader: ELR on, ISR and
// ELR empty, and the one last known leader running; -1 otherwise.
func (k *controller) lastKnownLeaderCandidate(running func(int32) bool) int32 {
	r := &k.rec
	if k.elr && len(r.ISR) == 0 && len(r.ELR) == 0 && len(r.LastKnownELR) == 1 && running(r.LastKnownELR[0]) {
		return r.LastKnownELR[0]
	}
	return -1
}

// electAnyLeader is PartitionChangeBuilder.electAnyLeader's choice: the
// first valid replica in the ISR's order (then the ELR's), the last
// known leader, then, if unclean is set and the partition is not in
// phase 1 (the phase-1 guard does not set Election.UNCLEAN), the first
// running assigned replica.
func (k *controller) electAnyLeader(running func(int32) bool, unclean bool) (election, int32) {
	r := &k.rec
	for _, id := range r.ISR {
		if running(id) {
			return cleanElection, id
		}
	}
	for _, id := range r.ELR {
		if k.validLeader(id, running) {
			return elrElection, id
		}
	}
	if id := k.lastKnownLeaderCandidate(running); id >= 0 {
		return lastKnownLeader, id
	}
	if unclean && r.State.Phase() != tierstate.PhaseOne {
		for _, id := range k.replicas {
			if running(id) {
				return uncleanElection, id
			}
		}
	}
	return noLeaderElection, -1
}

// electPreferredLeader is PartitionChangeBuilder.electPreferredLeader's
// choice: the preferred replica (the first assigned one) if it is a
// valid leader; else the current leader if it is one (no change); else
// the first other valid assigned replica; else the last known leader
// (canElectLastKnownLeader, also for a preferred election:
// github.com/aiven/inkless/pull/871). Never unclean.
func (k *controller) electPreferredLeader(running func(int32) bool) (election, int32) {
	r := &k.rec
	if p := k.replicas[0]; k.validLeader(p, running) {
		return k.validKind(p), p
	}
	if k.validLeader(r.Leader, running) {
		return noElection, r.Leader
	}
	for _, id := range k.replicas[1:] {
		if k.validLeader(id, running) {
			return k.validKind(id), id
		}
	}
	if id := k.lastKnownLeaderCandidate(running); id >= 0 {
		return lastKnownLeader, id
	}
	return noLeaderElection, -1
}

// elect applies an election's choice to the record: no leader (a new
// leader epoch only when the partition had one), or next in a new leader
// epoch, with the ISR and ELR each kind of election leaves.
func (k *controller) elect(kind election, next int32) election {
	r := &k.rec
	if kind == noElection {
		return kind
	}
	if next < 0 {
		if r.Leader >= 0 {
			k.newLeader(-1)
		}
		return noLeaderElection
	}
	k.newLeader(next)
	switch kind {
	case elrElection:
		r.ELR = without(r.ELR, next)
		r.ISR = []int32{next}
	case lastKnownLeader, uncleanElection:
		// Not a clean election: the ELR and the last known leader are
		// cleared (PartitionChangeBuilder.maybePopulateTargetElr).
		r.ISR = []int32{next}
		r.ELR = nil
		r.Recovering = true
	}
	if k.elr {
		r.LastKnownELR = nil // the partition has a leader again
	}
	return kind
}

// ElectionType is an ElectLeaders request's election type (Kafka's
// ElectionType).
type ElectionType int8

const (
	// ElectPreferred (PREFERRED) moves leadership to the preferred
	// replica, the first assigned one.
	ElectPreferred ElectionType = iota
	// ElectUnclean (UNCLEAN) elects a leaderless partition's leader,
	// from outside the ISR if need be.
	ElectUnclean
)

func (t ElectionType) String() string {
	if t == ElectUnclean {
		return "unclean"
	}
	return "preferred"
}

// ElectLeaders refusals, Kafka's error codes. Each wraps ErrNotApplicable:
// the record does not change, and a random run skips the action.
var (
	// ErrElectionNotNeeded: a preferred election while the preferred
	// replica leads, or an unclean one while the partition has a leader
	// (ELECTION_NOT_NEEDED).
	ErrElectionNotNeeded = fmt.Errorf("%w: ELECTION_NOT_NEEDED", ErrNotApplicable)
	// ErrPreferredLeaderNotAvailable: a preferred election that changes
	// nothing (PREFERRED_LEADER_NOT_AVAILABLE).
	ErrPreferredLeaderNotAvailable = fmt.Errorf("%w: PREFERRED_LEADER_NOT_AVAILABLE", ErrNotApplicable)
	// ErrEligibleLeadersNotAvailable: an unclean election that finds no
	// leader, in phase 1 because unclean elections are blocked there
	// (ELIGIBLE_LEADERS_NOT_AVAILABLE).
	ErrEligibleLeadersNotAvailable = fmt.Errorf("%w: ELIGIBLE_LEADERS_NOT_AVAILABLE", ErrNotApplicable)
)

// electLeaders is ReplicationControlManager.electLeader for the
// partition: a preferred election is not needed while the preferred
// replica leads, an unclean one while the partition has a leader; the
// PartitionChangeBuilder then chooses with Election.PREFERRED or
// Election.UNCLEAN (the phase-1 guard leaves a phase-1 partition at
// Election.ONLINE: no unclean choice, the last known leader still), and
// a choice that changes nothing is refused. The record is changed only
// when the election is not refused.
func (k *controller) electLeaders(t ElectionType, running func(int32) bool) (election, error) {
	r := &k.rec
	var kind election
	var next int32
	switch t {
	case ElectPreferred:
		if r.Leader == k.replicas[0] {
			return noElection, fmt.Errorf("%w: broker %d is the preferred leader and leads", ErrElectionNotNeeded, r.Leader)
		}
		kind, next = k.electPreferredLeader(running)
		if kind == noElection || (next < 0 && r.Leader < 0) {
			return noElection, fmt.Errorf("%w: preferred replica %d is not a valid leader; %s", ErrPreferredLeaderNotAvailable,
				k.replicas[0], r.electionView())
		}
	default:
		if r.Leader >= 0 {
			return noElection, fmt.Errorf("%w: broker %d leads", ErrElectionNotNeeded, r.Leader)
		}
		kind, next = k.electAnyLeader(running, true)
		if next < 0 {
			return noElection, fmt.Errorf("%w: no running replica can lead (%s); %s", ErrEligibleLeadersNotAvailable,
				r.State.Phase(), r.electionView())
		}
	}
	return k.elect(kind, next), nil
}

// brokerFenced is the controller's reaction to a broker that stopped
// heartbeating or shut down: out of the ISR (without ELR Kafka keeps
// the last member; with ELR the ISR may empty, the leaver joining the
// ELR), and a new leader if it led.
func (k *controller) brokerFenced(id int32, running func(int32) bool) election {
	if k.rec.inISR(id) && (k.elr || len(k.rec.ISR) > 1) {
		k.changeISR(without(k.rec.ISR, id))
	}
	if k.rec.Leader != id {
		return noElection
	}
	alive := func(x int32) bool { return x != id && running(x) }
	if !k.elr && !k.unclean {
		// Kafka before KIP-966: the first running ISR member, or none.
		next := int32(-1)
		for _, cand := range k.rec.ISR {
			if alive(cand) {
				next = cand
				break
			}
		}
		k.newLeader(next)
		if next < 0 {
			return noLeaderElection
		}
		return cleanElection
	}
	// The fenced broker cannot stay leader; electLeader keeps a leader
	// that is running and in the ISR.
	return k.electLeader(alive)
}

// brokerRegistered is the controller's reaction to a broker that
// registers again (a restart): after an unclean shutdown it leaves the
// ELR (KIP-966: it may have lost records), then a leaderless partition
// elects. Without ELR the restarted broker leads if it is in the ISR
// (Kafka elects the last ISR member when it returns).
func (k *controller) brokerRegistered(id int32, running func(int32) bool) election {
	clean := k.cleanStop[id]
	delete(k.cleanStop, id)
	if !k.elr && !k.unclean {
		if k.rec.Leader < 0 && k.rec.inISR(id) {
			k.newLeader(id)
			return cleanElection
		}
		return noElection
	}
	if k.elr && !clean && slices.Contains(k.rec.ELR, id) {
		k.rec.ELR = without(k.rec.ELR, id)
		k.rec.PartitionEpoch++
	}
	if k.rec.Leader >= 0 {
		return noElection
	}
	return k.electLeader(running)
}

// running reports whether broker id is up (registered and unfenced).
func (c *Cluster) running(id int32) bool {
	b := c.Broker(id)
	return b != nil && b.up
}

// maybeRecovered is the leader's AlterPartition that ends a RECOVERING
// state (Kafka: the leader of an unclean election reports RECOVERED once
// it leads on its log): a running leader that took up leadership (not
// fenced, not offline) reports it, and the controller publishes it.
func (c *Cluster) maybeRecovered() error {
	if !c.ctrl.rec.Recovering || c.leaderBroker() == nil {
		return nil
	}
	c.ctrl.rec.Recovering = false
	c.ctrl.rec.PartitionEpoch++
	return c.publish("leader recovered")
}

// acceptLossAtElection records, after an election from outside the ISR
// and ELR, the committed records the new leader does not hold (past its
// log end, or from the first offset where its log holds another value
// than the committed one: model.agreedEnd): KIP-966
// and unclean elections accept that loss, so the invariants stop asking
// for them. Before the seal the partition goes on from the leader's log
// end (the records past it are discarded, and new ones take their
// offsets); in phase 1 the prefix [leader's log end, seal) is lost (the
// leader is fenced until the seal comes down to its log end); in phase 2
// remote storage and the WAL still hold everything.
func (c *Cluster) acceptLossAtElection(kind election) {
	if kind != lastKnownLeader && kind != uncleanElection {
		return
	}
	end := int64(0)
	if b := c.Broker(c.ctrl.rec.Leader); b != nil && b.Log() != nil {
		end = min(c.remoteAgreedEnd(b), c.model.agreedEnd(b.Log()))
		// A leader that was outside the ISR when an earlier election
		// discarded from s on (model.staleFrom) holds the discarded
		// lineage from s; where its log starts above s, the comparison
		// above sees none of that, and the committed records from s up
		// to its log start are on no replica it leads (it never fetched
		// them: fetching would have truncated it to s).
		if s, ok := c.model.staleFrom[b.ID]; ok && b.Log().LogStartOffset() > s {
			end = min(end, s)
		}
	}
	switch st := c.ctrl.rec.State; {
	case !st.SealCommitted():
		if end < c.model.end {
			c.model.discardFrom(end, c.finishedSegments())
			// The replicas outside the ISR are stale from end, or from
			// lower down where the new leader's records become committed
			// in place of records an earlier election gave up (no
			// committed value known there: the comparison above agrees
			// without one, and the other replicas hold none of them).
			stale := end
			if b := c.leaderBroker(); b != nil && b.Log() != nil {
				stale = c.model.firstUnknown(max(b.Log().LogStartOffset(), 0), end)
			}
			if c.model.staleFrom == nil {
				c.model.staleFrom = map[int32]int64{}
			}
			for _, id := range c.ctrl.replicas {
				if old, ok := c.model.staleFrom[id]; id != c.ctrl.rec.Leader && (!ok || stale < old) {
					c.model.staleFrom[id] = stale
				}
			}
		}
	case st.Phase() == tierstate.PhaseOne:
		c.model.acceptLoss(min(end, st.Seal()), st.Seal())
	}
	if st := c.ctrl.rec.State; !st.SealCommitted() {
		// The new leader's lineage wins: its records below its own high
		// watermark (restored from its checkpoint, or learned before it
		// fell out of the ISR) are served to consumers at once, as
		// Kafka's new leader serves up to its high watermark, so they
		// are the partition's committed records now, even where an
		// earlier election had discarded them (the committed end may
		// have fallen below them).
		if b := c.leaderBroker(); b != nil && b.Log() != nil {
			if from, hw := c.model.end, b.Log().HighWatermark(); hw > from {
				if err := c.model.commitFromLog(b.Log(), from, hw); err != nil {
					c.trace.detail("commit [%d, %d): %v", from, hw, err)
				}
			}
		}
		// Its ISR is itself alone: Kafka's Partition.makeLeader raises
		// the high watermark to the log end at once
		// (maybeIncrementLeaderHW), and remote reads below the local log
		// start are served regardless of a high watermark a crash lost.
		c.advanceHW()
		// A remote segment an earlier election discarded counts again
		// when the new leader's lineage holds it (Kafka's
		// isRemoteSegmentWithinLeaderEpochs: its leader serves it, and
		// the expiration task keeps it): an unclean election may bring
		// back a lineage an earlier one had discarded.
		if b := c.leaderBroker(); b != nil && b.Log() != nil {
			c.model.restoreLineage(c.finishedSegments(), b.Log().LogStartOffset(), b.Log().LogEndOffset(), b.Epochs())
			c.acceptUnservedPrefix(b)
		}
	}
}

// acceptUnservedPrefix gives up the records of the new leader's lineage
// below its local log start that remote storage no longer serves: a
// leader of another lineage deleted their segments (the expiration's
// epoch cleanup, Kafka's rule for segments outside its lineage) after
// an earlier unclean election had discarded them. The election that
// makes their lineage the partition's again cannot bring them back; its
// leader serves none of them (and its log start goes past them), so
// they are that election's accepted loss, like the records past its log
// end.
func (c *Cluster) acceptUnservedPrefix(b *Broker) {
	l := b.Log()
	to := min(l.LocalLogStartOffset(), c.model.end)
	var readErr error
	served := func(off int64) (int64, bool) {
		res, err := b.mgr.Read(c.ctx, c.tp, off, fetchBytes, log.IsolationLogEnd, true)
		readErr = err
		if err != nil || len(res.Records) == 0 {
			return off, false
		}
		next, err := forEachRecord(res.Records, off, to, func(int64, string) error { return nil })
		return next, err == nil && next > off
	}
	for off := max(l.LogStartOffset(), 0); off < to; {
		if next, ok := served(off); ok {
			off = next
			continue
		}
		offErr := readErr
		gap := off + 1
		for gap < to {
			if _, ok := served(gap); ok {
				break
			}
			gap++
		}
		// Remote storage holding off in the new leader's lineage (a valid
		// segment) must serve it: an unreadable offset there is a lost
		// record, not a loss the election accepts, unless injected store
		// faults may have failed the read, or off's batch runs past the
		// segment's part in the lineage (the election cut it inside the
		// batch): a batch is served whole, and its records past the cut
		// are the discarded lineage's, so the read refuses it.
		if s, ok := c.validSegmentHolding(off); ok && c.store.rate() == 0 && c.unserved == nil &&
			!batchCrossesCut(offErr, off, s.EndOffset) {
			c.unserved = c.violation(LostRecord, b.ID, off,
				"remote segment [%d, %d] holds offset %d in the leader's lineage, but the leader does not serve it",
				s.StartOffset, s.EndOffset, off)
		}
		c.trace.detail("remote storage no longer serves [%d, %d) of the new leader's lineage: given up", off, gap)
		c.model.acceptLoss(off, gap)
		off = gap
	}
}

// batchCrossesCut reports whether err is a remote read's refusal of
// the batch holding off because it runs past end, the last offset of its
// segment in the leader's lineage.
func batchCrossesCut(err error, off, end int64) bool {
	var le *remote.LineageError
	return errors.As(err, &le) && le.BatchBaseOffset <= off && le.BatchLastOffset > end
}

// remoteAgreedEnd is where the records of b's lineage below its local log
// start (read through its remote log manager, which serves only its
// lineage's segments) stop agreeing with the committed values: the first
// offset holding another value, or the first one it cannot read (a
// record of its lineage remote storage no longer holds: the new leader
// cannot serve it, so an election from outside the ISR loses it; the model
// cannot tell it from a read that failed otherwise, and gives it up
// too); 1<<62 when every such record agrees. model.agreedEnd
// reads the local log only, and a leader whose older records are tiered
// may hold another lineage there (an unclean election of a replica that
// tiered its own records while outside the ISR).
func (c *Cluster) remoteAgreedEnd(b *Broker) int64 {
	l := b.Log()
	to := min(l.LocalLogStartOffset(), c.model.end)
	errStop := errors.New("stop")
	for off := max(l.LogStartOffset(), 0); off < to; {
		res, err := b.mgr.Read(c.ctx, c.tp, off, fetchBytes, log.IsolationLogEnd, true)
		if err != nil || len(res.Records) == 0 {
			c.trace.detail("remote agreement: read at %d: %v", off, err)
			return off
		}
		end := off
		next, err := forEachRecord(res.Records, off, to, func(o int64, v string) error {
			if want, ok := c.model.values[o]; ok && want != v {
				end = o
				return errStop
			}
			return nil
		})
		if errors.Is(err, errStop) {
			return end
		}
		if err != nil || next <= off {
			return off
		}
		off = next
	}
	return 1 << 62
}

// validSegmentHolding returns the valid remote segment (validSegments)
// holding offset o, if any.
func (c *Cluster) validSegmentHolding(o int64) (remote.SegmentMetadata, bool) {
	for _, s := range c.validSegments() {
		if s.StartOffset <= o && o <= s.EndOffset {
			return s, true
		}
	}
	return remote.SegmentMetadata{}, false
}
