package sim

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/tierlog/tierlog/consolidate"
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
	State          tierstate.State
}

func (r partRecord) String() string {
	return fmt.Sprintf("leader=%d epoch=%d pe=%d isr=%v %s", r.Leader, r.LeaderEpoch, r.PartitionEpoch, r.ISR, r.State)
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
}

func (k *controller) init(brokers int) {
	k.rec = partRecord{Leader: 1}
	for id := 1; id <= brokers; id++ {
		k.rec.ISR = append(k.rec.ISR, int32(id))
	}
	k.fetched = map[int32]int64{}
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
		b.sw = &consolidate.LeaderSwitch{TP: Partition, BrokerID: b.ID, LeaderEpoch: rec.LeaderEpoch, Log: l,
			Gate: b.gate, Controller: switchController{c}, ControlPlane: c.cp, NowMs: func() int64 { return c.nowMs }}
		b.swEpoch = rec.LeaderEpoch
	}
	if rec.State.SealCommitted() && b.consolidating {
		b.pruner.Arm(Partition, rec.State.Seal())
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
	st, err := k.rec.State.CommitSeal(p.Seal, p.Producers)
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
	k.rec.State = st
	k.rec.PartitionEpoch++
	s.c.trace.detail("controller commits phase 2: R=%d E_d=%d", st.LastClassicLeaderEpoch(), st.DisklessLeaderEpoch())
	return s.c.publish("phase 2 committed")
}
