package sim

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/tierstate"
	"github.com/tierlog/tierlog/wal"
)

// The operator's recovery of a phase-1 partition that lost its classic
// prefix (github.com/aiven/inkless/pull/855) and the downward re-seal of
// github.com/aiven/inkless/pull/871, as kafka-topic-switch.sh runs them:
// each command describes the replicas through tierstate.Describe, checks
// with tierstate's functions, and the controller commits the record
// through tierstate.State's operations and publishes it to every
// broker's replica driver.

// crossTierLogStart is X as the control plane reports it; without a
// row, the broker's log start.
func (c *Cluster) crossTierLogStart(b *Broker) int64 {
	if info, err := c.cp.LogInfo(c.ctx, c.walTP()); err == nil {
		return rowCrossTierStart(info)
	}
	if l := b.Log(); l != nil {
		return l.LogStartOffset()
	}
	return 0
}

// describe is DescribeDisklessSwitchReplica on broker id: its log as the
// driver holds it (also when fenced), the driver's fenced record, and
// the broker's view of the remote log metadata.
func (c *Cluster) describe(id int32) (tierstate.ReplicaDescription, error) {
	b := c.Broker(id)
	if b == nil || !b.up {
		return tierstate.ReplicaDescription{}, fmt.Errorf("sim: describe: broker %d is not running", id)
	}
	req := tierstate.DescribeRequest{Partition: c.tp, BrokerID: id, State: c.ctrl.rec.State,
		FencedByBroker: b.Prior().Fenced, CrossTierLogStartOffset: c.crossTierLogStart(b), Remote: c.meta,
		RemoteReady: b.mgr.IsPartitionReady}
	if l := b.Log(); l != nil {
		req.Log = l
	}
	return tierstate.Describe(req)
}

// Describe is `kafka-topic-switch.sh describe` for one replica: its
// description (offsets, fence, remote coverage, what start-phase-2 would
// lose), one trace line.
func (c *Cluster) Describe(id int32) (tierstate.ReplicaDescription, error) {
	var d tierstate.ReplicaDescription
	err := c.do("describe", id, func() (string, error) {
		var err error
		if d, err = c.describe(id); err != nil {
			return "", err
		}
		return d.String(), nil
	})
	return d, err
}

// ElectReplica is `kafka-topic-switch.sh elect --replica id`: the tool's
// check (tierstate.CheckElectReplica on the replica's description: high
// watermark at the seal, log and remote storage covering the prefix),
// then AlterDisklessSwitch with LeaderId: the controller checks the
// switch rules (State.ValidateElectReplica with the seal named), that
// the broker is running and its log directory online, and elects it with
// an ISR of it alone, even from outside the ISR. A refusal changes
// nothing and is returned (a *tierstate.RecoveryError or
// *tierstate.TransitionError).
func (c *Cluster) ElectReplica(id int32) error {
	return c.do("elect-replica", id, func() (string, error) {
		d, err := c.describe(id)
		if err != nil {
			return "refused", err
		}
		if err := tierstate.CheckElectReplica(c.ctrl.rec.State, d); err != nil {
			return "refused", err
		}
		k := &c.ctrl
		if err := k.rec.State.ValidateElectReplica(d.Seal); err != nil {
			return "controller refused", err
		}
		if b := c.Broker(id); b.Prior().Offline {
			return "controller refused", fmt.Errorf("sim: broker %d: log directory offline: %w", id, tierstate.ErrRecoveryRefused)
		}
		k.newLeader(id)
		k.changeISR([]int32{id})
		k.rec.ELR, k.rec.LastKnownELR = nil, nil
		err = c.publish("operator election")
		return fmt.Sprintf("hw=%d log=%s; epoch %d isr=%v", d.HighWatermark, d.LocalRange(), k.rec.LeaderEpoch, k.rec.ISR), err
	})
}

// StartPhaseTwo is `kafka-topic-switch.sh start-phase-2
// [--accept-data-loss]`: every running replica is described (a stopped
// broker does not answer: PlanStartPhaseTwo names it and goes on), the
// tool plans with tierstate.PlanStartPhaseTwo (refused while a described
// replica's log and remote storage cover the prefix, or when it loses
// records without acceptDataLoss; the new seal is the highest remote end
// reported), and the controller commits
// State.StartPhaseTwo at that seal in a record that bumps the leader
// epoch once, sets the ISR to the active assigned replicas
// (Cluster.phaseTwoISR) and elects a leader (the current one if it
// runs), as the flag commit does. The records in
// [new seal, old seal) are given up; the control plane keeps the old
// seal until Repair.
func (c *Cluster) StartPhaseTwo(acceptDataLoss bool) error {
	return c.do("start-phase-2", -1, func() (string, error) {
		if acceptDataLoss {
			c.rec.note("accept-data-loss", "")
		}
		k := &c.ctrl
		var descs []tierstate.ReplicaDescription
		for _, id := range k.replicas {
			if !c.running(id) {
				continue // does not answer: not described
			}
			d, err := c.describe(id)
			if err != nil {
				return "refused", err
			}
			descs = append(descs, d)
		}
		plan, err := tierstate.PlanStartPhaseTwo(k.rec.State, tierstate.StartPhaseTwoRequest{Replicas: k.replicas,
			Descriptions: descs, CurrentLeaderEpoch: k.rec.LeaderEpoch, AcceptDataLoss: acceptDataLoss})
		if err != nil {
			return "refused", err
		}
		st, err := k.rec.State.StartPhaseTwo(plan.Seal, plan.RecordedEpoch, k.rec.LeaderEpoch)
		if err != nil {
			return "controller refused", err
		}
		isr := c.phaseTwoISR()
		leader := k.rec.Leader
		if !slices.Contains(isr, leader) {
			leader = -1
			if len(isr) > 0 {
				leader = isr[0]
			}
		}
		k.rec.State = st
		k.newLeader(leader)
		k.changeISR(isr)
		k.rec.ELR, k.rec.LastKnownELR, k.rec.Recovering = nil, nil, false
		c.model.acceptLoss(plan.Lost.Start, plan.Lost.End)
		err = c.publish("start-phase-2")
		return plan.String(), err
	})
}

// Reseal is `kafka-topic-switch.sh seal S'` on a phase-1 partition: the
// tool describes the leader (a fenced one answers) and plans with
// tierstate.PlanReseal, which refuses a seal outside [X, leader's log
// end] (github.com/aiven/inkless/pull/871); the seal moves down to S'
// (State.Reseal's rules; /pull/871 lowers it to the last known leader's
// log end), giving up the records in [S', S). Before a seal is committed
// the range is the leader's log's, and the forced seal must be its log
// end at its high watermark. The control plane keeps the old seal
// until Repair. A refusal changes nothing.
func (c *Cluster) Reseal(seal int64) error {
	return c.do("reseal", -1, func() (string, error) {
		c.rec.note("seal", seal)
		k := &c.ctrl
		old := k.rec.State.Seal()
		req := tierstate.ResealRequest{Seal: seal, Leader: k.rec.Leader}
		if b := c.Broker(k.rec.Leader); b != nil && b.up {
			if k.rec.State.SealCommitted() {
				d, err := c.describe(b.ID)
				if err != nil {
					return "refused", err
				}
				req.LogStartOffset, req.LeaderLogEndOffset = d.CrossTierLogStartOffset, d.LogEndOffset
				req.LeaderHighWatermark = d.HighWatermark
			} else if l := b.Log(); l != nil {
				req.LogStartOffset, req.LeaderLogEndOffset = l.LogStartOffset(), l.LogEndOffset()
				req.LeaderHighWatermark = l.HighWatermark()
			}
			if l := b.Log(); l != nil {
				span, err := c.batchAt(b, seal)
				if err != nil {
					return "refused", fmt.Errorf("sim: reseal: the leader's batch at the seal %d: %w", seal, err)
				}
				req.SealBatch = span
				req.LeaderLineage = l.EpochEntriesInRange(-1, seal)
			}
		} else {
			req.Leader = -1
		}
		st, err := tierstate.PlanReseal(k.rec.State, req)
		if err != nil {
			return "refused", err
		}
		pending := !k.rec.State.SealCommitted()
		k.rec.State = st
		k.rec.PartitionEpoch++
		if old > seal {
			c.model.acceptLoss(seal, old)
		}
		if b := c.Broker(k.rec.Leader); pending && b != nil && b.up && b.Log() != nil && seal > c.model.end {
			// A forced seal at the leader's log end commits the leader's
			// records up to it (its driver raises the high watermark to
			// the seal, as the seal the leader commits does).
			// PlanReseal takes it only at the leader's high watermark
			// (guard reseal-pending-high-watermark), so the records past
			// the model's committed end are the ISR's too; with the guard
			// off this claim is what the checks catch.
			if err := c.model.commitFromLog(b.Log(), c.model.end, seal); err != nil {
				c.trace.detail("commit [%d, %d): %v", c.model.end, seal, err)
			}
		}
		err = c.publish("re-seal")
		err = errors.Join(err, c.maybeRecovered())
		return fmt.Sprintf("seal %d -> %d; %s", old, seal, k.rec.electionView()), err
	})
}

// batchAt is the leader's batch holding offset, across its tiers (a
// remote read below its local log start: a lowered seal may fall in the
// tiered prefix, and a seal inside a tiered batch leaves the batch's
// records below it unreadable, since a tiered read refuses a batch that
// reaches the seal); unknown when neither tier holds offset. A failed
// remote read is returned: the tool cannot check the seal.
func (c *Cluster) batchAt(b *Broker, offset int64) (tierstate.BatchSpan, error) {
	l := b.Log()
	if offset >= l.LogEndOffset() {
		return tierstate.BatchSpan{}, nil
	}
	var data []byte
	if offset < l.LocalLogStartOffset() {
		res, err := b.mgr.Read(c.ctx, c.tp, offset, 1, log.IsolationLogEnd, true)
		if errors.Is(err, remote.ErrOffsetOutOfRange) {
			return tierstate.BatchSpan{}, nil
		}
		if err != nil {
			return tierstate.BatchSpan{}, err
		}
		data = res.Records
	} else {
		fd, err := l.Read(nil, offset, 1, log.IsolationLogEnd, true)
		if err != nil {
			return tierstate.BatchSpan{}, nil
		}
		data = fd.Records
	}
	if len(data) == 0 {
		return tierstate.BatchSpan{}, nil
	}
	rb, err := record.ReadBatch(data)
	if err != nil {
		return tierstate.BatchSpan{}, err
	}
	return tierstate.BatchSpan{Known: true, BaseOffset: rb.BaseOffset(), LastOffset: rb.LastOffset()}, nil
}

// Repair is `kafka-topic-switch.sh repair` (RepairDisklessLog): the
// control plane's diskless start offset becomes the committed seal.
func (c *Cluster) Repair() error {
	return c.do("repair", -1, func() (string, error) {
		seal := c.Seal()
		if seal < 0 {
			return "", notApplicable("no committed seal")
		}
		res, err := c.cp.RepairDisklessLog(c.ctx, []wal.RepairDisklessLogRequest{{Partition: c.walTP(),
			DisklessStartOffset: seal}})
		if err != nil {
			return "", err
		}
		info, _ := c.cp.LogInfo(c.ctx, c.walTP())
		c.model.walHW = -1 // the repair may move the high watermark without a batch
		return fmt.Sprintf("found=%t W=%d S=%d hw=%d", res[0].Found, info.LogStartOffset, info.DisklessStartOffset,
			info.HighWatermark), nil
	})
}

// DescribeAll describes every running replica, one step each, and
// returns the descriptions joined, one per line.
func (c *Cluster) DescribeAll() (string, error) {
	var lines []string
	for _, id := range c.ctrl.replicas {
		if !c.running(id) {
			continue
		}
		d, err := c.Describe(id)
		if err != nil {
			return strings.Join(lines, "\n"), err
		}
		lines = append(lines, d.String())
	}
	return strings.Join(lines, "\n"), nil
}
