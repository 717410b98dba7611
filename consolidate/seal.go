package consolidate

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/internal/mutation"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/tierstate"
	"github.com/tierlog/tierlog/wal"
)

// The leader's side of the switch, before consolidation starts:
//
//	phase         classic appends    the leader
//	classic       yes                -
//	seal pending  refused            SealLeader: abort each undecided transaction,
//	              (retriable)        roll the active segment, flush; once HW = LEO
//	                                 the proposal S = LEO goes to the controller
//	phase 1/2     refused            InitDisklessLog (W = log start, HW = S,
//	              (sealed at S)      producer states); PlanClassicPrefixRequest
//
// Every step is idempotent and reads what it needs from the log, so a
// crash anywhere before the controller commits the seal is repaired by
// running SealLeader again on the reopened log: a lost marker is written
// again (the transaction is still open in the recovered producer state),
// a lost roll is rolled again. The controller's commit of S is the commit
// point; the log never grows past S afterwards (ClassicGate).

var (
	// ErrClassicAppendRefused is the sentinel of every
	// *ClassicAppendError.
	ErrClassicAppendRefused = errors.New("consolidate: classic append refused")
	// ErrSealPending: the partition is being sealed. Kafka:
	// REPLICA_NOT_AVAILABLE (retriable; the producer retries and reaches
	// the diskless log once the seal is committed).
	ErrSealPending = errors.New("consolidate: seal pending")
	// ErrClassicLogSealed: the seal is committed; appends go to the WAL
	// once DisklessProduceAllowed lets them (phase 2).
	ErrClassicLogSealed = errors.New("consolidate: classic log sealed")
	// ErrAwaitingPhaseTwo: the partition switched from classic to
	// diskless and its phase-2 flag, which commits the diskless leader
	// epoch E_d, is not committed yet: no diskless record is produced or
	// consolidated before it (tierstate.State.TakesDisklessRecords).
	// Kafka: NOT_LEADER_OR_FOLLOWER (retriable; the producer refreshes
	// its metadata and retries).
	ErrAwaitingPhaseTwo = errors.New("consolidate: diskless records wait for the phase-2 flag")
	// ErrLogPastSeal: the leader's log does not end at the committed
	// seal, so its producer state is not the one at S.
	ErrLogPastSeal = errors.New("consolidate: log does not end at the seal")
)

// ClassicAppendError is a refused classic append: the phase, and the seal
// once committed. It unwraps to ErrClassicAppendRefused and to
// ErrSealPending or ErrClassicLogSealed.
type ClassicAppendError struct {
	Phase tierstate.Phase
	Seal  int64
}

func (e *ClassicAppendError) Error() string {
	if e.Phase == tierstate.PhaseSealPending {
		return "consolidate: classic append refused: seal pending"
	}
	return fmt.Sprintf("consolidate: classic append refused: classic log sealed at %d (%s)", e.Seal, e.Phase)
}

// Unwrap returns the sentinels.
func (e *ClassicAppendError) Unwrap() []error {
	if e.Phase == tierstate.PhaseSealPending {
		return []error{ErrClassicAppendRefused, ErrSealPending}
	}
	return []error{ErrClassicAppendRefused, ErrClassicLogSealed}
}

// ClassicAppendAllowed decides whether a leader append from origin may go
// to the classic log in state s: always while classic; while the seal is
// pending only the broker's own writes (transaction markers, which decide
// the transactions the seal waits for); never once the seal is committed.
func ClassicAppendAllowed(s tierstate.State, origin log.AppendOrigin) error {
	switch s.Phase() {
	case tierstate.PhaseClassic:
		return nil
	case tierstate.PhaseSealPending:
		if origin == log.OriginCoordinator {
			return nil
		}
		return &ClassicAppendError{Phase: s.Phase(), Seal: s.Seal()}
	default:
		return &ClassicAppendError{Phase: s.Phase(), Seal: s.Seal()}
	}
}

// DisklessHeldError refuses a diskless record of a switched partition
// before its phase-2 flag: a produce (DisklessProduceAllowed) or a
// consolidation stamp (StampEpoch). It carries the phase, the seal and
// the E_d the state holds (-1, or one an older controller wrote with the
// seal), and unwraps to ErrSealPending while the seal is pending (Kafka
// REPLICA_NOT_AVAILABLE) and to ErrAwaitingPhaseTwo otherwise (Kafka
// NOT_LEADER_OR_FOLLOWER). Both are retriable.
type DisklessHeldError struct {
	Phase               tierstate.Phase
	Seal                int64
	DisklessLeaderEpoch int32
}

func (e *DisklessHeldError) Error() string {
	if e.Phase == tierstate.PhaseSealPending {
		return "consolidate: diskless records held: seal pending"
	}
	return fmt.Sprintf("consolidate: diskless records held: %s at seal %d, diskless epoch %d, until the phase-2 flag",
		e.Phase, e.Seal, e.DisklessLeaderEpoch)
}

// Unwrap returns the sentinel.
func (e *DisklessHeldError) Unwrap() error {
	if e.Phase == tierstate.PhaseSealPending {
		return ErrSealPending
	}
	return ErrAwaitingPhaseTwo
}

// DisklessProduceAllowed decides whether a produce to the diskless WAL
// may be taken for a partition in state s: only when the partition takes
// diskless records (tierstate.State.TakesDisklessRecords: never switched,
// or phase 2 with its E_d). A switched partition refuses it while the
// seal is pending and in phase 1 with a *DisklessHeldError; the producer
// retries and is taken once the phase-2 flag is committed. A partition
// the switch never touched is not decided here (nil): whether a topic is
// diskless at all is the broker's routing.
func DisklessProduceAllowed(s tierstate.State) error {
	if s.TakesDisklessRecords() {
		return nil
	}
	return &DisklessHeldError{Phase: s.Phase(), Seal: s.Seal(), DisklessLeaderEpoch: s.DisklessLeaderEpoch()}
}

// LeaderAppender is the classic append path of a leader's log.
// *log.UnifiedLog satisfies it.
type LeaderAppender interface {
	AppendAsLeader(batches []byte, leaderEpoch int32, origin log.AppendOrigin) (log.AppendInfo, error)
}

// ClassicGate is the leader's classic append path of one partition with
// the switch state in front of it: AppendAsLeader refuses what
// ClassicAppendAllowed refuses (a *ClassicAppendError, nothing written)
// and passes the rest to the log. The broker calls SetState with every
// state it replays. The gate changes nothing in package log: after a
// restart the replayed state refuses again. A consolidation append
// (AppendAsFollower) does not go through it.
//
// Concurrency: safe for concurrent use. Appends hold mu shared for the
// whole append (the check and the log write), so they run in parallel
// with each other, and SetState takes it exclusively: once SetState
// returns, no append admitted under the old state is still in flight, so
// the sealing that follows sees every classic record (an append admitted
// before the arming cannot land after the seal was computed). That is
// the one reason the log write happens under mu.
type ClassicGate struct {
	log LeaderAppender
	mu  sync.RWMutex
	// state is guarded by mu.
	state tierstate.State
}

// NewClassicGate returns the gate of l in state s.
func NewClassicGate(l LeaderAppender, s tierstate.State) *ClassicGate {
	return &ClassicGate{log: l, state: s}
}

// SetState replaces the switch state, after every append admitted under
// the previous one has finished.
func (g *ClassicGate) SetState(s tierstate.State) {
	g.mu.Lock()
	g.state = s
	g.mu.Unlock()
}

// AppendAsLeader appends to the classic log unless the switch refuses it.
// A refused append returns an empty AppendInfo.
func (g *ClassicGate) AppendAsLeader(batches []byte, leaderEpoch int32, origin log.AppendOrigin) (log.AppendInfo, error) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if err := ClassicAppendAllowed(g.state, origin); err != nil {
		return log.AppendInfo{FirstOffset: base.UndefinedOffset, LastOffset: base.UndefinedOffset,
			MaxTimestamp: base.UndefinedOffset}, err
	}
	return g.log.AppendAsLeader(batches, leaderEpoch, origin)
}

// DisklessProduceAllowed is DisklessProduceAllowed in the gate's state:
// the broker asks it before it sends a produce of this partition to the
// WAL (wal.Writer). It takes the gate's lock shared, so it never sees a
// state older than the last SetState that returned.
func (g *ClassicGate) DisklessProduceAllowed() error {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return DisklessProduceAllowed(g.state)
}

// SealLog is what sealing reads and writes of the leader's log.
// *log.UnifiedLog satisfies it.
type SealLog interface {
	LeaderAppender
	ActiveProducers() []log.ProducerState
	Offsets() log.Offsets
	Segments(from int64) ([]log.SegmentInfo, error)
	Roll() error
	Flush() error
	// EpochEntriesInRange is the log's leader-epoch entries over
	// [start, end) (start -1: from the cache's first): the proposal's
	// seal lineage is EpochEntriesInRange(-1, S).
	EpochEntriesInRange(start, end int64) []epochcache.Entry
}

var _ SealLog = (*log.UnifiedLog)(nil)

// OpenTxn is an undecided transaction the seal aborts.
type OpenTxn struct {
	ProducerID       int64
	ProducerEpoch    int16
	CoordinatorEpoch int32
	FirstOffset      int64
}

// SealInput is what PlanSeal decides on.
type SealInput struct {
	Phase tierstate.Phase
	// LogEnd and HighWatermark are the leader log's; ActiveBase is its
	// active segment's base offset.
	LogEnd, HighWatermark, ActiveBase int64
	Open                              []OpenTxn
}

// SealPlan is PlanSeal's answer, in the order the leader runs it.
type SealPlan struct {
	// Seal: the partition is seal pending (otherwise nothing to do).
	Seal bool
	// Abort: write an ABORT marker for each, in the leader epoch.
	Abort []OpenTxn
	// Roll: the active segment holds records; close it so the classic
	// tail is a finished, copyable segment.
	Roll bool
	// Ready: nothing to abort or roll and HW = LEO: propose S = LEO.
	Ready    bool
	Proposed int64
}

// PlanSeal decides the next sealing steps of a seal-pending leader (the
// broker's part of the switch, docs/switch.md). The markers go first (they
// move the log end), then the roll; the proposal waits for the followers
// to replicate everything (HW = LEO), so the seal never sits above
// what a newly elected leader holds.
func PlanSeal(in SealInput) SealPlan {
	if in.Phase != tierstate.PhaseSealPending {
		return SealPlan{}
	}
	p := SealPlan{Seal: true, Abort: in.Open}
	p.Roll = len(in.Open) > 0 || in.LogEnd > in.ActiveBase
	if !p.Roll && in.HighWatermark == in.LogEnd {
		p.Ready, p.Proposed = true, in.LogEnd
	}
	return p
}

// SealProposal is what the leader sends the controller with
// InitDisklessLog once its log is sealed: the seal, the leader's epoch at
// seal-1 and its producer states (the controller commits it with
// tierstate.State.CommitSealProposal).
type SealProposal = tierstate.SealProposal

// SealResult is one SealLeader run.
type SealResult struct {
	Aborted []OpenTxn
	Rolled  bool
	// Ready: Proposal may be sent. Otherwise the high watermark is below
	// the log end: run again once the followers caught up.
	Ready    bool
	Proposal SealProposal
}

func sealInput(s tierstate.State, l SealLog) (SealInput, error) {
	o := l.Offsets()
	segs, err := l.Segments(o.LogEndOffset)
	if err != nil {
		return SealInput{}, err
	}
	in := SealInput{Phase: s.Phase(), LogEnd: o.LogEndOffset, HighWatermark: o.HighWatermark, ActiveBase: o.LogEndOffset}
	if n := len(segs); n > 0 {
		in.ActiveBase = segs[n-1].BaseOffset
	}
	for _, p := range l.ActiveProducers() {
		if p.CurrentTxnFirstOffset >= 0 {
			in.Open = append(in.Open, OpenTxn{ProducerID: p.ProducerID, ProducerEpoch: p.ProducerEpoch,
				CoordinatorEpoch: p.CoordinatorEpoch, FirstOffset: p.CurrentTxnFirstOffset})
		}
	}
	return in, nil
}

// SealLeader runs the sealing steps PlanSeal decides on the leader's log
// in leaderEpoch: one ABORT marker per undecided transaction (as the
// transaction coordinator would write it, at nowMs), a roll, and a flush,
// so that the proposal never names offsets a crash can lose. It returns
// the proposal once HW = LEO. Safe to run again after a crash or while
// waiting for the high watermark.
func SealLeader(s tierstate.State, l SealLog, leaderEpoch int32, nowMs int64) (SealResult, error) {
	if s.Phase() != tierstate.PhaseSealPending {
		return SealResult{}, fmt.Errorf("consolidate: seal in phase %s: %w", s.Phase(), tierstate.ErrInvalidTransition)
	}
	in, err := sealInput(s, l)
	if err != nil {
		return SealResult{}, err
	}
	plan := PlanSeal(in)
	var res SealResult
	for _, t := range plan.Abort {
		opts := record.DefaultBuilderOptions()
		opts.ProducerID, opts.ProducerEpoch, opts.PartitionLeaderEpoch = t.ProducerID, t.ProducerEpoch, leaderEpoch
		marker, err := record.AppendEndTxnBatch(nil, opts, nowMs, record.ControlAbort, t.CoordinatorEpoch)
		if err != nil {
			return res, err
		}
		if _, err := l.AppendAsLeader(marker, leaderEpoch, log.OriginCoordinator); err != nil {
			return res, fmt.Errorf("consolidate: seal: abort producer %d: %w", t.ProducerID, err)
		}
		res.Aborted = append(res.Aborted, t)
	}
	if plan.Roll {
		if err := l.Roll(); err != nil {
			return res, err
		}
		res.Rolled = true
	}
	if err := l.Flush(); err != nil {
		return res, err
	}
	if in, err = sealInput(s, l); err != nil {
		return res, err
	}
	if plan = PlanSeal(in); plan.Ready {
		res.Ready = true
		res.Proposal = SealProposal{Seal: plan.Proposed, Producers: tagProducerStates(l.ActiveProducers()),
			Lineage: l.EpochEntriesInRange(-1, plan.Proposed)}
	}
	return res, nil
}

// tagProducerStates is the log's producer state as the seal commits it
// (tag 101: each producer's last batch; a producer with no batch keeps
// its epoch, with sequences and offset -1).
func tagProducerStates(ps []log.ProducerState) []tierstate.ProducerStateEntry {
	out := make([]tierstate.ProducerStateEntry, 0, len(ps))
	for _, p := range ps {
		e := tierstate.ProducerStateEntry{ProducerID: p.ProducerID, ProducerEpoch: p.ProducerEpoch,
			BaseSequence: base.NoSequence, LastSequence: base.NoSequence, AssignedOffset: base.UndefinedOffset,
			BatchMaxTimestamp: p.LastTimestamp}
		if n := len(p.Batches); n > 0 {
			b := p.Batches[n-1]
			e.BaseSequence, e.LastSequence = b.FirstSeq(), b.LastSeq
			e.AssignedOffset, e.BatchMaxTimestamp = b.LastOffset-int64(b.OffsetDelta), b.Timestamp
		}
		out = append(out, e)
	}
	return out
}

// walProducerStates is the log's producer state as the control plane
// keeps it: each producer's dedup window.
func walProducerStates(ps []log.ProducerState) []wal.ProducerState {
	out := make([]wal.ProducerState, 0, len(ps))
	for _, p := range ps {
		w := wal.ProducerState{ProducerID: p.ProducerID, ProducerEpoch: p.ProducerEpoch}
		for _, b := range p.Batches {
			w.Batches = append(w.Batches, wal.ProducerBatch{BaseSequence: b.FirstSeq(), LastSequence: b.LastSeq,
				AssignedOffset: b.LastOffset - int64(b.OffsetDelta), Timestamp: b.Timestamp})
		}
		out = append(out, w)
	}
	return out
}

// PlanInitDisklessLog is the control-plane row of a partition whose seal
// the controller committed: W = the classic log start, HW = S, and the
// producer states of the sealed log. The log must end at the seal
// (ErrLogPastSeal otherwise: a log past S has records the seal does not
// own, and its producer state is not the one at S), except in phase 2,
// where a leader whose log ends below the seal (it lost its disk, and
// rebuilds from remote storage, which holds the classic prefix) takes the
// row from the metadata, as Inkless's leader does after the commit: the
// producer states the seal committed (tag 101). Without the row its
// consolidation fetch below the seal is answered "unknown partition"
// rather than redirected to remote storage, so it never rebuilds, and
// without the rebuild its log never ends at the seal: a partition whose
// every replica lost its disk before the row was written (the operator's
// start-phase-2) would never serve its classic prefix.
func PlanInitDisklessLog(s tierstate.State, tp remote.TopicIDPartition, l SealLog) (wal.InitDisklessLogRequest, error) {
	if !s.SealCommitted() {
		return wal.InitDisklessLogRequest{}, fmt.Errorf("consolidate: init diskless log in phase %s: %w", s.Phase(), tierstate.ErrInvalidTransition)
	}
	o := l.Offsets()
	req := wal.InitDisklessLogRequest{Partition: walTP(tp), Topic: tp.Topic, LogStartOffset: o.LogStartOffset,
		DisklessStartOffset: s.Seal()}
	switch {
	case o.LogEndOffset == s.Seal():
		req.ProducerStates = walProducerStates(l.ActiveProducers())
	case o.LogEndOffset < s.Seal() && s.Phase() == tierstate.PhaseTwo && !mutation.Disabled(mutation.InitRowFromMetadata):
		// W, the classic log start, is also the row's first cross-tier
		// log start X. Without a recorded epoch the classic prefix is
		// empty (X at the seal: the endpoint then resets a fetch below
		// it rather than waiting for remote storage to hold S-1); with
		// one, the log's start is at or below the remote prefix's, and
		// the remote-log manager's report raises it.
		req.LogStartOffset = min(o.LogStartOffset, s.Seal())
		if s.LastClassicLeaderEpoch() < 0 {
			req.LogStartOffset = s.Seal()
		}
		req.ProducerStates = metadataProducerStates(s.ProducerStates(), s.Seal())
	default:
		return wal.InitDisklessLogRequest{}, fmt.Errorf("consolidate: init diskless log: log end %d, seal %d: %w",
			o.LogEndOffset, s.Seal(), ErrLogPastSeal)
	}
	return req, nil
}

// metadataProducerStates is the control plane's producer state from the
// seal's committed one (tag 101: each producer's last batch). A batch at
// or past the seal is not in the classic prefix (an operator lowered the
// seal past it, giving up its records): the producer keeps its epoch
// without it, so a retry of that batch is not answered as a duplicate of
// records no tier holds.
func metadataProducerStates(ps []tierstate.ProducerStateEntry, seal int64) []wal.ProducerState {
	out := make([]wal.ProducerState, 0, len(ps))
	for _, p := range ps {
		w := wal.ProducerState{ProducerID: p.ProducerID, ProducerEpoch: p.ProducerEpoch}
		if p.BaseSequence >= 0 && p.AssignedOffset >= 0 && p.AssignedOffset < seal {
			w.Batches = []wal.ProducerBatch{{BaseSequence: p.BaseSequence, LastSequence: p.LastSequence,
				AssignedOffset: p.AssignedOffset, Timestamp: p.BatchMaxTimestamp}}
		}
		out = append(out, w)
	}
	return out
}

// InitDisklessLog creates the partition's WAL row from its sealed log
// (PlanInitDisklessLog) on cp. A row that exists already is a success.
func InitDisklessLog(ctx context.Context, cp wal.ControlPlane, s tierstate.State, tp remote.TopicIDPartition, l SealLog) (wal.InitDisklessLogRequest, error) {
	req, err := PlanInitDisklessLog(s, tp, l)
	if err != nil {
		return req, err
	}
	res, err := cp.InitDisklessLog(ctx, []wal.InitDisklessLogRequest{req})
	if err != nil {
		return req, err
	}
	return req, res[0].Err
}
