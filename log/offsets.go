package log

import (
	"fmt"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/internal/mutation"
	"go.uber.org/zap"
)

// UpdateHighWatermark sets the high watermark, clamped to [LogStartOffset,
// LogEndOffset], and returns the value set. It may move the high
// watermark backwards (a follower that learns a lower value from its
// leader). Kafka: updateHighWatermark.
func (l *UnifiedLog) UpdateHighWatermark(hw int64) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	hw = l.setHighWatermarkLocked(hw)
	l.publishOffsetsLocked()
	l.assertPublishedLocked()
	return hw
}

// setHighWatermarkLocked clamps and stores. REQUIRES: l.mu held.
func (l *UnifiedLog) setHighWatermarkLocked(hw int64) int64 {
	hw = min(max(hw, l.logStartOffset.Load()), l.logEndOffset.Load())
	if old := l.highWatermark.Load(); hw < old {
		l.logger.Warn("high watermark moves backwards",
			zap.String("dir", l.dir), zap.Int64("from", old), zap.Int64("to", hw))
	}
	l.storeHighWatermarkLocked(hw)
	return hw
}

// MaybeIncrementHighWatermark raises the high watermark to hw if that is
// higher (the leader's rule), and reports whether it moved. An hw above
// the log end offset is a bug in the caller: ErrHighWatermarkBeyondEnd.
func (l *UnifiedLog) MaybeIncrementHighWatermark(hw int64) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if leo := l.logEndOffset.Load(); hw > leo {
		return false, fmt.Errorf("%w: %d > log end offset %d", ErrHighWatermarkBeyondEnd, hw, leo)
	}
	if hw <= l.highWatermark.Load() {
		return false, nil
	}
	l.storeHighWatermarkLocked(hw)
	l.publishOffsetsLocked()
	return true, nil
}

// MaybeIncrementLogStartOffset raises the log start offset to n (a
// DeleteRecords request, or retention in the remote tier), never lowering
// it, and reports whether it moved. n above the high watermark is refused
// with an *OffsetRangeError (ErrOffsetOutOfRange): uncommitted records are
// never made unreadable. With remote storage the local log start rises
// with it. The epoch cache forgets epochs before n (TruncateFromStart),
// the producer state its completed transactions below n (producers are
// kept); producer snapshots stay until retention deletes their segments.
// Segments wholly below n are deleted by the next DeleteOldSegments.
func (l *UnifiedLog) MaybeIncrementLogStartOffset(n int64) (bool, error) {
	l.mu.Lock()
	moved, err := l.maybeIncrementLogStartOffsetLocked(n)
	if err == nil {
		l.assertPublishedLocked()
	}
	// Snapshots go with their segments (Kafka deletes them with the
	// segments, not at a log start advance): the offsets checkpoint,
	// which names the segment a crash recovers from, may still name one
	// below the new log start, and that recovery needs the snapshot at
	// its base. Retention deletes the rest.
	floor := n
	if len(l.mu.segments) > 0 && !mutation.Disabled(mutation.SnapshotFloor) {
		floor = min(n, l.mu.segments[0].BaseOffset())
	}
	l.mu.Unlock()
	if err != nil {
		return false, err
	}
	if moved {
		l.deleteSnapshotsBelow(floor) // file I/O: after mu
	}
	return moved, l.flushEpochs()
}

// maybeIncrementLogStartOffsetLocked is MaybeIncrementLogStartOffset's
// critical section (UnifiedLog.maybeIncrementLogStartOffset). REQUIRES:
// l.mu held.
func (l *UnifiedLog) maybeIncrementLogStartOffsetLocked(n int64) (bool, error) {
	if err := l.checkWritableLocked(); err != nil {
		return false, err
	}
	if hw := l.highWatermark.Load(); n > hw {
		return false, &OffsetRangeError{Offset: n, LogStartOffset: l.logStartOffset.Load(),
			LocalLogStartOffset: l.localLogStartOffset.Load(), LogEndOffset: l.logEndOffset.Load(),
			HighWatermark: hw, err: fmt.Errorf("%w: log start offset cannot pass the high watermark", ErrOffsetOutOfRange)}
	}
	if l.opts.RemoteStorageEnabled && n > l.localLogStartOffset.Load() {
		l.localLogStartOffset.Store(n)
		defer l.publishOffsetsLocked()
	}
	if n <= l.logStartOffset.Load() {
		return false, nil
	}
	l.logStartOffset.Store(n)
	if !l.opts.RemoteStorageEnabled {
		l.localLogStartOffset.Store(n)
	}
	// The recovery point stays (Kafka raises it to n): it is where the
	// synced data ends, and the batches below n, unsynced, still hold
	// the state of the producers this advance keeps. Raised, it would let
	// the next flush skip their fsync, and a crash would forget those
	// producers (their dedup windows) while the log holds them in memory.
	l.epochs.TruncateFromStart(n)
	// Producers are kept (they expire by time), as in Kafka since KIP-360:
	// dropping those whose last batch is below n (the pre-2.4 rule) would forget the dedup window and open transactions
	// of producers restored from a remote snapshot, whose batches all lie
	// below the new log start. Completed transactions below n are
	// forgotten; snapshot files stay until retention deletes their
	// segments.
	l.mu.producers.OnLogStartOffsetIncremented(n)
	if l.highWatermark.Load() < n {
		l.storeHighWatermarkLocked(n)
	} else {
		l.refreshFirstUnstableOffsetLocked()
	}
	l.publishOffsetsLocked()
	return true, nil
}

// UpdateLogStartOffsetFromRemoteTier raises the log start offset to n as
// the remote tier's retention reports it. Ignored (false) when remote
// storage is disabled.
func (l *UnifiedLog) UpdateLogStartOffsetFromRemoteTier(n int64) (bool, error) {
	if !l.opts.RemoteStorageEnabled {
		l.logger.Error("log start offset update from the remote tier on a log without remote storage",
			zap.String("dir", l.dir), zap.Int64("offset", n))
		return false, nil
	}
	return l.MaybeIncrementLogStartOffset(n)
}

// Special ListOffsets timestamps (Kafka's ListOffsetsRequest constants).
const (
	ListLatest                int64 = -1
	ListEarliest              int64 = -2
	ListMaxTimestamp          int64 = -3
	ListEarliestLocal         int64 = -4
	ListLatestTiered          int64 = -5
	ListEarliestPendingUpload int64 = -6
)

// OffsetAndEpoch is an answer to ListOffsets. Epoch is -1 when unknown;
// Offset is -1 when there is no answer. The same type as
// epochcache.OffsetAndEpoch and tierstate.OffsetAndEpoch.
type OffsetAndEpoch = epochcache.OffsetAndEpoch

var undefinedOffsetAndEpoch = OffsetAndEpoch{Offset: base.UndefinedOffset, Epoch: base.UndefinedEpoch}

// ListOffsets answers the special ListOffsets timestamps a log can answer
// alone (UnifiedLog.fetchOffsetByTimestamp): ListEarliest, ListEarliestLocal, ListLatest,
// ListLatestTiered and ListEarliestPendingUpload; any timestamp >= 0 is
// looked up in the local segments (the first offset whose batch has a
// timestamp >= ts). Offsets only in the remote tier are the remote tier's
// to answer for timestamps. found is false when the log has no answer.
func (l *UnifiedLog) ListOffsets(ts int64) (OffsetAndEpoch, bool, error) {
	epochAt := func(o int64) int32 {
		if e, ok := l.epochs.EpochForOffset(o); ok {
			return e
		}
		return base.UndefinedEpoch
	}
	remote := l.opts.RemoteStorageEnabled
	switch {
	case ts == ListEarliest || (ts == ListEarliestLocal && !remote):
		start := l.LogStartOffset()
		epoch := base.UndefinedEpoch
		if e, ok := l.epochs.Earliest(); ok && e.StartOffset <= start {
			epoch = e.Epoch
		}
		return OffsetAndEpoch{Offset: start, Epoch: epoch}, true, nil
	case ts == ListEarliestLocal:
		start := l.LocalLogStartOffset()
		return OffsetAndEpoch{Offset: start, Epoch: epochAt(start)}, true, nil
	case ts == ListLatest:
		epoch, ok := l.LatestEpoch()
		if !ok {
			epoch = base.UndefinedEpoch
		}
		return OffsetAndEpoch{Offset: l.LogEndOffset(), Epoch: epoch}, true, nil
	case ts == ListLatestTiered:
		hi := l.HighestOffsetInRemoteStorage()
		if !remote || hi < 0 {
			return OffsetAndEpoch{Offset: hi, Epoch: base.UndefinedEpoch}, remote, nil
		}
		return OffsetAndEpoch{Offset: hi, Epoch: epochAt(hi)}, true, nil
	case ts == ListEarliestPendingUpload:
		return l.earliestPendingUpload(epochAt), true, nil
	case ts < 0:
		return undefinedOffsetAndEpoch, false, fmt.Errorf("log: list offsets timestamp %d: %w", ts, ErrInvalidArgument)
	}
	return l.offsetForTimestamp(ts)
}

func (l *UnifiedLog) earliestPendingUpload(epochAt func(int64) int32) OffsetAndEpoch {
	hi := l.HighestOffsetInRemoteStorage()
	start := l.LogStartOffset()
	if hi < 0 {
		if l.LocalLogStartOffset() == start {
			e, _, _ := l.ListOffsets(ListEarliest)
			return e
		}
		return undefinedOffsetAndEpoch
	}
	o := max(hi+1, start)
	return OffsetAndEpoch{Offset: o, Epoch: epochAt(o)}
}

// offsetForTimestamp finds the first offset, among local segments at or
// above the local log start, whose batch has MaxTimestamp >= ts.
func (l *UnifiedLog) offsetForTimestamp(ts int64) (OffsetAndEpoch, bool, error) {
	v, err := l.acquireView()
	if err != nil {
		return undefinedOffsetAndEpoch, false, err
	}
	defer v.unref()
	start := l.LocalLogStartOffset()
	for _, s := range v.segments {
		if s.LargestTimestamp() < ts {
			continue
		}
		off, found, err := s.FindOffsetByTimestamp(ts, start)
		if err != nil {
			return undefinedOffsetAndEpoch, false, err
		}
		if found {
			e, ok := l.epochs.EpochForOffset(off)
			if !ok {
				e = base.UndefinedEpoch
			}
			return OffsetAndEpoch{Offset: max(off, start), Epoch: e}, true, nil
		}
	}
	return undefinedOffsetAndEpoch, false, nil
}

// AssignEpochStartOffset records that leader epoch epoch starts at
// startOffset, as a new leader does before it accepts writes (Kafka:
// Partition.makeLeader calls it with the log end offset). The entry may
// have no records yet; a later truncation to the log end offset removes
// it again if the leader wrote nothing. The epoch checkpoint is written
// before the call returns, outside the log mutex.
func (l *UnifiedLog) AssignEpochStartOffset(epoch int32, startOffset int64) error {
	l.mu.Lock()
	err := l.checkWritableLocked()
	if err == nil && startOffset > l.logEndOffset.Load() {
		err = fmt.Errorf("log: epoch %d start offset %d beyond log end offset %d: %w",
			epoch, startOffset, l.logEndOffset.Load(), ErrInvalidArgument)
	}
	if err == nil {
		_, err = l.epochs.AssignDeferred(epoch, startOffset)
	}
	l.mu.Unlock()
	if err != nil {
		return err
	}
	return l.flushEpochs()
}
