package consolidate

import (
	"context"
	"fmt"

	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/internal/mutation"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/tierstate"
	"github.com/tierlog/tierlog/wal"
)

// PrefixLog is what the leader reads of its log to ask for phase 2.
// *log.UnifiedLog satisfies it.
type PrefixLog interface {
	// HighestOffsetInRemoteStorageInLineage: a stale highest offset in
	// remote storage an unclean truncation left (another lineage's
	// segments) does not prove S-1 tiered.
	HighestOffsetInRemoteStorageInLineage() int64
	LogStartOffset() int64
	EpochForOffset(offset int64) (int32, bool)
}

var _ PrefixLog = (*log.UnifiedLog)(nil)

// ClassicPrefixPlan is PlanClassicPrefixRequest's answer.
type ClassicPrefixPlan struct {
	// Send: the leader sends SetClassicPrefixInRemoteStorage now.
	Send bool
	// LastClassicLeaderEpoch is R, the epoch of the leader's record at
	// S-1, or -1 when its log holds no record below the seal.
	LastClassicLeaderEpoch int32
	// EmptyPrefix: R is -1 because the leader's log starts at the seal
	// (DeleteRecords or retention removed the classic prefix). The WAL
	// row's cross-tier log start X may still be below it: the sealing
	// leader wrote its own log start, and an unclean election can have
	// put a leader whose log started lower (DeleteRecords never reached
	// it) before this one. SendClassicPrefixRequest raises X to the seal
	// first, so that the endpoint and ListOffsets agree with the phase-2
	// replica check that nothing is left below the seal; with X below it
	// the consolidating leader would wait for ever for remote storage to
	// hold S-1.
	EmptyPrefix bool
}

// PlanClassicPrefixRequest decides, for a phase-1 consolidating partition
// this broker leads, whether to ask the controller for phase 2
// (SetClassicPrefixInRemoteStorage, github.com/aiven/inkless/pull/827)
// and with which recorded epoch (github.com/aiven/inkless/pull/857): only
// once the remote copy reaches S-1 (h >= S-1), with R = the epoch at S-1
// when the log (local or remote) starts below the seal, else -1.
func PlanClassicPrefixRequest(s tierstate.State, l PrefixLog) ClassicPrefixPlan {
	none := ClassicPrefixPlan{LastClassicLeaderEpoch: base.UndefinedEpoch}
	if !s.Consolidating() || s.Phase() != tierstate.PhaseOne {
		return none
	}
	seal := s.Seal()
	if l.HighestOffsetInRemoteStorageInLineage() < seal-1 {
		return none
	}
	plan := ClassicPrefixPlan{Send: true, LastClassicLeaderEpoch: base.UndefinedEpoch}
	switch {
	case seal > 0 && l.LogStartOffset() <= seal-1:
		if e, ok := l.EpochForOffset(seal - 1); ok {
			plan.LastClassicLeaderEpoch = e
		}
	case seal > 0:
		plan.EmptyPrefix = true
	}
	return plan
}

// SendClassicPrefixRequest sends the phase-2 request plan calls for
// (plan.Send must hold) and returns it. For an empty prefix it first
// raises the control plane's cross-tier log start X to the seal
// (ClassicPrefixPlan.EmptyPrefix): X only advances, so a retry after a
// lost answer changes nothing, and a crash between the two calls leaves
// X at the seal of a phase-1 partition whose leader has nothing below it.
func SendClassicPrefixRequest(ctx context.Context, cp wal.ControlPlane, c SwitchController, tp remote.TopicIDPartition,
	s tierstate.State, plan ClassicPrefixPlan, brokerID, leaderEpoch int32) (tierstate.ClassicPrefixRequest, error) {
	req := tierstate.ClassicPrefixRequest{BrokerID: brokerID, LeaderEpoch: leaderEpoch, Seal: s.Seal(),
		LastClassicLeaderEpoch: plan.LastClassicLeaderEpoch}
	if plan.EmptyPrefix && !mutation.Disabled(mutation.EmptyPrefixCrossTierStart) {
		if err := raiseCrossTierStart(ctx, cp, tp, s.Seal()); err != nil {
			return req, err
		}
	}
	return req, c.SetClassicPrefixInRemoteStorage(ctx, tp, req)
}

// raiseCrossTierStart makes the control plane's X at least x.
func raiseCrossTierStart(ctx context.Context, cp wal.ControlPlane, tp remote.TopicIDPartition, x int64) error {
	res, err := cp.AdvanceCrossTierLogStart(ctx, []wal.AdvanceCrossTierLogStartRequest{{Partition: walTP(tp), CrossTierLogStart: x}})
	switch {
	case err != nil:
	case len(res) != 1:
		err = fmt.Errorf("%d answers for one partition: %w", len(res), wal.ErrInconsistentAnswer)
	case res[0].Err != nil:
		err = res[0].Err
	case res[0].CrossTierLogStart < x:
		err = fmt.Errorf("stored %d: %w", res[0].CrossTierLogStart, wal.ErrInconsistentAnswer)
	}
	if err != nil {
		return fmt.Errorf("consolidate: raise the cross-tier log start of %s to the seal %d: %w", tp, x, err)
	}
	return nil
}

// SwitchController is the controller as the leader's switch steps talk to
// it; the broker implements it over its RPCs.
type SwitchController interface {
	// ProposeSeal sends InitDisklessLog with the leader's seal and producer
	// states (the controller commits it with tierstate.State.CommitSeal
	// and answers with a metadata record).
	ProposeSeal(ctx context.Context, tp remote.TopicIDPartition, leaderEpoch int32, p SealProposal) error
	// SetClassicPrefixInRemoteStorage asks for phase 2
	// (github.com/aiven/inkless/pull/827).
	SetClassicPrefixInRemoteStorage(ctx context.Context, tp remote.TopicIDPartition, req tierstate.ClassicPrefixRequest) error
}

// SwitchLog is the leader's log as the switch steps use it.
// *log.UnifiedLog satisfies it.
type SwitchLog interface {
	SealLog
	PrefixLog
}

var _ SwitchLog = (*log.UnifiedLog)(nil)

// LeaderSwitch drives the leader-side switch steps of one partition this
// broker leads, from each switch state the broker replays (Step): the
// gate's state, the sealing and its proposal while the seal is pending,
// the WAL row once the seal is committed, and the phase-2 request once
// remote storage holds S-1. It is not safe for concurrent use: the
// broker calls Step from the partition's metadata and remote-copy events.
type LeaderSwitch struct {
	TP           remote.TopicIDPartition
	BrokerID     int32
	LeaderEpoch  int32
	Log          SwitchLog
	Gate         *ClassicGate
	Controller   SwitchController
	ControlPlane wal.ControlPlane
	// NowMs is the clock of the abort markers.
	NowMs func() int64

	proposed    bool       // a seal proposal was sent in this leader epoch
	initialised sealMemory // the seal whose WAL row exists
	asked       sealMemory // the seal the phase-2 request was sent for
	rolled      sealMemory // the seal the log was rolled at (RollAtSeal or the seal's own roll)
}

// sealMemory remembers one seal a step was done for.
type sealMemory struct {
	done bool
	seal int64
}

func (m sealMemory) is(seal int64) bool { return m.done && m.seal == seal }

// SwitchStep says what one LeaderSwitch.Step did.
type SwitchStep struct {
	Seal     SealResult
	Proposed bool
	Init     *wal.InitDisklessLogRequest
	// Rolled: RollAtSeal rolled the active segment.
	Rolled     bool
	PrefixSent *tierstate.ClassicPrefixRequest
}

// Step runs the steps state s calls for. Every step is idempotent, so
// the broker may call it on every event; a failed step is retried by the
// next call.
func (d *LeaderSwitch) Step(ctx context.Context, s tierstate.State) (SwitchStep, error) {
	if d.Gate != nil {
		d.Gate.SetState(s)
	}
	var st SwitchStep
	switch {
	case s.Phase() == tierstate.PhaseSealPending:
		if d.proposed {
			return st, nil
		}
		res, err := SealLeader(s, d.Log, d.LeaderEpoch, d.NowMs())
		st.Seal = res
		if err != nil || !res.Ready {
			return st, err
		}
		if err := d.Controller.ProposeSeal(ctx, d.TP, d.LeaderEpoch, res.Proposal); err != nil {
			return st, err
		}
		d.proposed, st.Proposed = true, true
		d.rolled = sealMemory{true, res.Proposal.Seal} // proposed only once rolled
	case s.SealCommitted():
		if !d.initialised.is(s.Seal()) {
			req, err := InitDisklessLog(ctx, d.ControlPlane, s, d.TP, d.Log)
			if err != nil {
				return st, err
			}
			d.initialised, st.Init = sealMemory{true, s.Seal()}, &req
		}
		if !d.rolled.is(s.Seal()) {
			rolled, err := RollAtSeal(s, d.Log)
			if err != nil {
				return st, err
			}
			d.rolled, st.Rolled = sealMemory{true, s.Seal()}, rolled
		}
		if plan := PlanClassicPrefixRequest(s, d.Log); plan.Send && !d.asked.is(s.Seal()) {
			req, err := SendClassicPrefixRequest(ctx, d.ControlPlane, d.Controller, d.TP, s, plan, d.BrokerID, d.LeaderEpoch)
			if err != nil {
				return st, err
			}
			d.asked, st.PrefixSent = sealMemory{true, s.Seal()}, &req
		}
	}
	return st, nil
}

// ForgetProposal makes the next Step of a seal-pending partition send
// the seal proposal again: the broker calls it when its request went
// unanswered (a timeout). The controller's CommitSeal refuses a second
// commit, so a duplicate proposal changes nothing.
func (d *LeaderSwitch) ForgetProposal() { d.proposed = false }

// NeedsRollAtSeal reports whether a phase-1 leader must roll its log at
// the seal: the log ends at the seal and remote storage does not hold
// S-1 yet. The remote-log manager copies rolled segments only, and a
// log that takes no classic append past the seal rolls by size or age
// never, so a leader elected in phase 1 (its predecessor, which rolled
// when it sealed, failed) would hold S-1 in its active segment for good
// and never ask for phase 2.
func NeedsRollAtSeal(s tierstate.State, l PrefixLog, logEnd int64) bool {
	return s.Phase() == tierstate.PhaseOne && logEnd == s.Seal() && l.HighestOffsetInRemoteStorageInLineage() < s.Seal()-1
}

// RollAtSeal rolls the leader's active segment when NeedsRollAtSeal
// holds and the segment holds records (all below the seal: the log ends
// there). It reports whether it rolled; rolling an empty active segment
// would change nothing.
func RollAtSeal(s tierstate.State, l SwitchLog) (bool, error) {
	o := l.Offsets()
	if !NeedsRollAtSeal(s, l, o.LogEndOffset) {
		return false, nil
	}
	segs, err := l.Segments(o.LogEndOffset)
	if err != nil {
		return false, err
	}
	if n := len(segs); n == 0 || segs[n-1].BaseOffset >= o.LogEndOffset {
		return false, nil
	}
	if err := l.Roll(); err != nil {
		return false, fmt.Errorf("consolidate: roll at seal %d: %w", s.Seal(), err)
	}
	return true, nil
}
