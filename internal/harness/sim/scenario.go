package sim

import (
	"errors"
	"math/rand/v2"

	"github.com/tierlog/tierlog/tierstate"
)

// Scenarios are scheduler actions that run a few of the Cluster's
// actions in an order a real incident takes, each recorded as its own
// step (so a script of the run, Replay and Shrink see only the
// primitive actions). They exist because some hazards need a chain of
// ordinary events that 500 independently drawn steps almost never put
// in order; the chain is still drawn at random (when, on which broker,
// how many records), and the rest of the schedule around it is the
// menu's.

// LoneLeaderLost is the incident of a leader left alone in the ISR
// (min.insync.replicas=1: its followers fell behind and were shrunk out)
// that keeps committing, tiers what it committed, and is then lost, so
// that the controller elects a follower uncleanly (KIP-966's unclean
// recovery, an operator's unclean ElectLeaders): the records the lone
// leader committed and uploaded past the new leader's log end are
// discarded from the partition, while remote storage and the lost
// leader's disk still hold them. This is the premise of
// github.com/aiven/inkless/pull/857's "recreate instead of truncate":
// a switch sealed after it must not let the lost leader's tail or its
// remote progress count.
//
// The steps: a produce (so that the followers lag), the ISR shrunk to
// the leader, a produce of n records committed by the leader alone, a
// roll and a copy on the leader, its crash, and an unclean election.
// Not applicable outside the classic phase or without a leader. A step
// that does not apply ends the scenario there (the steps taken stay in
// the schedule).
func (c *Cluster) LoneLeaderLost(n int) error {
	lb := c.leaderBroker()
	if lb == nil || c.ctrl.rec.State.Phase() != tierstate.PhaseClassic {
		return notApplicable("lone-leader-lost: no leader in the classic phase")
	}
	id := lb.ID
	// A step that fails ends the scenario there: a violation is the
	// answer, anything else (a step that did not apply) leaves the steps
	// taken in the schedule.
	if err := c.Produce(1); err != nil {
		if v := besides(err); v != nil {
			return v
		}
		return notApplicable("lone-leader-lost: the first produce did not apply")
	}
	for _, o := range c.brokers {
		if o.ID == id {
			continue
		}
		if v := besides(c.ShrinkISR(o.ID)); v != nil {
			return v
		}
	}
	if len(c.ctrl.rec.ISR) != 1 {
		return nil
	}
	if err := c.Produce(n); err != nil {
		return besides(err)
	}
	// The roll and the copy may find nothing to do (a segment already
	// rolled, copied): the incident goes on.
	if v := besides(c.Roll(id)); v != nil {
		return v
	}
	if v := besides(c.Copy(id)); v != nil {
		return v
	}
	if err := c.Crash(id); err != nil {
		return besides(err)
	}
	return besides(c.ElectLeaders(ElectUnclean))
}

// besides is err's violation, nil when err is none (a step that did
// not apply or failed without breaking an invariant).
func besides(err error) error {
	var v *Violation
	if errors.As(err, &v) {
		return v
	}
	return nil
}

// scenarioChoices are the scenarios' rows of the scheduler's menu,
// weight 0 by default (a weight shifts every seed's draws; simCatches
// takes them in menus of their own).
var scenarioChoices = []choice{
	{"lone-leader-lost", 0, func(c *Cluster, rng *rand.Rand) error { return c.LoneLeaderLost(5 + rng.IntN(40)) }},
}
