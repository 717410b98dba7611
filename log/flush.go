package log

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tierlog/tierlog/internal/atomicfile"
	"github.com/tierlog/tierlog/internal/mutation"
	"github.com/tierlog/tierlog/log/internal/producer"
	"github.com/tierlog/tierlog/log/internal/segment"
	"go.uber.org/zap"
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

// Flush makes every appended record durable: it fdatasyncs the segments
// holding offsets at or above the recovery point, oldest first, then
// fsyncs the index files of those no longer active, and the directory if
// segments were created, replaced or removed since the last flush; then
// it fsyncs the epoch checkpoint (if dirty) and writes the producer
// snapshots queued by rolls; then it advances the recovery point to the
// log end offset it started with, and when that passes a segment (or
// makes a segment recovery point) writes the offsets checkpoint, with the
// transaction indexes it vouches for (writeCheckpoint). Segment data
// comes before any directory fsync (rollsync.go).
//
// The fsyncs run with the log mutex released (flushMu serializes flushes),
// so appends and reads continue. A failed fsync makes the log refuse
// writes with that error until it is reopened: the kernel may have
// dropped the dirty pages, so a retry that succeeded would lie.
func (l *UnifiedLog) Flush() error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	return l.flushFlushMuHeld()
}

// flushFlushMuHeld is Flush.
//
// REQUIRES: l.flushMu held.
func (l *UnifiedLog) flushFlushMuHeld() error {

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
	// The data syncs below cover every rolled segment (all hold offsets
	// below upTo); a roll meanwhile sets the mark again.
	l.mu.rolledUnsynced = false
	// Every snapshot at or below upTo is queued by now: a roll queues its
	// snapshot before the log end offset passes the new base.
	snaps := slices.Clone(l.mu.pendingSnapshots)
	l.mu.unflushedBytes = 0
	point := l.segmentPointDueLocked(upTo)
	v, err := l.acquireView()
	l.mu.Unlock()
	if err != nil {
		return err
	}
	defer v.unref()

	if upTo <= from && !dirDirty && !l.epochs.Dirty() && len(snaps) == 0 && point == nil {
		return nil
	}
	// Order (rollsync.go): the data of every segment first, oldest
	// first, before anything that fsyncs the directory (a segment's new
	// index files, the directory itself, the epoch checkpoint, the
	// snapshots, the checkpoint): such an fsync makes every segment's
	// entry durable, and a segment durable above one whose data is not
	// is a hole after a crash. Then the index files and the directory.
	// Then the epoch checkpoint and the producer snapshots, before the
	// recovery point that passes them: recovery re-assigns epochs only
	// above the recovery point, and reloads the newest snapshot at or
	// below the segment it starts from. The offsets checkpoint last.
	ordered := !mutation.Disabled(mutation.RollSyncOrder)
	if !ordered {
		if err := l.flushCheckpointFiles(snaps); err != nil {
			return err
		}
	}
	crossed := false
	var inactive []*segmentRef
	for i, s := range v.segments {
		if s.BaseOffset() >= upTo {
			break // holds nothing below upTo
		}
		if i+1 < len(v.segments) && v.segments[i+1].BaseOffset() <= from {
			continue // wholly below the recovery point: its data is durable
		}
		if err := l.timedSync(s.FlushData); err != nil {
			return l.fail(err)
		}
		// The index files of the segments no longer active are
		// written below, after every .log. The active segment's offset
		// and time indexes are rebuilt by recovery after any crash
		// (recovery starts at the segment holding the recovery point,
		// and Open checks a trusted segment's .index against its .log),
		// so only its data needs the fsync. Transaction indexes cannot
		// be checked: writeCheckpoint writes them.
		if i+1 < len(v.segments) {
			inactive = append(inactive, s)
		}
	}
	for _, s := range inactive {
		if err := l.timedSync(s.FlushIndexes); err != nil {
			return l.fail(err)
		}
		crossed = true
	}
	if dirDirty {
		// Segment files were created, replaced or removed: make the
		// directory entries durable too.
		if err := l.timedSync(func() error { return atomicfile.SyncDir(l.fs, l.dir) }); err != nil {
			return l.fail(err)
		}
	}
	if ordered {
		if err := l.flushCheckpointFiles(snaps); err != nil {
			return err
		}
	}

	if point != nil {
		if err := l.writeSegmentPointFiles(point); err != nil {
			return err
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
	prevPoint := int64(0)
	if point != nil && l.mu.truncationCount == count {
		prevPoint = l.mu.segmentPoint
		l.mu.segmentPoint, l.mu.segmentPointBase, l.mu.segmentPointPos = point.offset, point.ref.BaseOffset(), point.pos
	} else {
		point = nil
	}
	ckpt := l.offsetsCheckpointLocked()
	l.mu.Unlock()
	if (advanced && crossed) || point != nil {
		// The recovery point passed a segment boundary, or a segment
		// recovery point is ready: record it so a crash does not
		// recover the whole log (or segment). Between these writes the
		// checkpoint lags, which costs recovery time, never data.
		if err := l.writeCheckpoint(v.segments, ckpt); err != nil {
			return l.fail(err)
		}
	}
	if point != nil && prevPoint > 0 && prevPoint != point.offset && !isSegmentBase(v.segments, prevPoint) {
		// The previous point's snapshot is no longer named by the
		// checkpoint. Best effort: an extra snapshot is never wrong.
		if err := producer.DeleteSnapshot(l.fs, l.dir, prevPoint); err != nil {
			l.logger.Warn("could not delete a superseded producer snapshot", zap.Int64("offset", prevPoint), zap.Error(err))
		}
	}
	return nil
}

// flushCheckpointFiles writes what a flush must make durable before its
// recovery point: the epoch checkpoint (if dirty) and the producer
// snapshots queued by rolls, snaps.
//
// REQUIRES: l.flushMu held, l.mu not held.
func (l *UnifiedLog) flushCheckpointFiles(snaps []pendingSnapshot) error {
	if err := l.flushEpochs(); err != nil {
		return err
	}
	return l.writeSnapshotsFlushMuHeld(snaps)
}

// writeCheckpoint writes the offsets checkpoint c, after making durable
// the transaction index of every segment of segs that starts below c's
// recovery point, the active one included (writeTxnIndex: a no-op when
// the file already holds the segment's entries).
//
// The checkpoint is what lets recovery trust a segment: Open recovers
// from the segment holding the recovery point and reads the .txnindex of
// every segment below it from disk, where a missing or short file cannot
// be told from one with fewer aborted transactions. Flushes alone do not
// keep the files durable: a flush fsyncs the active segment's data only,
// so a segment that was active when the recovery point reached its end,
// and that a roll at that very offset then left wholly below it, is never
// synced again; and a checkpoint whose recovery point is the active
// segment's end starts recovery in the next segment once a roll there is
// durable. Writing the indexes here, before every checkpoint that can
// pass a segment, covers both whichever flush, truncation or roll came
// before.
//
// A segment wholly below the log start is skipped: no read returns its
// aborted transactions (their markers lie below any fetch offset), and
// retention deletes it next.
//
// REQUIRES: l.flushMu held (the writer of txnPersisted); l.mu may be held.
func (l *UnifiedLog) writeCheckpoint(segs []*segmentRef, c offsetsCheckpoint) error {
	for i, s := range segs {
		if s.BaseOffset() >= c.recoveryPoint {
			break
		}
		if i+1 < len(segs) && segs[i+1].BaseOffset() <= c.logStartOffset {
			continue
		}
		if err := l.writeTxnIndex(s); err != nil {
			return err
		}
	}
	return writeOffsetsCheckpoint(l.fs, l.dir, c)
}

// segmentPoint is a segment recovery point a flush makes durable: the
// offset (the flush's log end), the active segment and its .log position
// there, and the producer snapshot and transaction index entries at that
// offset, taken under mu.
type segmentPoint struct {
	offset, pos int64
	ref         *segmentRef
	snap        pendingSnapshot
	txn         []byte
}

// segmentPointDueLocked returns the segment recovery point the flush to
// upTo should write, or nil: when RecoveryPointIntervalBytes of the
// active segment lie between its last point (or its start) and upTo,
// which must lie inside it.
//
// REQUIRES: l.mu and l.flushMu held; upTo is the log end offset.
func (l *UnifiedLog) segmentPointDueLocked(upTo int64) *segmentPoint {
	iv := l.opts.RecoveryPointIntervalBytes
	segs := l.mu.segments
	if iv <= 0 || len(segs) == 0 {
		return nil
	}
	act := segs[len(segs)-1]
	size := act.Size()
	since := size
	if l.mu.segmentPointBase == act.BaseOffset() && l.mu.segmentPointPos >= 0 {
		since = size - l.mu.segmentPointPos
	}
	if upTo <= act.BaseOffset() || upTo <= l.mu.segmentPoint || since < iv {
		return nil
	}
	pm := l.mu.producers
	snap := takeSnapshot(pm, max(pm.MapEndOffset(), upTo))
	snap.offset = upTo // the file's name: the point, the log end
	return &segmentPoint{offset: upTo, pos: size, ref: act, snap: snap, txn: act.txn.AppendEncoded(nil, 0)}
}

// writeSegmentPointFiles makes durable what a recovery resumed at p needs
// besides the .log prefix (fdatasynced by the caller before): the
// producer snapshot at p.offset, the active segment's index files (every
// entry below p.pos) and its transaction index. The offsets checkpoint
// naming p, written after these, is the commit point.
//
// REQUIRES: l.flushMu held, l.mu not held.
func (l *UnifiedLog) writeSegmentPointFiles(p *segmentPoint) error {
	if err := p.snap.write(l); err != nil {
		return l.fail(err)
	}
	if err := l.timedSync(p.ref.FlushIndexes); err != nil {
		return l.fail(err)
	}
	// The entries taken under mu; appends may have added more since,
	// which the next write of the file adds (the count tells it).
	n := int64(len(p.txn) / producer.AbortedTxnSize)
	if n != p.ref.txnPersisted.Load() {
		path := l.fs.PathJoin(l.dir, segment.TxnIndexFileName(p.ref.BaseOffset()))
		if err := atomicfile.Write(l.fs, path, p.txn); err != nil {
			return l.fail(fmt.Errorf("log: write %s: %w", path, err))
		}
		p.ref.txnPersisted.Store(n)
	}
	return nil
}

// isSegmentBase reports whether offset is the base offset of one of segs.
func isSegmentBase(segs []*segmentRef, offset int64) bool {
	for _, s := range segs {
		if s.BaseOffset() == offset {
			return true
		}
	}
	return false
}

// flushEpochs writes the epoch checkpoint if it is dirty, after the data
// of rolled segments (its directory fsync may make a rolled-to segment
// durable: rollsync.go). A failure is a write failure of the log.
//
// REQUIRES: l.flushMu held, l.mu not held.
func (l *UnifiedLog) flushEpochs() error {
	if !l.epochs.Dirty() {
		return nil
	}
	if err := l.syncRolledFlushMuHeld(); err != nil {
		return err
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
		segmentPoint:   l.mu.segmentPoint,
	}
}
