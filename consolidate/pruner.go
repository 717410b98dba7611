package consolidate

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/tierstate"
	"github.com/tierlog/tierlog/wal"
)

// PruneLog is what the pruner reads of a leader's local log.
// *log.UnifiedLog satisfies it.
type PruneLog interface {
	// HighestOffsetInRemoteStorageInLineage is the highest offset remote
	// storage holds of this log's lineage (not a stale value an unclean
	// truncation left: log.UnifiedLog.HighestOffsetInRemoteStorageInLineage).
	HighestOffsetInRemoteStorageInLineage() int64
	LogEndOffset() int64
	// EpochForOffset is the leader epoch that wrote offset, from the
	// log's epoch cache.
	EpochForOffset(offset int64) (int32, bool)
}

var _ PruneLog = (*log.UnifiedLog)(nil)

// RemoteSegmentLookup finds the finished remote segment holding an offset
// of an epoch. *remote.MetadataManager satisfies it.
type RemoteSegmentLookup interface {
	// SegmentFor returns the COPY_SEGMENT_FINISHED segment that holds
	// offset in epoch, ok false when none does (Kafka:
	// remoteLogSegmentMetadata(tp, epoch, offset)).
	SegmentFor(tp remote.TopicIDPartition, epoch int32, offset int64) (remote.SegmentMetadata, bool, error)
}

var _ RemoteSegmentLookup = (*remote.MetadataManager)(nil)

// PrunePartition is one consolidating partition the broker leads.
type PrunePartition struct {
	Partition remote.TopicIDPartition
	State     tierstate.State
	Log       PruneLog
	// AwaitingRebuild: the leader was recreated and has not rebuilt.
	AwaitingRebuild bool
}

// PrunerOptions configures a Pruner. ControlPlane is required.
type PrunerOptions struct {
	ControlPlane wal.ControlPlane
	// RemoteSegments is the broker's remote log metadata. With it, a
	// partition is pruned at h only while a finished segment holds h in
	// the log's epoch at h (PruneInput.HighestNotInRemoteStorage); nil
	// trusts the log's h alone (tests without remote metadata).
	RemoteSegments RemoteSegmentLookup
	// Logger; default zap.NewNop().
	Logger *zap.Logger
}

// Pruner deletes the WAL batches that remote storage holds, for the
// consolidating partitions a broker leads (Inkless's
// ConsolidatedDisklessLogPruner; the broker calls Run every
// inkless.consolidation.cleanup.interval.ms, default 5 minutes). It keeps
// each partition's prune floor.
//
// Concurrency: safe for concurrent use; Run calls are serialised (runMu)
// so two runs never send prunes of one partition at once; mu guards the
// floors and is never held across the control-plane call.
type Pruner struct {
	opts  PrunerOptions
	runMu sync.Mutex
	mu    struct {
		sync.Mutex
		// floors holds each armed partition's prune floor.
		floors map[remote.TopicIDPartition]int64
	}
	prunes, skips, failures atomic.Int64
}

// NewPruner returns a Pruner with no floor set.
func NewPruner(opts PrunerOptions) (*Pruner, error) {
	if opts.ControlPlane == nil {
		return nil, fmt.Errorf("consolidate: pruner needs a control plane: %w", ErrInvalidArgument)
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	p := &Pruner{opts: opts}
	p.mu.floors = map[remote.TopicIDPartition]int64{}
	return p, nil
}

// Arm raises tp's floor to at least InitialFloor(seal): the consolidation
// of a switched partition started (the reconciler found it ready). A
// born-diskless partition needs no arming.
func (p *Pruner) Arm(tp remote.TopicIDPartition, seal int64) {
	f := InitialFloor(seal)
	if f == NoFloor {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if cur, ok := p.mu.floors[tp]; !ok || cur < f {
		p.mu.floors[tp] = f
	}
}

// Disarm forgets tp's floor (the broker no longer leads it, or the
// partition was recreated: its next consolidation arms it again).
func (p *Pruner) Disarm(tp remote.TopicIDPartition) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.mu.floors, tp)
}

// Floor returns tp's floor, NoFloor when unset.
func (p *Pruner) Floor(tp remote.TopicIDPartition) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if f, ok := p.mu.floors[tp]; ok {
		return f
	}
	return NoFloor
}

// PruneOutcome reports one partition of a Run.
type PruneOutcome struct {
	Partition remote.TopicIDPartition
	Decision  PruneDecision
	// Err is the control plane's error for this partition, or the remote
	// log metadata's error looking up h (nothing was sent then); the
	// floor is unchanged then.
	Err error
	// LogStartOffset is the WAL start the prune returned; Floor the floor
	// after the run.
	LogStartOffset int64
	Floor          int64
}

// remoteHolds reports whether the remote log metadata lists a finished
// segment holding h in the log's epoch at h; true without
// RemoteSegments, or when h < 0 (DecidePrune skips it anyway).
func (p *Pruner) remoteHolds(part PrunePartition, h int64) (bool, error) {
	if p.opts.RemoteSegments == nil || h < 0 {
		return true, nil
	}
	epoch, ok := part.Log.EpochForOffset(h)
	if !ok {
		return false, nil
	}
	_, held, err := p.opts.RemoteSegments.SegmentFor(part.Partition, epoch, h)
	if err != nil {
		return false, fmt.Errorf("consolidate: prune %s: remote segment of %d in epoch %d: %w", part.Partition, h, epoch, err)
	}
	return held, nil
}

// Run decides every partition (DecidePrune), sends the prunes in one
// PruneDisklessLogs call, and raises each pruned partition's floor to the
// WAL start it returned. The returned error is for the whole call (ctx,
// the control plane failed); one partition's refusal is in its outcome.
func (p *Pruner) Run(ctx context.Context, parts []PrunePartition) ([]PruneOutcome, error) {
	p.runMu.Lock()
	defer p.runMu.Unlock()
	out := make([]PruneOutcome, len(parts))
	var reqs []wal.PruneRequest
	var sent []int
	for i, part := range parts {
		floor := p.Floor(part.Partition)
		h := part.Log.HighestOffsetInRemoteStorageInLineage()
		in := PruneInput{State: part.State, Floor: floor, AwaitingRebuild: part.AwaitingRebuild,
			HighestOffsetInRemoteStorage: h, LogEndOffset: part.Log.LogEndOffset()}
		held, err := p.remoteHolds(part, h)
		if err != nil {
			p.failures.Add(1)
			out[i] = PruneOutcome{Partition: part.Partition, Decision: PruneDecision{Reason: SkipHighestNotInRemoteStorage,
				HighestTieredOffset: -1}, Err: err, LogStartOffset: NoFloor, Floor: floor}
			continue
		}
		in.HighestNotInRemoteStorage = !held
		d := DecidePrune(in)
		out[i] = PruneOutcome{Partition: part.Partition, Decision: d, LogStartOffset: NoFloor, Floor: floor}
		if !d.Prune() {
			p.skips.Add(1)
			continue
		}
		reqs = append(reqs, wal.PruneRequest{Partition: walTP(part.Partition), HighestOffsetInRemoteStorage: d.HighestTieredOffset})
		sent = append(sent, i)
	}
	if len(reqs) == 0 {
		return out, nil
	}
	res, err := p.opts.ControlPlane.PruneDisklessLogs(ctx, reqs)
	if err != nil {
		p.failures.Add(int64(len(reqs)))
		return out, err
	}
	if len(res) != len(reqs) {
		return out, fmt.Errorf("consolidate: %d prune answers for %d requests: %w", len(res), len(reqs), wal.ErrInconsistentAnswer)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, i := range sent {
		o := &out[i]
		if res[k].Err != nil {
			o.Err = res[k].Err
			p.failures.Add(1)
			p.opts.Logger.Warn("WAL prune refused", zap.Stringer("partition", o.Partition), zap.Error(o.Err))
			continue
		}
		p.prunes.Add(1)
		o.LogStartOffset = res[k].LogStartOffset
		cur, ok := p.mu.floors[o.Partition]
		if !ok {
			cur = NoFloor
		}
		floor, lowered := RaiseFloor(cur, o.LogStartOffset)
		if lowered {
			p.opts.Logger.Warn("WAL prune returned a start below the floor; floor kept",
				zap.Stringer("partition", o.Partition), zap.Int64("floor", cur), zap.Int64("walStart", o.LogStartOffset))
		}
		p.mu.floors[o.Partition] = floor
		o.Floor = floor
	}
	return out, nil
}

// PrunerMetrics is a snapshot of a Pruner's counters.
type PrunerMetrics struct {
	Prunes, Skips, Failures int64
}

// Metrics returns a snapshot of the counters.
func (p *Pruner) Metrics() PrunerMetrics {
	return PrunerMetrics{Prunes: p.prunes.Load(), Skips: p.skips.Load(), Failures: p.failures.Load()}
}
