package replica

import (
	"fmt"

	"github.com/tierlog/tierlog/consolidate"
	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/tierstate"
)

// SwitchProgress is what the driver remembers of the leader's switch
// steps in the current leader epoch (Inkless: the seal, InitDisklessLog
// and SetClassicPrefixInRemoteStorage of a leader), and whether it armed
// the WAL pruner. A new leader epoch or the loss of leadership forgets
// the steps (each is idempotent on the controller and the control plane,
// so a new epoch sends them again); the pruner's arming outlives a leader
// epoch and ends with DisarmPruner.
type SwitchProgress struct {
	// Proposed: the seal proposal was sent in this leader epoch.
	Proposed bool
	// Initialised is the seal whose WAL row this leader created, Asked
	// the seal its phase-2 request was sent for, Rolled the seal its log
	// was rolled at (by the seal itself or by RollAtSeal); -1 for none.
	Initialised, Asked, Rolled int64
	// PrunerArmed: the driver armed the pruner and has not disarmed it.
	PrunerArmed bool
}

func (p SwitchProgress) forgetSteps() SwitchProgress {
	return SwitchProgress{Initialised: base.UndefinedOffset, Asked: base.UndefinedOffset, Rolled: base.UndefinedOffset,
		PrunerArmed: p.PrunerArmed}
}

// SwitchLog is what the leader's switch decision reads of the log.
// *log.UnifiedLog satisfies it.
type SwitchLog interface {
	ViewLog
	consolidate.PrefixLog
}

// Leads reports whether this broker acts as the partition's leader after
// delta d: the delta makes it leader and the replica is neither fenced
// nor offline.
func Leads(p Prior, d Delta) bool {
	return d.Leader && !p.Fenced && !p.Offline && d.Removal == NotRemoved
}

// DecideSwitch is the leader's side of the switch, decided after the
// transition (on the prior it left) and again by the StepSwitch hook:
//
//	seal pending, no proposal yet      Seal (then ProposeSeal once HW = LEO)
//	phase 1, LEO = S, no row yet       InitDisklessLog
//	phase 1, LEO = S, S-1 not remote   RollAtSeal (once per seal and leader epoch)
//	phase 1, remote storage holds S-1  RequestPhaseTwo with R = the epoch at S-1
//	consolidating, seal committed      ArmPruner at S-1 once LEO >= S; below the
//	                                   seal (a recreated or log-less leader
//	                                   awaiting its rebuild) DisarmPruner
//	not leading, or not consolidating  DisarmPruner
//
// A leader elected in phase 1 (after the sealing leader failed) holds
// S-1 in the active segment it replicated into; without RollAtSeal that
// segment would roll only by size or age, never reached since the log
// takes no classic append, and the partition would stay in phase 1.
//
// The row is created only in phase 1 from a log that ends at the seal: a
// leader elected after the commit with a consolidated suffix past S, or
// one rebuilding below S, finds the row its predecessor created
// (consolidation appended from it), and phase 2 was asked for by a leader
// whose row existed (the request follows the row, and waits for it when
// the row failed). The pruner actions appear only when the arming
// changes. Every step is idempotent; a failed one is decided again by the
// next call.
//
// Pure: it reads l and changes nothing.
func DecideSwitch(p Prior, d Delta, sp SwitchProgress, l SwitchLog) Plan {
	var plan Plan
	s := d.State
	if !Leads(p, d) || l == nil {
		if sp.PrunerArmed {
			plan = append(plan, act(DisarmPruner, -1, "no longer leads (%s)", leadWhy(p, d, l)))
		}
		return plan
	}
	leo, hw := l.LogEndOffset(), l.HighWatermark()
	switch {
	case s.Phase() == tierstate.PhaseSealPending:
		if !sp.Proposed {
			plan = append(plan, act(Seal, leo, "seal pending, leader epoch %d, log end %d, high watermark %d: abort, roll, flush; propose once HW = LEO",
				d.LeaderEpoch, leo, hw))
		}
	case s.SealCommitted():
		seal := s.Seal()
		if s.Phase() == tierstate.PhaseOne && leo == seal && sp.Initialised != seal {
			plan = append(plan, act(InitDisklessLog, seal, "seal %d committed, log end %d at the seal: W = log start %d, HW = S",
				seal, leo, l.LogStartOffset()))
		}
		if sp.Rolled != seal && consolidate.NeedsRollAtSeal(s, l, leo) {
			plan = append(plan, act(RollAtSeal, seal, "phase 1, log end %d at the seal, remote storage holds up to %d < S-1 = %d: the segment holding S-1 must be rolled to be copied",
				leo, l.HighestOffsetInRemoteStorageInLineage(), seal-1))
		}
		if req := consolidate.PlanClassicPrefixRequest(s, l); req.Send && sp.Asked != seal {
			plan = append(plan, act(RequestPhaseTwo, seal, "phase 1, remote storage holds up to %d >= S-1 = %d: recorded epoch %d",
				l.HighestOffsetInRemoteStorageInLineage(), seal-1, req.LastClassicLeaderEpoch))
		}
	}
	switch {
	case !s.Consolidating() || !s.SealCommitted():
		if sp.PrunerArmed {
			plan = append(plan, act(DisarmPruner, -1, "%s: nothing to prune behind a seal", s))
		}
	case l.LogEndOffset() >= s.Seal():
		if !sp.PrunerArmed {
			plan = append(plan, act(ArmPruner, consolidate.InitialFloor(s.Seal()), "consolidating leader with log end %d at or past seal %d: the first prune waits for S-1 in remote storage",
				leo, s.Seal()))
		}
	case sp.PrunerArmed:
		plan = append(plan, act(DisarmPruner, -1, "log end %d below seal %d: no prune before the rebuild", leo, s.Seal()))
	}
	return plan
}

func leadWhy(p Prior, d Delta, l SwitchLog) string {
	switch {
	case d.Removal != NotRemoved:
		return d.Removal.String()
	case p.Offline:
		return "offline"
	case p.Fenced:
		return "fenced"
	case !d.Leader:
		return fmt.Sprintf("follower of %d", d.LeaderID)
	case l == nil:
		return "no log"
	}
	return "leader"
}
