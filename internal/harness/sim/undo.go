package sim

import (
	"errors"
	"fmt"

	"github.com/tierlog/tierlog/consolidate"
	"github.com/tierlog/tierlog/tierstate"
)

// Undoing the classic-to-diskless switch: the operator's override
// `kafka-topic-switch.sh seal -1` (abort) and `seal -2` (re-arm), which
// Inkless's switch document (docs/inkless/CLASSIC_TO_DISKLESS_SWITCH.md of
// https://github.com/aiven/inkless, "Operator override of the seal
// offset") accepts only while the seal is pending. The controller decides
// with tierstate.State.AbortSwitch and RearmSwitch and publishes the
// record to every broker's replica driver; a refusal changes nothing and
// is the action's error (a *tierstate.TransitionError naming the phase).

// UndoSwitch is the operator's abort of a pending switch (seal -1): the
// partition is classic again and consolidates nowhere (the State the
// abort gives is not consolidating). Brokers leave the switch: the
// leader's switch steps are dropped (Inkless unregisters the partition
// from its InitDisklessLogManager), its classic gate takes produce again,
// and the replica drivers keep or put every follower on the classic
// fetcher. No WAL row exists yet (InitDisklessLog runs after the seal
// commit), so no diskless record was taken. Refused in phases 1 and 2
// (tierstate.ErrSealCommitted) and on a classic partition
// (tierstate.ErrNotSwitching).
func (c *Cluster) UndoSwitch() error {
	return c.do("undo-switch", -1, func() (string, error) {
		k := &c.ctrl
		from := k.rec.State
		st, err := from.AbortSwitch()
		if err != nil {
			return "controller refused", err
		}
		k.rec.State = st
		k.rec.PartitionEpoch++
		for _, b := range c.brokers {
			b.sw = nil
		}
		err = c.publish("switch undone")
		return fmt.Sprintf("%s -> %s", from, st), err
	})
}

// RearmSwitch is the operator's re-arm of a pending switch (seal -2):
// the switch stays pending, and the record re-sets the leader, which
// bumps the leader epoch so that the leader seals again in the new
// epoch. Refused like UndoSwitch, and without a leader (the record
// re-sets the current one).
func (c *Cluster) RearmSwitch() error {
	return c.do("rearm-switch", -1, func() (string, error) {
		k := &c.ctrl
		st, err := k.rec.State.RearmSwitch()
		if err != nil {
			return "controller refused", err
		}
		if k.rec.Leader < 0 {
			return "", notApplicable("no leader to re-set")
		}
		k.rec.State = st
		k.newLeader(k.rec.Leader)
		err = c.publish("switch re-armed")
		return fmt.Sprintf("%s leader epoch %d", st, k.rec.LeaderEpoch), err
	})
}

// ClassicBroken: a classic partition (never switched, or its switch
// undone; the simulation has no born-diskless topic) is consolidated by a
// running broker, or its leader refuses a classic produce. After an undo
// the partition keeps taking classic produce and replicating it on the
// classic fetchers.
const ClassicBroken = ConsolidatingOutsideISR + 1

// checkClassic: no running broker consolidates a classic partition.
func (c *Cluster) checkClassic() *Violation {
	if c.ctrl.rec.State.Phase() != tierstate.PhaseClassic {
		return nil
	}
	for _, b := range c.brokers {
		if b.up && b.consolidating {
			return c.violation(ClassicBroken, b.ID, -1, "broker %d consolidates the classic partition (%s)", b.ID, c.ctrl.rec.State)
		}
	}
	return nil
}

// classicProduceRefused is the violation of a classic produce that the
// leader's gate refused while the controller's record is classic, nil
// for any other outcome.
func (c *Cluster) classicProduceRefused(err error) *Violation {
	if c.ctrl.rec.State.Phase() != tierstate.PhaseClassic || !errors.Is(err, consolidate.ErrClassicAppendRefused) {
		return nil
	}
	return c.violation(ClassicBroken, c.ctrl.rec.Leader, -1, "leader refuses classic produce of the classic partition: %v", err)
}
