package replica

import (
	"context"
	"errors"
	"fmt"

	"github.com/tierlog/tierlog/consolidate"
	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/tierstate"
)

// PrunerArming is the WAL pruner as the driver arms it.
// *consolidate.Pruner satisfies it.
type PrunerArming interface {
	Arm(tp remote.TopicIDPartition, seal int64)
	Disarm(tp remote.TopicIDPartition)
}

var _ PrunerArming = (*consolidate.Pruner)(nil)

// ErrNoLog is returned by AppendAsLeader when the replica has no log (or
// is offline).
var ErrNoLog = errors.New("replica: no log to append to")

// setLogLocked makes l the current log and gives it a ClassicGate in the
// state of the delta last applied. Appends in flight on the old gate
// finish first (app is taken exclusively). REQUIRES: r.mu held.
func (r *Replica) setLogLocked(l Log) {
	r.mu.log = l
	g := newGate(l, r.mu.gateState)
	r.app.Lock()
	r.app.gate = g
	r.app.Unlock()
}

// newGate is l's ClassicGate in state s, nil when l is nil or has no
// leader append path.
func newGate(l Log, s tierstate.State) *consolidate.ClassicGate {
	if la, ok := l.(consolidate.LeaderAppender); ok && l != nil {
		return consolidate.NewClassicGate(la, s)
	}
	return nil
}

// closeGateLocked refuses every later append (an offline replica).
// REQUIRES: r.mu held.
func (r *Replica) closeGateLocked() {
	r.app.Lock()
	r.app.gate = nil
	r.app.Unlock()
}

// setGateStateLocked gives the current gate the switch state s; it
// returns once the appends admitted under the old state are written, so
// the seal that may follow sees them (consolidate.ClassicGate.SetState).
// REQUIRES: r.mu held.
func (r *Replica) setGateStateLocked(s tierstate.State) {
	r.mu.gateState = s
	r.app.RLock()
	g := r.app.gate
	r.app.RUnlock()
	if g != nil {
		g.SetState(s)
		return
	}
	if r.mu.log != nil && !r.mu.prior.Offline {
		// The first delta (or the first since the log was found):
		// the gate opens in the delta's state.
		r.setLogLocked(r.mu.log)
	}
}

// AppendAsLeader is the leader's classic append path (produce and the
// coordinator's markers): the current log behind a consolidate.ClassicGate
// in the switch state of the delta last applied (none before the first
// delta: ErrNoLog). A seal-pending partition refuses client appends
// (consolidate.ErrSealPending, Kafka REPLICA_NOT_AVAILABLE: the producer
// retries), a sealed one every append
// (consolidate.ErrClassicLogSealed: produce goes to the WAL, through
// DisklessProduceAllowed). It holds
// none of the driver's delta lock, but a promotion of the future log waits
// for it and holds the next one until the new log is in place (Kafka
// appends under leaderIsrUpdateLock for the same reason). ErrNoLog when
// the replica has no log or is offline. The caller checks leadership.
func (r *Replica) AppendAsLeader(batches []byte, leaderEpoch int32, origin log.AppendOrigin) (log.AppendInfo, error) {
	r.app.RLock()
	defer r.app.RUnlock()
	if r.app.gate == nil {
		return log.AppendInfo{FirstOffset: base.UndefinedOffset, LastOffset: base.UndefinedOffset,
			MaxTimestamp: base.UndefinedOffset}, fmt.Errorf("%w: %s", ErrNoLog, r.opts.Partition)
	}
	return r.app.gate.AppendAsLeader(batches, leaderEpoch, origin)
}

// DisklessProduceAllowed is the leader's diskless produce gate: the
// broker asks it before it sends a produce of this partition to the WAL
// (wal.Writer), in the switch state of the delta last applied
// (consolidate.DisklessProduceAllowed). A switched partition takes
// diskless produce only once the phase-2 flag committed its diskless
// epoch; before, a *consolidate.DisklessHeldError (errors.Is
// consolidate.ErrAwaitingPhaseTwo: Kafka NOT_LEADER_OR_FOLLOWER, or
// consolidate.ErrSealPending while the seal is pending), and the producer
// retries. ErrNoLog as AppendAsLeader. The caller checks leadership.
func (r *Replica) DisklessProduceAllowed() error {
	r.app.RLock()
	defer r.app.RUnlock()
	if r.app.gate == nil {
		return fmt.Errorf("%w: %s", ErrNoLog, r.opts.Partition)
	}
	return r.app.gate.DisklessProduceAllowed()
}

// SwitchProgress returns what the driver remembers of the leader's
// switch steps and the pruner's arming.
func (r *Replica) SwitchProgress() SwitchProgress {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.switchp
}

// StepSwitch runs the leader's switch steps and the pruner's arming
// (DecideSwitch) on the delta last applied, as Apply does after the
// transition. The broker calls it whenever what they wait for may have
// changed: the high watermark reached the log end of a seal-pending
// leader (the proposal waits for it), the remote log manager copied a
// segment (the phase-2 request waits for S-1 in remote storage, the
// pruner's arming for a rebuilt log), and on a timer. It returns the
// actions performed and the first failed step; a failed step takes
// nothing offline and is decided again by the next call.
func (r *Replica) StepSwitch(ctx context.Context) (Plan, error) {
	ev := &events{r: r}
	defer ev.report()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.prior.Offline {
		return nil, ErrOffline
	}
	return r.switchLocked(ctx, r.mu.delta, ev)
}

// RetrySealProposal makes the next step of a seal-pending leader send
// the seal proposal again; the broker calls it when the proposal went
// unanswered (a timeout). The controller refuses a second commit
// (tierstate.State.CommitSeal), so a duplicate changes nothing.
func (r *Replica) RetrySealProposal() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.switchp.Proposed = false
}

// PrunePartition is the partition as the broker's consolidate.Pruner.Run
// takes it, when this broker leads it, consolidating, with a log. A leader
// whose log ends below the seal (recreated, or log-less, before its
// rebuild) is AwaitingRebuild: no prune until the rebuild brought it to
// the seal (https://github.com/aiven/inkless/pull/857).
func (r *Replica) PrunePartition() (consolidate.PrunePartition, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, l := r.mu.delta, r.mu.log
	if !Leads(r.mu.prior, d) || l == nil || !d.State.Consolidating() {
		return consolidate.PrunePartition{}, false
	}
	awaiting := d.State.SealCommitted() && l.LogEndOffset() < d.State.Seal()
	return consolidate.PrunePartition{Partition: r.opts.Partition, State: d.State, Log: l, AwaitingRebuild: awaiting}, true
}

// switchLocked decides and performs the leader's switch steps for delta d.
// The switch steps stop at the first failure; the pruner's arming is
// always performed. Actions whose dependency the broker did not configure
// are skipped. REQUIRES: r.mu held.
func (r *Replica) switchLocked(ctx context.Context, d Delta, ev *events) (Plan, error) {
	var view SwitchLog
	if r.mu.log != nil {
		view = r.mu.log
	}
	var done Plan
	var failed error
	for _, a := range DecideSwitch(r.mu.prior, d, r.mu.switchp, view) {
		step := a.Kind != ArmPruner && a.Kind != DisarmPruner
		if (step && (r.opts.Controller == nil || failed != nil)) || (!step && r.opts.Pruner == nil) {
			continue
		}
		performed, err := r.switchEffectLocked(ctx, d, a)
		for i, p := range performed {
			var perr error
			if i == len(performed)-1 {
				perr = err
			}
			ev.add(p, perr)
			done = append(done, p)
			if p.Kind != ArmPruner && p.Kind != DisarmPruner {
				r.mu.metrics.SwitchSteps++
			}
		}
		if err != nil {
			r.mu.metrics.SwitchFailures++
			failed = err
		}
	}
	return done, failed
}

// switchEffectLocked performs one switch action and returns the actions
// performed (a ready Seal is followed by its ProposeSeal) with the reason
// completed by the effect's result. REQUIRES: r.mu held.
func (r *Replica) switchEffectLocked(ctx context.Context, d Delta, a Action) (Plan, error) {
	tp, s := r.opts.Partition, d.State
	switch a.Kind {
	case ArmPruner:
		r.opts.Pruner.Arm(tp, s.Seal())
		r.mu.switchp.PrunerArmed = true
		return Plan{a}, nil
	case DisarmPruner:
		r.disarmLocked()
		return Plan{a}, nil
	}
	sl, ok := r.mu.log.(consolidate.SealLog)
	if !ok {
		return Plan{a}, fmt.Errorf("replica: log of %s is not a consolidate.SealLog: %w", tp, ErrInvalidArgument)
	}
	switch a.Kind {
	case Seal:
		res, err := consolidate.SealLeader(s, sl, d.LeaderEpoch, r.opts.NowMs())
		a.Reason += "; " + sealOutcome(res, sl)
		if err != nil || !res.Ready {
			return Plan{a}, err
		}
		p := act(ProposeSeal, res.Proposal.Seal, "S = log end %d with %d producer state(s), leader epoch %d",
			res.Proposal.Seal, len(res.Proposal.Producers), d.LeaderEpoch)
		if err := r.opts.Controller.ProposeSeal(ctx, tp, d.LeaderEpoch, res.Proposal); err != nil {
			return Plan{a, p}, err
		}
		// SealLeader proposes only once the active segment is rolled
		// (S = LEO with nothing past the last roll): S-1 is copyable.
		r.mu.switchp.Proposed, r.mu.switchp.Rolled = true, res.Proposal.Seal
		return Plan{a, p}, nil
	case InitDisklessLog:
		req, err := consolidate.InitDisklessLog(ctx, r.opts.ControlPlane, s, tp, sl)
		if err == nil {
			r.mu.switchp.Initialised = s.Seal()
			a.Reason += fmt.Sprintf("; row created: W = %d, S = %d, %d producer state(s)", req.LogStartOffset,
				req.DisklessStartOffset, len(req.ProducerStates))
		}
		return Plan{a}, err
	case RollAtSeal:
		sw, ok := r.mu.log.(consolidate.SwitchLog)
		if !ok {
			return Plan{a}, fmt.Errorf("replica: log of %s is not a consolidate.SwitchLog: %w", tp, ErrInvalidArgument)
		}
		rolled, err := consolidate.RollAtSeal(s, sw)
		if err != nil {
			return Plan{a}, err
		}
		a.Reason += fmt.Sprintf("; rolled %t", rolled)
		r.mu.switchp.Rolled = s.Seal()
		return Plan{a}, nil
	case RequestPhaseTwo:
		plan := consolidate.PlanClassicPrefixRequest(s, r.mu.log)
		if _, err := consolidate.SendClassicPrefixRequest(ctx, r.opts.ControlPlane, r.opts.Controller, tp, s, plan,
			r.opts.BrokerID, d.LeaderEpoch); err != nil {
			return Plan{a}, err
		}
		r.mu.switchp.Asked = s.Seal()
		return Plan{a}, nil
	}
	return Plan{a}, fmt.Errorf("replica: action %s is not a switch step: %w", a.Kind, ErrInvalidArgument)
}

// disarmLocked forgets the pruner's floor if the driver armed it.
// REQUIRES: r.mu held.
func (r *Replica) disarmLocked() {
	if r.opts.Pruner != nil && r.mu.switchp.PrunerArmed {
		r.opts.Pruner.Disarm(r.opts.Partition)
	}
	r.mu.switchp.PrunerArmed = false
}

func sealOutcome(res consolidate.SealResult, l consolidate.SealLog) string {
	o := l.Offsets()
	s := fmt.Sprintf("aborted %d transaction(s), rolled %t, flushed", len(res.Aborted), res.Rolled)
	if !res.Ready {
		s += fmt.Sprintf("; high watermark %d below log end %d: wait for the followers", o.HighWatermark, o.LogEndOffset)
	}
	return s
}
