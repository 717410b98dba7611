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
//
// The raise is durable when it returns: the offsets checkpoint holding n
// is written before the epoch checkpoint without the epochs below n
// (commitLogStartFlushMuHeld), and flushMu keeps a concurrent flush from
// writing the latter first.
func (l *UnifiedLog) MaybeIncrementLogStartOffset(n int64) (bool, error) {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
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
	segs, ckpt := l.mu.segments, l.offsetsCheckpointLocked()
	l.mu.Unlock()
	if err != nil {
		return false, err
	}
	if moved {
		if err := l.commitLogStartFlushMuHeld(segs, ckpt); err != nil {
			return true, err
		}
		l.deleteSnapshotsBelow(floor) // file I/O: after mu
	}
	return moved, l.flushEpochs()
}

// commitLogStartFlushMuHeld makes a raised log start durable: it writes
// the offsets checkpoint ckpt (the state after the raise, taken under mu
// with segs) before anything writes the epoch checkpoint the raise
// truncated from the start. The checkpoint is the raise's commit point. In
// the other order a crash between the two writes would reopen the log at
// the old log start with an epoch cache that starts at the new one: the
// records between them would have no epoch (or, for a raise to the log
// end, none would: Open's truncation from the end drops the entry the
// raise moved there), and a follower copying them would take their
// batches' epochs, diverging from this log's lineage. Kafka flushes the
// truncated epoch cache right away (LeaderEpochFileCache.truncateFromStartAsyncFlush)
// and the log start offset checkpoint only periodically; its LogLoader
// repairs only the stale-cache direction (truncateFromStart of the
// checkpointed log start), which this order leaves as the only one.
// A failure fails the log: its truncated cache must never be written.
//
// REQUIRES: l.flushMu held, l.mu not held.
func (l *UnifiedLog) commitLogStartFlushMuHeld(segs []*segmentRef, ckpt offsetsCheckpoint) error {
	if mutation.Disabled(mutation.LogStartCheckpointFirst) {
		return nil
	}
	if err := l.syncRolledFlushMuHeld(); err != nil { // rollsync.go
		return err
	}
	if err := l.syncBelowFlushMuHeld(segs, ckpt.logStartOffset); err != nil {
		return err
	}
	if err := l.writeCheckpoint(segs, ckpt); err != nil {
		return l.fail(err)
	}
	return nil
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
// ListOffsets answers each of them; TestListOffsetsAnswersEverySpecialTimestamp
// holds that for every List constant declared here.
const (
	ListLatest                int64 = -1
	ListEarliest              int64 = -2
	ListMaxTimestamp          int64 = -3 // KIP-734
	ListEarliestLocal         int64 = -4
	ListLatestTiered          int64 = -5
	ListEarliestPendingUpload int64 = -6
)

// NoTimestamp is the timestamp of an answer that has none (the special
// timestamps other than ListMaxTimestamp, or no answer). Kafka:
// RecordBatch.NO_TIMESTAMP.
const NoTimestamp int64 = -1

// OffsetAndEpoch is an answer to ListOffsets. Epoch is -1 when unknown;
// Offset is -1 when there is no answer. The same type as
// epochcache.OffsetAndEpoch and tierstate.OffsetAndEpoch.
type OffsetAndEpoch = epochcache.OffsetAndEpoch

// TimestampAndOffset is an answer to FetchOffsetByTimestamp: a
// ListOffsets answer with the timestamp of the record found, which a
// broker returns with the offset. Kafka: FileRecords.TimestampAndOffset.
type TimestampAndOffset struct {
	// Timestamp is the record's timestamp, NoTimestamp for the special
	// timestamps that find no record (all but ListMaxTimestamp).
	Timestamp int64
	// Offset is the answer, -1 when there is none.
	Offset int64
	// Epoch is the leader epoch of Offset, -1 when unknown.
	Epoch int32
}

var undefinedOffsetAndEpoch = OffsetAndEpoch{Offset: base.UndefinedOffset, Epoch: base.UndefinedEpoch}

var noTimestampAndOffset = TimestampAndOffset{Timestamp: NoTimestamp, Offset: base.UndefinedOffset, Epoch: base.UndefinedEpoch}

// ListOffsets is FetchOffsetByTimestamp without the timestamp.
func (l *UnifiedLog) ListOffsets(ts int64) (OffsetAndEpoch, bool, error) {
	r, found, err := l.FetchOffsetByTimestamp(ts)
	return OffsetAndEpoch{Offset: r.Offset, Epoch: r.Epoch}, found, err
}

// FetchOffsetByTimestamp answers ListOffsets for the timestamps a log can
// answer alone (UnifiedLog.fetchOffsetByTimestamp): ListEarliest,
// ListEarliestLocal, ListLatest, ListLatestTiered and
// ListEarliestPendingUpload from the log's offsets; ListMaxTimestamp
// (KIP-734) from the local segments: the first offset, at or above the
// local log start, of a record carrying the largest timestamp of the
// local segments; any timestamp >= 0 from the local segments too: the
// first offset whose record has a timestamp >= ts. Offsets only in the
// remote tier are the remote tier's to answer for timestamps, as in
// Kafka. found is false when the log has no answer (an empty log has
// none for ListMaxTimestamp, as in Kafka). Other negative timestamps
// are refused with ErrInvalidArgument.
func (l *UnifiedLog) FetchOffsetByTimestamp(ts int64) (TimestampAndOffset, bool, error) {
	epochAt := l.epochOrUndefined
	at := func(o OffsetAndEpoch) TimestampAndOffset {
		return TimestampAndOffset{Timestamp: NoTimestamp, Offset: o.Offset, Epoch: o.Epoch}
	}
	remote := l.opts.RemoteStorageEnabled
	switch {
	case ts == ListEarliest || (ts == ListEarliestLocal && !remote):
		start := l.LogStartOffset()
		epoch := base.UndefinedEpoch
		if e, ok := l.epochs.Earliest(); ok && e.StartOffset <= start {
			epoch = e.Epoch
		}
		return at(OffsetAndEpoch{Offset: start, Epoch: epoch}), true, nil
	case ts == ListEarliestLocal:
		start := l.LocalLogStartOffset()
		return at(OffsetAndEpoch{Offset: start, Epoch: epochAt(start)}), true, nil
	case ts == ListLatest:
		epoch, ok := l.LatestEpoch()
		if !ok {
			epoch = base.UndefinedEpoch
		}
		return at(OffsetAndEpoch{Offset: l.LogEndOffset(), Epoch: epoch}), true, nil
	case ts == ListLatestTiered:
		hi := l.HighestOffsetInRemoteStorage()
		if !remote || hi < 0 {
			return at(OffsetAndEpoch{Offset: hi, Epoch: base.UndefinedEpoch}), remote, nil
		}
		return at(OffsetAndEpoch{Offset: hi, Epoch: epochAt(hi)}), true, nil
	case ts == ListEarliestPendingUpload:
		return at(l.earliestPendingUpload(epochAt)), true, nil
	case ts == ListMaxTimestamp:
		return l.offsetOfMaxTimestamp()
	case ts < 0:
		return noTimestampAndOffset, false, fmt.Errorf("log: list offsets timestamp %d: %w", ts, ErrInvalidArgument)
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
func (l *UnifiedLog) offsetForTimestamp(ts int64) (TimestampAndOffset, bool, error) {
	v, err := l.acquireView()
	if err != nil {
		return noTimestampAndOffset, false, err
	}
	defer v.unref()
	start := l.LocalLogStartOffset()
	for _, s := range v.segments {
		if s.LargestTimestamp() < ts {
			continue
		}
		r, found, err := s.FindByTimestamp(ts, start)
		if err != nil {
			return noTimestampAndOffset, false, l.readFailed(s, s.BaseOffset(), err)
		}
		if found {
			off := max(r.Offset, start)
			return TimestampAndOffset{Timestamp: r.Timestamp, Offset: off, Epoch: l.epochOrUndefined(off)}, true, nil
		}
	}
	return noTimestampAndOffset, false, nil
}

// offsetOfMaxTimestamp answers ListMaxTimestamp as Kafka does: the
// segment with the largest MaxTimestamp (the first of equals) holds the
// answer, the first record there carrying that timestamp. Unlike Kafka it
// skips records below the local log start, which no read returns: when
// the only records with the largest timestamp lie below it, the log has
// no answer.
func (l *UnifiedLog) offsetOfMaxTimestamp() (TimestampAndOffset, bool, error) {
	v, err := l.acquireView()
	if err != nil {
		return noTimestampAndOffset, false, err
	}
	defer v.unref()
	largest := NoTimestamp
	for _, s := range v.segments {
		if ts, _ := s.MaxTimestampAndOffset(); ts > largest {
			largest = ts
		}
	}
	if largest == NoTimestamp {
		return noTimestampAndOffset, false, nil // no record (or none with a timestamp)
	}
	start := l.LocalLogStartOffset()
	for _, s := range v.segments {
		if ts, _ := s.MaxTimestampAndOffset(); ts != largest {
			continue
		}
		// The largest timestamp of the segment: the first record at or
		// above it carries it.
		r, found, err := s.FindByTimestamp(largest, start)
		if err != nil {
			return noTimestampAndOffset, false, l.readFailed(s, s.BaseOffset(), err)
		}
		if found {
			return TimestampAndOffset{Timestamp: r.Timestamp, Offset: r.Offset, Epoch: l.epochOrUndefined(r.Offset)}, true, nil
		}
	}
	return noTimestampAndOffset, false, nil
}

// epochOrUndefined is the leader epoch of offset o, -1 when unknown.
func (l *UnifiedLog) epochOrUndefined(o int64) int32 {
	if e, ok := l.epochs.EpochForOffset(o); ok {
		return e
	}
	return base.UndefinedEpoch
}

// AssignEpochStartOffset records that leader epoch epoch starts at
// startOffset, as a new leader does before it accepts writes (Kafka:
// Partition.makeLeader calls it with the log end offset). The entry may
// have no records yet; a later truncation to the log end offset removes
// it again if the leader wrote nothing. The epoch checkpoint is written
// before the call returns, outside the log mutex.
func (l *UnifiedLog) AssignEpochStartOffset(epoch int32, startOffset int64) error {
	l.flushMu.Lock() // for flushEpochs
	defer l.flushMu.Unlock()
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
