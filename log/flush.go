package log

import (
	"errors"
	"slices"
	"time"

	"github.com/tierlog/tierlog/internal/atomicfile"
)

func isCorruption(err error) bool { return errors.Is(err, ErrCorruption) }

// shouldFlushLocked applies the flush policy after an append of records.
//
// REQUIRES: l.mu held.
func (l *UnifiedLog) shouldFlushLocked(records int64) bool {
	if l.mu.unflushedRecords == 0 {
		return false
	}
	if n := l.opts.FlushMessages; n > 0 && l.mu.unflushedRecords >= n {
		return true
	}
	if ms := l.opts.FlushMs; ms > 0 && l.opts.nowMs()-l.mu.firstUnflushedMs >= ms {
		return true
	}
	return false
}

// MaybeFlush flushes if the flush policy asks for it (FlushMs elapsed
// since the oldest unflushed append). A broker calls it periodically;
// appends check the policy themselves.
func (l *UnifiedLog) MaybeFlush() error {
	l.mu.Lock()
	due := l.shouldFlushLocked(0)
	l.mu.Unlock()
	if !due {
		return nil
	}
	return l.Flush()
}

// Flush makes every appended record durable: it fsyncs the epoch
// checkpoint (if dirty), writes the producer snapshots queued by rolls,
// fsyncs the segments holding offsets at or above the recovery point
// (with the transaction index of each but the active one), and the
// directory if segments were created, replaced or removed since the last
// flush; then it advances the recovery point to the log end offset it
// started with.
//
// The fsyncs run with the log mutex released (flushMu serializes flushes),
// so appends and reads continue. A failed fsync makes the log refuse
// writes with that error until it is reopened: the kernel may have
// dropped the dirty pages, so a retry that succeeded would lie.
func (l *UnifiedLog) Flush() error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()

	l.mu.Lock()
	if err := l.checkWritableLocked(); err != nil {
		l.mu.Unlock()
		return err
	}
	upTo := l.logEndOffset.Load()
	from := l.mu.recoveryPoint
	count := l.mu.truncationCount
	records := l.mu.unflushedRecords
	dirDirty := l.mu.dirDirty
	l.mu.dirDirty = false // set again by any change made meanwhile
	// Every snapshot at or below upTo is queued by now: a roll queues its
	// snapshot before the log end offset passes the new base.
	snaps := slices.Clone(l.mu.pendingSnapshots)
	v, err := l.acquireView()
	l.mu.Unlock()
	if err != nil {
		return err
	}
	defer v.unref()

	if upTo <= from && !dirDirty && !l.epochs.Dirty() && len(snaps) == 0 {
		return nil
	}
	// The epoch checkpoint first: the recovery point must never pass an
	// epoch assignment that is not durable, since recovery re-assigns
	// epochs only above the recovery point. The producer snapshots
	// likewise: recovery reloads the newest snapshot at or below the
	// segment it starts from.
	if err := l.flushEpochs(); err != nil {
		return err
	}
	if err := l.writeSnapshotsFlushMuHeld(snaps); err != nil {
		return err
	}
	crossed := false
	for i, s := range v.segments {
		if s.BaseOffset() >= upTo {
			break // holds nothing below upTo
		}
		if i+1 < len(v.segments) && v.segments[i+1].BaseOffset() <= from {
			continue // wholly below the recovery point: already durable
		}
		sync := s.Flush
		if i+1 == len(v.segments) {
			// The active segment: its indexes are rebuilt by recovery
			// after any crash (recovery starts at the segment holding the
			// recovery point), so only its data needs the fsync.
			sync = s.FlushData
		}
		if err := l.timedSync(sync); err != nil {
			return l.fail(err)
		}
		if i+1 < len(v.segments) {
			// A segment the recovery point will pass: its transaction
			// index must be durable too, since recovery will not rebuild
			// it. (The active segment's is rebuilt by any recovery.)
			if err := l.writeTxnIndex(s); err != nil {
				return l.fail(err)
			}
		}
		crossed = crossed || i+1 < len(v.segments)
	}
	if dirDirty {
		// Segment files were created, replaced or removed: make the
		// directory entries durable too.
		if err := l.timedSync(func() error { return atomicfile.SyncDir(l.fs, l.dir) }); err != nil {
			return l.fail(err)
		}
	}

	l.mu.Lock()
	advanced := false
	if l.mu.truncationCount == count && upTo > l.mu.recoveryPoint {
		// No truncation ran meanwhile, so [from, upTo) is what we synced.
		l.mu.recoveryPoint = upTo
		l.mu.unflushedRecords = max(0, l.mu.unflushedRecords-records)
		if l.mu.unflushedRecords == 0 {
			l.mu.firstUnflushedMs = 0
		}
		advanced = true
	}
	ckpt := l.offsetsCheckpointLocked()
	l.mu.Unlock()
	if advanced && crossed {
		// The recovery point passed a segment boundary: record it so a
		// crash does not recover the whole log. Between these writes the
		// checkpoint lags, which costs recovery time, never data.
		if err := writeOffsetsCheckpoint(l.fs, l.dir, ckpt); err != nil {
			return l.fail(err)
		}
	}
	return nil
}

// flushEpochs writes the epoch checkpoint if it is dirty. A failure is a
// write failure of the log.
func (l *UnifiedLog) flushEpochs() error {
	if !l.epochs.Dirty() {
		return nil
	}
	if err := l.epochs.Flush(); err != nil {
		return l.fail(err)
	}
	return nil
}

// fail takes the mutex and records a write failure (failLocked).
func (l *UnifiedLog) fail(err error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failLocked(err)
}

// timedSync runs an fsync and records its latency.
func (l *UnifiedLog) timedSync(sync func() error) error {
	start := time.Now()
	err := sync()
	l.counters.observeFsync(time.Since(start))
	return err
}

// offsetsCheckpointLocked returns the checkpoint content for the current
// state.
//
// REQUIRES: l.mu held.
func (l *UnifiedLog) offsetsCheckpointLocked() offsetsCheckpoint {
	return offsetsCheckpoint{
		logStartOffset: l.logStartOffset.Load(),
		recoveryPoint:  l.mu.recoveryPoint,
	}
}
