package log

import (
	"fmt"

	"github.com/tierlog/tierlog/internal/atomicfile"
	"github.com/tierlog/tierlog/internal/invariants"
	"github.com/tierlog/tierlog/internal/mutation"
	"github.com/tierlog/tierlog/log/internal/producer"
	"github.com/tierlog/tierlog/truncation"
	"go.uber.org/zap"
)

// Truncations hold flushMu and the log mutex for their whole duration,
// including the rewrite of the segment that loses its tail, the offsets checkpoint write
// of both truncations and the epoch checkpoint write of
// TruncateFullyAndStartAt, which fsync. This is the one place the
// log fsyncs under its mutex, on purpose: the truncation count promises
// that whoever reads it under the mutex sees either the old count with the
// old log or the new count with the new log (docs/remote-tier.md, "The
// truncation fence"), so the change and
// the count move in one critical section. Readers of records never take
// the mutex and are not held up; the writer is the one truncating. The
// producer state is rebuilt in the same critical section (snapshot
// deletions and loads are file I/O under the mutex for the same reason).

// TruncationCount returns the number of truncations that changed this log
// instance, and of FenceRemoteProgress calls. It takes the log mutex, so
// it waits for a running truncation: a remote task that reads it before
// it reads the epoch cache or the segments never pairs the new count with
// state from before the truncation.
func (l *UnifiedLog) TruncationCount() truncation.Count {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.truncationCount
}

// UpdateHighestOffsetInRemoteStorage installs offset (inclusive, the last
// offset known to be in remote storage) if it was computed under the
// current truncation count and is higher than the current value, and
// reports whether it did. An offset computed before a truncation that
// changed the log is dropped: it may describe records the log no longer
// has. Ignored (false) when remote storage is disabled.
func (l *UnifiedLog) UpdateHighestOffsetInRemoteStorage(offset int64, count truncation.Count) bool {
	if !l.opts.RemoteStorageEnabled {
		l.logger.Warn("highest offset in remote storage update on a log without remote storage",
			zap.String("dir", l.dir), zap.Int64("offset", offset))
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !truncation.Fence(offset, count).Valid(l.mu.truncationCount) {
		l.logger.Info("dropped a highest offset in remote storage computed before a truncation",
			zap.String("dir", l.dir), zap.Int64("offset", offset),
			zap.Uint64("count", uint64(count)), zap.Uint64("current", uint64(l.mu.truncationCount)))
		return false
	}
	// Computed under the current count, offset describes this lineage:
	// local retention may count it as copied again.
	if offset > l.remoteRetentionCap.Load() {
		l.remoteRetentionCap.Store(offset)
	}
	if offset <= l.highestOffsetInRemoteStorage.Load() {
		return false
	}
	l.highestOffsetInRemoteStorage.Store(offset)
	return true
}

// CapHighestOffsetInRemoteStorage lowers what local retention and the
// WAL pruner count as copied of this lineage
// (HighestOffsetInRemoteStorageInLineage) to offset, if offset was
// computed under the current truncation count and is lower, and reports
// whether it did. A remote task calls it when the remote log metadata no
// longer holds the highest offset the log recorded (segments of this
// lineage deleted by a leader of another one after an unclean election):
// the records above offset are copied again before they count. The
// highest offset in remote storage itself is kept, as in Kafka; an
// install computed later raises the cap again. Ignored (false) when
// remote storage is disabled.
func (l *UnifiedLog) CapHighestOffsetInRemoteStorage(offset int64, count truncation.Count) bool {
	if !l.opts.RemoteStorageEnabled {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !truncation.Fence(offset, count).Valid(l.mu.truncationCount) {
		return false
	}
	if offset >= min(l.highestOffsetInRemoteStorage.Load(), l.remoteRetentionCap.Load()) {
		return false
	}
	l.logger.Info("highest offset in remote storage no longer held by remote storage: capped",
		zap.String("dir", l.dir), zap.Int64("offset", offset),
		zap.Int64("highest", l.highestOffsetInRemoteStorage.Load()))
	l.remoteRetentionCap.Store(offset)
	return true
}

// FenceRemoteProgress drops the remote tasks' progress computed before
// it, as a truncation does (UpdateHighestOffsetInRemoteStorage and
// CapHighestOffsetInRemoteStorage refuse a count read earlier), without
// changing the log. remote.Manager calls it when the partition's role
// changes, before it checks what remote storage still holds: a task of
// the old role may have looked up an offset before a leader of another
// lineage deleted its segments (the epoch cleanup after an unclean
// election), and installing it after the check would let local
// retention delete the only copy. The Manager stops and waits for its
// own tasks first; the fence also covers a task run the way Kafka's
// RemoteLogManager cancels one, without waiting for it. A flush running
// across the fence does not advance the recovery point (the next one
// does), as across a truncation.
func (l *UnifiedLog) FenceRemoteProgress() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.truncationCount++
	l.mu.remoteFences++
}

// TruncateTo removes every record at or above offset t
// (UnifiedLog.truncateTo) and
// reports whether the log changed. t at or beyond the log end offset
// changes no record but still drops an epoch entry that starts at the log
// end offset (a leader that wrote nothing in its epoch); such a call does
// not count as a truncation. A t below the high watermark is allowed (an
// unclean leader change) and logged.
//
// Batches are never split: a t inside a batch removes that whole batch,
// so the log then ends at the batch's base offset, below t. LogEndOffset
// reports that true end afterwards, and the epoch cache, the producer
// state, the high watermark and the recovery point are cut there too.
// Kafka's LogSegment.truncateTo cuts at the same batch start, but its
// LocalLog.truncateTo then sets the log end offset to t itself, which is
// only right because its callers pass batch boundaries (a leader epoch's
// end offset or a high watermark always is one).
//
// A t below the first local segment empties the log and starts it at t.
// Without remote storage the log start offset becomes t and the epoch
// cache is cleared, as in Kafka; with it, the log start offset and the
// epochs below t stay (remote storage holds the records below the local
// log; see the comment in the body).
func (l *UnifiedLog) TruncateTo(t int64) (bool, error) {
	if t < 0 {
		return false, fmt.Errorf("log: truncate to %d: %w", t, ErrInvalidArgument)
	}
	// Deferred before flushMu's unlock, so it runs after it.
	var hw hwWatch
	defer l.noteHighWatermark(&hw)
	// flushMu first: no flush may be writing a queued producer snapshot
	// that this truncation drops (it would leave a snapshot above the
	// new log end on disk).
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	if err := l.checkWritableLocked(); err != nil {
		l.mu.Unlock()
		return false, err
	}
	hw.before = l.highWatermark.Load()
	defer func() { hw.after = l.highWatermark.Load() }()
	leo := l.logEndOffset.Load()
	if t >= leo {
		l.epochs.TruncateFromEnd(leo)
		l.mu.Unlock()
		return false, l.flushEpochs()
	}
	full := l.mu.segments[0].BaseOffset() > t
	if !full {
		var err error
		if t, err = l.batchStartLocked(t); err != nil {
			l.mu.Unlock()
			return false, err // nothing changed
		}
	}
	// Every truncation fsyncs the directory: the data of rolled segments
	// first (rollsync.go).
	if err := l.syncRolledLocked(); err != nil {
		l.mu.Unlock()
		return false, err
	}
	if hw := l.highWatermark.Load(); t < hw {
		l.logger.Warn("truncating below the high watermark",
			zap.String("dir", l.dir), zap.Int64("to", t), zap.Int64("highWatermark", hw))
	}
	l.countTruncationLocked()
	l.capRemoteRetentionLocked(t)
	var ev events
	var err error
	if full {
		// Kafka's truncateTo starts the log afresh at t here
		// (truncateFullyAndStartAt: log start t, epoch cache cleared). A
		// tiered log's local log starts above t only because remote
		// storage holds [log start, local log start), and forgetting that
		// prefix lets the leader's remote retention delete committed
		// records: below the new log start, or by the epoch cleanup once
		// the cache's earliest epoch is the new leader's. So the log start
		// and the epochs below t stay, as in a truncation inside the local
		// log.
		logStart, keepEpochs := t, false
		if l.opts.RemoteStorageEnabled && !mutation.Disabled(mutation.TruncationKeepsRemotePrefix) {
			logStart, keepEpochs = min(l.logStartOffset.Load(), t), true
		}
		err = l.truncateFullyLocked(t, logStart, keepEpochs, &ev)
	} else {
		err = l.truncateToLocked(t, &ev)
	}
	if err == nil {
		l.assertPublishedLocked()
	}
	l.mu.Unlock()
	l.fire(ev)
	if err != nil {
		return true, err
	}
	return true, l.flushEpochs()
}

// TruncateFullyAndStartAt deletes every segment and starts an empty log
// at offset n, with log start offset logStart (n when logStart < 0). It
// always counts as a truncation. The epoch cache is cleared and its
// checkpoint written before the call returns; the highest offset in
// remote storage is kept (UnifiedLog.truncateFullyAndStartAt); local
// retention counts no offset from n on as copied (capRemoteRetentionLocked).
func (l *UnifiedLog) TruncateFullyAndStartAt(n, logStart int64) error {
	if n < 0 {
		return fmt.Errorf("log: truncate fully and start at %d: %w", n, ErrInvalidArgument)
	}
	if logStart < 0 {
		logStart = n
	}
	if logStart > n {
		return fmt.Errorf("log: log start offset %d above the new log end offset %d: %w", logStart, n, ErrInvalidArgument)
	}
	return l.countedTruncation(func(ev *events) error {
		l.capRemoteRetentionLocked(n)
		return l.truncateFullyLocked(n, logStart, false, ev)
	})
}

// capRemoteRetentionLocked caps what local retention counts as copied
// below end, the log end a truncation leaves, when the highest offset in
// remote storage reaches it. Only an unclean leader change truncates
// below that offset (remote storage holds committed records only), and
// then remote storage holds another lineage's records there: the records
// appended from end on are not copied until a copy or the follower task
// says so, and local retention must not delete them as if they were. The
// highest offset in remote storage itself is kept, as in Kafka (the
// phase-2 replica check reads it). A lower cap only delays deletion.
//
// REQUIRES: l.mu held.
func (l *UnifiedLog) capRemoteRetentionLocked(end int64) {
	if l.highestOffsetInRemoteStorage.Load() >= end && !mutation.Disabled(mutation.TruncationLowersRemoteHighest) {
		l.remoteRetentionCap.Store(min(l.remoteRetentionCap.Load(), end-1))
	}
}

// countedTruncation runs do as one truncation that always counts: under
// flushMu (see TruncateTo) and mu, after the writability check and the
// count, with the events fired once mu is released. TruncateFullyAndStartAt
// and TruncateFullyAndRestore share it.
func (l *UnifiedLog) countedTruncation(do func(ev *events) error) error {
	var hw hwWatch
	defer l.noteHighWatermark(&hw) // after flushMu's unlock
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	if err := l.checkWritableLocked(); err != nil {
		l.mu.Unlock()
		return err
	}
	hw.before = l.highWatermark.Load()
	defer func() { hw.after = l.highWatermark.Load() }()
	if err := l.syncRolledLocked(); err != nil { // rollsync.go
		l.mu.Unlock()
		return err
	}
	l.countTruncationLocked()
	var ev events
	err := do(&ev)
	if err == nil {
		l.assertPublishedLocked()
	}
	l.mu.Unlock()
	l.fire(ev)
	return err
}

// hwWatch is the high watermark before and after a truncation (both 0
// when it did not start).
type hwWatch struct{ before, after int64 }

// noteHighWatermark tells the listener when a truncation lowered the high
// watermark. REQUIRES: no lock of the log held (a log manager writes its
// checkpoints from the callback, under its own lock).
func (l *UnifiedLog) noteHighWatermark(w *hwWatch) {
	if f := l.opts.Listener.HighWatermarkLowered; f != nil && w.after < w.before {
		f(w.after)
	}
}

// countTruncationLocked increments the truncation count at the start of
// the critical section that changes the log.
//
// REQUIRES: l.mu held.
func (l *UnifiedLog) countTruncationLocked() {
	l.mu.truncationCount++
	if k := l.testingKnobs.afterTruncationCounted; k != nil {
		k()
	}
}

// batchStartLocked returns where a truncation to t ends the log: the
// base offset of the batch holding t if t is inside a batch, else t.
//
// REQUIRES: l.mu held; first segment base <= t < LEO.
func (l *UnifiedLog) batchStartLocked(t int64) (int64, error) {
	segs := l.mu.segments
	s := segs[floorSegment(segs, t)]
	// The first batch whose last offset is >= t holds t when it starts
	// below t; otherwise t is a batch boundary (or in a gap a follower
	// append left, where nothing is split either).
	_, batchBase, found, err := s.TranslateOffset(t)
	if err != nil {
		return 0, fmt.Errorf("log: truncate to %d: %w", t, err)
	}
	if found && batchBase < t {
		l.logger.Info("truncation offset inside a batch: truncating to the batch start",
			zap.String("dir", l.dir), zap.Int64("requested", t), zap.Int64("batchBaseOffset", batchBase))
		return batchBase, nil
	}
	return t, nil
}

// floorSegment returns the index of the last segment whose base offset is
// <= t. REQUIRES: segs[0].BaseOffset() <= t.
func floorSegment(segs []*segmentRef, t int64) int {
	i := len(segs) - 1
	for segs[i].BaseOffset() > t {
		i--
	}
	return i
}

// truncateToLocked removes [t, LEO) from the segments: later segments are
// removed whole, the segment holding t is rewritten without its tail.
//
// REQUIRES: l.mu held; first segment base <= t < LEO; t is not inside a
// batch.
func (l *UnifiedLog) truncateToLocked(t int64, ev *events) error {
	segs := l.mu.segments
	i := floorSegment(segs, t)
	if err := l.removeSegmentsAboveLocked(segs, i, ev); err != nil {
		return l.failLocked(err)
	}
	replacement, _, err := segs[i].TruncateTo(t)
	if err != nil {
		return l.failLocked(err)
	}
	if replacement.Size() == 0 {
		// An emptied segment restarts its age for the time-based roll,
		// as Kafka resets its created time.
		replacement.SetCreatedMs(l.opts.nowMs())
	}
	// The cut segment's transaction index loses the aborted transactions
	// whose marker is at or above t. A replaced segment gets a copy (its
	// readers keep the old one); an unchanged one (t in a gap after its
	// last batch) keeps its ref, which its views share.
	ref := segs[i]
	if replacement == segs[i].Segment {
		if segs[i].txn.TruncateTo(t) > 0 {
			ref.txnPersisted.Store(-1)
		}
	} else {
		nt := truncatedTxnIndex(segs[i].txn, t)
		persisted := segs[i].txnPersisted.Load()
		if nt.Len() != segs[i].txn.Len() {
			persisted = -1
		}
		ref = newSegmentRef(replacement, nt, persisted)
	}
	l.mu.segments = append(segs[:i:i], ref)
	l.mu.dirDirty = true
	// Readers keep the old view and offsets until the new segments are
	// published with every offset this truncation changes, in one store
	// when the function returns (on a failure below too: the segments
	// changed either way). Until then the old view still holds the old
	// records (open handles read the replaced files).
	defer l.publishLocked()
	l.epochs.TruncateFromEnd(t)
	l.logEndOffset.Store(t)
	l.logStartOffset.Store(min(l.logStartOffset.Load(), t))
	l.localLogStartOffset.Store(min(l.localLogStartOffset.Load(), t))
	l.mu.recoveryPoint = min(l.mu.recoveryPoint, t)
	if l.mu.segmentPoint > t {
		// Its snapshot goes below; the checkpoint written below drops it.
		l.mu.segmentPoint = 0
	}
	if l.highWatermark.Load() > t {
		l.highWatermark.Store(t)
	}
	l.mu.unflushedRecords, l.mu.firstUnflushedMs, l.mu.unflushedBytes = 0, 0, 0
	if err := l.writeTxnIndex(ref); err != nil {
		return l.failLocked(err)
	}
	// Producer state (Kafka's truncateTo): snapshots above t go, queued
	// or on disk; the state is reloaded from the newest snapshot at or
	// below t and the batches after it up to t are replayed. The snapshot
	// deletions are made durable by the checkpoint write below.
	l.dropPendingSnapshotsAboveLocked(t)
	if _, err := l.reloadProducers(l.mu.producers, l.mu.segments, l.logStartOffset.Load(), t); err != nil {
		return l.failLocked(err)
	}
	l.finishProducerRebuildLocked()
	l.checkOffsetsLocked()
	// Checkpoint the lowered recovery point (Kafka's LogManager does too):
	// segments rolled above t before the next checkpoint would otherwise
	// sit below the old one, and a crash would skip their recovery.
	if err := l.writeCheckpoint(l.mu.segments, l.offsetsCheckpointLocked()); err != nil {
		return l.failLocked(err)
	}
	return nil
}

// truncateFullyLocked replaces every segment with one empty segment at n,
// with log start offset logStart. The epoch cache is cleared and flushed,
// or, with keepEpochs, cut at n (its entries below n describe the records
// below the local log that remote storage holds; the caller flushes it).
//
// REQUIRES: l.mu held.
func (l *UnifiedLog) truncateFullyLocked(n, logStart int64, keepEpochs bool, ev *events) error {
	old := l.mu.segments
	// No producer state survives (testdata/producer_truncate_fully): the
	// snapshot files go first, so
	// a crash from here on never pairs an old snapshot with the new log.
	l.mu.pendingSnapshots = nil
	if _, err := producer.DeleteSnapshotsAbove(l.fs, l.dir, -1); err != nil {
		return l.failLocked(err)
	}
	l.mu.producers.TruncateFullyAndStartAt(n)
	l.mu.segmentPoint = 0
	// Checkpoint the new log start and recovery point first (Kafka's
	// LogManager does too): with the old checkpoint, a crash after the
	// new segment became durable would recover a log start above n (Open
	// then deletes the new log and starts empty there) or skip recovery
	// of segments below the old recovery point. A crash before the
	// segments change leaves the old segments under the new checkpoint,
	// which Open reads as the old log (or an empty one at n if n is
	// beyond it).
	//
	// A log start below the current one waits for the old segments to be
	// durably gone: under a checkpoint naming it, segments that a crash
	// brings back would reopen from there, with records below the epoch
	// cache's first entry (which a raise of the log start truncated
	// durably). Until then the checkpoint keeps the current log start; a
	// crash leaves the old log, or no segment (or the new one) under a
	// log start above n, which Open turns into an empty log there.
	ckptStart := logStart
	ordered := !mutation.Disabled(mutation.TruncateFullyOrder)
	if cur := l.logStartOffset.Load(); logStart < cur && ordered {
		ckptStart = cur
	}
	if err := writeOffsetsCheckpoint(l.fs, l.dir, offsetsCheckpoint{logStartOffset: ckptStart, recoveryPoint: n}); err != nil {
		return l.failLocked(err)
	}
	// Remove first, then create: a segment at base n may exist and its
	// files must be gone before a new one takes the names. A crash in
	// between leaves no segment, which Open repairs by creating one at
	// the checkpointed log start (a truncation is not durable until the
	// next flush syncs the directory anyway).
	//
	// Highest first, each removal durable before the next (as a
	// truncation inside the log does): a crash in the loop leaves a
	// prefix of the old log, which the follower truncates again. Removed
	// from the lowest up with no fsync between, a crash could keep the
	// unlink of a lower segment and undo a higher one's, and reopen a log
	// whose local start jumped over the lost segments; with remote
	// storage the log start stays below them, so the log claimed offsets
	// that no tier held (the simulation's LostRecord once a leader copied
	// and pruned from there). The last removal's fsync also makes the
	// removals durable before the new segment exists: a crash keeping a
	// created file but not the removals before it would put the empty
	// segment among old ones, a hole Open cannot see.
	if ordered {
		if err := l.removeSegmentsAboveLocked(old, -1, ev); err != nil {
			return l.failLocked(fmt.Errorf("log: %w", err))
		}
	} else {
		for _, s := range old {
			if err := l.removeSegmentLocked(s, "truncation", ev); err != nil {
				return l.failLocked(err)
			}
		}
	}
	seg, err := l.createSegmentOverOrphans(n, nil)
	if err != nil {
		return l.failLocked(err)
	}
	l.mu.segments = []*segmentRef{newSegmentRef(seg, nil, 0)}
	l.mu.dirDirty = true
	if ckptStart != logStart {
		if err := writeOffsetsCheckpoint(l.fs, l.dir, offsetsCheckpoint{logStartOffset: logStart, recoveryPoint: n}); err != nil {
			return l.failLocked(err)
		}
	}
	l.logEndOffset.Store(n)
	l.logStartOffset.Store(logStart)
	if l.opts.RemoteStorageEnabled {
		l.localLogStartOffset.Store(n)
	} else {
		l.localLogStartOffset.Store(logStart)
	}
	l.storeHighWatermarkLocked(n)
	l.mu.recoveryPoint = n
	l.mu.unflushedRecords, l.mu.firstUnflushedMs, l.mu.unflushedBytes = 0, 0, 0
	// The empty segment and the offsets that describe it, in one store.
	l.publishLocked()

	if keepEpochs {
		l.epochs.TruncateFromEnd(n)
	} else if err := l.epochs.ClearAndFlush(); err != nil {
		return l.failLocked(err)
	}
	l.checkOffsetsLocked()
	return nil
}

// removeSegmentLocked removes a segment's files now; its file handles stay
// open for readers of older views until the last of those views is
// released (segmentView.unref closes them).
//
// REQUIRES: l.mu held.
// removeSegmentsAboveLocked removes the segments of segs above index i
// for a truncation, from the highest down, each removal made durable (a
// directory fsync) before the next: a crash inside the loop then leaves
// the segments up to the one being removed, whole, a prefix of the log.
// Removed from the lowest up with no fsync between, a crash could keep
// the unlink of a lower segment's .log and undo a higher one's, and the
// restart would load a log with a hole below its end (reads at the hole
// served from the next segment).
func (l *UnifiedLog) removeSegmentsAboveLocked(segs []*segmentRef, i int, ev *events) error {
	if mutation.Disabled(mutation.TruncationRemovalOrder) {
		for _, s := range segs[i+1:] {
			if err := l.removeSegmentLocked(s, "truncation", ev); err != nil {
				return err
			}
		}
		return nil
	}
	for k := len(segs) - 1; k > i; k-- {
		if err := l.removeSegmentLocked(segs[k], "truncation", ev); err != nil {
			return err
		}
		if err := atomicfile.SyncDir(l.fs, l.dir); err != nil {
			return err
		}
	}
	return nil
}

func (l *UnifiedLog) removeSegmentLocked(s *segmentRef, reason string, ev *events) error {
	size := s.Size()
	next, err := s.ReadNextOffset()
	if err != nil {
		return err
	}
	if err := s.RemoveFiles(); err != nil {
		return err
	}
	l.counters.segmentsDeleted.Add(1)
	ev.deleted = append(ev.deleted, SegmentDeleteInfo{BaseOffset: s.BaseOffset(), NextOffset: next, Bytes: size, Reason: reason})
	return nil
}

// checkOffsetsLocked asserts the offset invariants of docs/offsets.md:
// log start <= high watermark <= LEO, log start <= local log start,
// and the two starts equal without remote storage.
//
// REQUIRES: l.mu held.
func (l *UnifiedLog) checkOffsetsLocked() {
	if !invariants.Enabled {
		return
	}
	start, local := l.logStartOffset.Load(), l.localLogStartOffset.Load()
	hw, leo := l.highWatermark.Load(), l.logEndOffset.Load()
	invariants.Assertf(start <= hw && hw <= leo, "offsets: log start %d, high watermark %d, log end %d", start, hw, leo)
	invariants.Assertf(start <= local, "offsets: log start %d above local log start %d", start, local)
	invariants.Assertf(l.opts.RemoteStorageEnabled || start == local,
		"offsets: log start %d != local log start %d without remote storage", start, local)
	if e, ok := l.epochs.Latest(); ok {
		invariants.Assertf(e.StartOffset <= leo, "epoch %d starts at %d beyond log end %d", e.Epoch, e.StartOffset, leo)
	}
}
