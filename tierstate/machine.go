package tierstate

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/remote"
	"go.uber.org/zap"
)

// The tier state machine: rebuilding a replica's local log from remote
// storage when its fetch offset is below the source's local log start
// (OFFSET_MOVED_TO_TIERED_STORAGE), Kafka's TierStateMachine (KIP-405).
//
//	offset          log start          target  next
//	remote segment        [ .............. T ]
//	source          [ remote only ............. | local log of the source ...
//	rebuilt log     [ epochs and producer state, read remotely ]
//	                                            ^ empty local log: log end =
//	                                              local log start = HW = next
//
// Upstream, the target T is the record below the source's local log start
// and next is the segment's end + 1; in phase 2, T is seal - 1 in the
// recorded epoch and next is the seal, even when the segment goes past it.
//
// The Machine reads everything it needs first (the source's answers, the
// segment's metadata, its leader-epoch checkpoint and producer snapshot)
// and changes the local log last, in one crash-atomic call
// (log.UnifiedLog.TruncateFullyAndRestore). A failure before that call
// leaves the local log untouched.

// LeaderEndpoint is the source a fetcher rebuilds against: the partition
// leader for a replica fetcher, Inkless's DisklessLeaderEndPoint for a
// consolidation fetcher, the current log for a future log's fetcher.
// Kafka: LeaderEndPoint. A broker implements it; errors the source
// answers with (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH,
// NOT_LEADER_OR_FOLLOWER ...) are returned as errors, fencing as one
// wrapping ErrFencedEpoch.
type LeaderEndpoint interface {
	// FetchEarliestLocalOffset returns the source's local log start offset
	// and the leader epoch of the record there (Kafka:
	// fetchEarliestLocalOffset, ListOffsets with
	// EARLIEST_LOCAL_TIMESTAMP).
	FetchEarliestLocalOffset(ctx context.Context, tp remote.TopicIDPartition, currentLeaderEpoch int32) (OffsetAndEpoch, error)
	// FetchEpochEndOffset answers OffsetsForLeaderEpoch(epoch) for one
	// partition (Kafka: fetchEpochEndOffsets).
	FetchEpochEndOffset(ctx context.Context, tp remote.TopicIDPartition, currentLeaderEpoch, epoch int32) (EpochEndOffset, error)
}

// RemoteMetadata finds remote segments. *remote.MetadataManager
// satisfies it.
type RemoteMetadata interface {
	// SegmentFor returns the finished segment holding offset in leader
	// epoch epoch (Kafka: RemoteLogMetadataManager.remoteLogSegmentMetadata);
	// ok false when none does.
	SegmentFor(tp remote.TopicIDPartition, epoch int32, offset int64) (seg remote.SegmentMetadata, ok bool, err error)
}

// RemoteData reads a remote segment's auxiliary state.
// *remote.StorageManager satisfies it.
type RemoteData interface {
	// FetchLeaderEpochs returns the segment's leader-epoch checkpoint: the
	// leader's entries before the segment end, oldest first.
	FetchLeaderEpochs(ctx context.Context, m *remote.SegmentMetadata) ([]epochcache.Entry, error)
	// FetchIndex returns one auxiliary index; the rebuild asks only for
	// remote.IndexProducerSnapshot and remote.IndexProducerBatches (a
	// segment without the latter answers remote.ErrIndexNotFound).
	FetchIndex(ctx context.Context, m *remote.SegmentMetadata, t remote.IndexType) ([]byte, error)
}

// RebuildLog is the local log a rebuild replaces: the replica's current
// log, or its future log for an alter-log-dir fetcher. *log.UnifiedLog
// satisfies it.
type RebuildLog interface {
	RemoteStorageEnabled() bool
	LogStartOffset() int64
	LocalLogStartOffset() int64
	LogEndOffset() int64
	LatestEpoch() (int32, bool)
	EpochEntries() []epochcache.Entry
	// TruncateFullyAndRestore replaces the log with an empty log at
	// r.NextOffset carrying r's log start, epochs and producer snapshot,
	// crash-atomically.
	TruncateFullyAndRestore(r log.RemoteRestore) error
}

// MachineOptions configures a Machine. Leader, Metadata and Data are
// required; the rest is optional.
type MachineOptions struct {
	// Leader is the fetcher's source.
	Leader LeaderEndpoint
	// Metadata is the remote segment metadata (the broker's
	// *remote.MetadataManager).
	Metadata RemoteMetadata
	// Data reads remote segments (the broker's *remote.StorageManager).
	Data RemoteData
	// PartitionReady reports whether the remote log manager has the
	// partition's metadata (Kafka: RemoteLogManager.isPartitionReady;
	// *remote.Manager's IsPartitionReady). Default: always ready.
	PartitionReady func(tp remote.TopicIDPartition) bool
	// Logger receives one line per rebuild. Default zap.NewNop().
	Logger *zap.Logger
	// Listener receives rebuild events. Optional.
	Listener MachineListener
}

// MachineListener receives a Machine's events. Every field is optional.
// Callbacks run on the goroutine that called Rebuild, with no lock held,
// and must not call back into the Machine.
type MachineListener struct {
	// RebuildStarted is called before a rebuild asks its sources anything.
	RebuildStarted func(RebuildStart)
	// RebuildFinished is called when a rebuild ends; err is nil on
	// success, and res then describes what was restored.
	RebuildFinished func(res RebuildResult, err error)
}

// RebuildStart describes a rebuild about to run.
type RebuildStart struct {
	Partition remote.TopicIDPartition
	Mode      RebuildMode
	// LogEndOffset is the local log's end (the fetch offset the source
	// refused).
	LogEndOffset int64
}

// Machine rebuilds local logs from remote storage for one fetcher (Kafka:
// TierStateMachine). It keeps no state between rebuilds.
//
// Concurrency: safe for concurrent use on different logs; the caller (the
// fetcher owning the partition) serializes rebuilds of one log with its
// other writes, as for any log writer.
type Machine struct {
	opts     MachineOptions
	counters machineCounters
}

// NewMachine returns a Machine over its sources.
func NewMachine(opts MachineOptions) (*Machine, error) {
	if opts.Leader == nil || opts.Metadata == nil || opts.Data == nil {
		return nil, fmt.Errorf("tierstate: machine needs a leader endpoint, remote metadata and remote data: %w", ErrInvalidArgument)
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	return &Machine{opts: opts}, nil
}

// RebuildRequest is one partition whose fetch was answered
// OFFSET_MOVED_TO_TIERED_STORAGE.
type RebuildRequest struct {
	Partition remote.TopicIDPartition
	// Log is the local log to rebuild.
	Log RebuildLog
	// State is the partition's switch state: with the log's end (the
	// fetch offset the source refused) it selects the rebuild
	// (ModeForFetch).
	State State
	// CurrentLeaderEpoch is the fetcher's current leader epoch, sent with
	// the questions to the source (KIP-320 fencing).
	CurrentLeaderEpoch int32
	// LeaderLogStartOffset is the log start offset of the fetch response;
	// the rebuilt log starts its log there (records below the local log
	// start are read remotely). Negative: the rebuilt log's log start is
	// its next offset.
	LeaderLogStartOffset int64
}

// RebuildResult describes a rebuild: after a failure, only what the steps
// before it looked up (see Machine.Rebuild).
type RebuildResult struct {
	Partition remote.TopicIDPartition
	Mode      RebuildMode
	// LeaderLocalLogStart is the source's answer to
	// FetchEarliestLocalOffset; record.UndefinedOffset and
	// record.UndefinedEpoch in phase 2, which ignores the source's local
	// log.
	LeaderLocalLogStart OffsetAndEpoch
	// QueriedEpoch is the epoch asked with OffsetsForLeaderEpoch, and
	// EpochAnswer the answer; record.UndefinedEpoch and a zero answer when
	// none was asked (epoch 0 at the local start, or phase 2).
	QueriedEpoch int32
	EpochAnswer  EpochEndOffset
	// Target is the record the segment was looked up for.
	Target OffsetAndEpoch
	// Segment is the remote segment the state was restored from.
	Segment remote.SegmentMetadata
	// NextOffset is where the local log now starts and ends, its high
	// watermark, and the next fetch offset.
	NextOffset int64
	// LogStartOffset is the rebuilt log's log start offset.
	LogStartOffset int64
	// Epochs are the rebuilt log's leader-epoch entries; Dropped the
	// checkpoint's entries at or past NextOffset, not restored.
	Epochs  []epochcache.Entry
	Dropped []epochcache.Entry
	// ProducerSnapshotRestored says whether the segment's producer
	// snapshot became the producer state at NextOffset.
	ProducerSnapshotRestored bool
	// LastFetchedEpoch is the rebuilt log's latest epoch, for the next
	// fetch's truncation check; record.UndefinedEpoch when it has none.
	LastFetchedEpoch int32
}

// String prints the result on a few lines, for logs and examples.
func (r RebuildResult) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s rebuild of %s:", r.Mode, r.Partition)
	if r.Mode == RebuildUpstream {
		fmt.Fprintf(&b, " leader local log start %s,", r.LeaderLocalLogStart)
		if r.QueriedEpoch != base.UndefinedEpoch {
			fmt.Fprintf(&b, " OffsetsForLeaderEpoch(%d) = %s,", r.QueriedEpoch, r.EpochAnswer)
		}
	}
	fmt.Fprintf(&b, " target %s in segment [%d, %d]\n", r.Target, r.Segment.StartOffset, r.Segment.EndOffset)
	fmt.Fprintf(&b, "local log at %d (log start %d), epochs %s", r.NextOffset, r.LogStartOffset, epochcache.FormatEntries(r.Epochs))
	if len(r.Dropped) > 0 {
		fmt.Fprintf(&b, " (not restored: %s)", epochcache.FormatEntries(r.Dropped))
	}
	if r.ProducerSnapshotRestored {
		b.WriteString(", producer snapshot restored")
	} else {
		b.WriteString(", empty producer state")
	}
	return b.String()
}

// Rebuild rebuilds req.Log from remote storage and returns where the fetch
// continues (Kafka's TierStateMachine, and the phase-2 rebuild of
// https://github.com/aiven/inkless/pull/857 when req.State has a recorded
// epoch and the log ends below the seal, ModeForFetch):
//
//	upstream                                   phase 2 (R >= 0)
//	1  remote storage enabled on the log        same
//	2  source's local log start L, epoch E      skipped (the source's local log is ignored)
//	3  target L-1; its epoch: E = 0 -> 0, else  target S-1 in epoch R, no question
//	   OffsetsForLeaderEpoch(E-1) -> (e, end):
//	   end > L-1 ? e : E
//	4  remote log manager ready                 same
//	5  segment holding the target, or           same
//	   ErrRemoteSegmentNotFound (retry)
//	6  segment's epoch checkpoint               same; plan: PlanRestore
//	7  producer snapshot                        only if the segment ends at S-1
//	8  log: TruncateFullyAndRestore(next =      next = S, epochs below S
//	   segment end + 1, all epochs)
//
// Steps 1 to 7 read only; the local log changes in step 8, and only if
// they all succeeded and ctx is still live. Errors are *RebuildError;
// RebuildAction says what the fetcher does with them. A failed rebuild
// still returns what its steps looked up before the failure (the source's
// local log start, the epoch answer, the target, the segment); the fields
// that describe the rebuilt log (NextOffset and after) stay unset.
func (m *Machine) Rebuild(ctx context.Context, req RebuildRequest) (RebuildResult, error) {
	if req.Log == nil {
		return RebuildResult{}, fmt.Errorf("tierstate: rebuild of %s without a log: %w", req.Partition, ErrInvalidArgument)
	}
	r := rebuildRun{m: m, req: req, res: RebuildResult{
		Partition:           req.Partition,
		Mode:                ModeForFetch(req.State, req.Log.LogEndOffset()),
		LeaderLocalLogStart: OffsetAndEpoch{Offset: base.UndefinedOffset, Epoch: base.UndefinedEpoch},
		QueriedEpoch:        base.UndefinedEpoch,
		Target:              OffsetAndEpoch{Offset: base.UndefinedOffset, Epoch: base.UndefinedEpoch},
		LastFetchedEpoch:    base.UndefinedEpoch,
	}}
	m.counters.started.Add(1)
	if ls := m.opts.Listener.RebuildStarted; ls != nil {
		ls(RebuildStart{Partition: req.Partition, Mode: r.res.Mode, LogEndOffset: req.Log.LogEndOffset()})
	}
	err := r.run(ctx)
	if err != nil {
		m.opts.Logger.Warn("rebuild from remote storage failed", zap.Stringer("partition", req.Partition),
			zap.Stringer("mode", r.res.Mode), zap.Stringer("action", RebuildAction(err)), zap.Error(err))
	} else {
		m.opts.Logger.Info("rebuilt the local log from remote storage", zap.Stringer("partition", req.Partition),
			zap.Stringer("mode", r.res.Mode), zap.Stringer("target", r.res.Target),
			zap.Int64("segmentStart", r.res.Segment.StartOffset), zap.Int64("segmentEnd", r.res.Segment.EndOffset),
			zap.Int64("nextOffset", r.res.NextOffset), zap.Int64("logStartOffset", r.res.LogStartOffset),
			zap.String("epochs", epochcache.FormatEntries(r.res.Epochs)),
			zap.Bool("producerSnapshot", r.res.ProducerSnapshotRestored))
	}
	m.counters.observeRebuild(r.res, err)
	if ls := m.opts.Listener.RebuildFinished; ls != nil {
		ls(r.res, err)
	}
	return r.res, err
}

// rebuildRun is one Rebuild call.
type rebuildRun struct {
	m   *Machine
	req RebuildRequest
	res RebuildResult
}

func (r *rebuildRun) fail(step RebuildStep, err error) *RebuildError {
	return &RebuildError{Partition: r.req.Partition, Mode: r.res.Mode, Step: step,
		TargetEpoch: r.res.Target.Epoch, TargetOffset: r.res.Target.Offset,
		Err: err}
}

func (r *rebuildRun) run(ctx context.Context) error {
	req, opts := r.req, r.m.opts
	tp := req.Partition
	if err := ctx.Err(); err != nil {
		return r.fail(StepPreconditions, err)
	}
	if !req.Log.RemoteStorageEnabled() {
		return r.fail(StepPreconditions, ErrRemoteStorageNotEnabled)
	}
	if err := r.findTarget(ctx); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return r.fail(StepSegmentLookup, err)
	}
	if opts.PartitionReady != nil && !opts.PartitionReady(tp) {
		return r.fail(StepPreconditions, ErrRemoteStorageNotReady)
	}
	if r.res.Target.Offset < 0 {
		// The source's local log starts at 0: no record below it.
		return r.fail(StepSegmentLookup, &SegmentNotFoundError{Partition: tp, Epoch: r.res.Target.Epoch, Offset: r.res.Target.Offset})
	}

	seg, ok, err := opts.Metadata.SegmentFor(tp, r.res.Target.Epoch, r.res.Target.Offset)
	switch {
	case err != nil:
		return r.fail(StepSegmentLookup, err)
	case !ok:
		return r.fail(StepSegmentLookup, &SegmentNotFoundError{Partition: tp, Epoch: r.res.Target.Epoch, Offset: r.res.Target.Offset})
	}
	r.res.Segment = seg
	if err := ctx.Err(); err != nil {
		return r.fail(StepFetchLeaderEpochs, err)
	}
	checkpoint, err := opts.Data.FetchLeaderEpochs(ctx, &seg)
	if err != nil {
		return r.fail(StepFetchLeaderEpochs, err)
	}
	plan, err := PlanRestore(r.res.Mode, req.State.Seal(), r.res.Target, seg, checkpoint)
	if err != nil {
		return r.fail(StepPlan, err)
	}
	if req.LeaderLogStartOffset > plan.NextOffset {
		return r.fail(StepPlan, fmt.Errorf("%w: log start %d, next offset %d",
			ErrLeaderLogStartBeyondNextOffset, req.LeaderLogStartOffset, plan.NextOffset))
	}
	var snapshot, batches []byte
	if plan.RestoreSnapshot {
		if err := ctx.Err(); err != nil {
			return r.fail(StepFetchSnapshot, err)
		}
		if snapshot, err = opts.Data.FetchIndex(ctx, &seg, remote.IndexProducerSnapshot); err != nil {
			return r.fail(StepFetchSnapshot, err)
		}
		if snapshot == nil {
			snapshot = []byte{} // present but empty: still a snapshot (of no producer)
		}
		// Every producer's dedup window, uploaded beside the snapshot; a
		// segment copied without it restores Kafka's window (the last
		// batch of each producer).
		batches, err = opts.Data.FetchIndex(ctx, &seg, remote.IndexProducerBatches)
		if errors.Is(err, remote.ErrIndexNotFound) {
			batches, err = nil, nil
		}
		if err != nil {
			return r.fail(StepFetchSnapshot, err)
		}
	}
	// Last chance to give up with the local log untouched.
	if err := ctx.Err(); err != nil {
		return r.fail(StepRestoreLocalLog, err)
	}
	err = req.Log.TruncateFullyAndRestore(log.RemoteRestore{NextOffset: plan.NextOffset,
		LogStartOffset: req.LeaderLogStartOffset, Epochs: plan.Epochs, ProducerSnapshot: snapshot,
		ProducerBatches: batches})
	if err != nil {
		e := r.fail(StepRestoreLocalLog, err)
		// The log refuses bad input (ErrInvalidArgument: bad epochs;
		// ErrCorruption: a snapshot that does not decode) before it
		// changes anything; a closed log is not changed either. Anything
		// else failed the log part-way.
		e.LocalLogChanged = !errors.Is(err, ErrInvalidArgument) && !errors.Is(err, ErrCorruption) &&
			!errors.Is(err, base.ErrClosed)
		return e
	}
	r.res.NextOffset = plan.NextOffset
	r.res.LogStartOffset = req.Log.LogStartOffset()
	r.res.Epochs = req.Log.EpochEntries()
	r.res.Dropped = plan.Dropped
	r.res.ProducerSnapshotRestored = plan.RestoreSnapshot
	if e, ok := req.Log.LatestEpoch(); ok {
		r.res.LastFetchedEpoch = e
	}
	return nil
}

// findTarget sets r.res.Target: the record just below the source's local
// log start and its epoch (upstream), or seal - 1 in R (phase 2).
func (r *rebuildRun) findTarget(ctx context.Context) error {
	req, leader := r.req, r.m.opts.Leader
	if r.res.Mode == RebuildPhaseTwo {
		target, ok := PhaseTwoTarget(req.State)
		if !ok {
			return r.fail(StepPreconditions, fmt.Errorf("%w: phase-2 seal %d has no record below it", ErrInvalidArgument, req.State.Seal()))
		}
		r.res.Target = target
		return nil
	}
	local, err := leader.FetchEarliestLocalOffset(ctx, req.Partition, req.CurrentLeaderEpoch)
	if err != nil {
		return r.fail(StepEarliestLocal, err)
	}
	r.res.LeaderLocalLogStart = local
	var answer EpochEndOffset
	if NeedsEpochQuery(local) {
		if err := ctx.Err(); err != nil {
			return r.fail(StepEpochEndOffset, err)
		}
		r.res.QueriedEpoch = local.Epoch - 1
		if answer, err = leader.FetchEpochEndOffset(ctx, req.Partition, req.CurrentLeaderEpoch, local.Epoch-1); err != nil {
			return r.fail(StepEpochEndOffset, err)
		}
		r.res.EpochAnswer = answer
	}
	r.res.Target = UpstreamTarget(local, answer)
	return nil
}
