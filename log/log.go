package log

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/mutation"
	"github.com/tierlog/tierlog/log/internal/producer"
	"github.com/tierlog/tierlog/log/internal/segment"
	"github.com/tierlog/tierlog/truncation"
	"go.uber.org/zap"
)

// UnifiedLog is the local, segmented log of one partition, with the
// offsets Kafka keeps beside it (log start, local log start, high
// watermark, highest offset in remote storage), its leader-epoch cache and
// its truncation count.
//
// Concurrency: one writer at a time calls the appends, Roll, the
// truncations, DeleteOldSegments and the offset updates; the caller
// serializes them (the leader's append path or the follower's fetcher).
// Read, the offset getters, EndOffsetForEpoch and Metrics may run at any
// time, concurrently with the writer and each other, and never wait for
// it: they load one immutable state (a refcounted segment view and the
// offsets published with it, see readState), so everything one call
// reports held at one instant.
//
// Lock order: UnifiedLog.flushMu -> UnifiedLog.mu -> epochcache.Cache
// (flushMu -> mu), and UnifiedLog.mu -> producer.TxnIndex.mu (a leaf,
// also taken by readers). The producer state (mu.producers) is guarded
// by mu. No fsync runs under mu except inside a truncation,
// which must change the segments, the epoch cache and the truncation count
// in one critical section (see truncate.go); readers never take mu, so
// they are not held up by it.
type UnifiedLog struct {
	dir     string
	opts    Options // immutable after Open
	fs      vfs.FS  // == opts.FS
	logger  *zap.Logger
	segOpts segment.Options
	epochs  *epochcache.Cache // ordered after mu
	// stage defers the fsyncs of a CloseDeferred (close_deferred.go);
	// l.fs carries a pointer to it.
	stage closeStage

	// The offsets below are the writer's working copy: written and read
	// with mu held only. Readers never load them: they load state, which
	// the writer publishes (publishLocked, publishOffsetsLocked) once an
	// operation has staged all its changes, so the offsets a reader sees
	// held together at one instant. (They stay atomics only so that code
	// which stages them compiles unchanged.)
	//
	// logEndOffset is the offset the next appended record receives.
	logEndOffset atomic.Int64
	// highWatermark: offsets below it are committed.
	// Invariant: logStartOffset <= highWatermark <= logEndOffset.
	highWatermark atomic.Int64
	// logStartOffset is the first offset readable anywhere (local or
	// remote); localLogStartOffset the first readable locally.
	// Invariant: logStartOffset <= localLogStartOffset, equal when remote
	// storage is disabled.
	logStartOffset      atomic.Int64
	localLogStartOffset atomic.Int64
	// firstUnstableOffset is the producer state's first unstable offset
	// (clamped to the log start offset), -1 if none. Refreshed whenever
	// the producer state or the high watermark changes.
	firstUnstableOffset atomic.Int64
	// state is what readers see: the view and the offsets, published
	// together. Replaced (never mutated) with mu held; race-free because
	// a reader loads one pointer to an immutable value.
	state atomic.Pointer[readState]
	// highestOffsetInRemoteStorage is the inclusive last offset known to
	// be copied, -1 if none. Only grows; installed only with the current
	// truncation count (UpdateHighestOffsetInRemoteStorage). Read alone,
	// never paired with another offset, so a single atomic word.
	highestOffsetInRemoteStorage atomic.Int64
	// remoteRetentionCap is the highest offset local retention may count
	// as copied: a truncation below highestOffsetInRemoteStorage caps it
	// below the log end it leaves (an unclean leader change: remote
	// storage holds another lineage's records there), and an install
	// computed after the truncation raises it again. math.MaxInt64 when
	// no truncation capped it. highestOffsetInRemoteStorage itself keeps
	// Kafka's meaning (it only grows): the phase-2 replica check reads it
	// as evidence of progress past the seal.
	remoteRetentionCap atomic.Int64
	// view is the current segment list and holds the log's reference to
	// it; replaced (never mutated) with mu held, always together with
	// state. Readers go through state (acquireState).
	view atomic.Pointer[segmentView]
	// released is set when Close or Delete dropped the log's reference to
	// the last view: readers then get ErrClosed instead of retrying.
	released atomic.Bool
	// waits are the generations of WaitFor's and Watch's waiters, one per
	// Isolation bound (wait.go). Closed and replaced by storeStateLocked
	// with mu held; waiters take no lock (race-free because a generation
	// leaves its pointer only by the swap that closes it).
	waits waitBounds
	// offline is set (once, with mu held) by failLocked: the write
	// failure, for waiters, which do not take mu.
	offline atomic.Pointer[offlineErr]

	// flushMu serializes flushes. It is held across the fsyncs, with mu
	// released, so appends continue while a flush runs.
	flushMu sync.Mutex
	// background counts the flushes appends started in the background
	// (startBackgroundFlush); Close waits for them.
	background sync.WaitGroup

	mu struct {
		sync.Mutex
		// segments is sorted by base offset; the last one is active. It is
		// the list of the current view.
		segments []*segmentRef
		// truncationCount counts truncations that changed the log and
		// remote-progress fences (FenceRemoteProgress).
		truncationCount truncation.Count
		// remoteFences counts the FenceRemoteProgress calls among them.
		remoteFences truncation.Count
		// closeErr is the failed Close's error, returned by later Closes
		// with Options.ManagedCleanShutdown.
		closeErr error
		// recoveryPoint: offsets below it are fsynced.
		recoveryPoint int64
		// segmentPoint is the segment recovery point the offsets
		// checkpoint carries (0: none), segmentPointBase the base of the
		// segment holding it and segmentPointPos its .log position (for
		// the interval rule; -1 when unknown after an open).
		segmentPoint, segmentPointBase, segmentPointPos int64
		// unflushedBytes counts the bytes appended since the flush
		// that last started; backgroundFlush is set while a flush
		// started by an append runs.
		unflushedBytes  int64
		backgroundFlush bool
		// closing is set by Close before it waits for the background
		// flush: no new one starts (UnifiedLog.background's Add happens
		// under mu, never from zero during the Wait).
		closing bool
		// unflushedRecords and firstUnflushedMs drive the flush policy.
		unflushedRecords int64
		firstUnflushedMs int64
		// dirDirty is set when segment files were created, replaced or
		// removed since the last flush synced the directory.
		dirDirty bool
		// rolledUnsynced is set by a roll that left data above the
		// recovery point in a segment that is no longer active, and
		// cleared by whoever syncs that data (syncRolled, Flush): a
		// directory fsync may not run while it is set (rollsync.go).
		rolledUnsynced bool
		// err is sticky: after a failed write or fsync every later write
		// returns it, until the log is reopened.
		err    error
		closed bool
		// producers is the producer state (idempotence, transactions):
		// not safe for concurrent use, so only called with mu held.
		producers *producer.Manager
		// pendingSnapshots are the producer snapshots taken at rolls and
		// not yet written, by offset. Written with flushMu held
		// (writePendingSnapshots, Flush) before the recovery point passes
		// their offsets; only a truncation (holding flushMu too) removes
		// entries other than the written prefix.
		pendingSnapshots []pendingSnapshot
		// stateSlab holds the read states not yet published
		// (nextStateLocked).
		stateSlab []readState
	}

	counters counters

	// epochsRebuilt is set by Open when the leader-epoch checkpoint was
	// damaged and the epochs were rebuilt from the batches. Open only.
	epochsRebuilt bool

	// testingKnobs are hooks for tests; zero in production.
	testingKnobs struct {
		// afterTruncationCounted runs inside a truncation, after the
		// count was incremented and before the epoch cache is truncated.
		afterTruncationCounted func()
	}
}

// Dir returns the log's directory.
func (l *UnifiedLog) Dir() string { return l.dir }

// LogStartOffset returns the first offset readable anywhere, locally or
// in remote storage.
func (l *UnifiedLog) LogStartOffset() int64 { return l.Offsets().LogStartOffset }

// LocalLogStartOffset returns the first offset readable from local
// segments. Equal to LogStartOffset unless remote storage is enabled.
func (l *UnifiedLog) LocalLogStartOffset() int64 { return l.Offsets().LocalLogStartOffset }

// LogEndOffset returns the offset the next appended record receives.
func (l *UnifiedLog) LogEndOffset() int64 { return l.Offsets().LogEndOffset }

// HighWatermark returns the first offset not known to be committed.
func (l *UnifiedLog) HighWatermark() int64 { return l.Offsets().HighWatermark }

// LastStableOffset returns the first offset not known to be decided:
// min(first unstable offset, high watermark) (UnifiedLog.lastStableOffset).
// Reads with
// IsolationCommitted stop there. Lock-free. A caller that needs two of
// the offsets to agree calls Offsets once instead of two getters.
func (l *UnifiedLog) LastStableOffset() int64 { return l.Offsets().LastStableOffset }

// HighestOffsetInRemoteStorage returns the inclusive last offset known to
// be in remote storage, or -1.
func (l *UnifiedLog) HighestOffsetInRemoteStorage() int64 {
	return l.highestOffsetInRemoteStorage.Load()
}

// HighestOffsetInRemoteStorageInLineage returns the highest offset in
// remote storage known to hold this log's records, or -1:
// HighestOffsetInRemoteStorage, capped below the log end a truncation
// under it left (after an unclean leader change remote storage holds
// another lineage's records there) until a copy or follower task
// computed after that truncation installs an offset. This is what the
// WAL pruner may trust (consolidate.Pruner); HighestOffsetInRemoteStorage
// keeps Kafka's meaning.
func (l *UnifiedLog) HighestOffsetInRemoteStorageInLineage() int64 {
	h := l.highestOffsetInRemoteStorage.Load()
	if !mutation.Disabled(mutation.RemoteHighestInLineage) {
		h = min(h, l.remoteRetentionCap.Load())
	}
	return h
}

// RemoteStorageEnabled reports whether the log is tiered.
func (l *UnifiedLog) RemoteStorageEnabled() bool { return l.opts.RemoteStorageEnabled }

// LatestEpoch returns the latest leader epoch in the epoch cache.
func (l *UnifiedLog) LatestEpoch() (int32, bool) {
	e, ok := l.epochs.Latest()
	return e.Epoch, ok
}

// EarliestEpoch returns the epoch of the leader-epoch cache's first
// entry, false when the cache is empty.
func (l *UnifiedLog) EarliestEpoch() (int32, bool) {
	e, ok := l.epochs.Earliest()
	return e.Epoch, ok
}

// EpochEntries returns a copy of the leader-epoch cache's entries.
func (l *UnifiedLog) EpochEntries() []epochcache.Entry { return l.epochs.Entries() }

// EpochForOffset returns the leader epoch that wrote offset, from the
// epoch cache.
func (l *UnifiedLog) EpochForOffset(offset int64) (int32, bool) {
	return l.epochs.EpochForOffset(offset)
}

// EndOffsetForEpoch answers OffsetsForLeaderEpoch: the largest epoch <=
// epoch this log knows and the exclusive end offset of that epoch
// (LeaderEpochFileCache.endOffsetFor). The answer is epochcache.UndefinedEpochEndOffset (Undefined
// reports it) when the cache has none (Kafka's UNDEFINED_EPOCH_OFFSET).
func (l *UnifiedLog) EndOffsetForEpoch(epoch int32) epochcache.EpochEndOffset {
	ans := l.epochs.EndOffsetFor(epoch, l.LogEndOffset())
	if ans.Undefined() {
		return epochcache.UndefinedEpochEndOffset
	}
	return ans
}

// Metrics returns a snapshot of the log's counters and sizes.
func (l *UnifiedLog) Metrics() Metrics {
	st, err := l.acquireState()
	if err != nil {
		return Metrics{}
	}
	v, o := st.view, st.offsets
	defer v.unref()
	l.mu.Lock()
	rp, truncations := l.mu.recoveryPoint, l.mu.truncationCount-l.mu.remoteFences
	l.mu.Unlock()
	return Metrics{
		Segments:             len(v.segments),
		Bytes:                v.size(),
		LogStartOffset:       o.LogStartOffset,
		LocalLogStartOffset:  o.LocalLogStartOffset,
		LogEndOffset:         o.LogEndOffset,
		HighWatermark:        o.HighWatermark,
		RecoveryPoint:        rp,
		AppendedBatches:      l.counters.appendedBatches.Load(),
		AppendedBytes:        l.counters.appendedBytes.Load(),
		Rolls:                l.counters.rolls.Load(),
		SegmentsDeleted:      l.counters.segmentsDeleted.Load(),
		Truncations:          int64(truncations),
		RecoveryCuts:         l.counters.recoveryCuts.Load(),
		RecoverySkippedBytes: l.counters.recoverySkipped.Load(),
		CorruptionsFound:     l.counters.corruptionsFound.Load(),
		SegmentsMovedAside:   l.counters.movedAside.Load(),
		DamagedReads:         l.counters.damagedReads.Load(),
		ReadsCutAtDamage:     l.counters.readsCutAtDamage.Load(),
		OrphanIndexesRemoved: l.counters.orphansRemoved.Load(),
		Fsyncs:               l.counters.fsyncs.Load(),
		FsyncLatencySum:      durationOf(l.counters.fsyncNanos.Load()),
		FsyncLatencyMax:      durationOf(l.counters.fsyncMaxNanos.Load()),
	}
}

// checkWritableLocked returns the error that stops writes: closed, or a
// sticky write error.
//
// REQUIRES: l.mu held.
func (l *UnifiedLog) checkWritableLocked() error {
	if l.mu.closed {
		return ErrClosed
	}
	return l.mu.err
}

// failLocked records a write or fsync failure; every later write returns
// it until the log is reopened (never report a failed fsync as success on
// a retry: the kernel may have dropped the dirty pages).
//
// REQUIRES: l.mu held.
func (l *UnifiedLog) failLocked(err error) error {
	if l.mu.err == nil {
		l.mu.err = fmt.Errorf("log: %s: writes refused after an I/O failure: %w", l.dir, err)
		l.offline.Store(&offlineErr{err: l.mu.err})
		l.wakeAll()
		l.logger.Error("log refuses writes after an I/O failure", zap.String("dir", l.dir), zap.Error(err))
	}
	return l.mu.err
}
