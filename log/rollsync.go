package log

import (
	"github.com/tierlog/tierlog/internal/mutation"
)

// A roll leaves the old segment's data unsynced (no fsync on the append
// path, as in Kafka, whose UnifiedLog.roll flushes the old segment
// asynchronously) and creates the new segment's file, whose directory
// entry is durable once anything fsyncs the partition directory: an
// atomically written file there (producer snapshot, epoch or offsets
// checkpoint, transaction index), a segment's index files, a truncation.
// A crash after such an fsync but before the old segment's data is synced
// keeps the new segment and an empty (or short) old one, and recovery
// cannot tell that shape from a roll at a batch's base above the log end:
// it ends the log at the new segment, with a hole of lost offsets below
// the log end, and a producer snapshot at the new base vouches for
// batches that are gone.
//
// The rule, kept by syncRolled and Flush: the data of every segment that
// is no longer active is durable before any fsync of the directory can
// make a later segment's entry durable. rollLocked marks the old
// segment's unsynced data (rolledUnsynced); every directory-syncing write
// of the log (writeSnapshotsFlushMuHeld, flushEpochs, the offsets
// checkpoint writes, truncations, writeCleanShutdown,
// LoadProducerSnapshot, the orphan removal of createSegment) syncs it
// first; Flush syncs all segment data before its index files, directory
// and checkpoint files. The cost is one fdatasync per roll, off the
// append path, paid by the first such write after it (usually the
// snapshot write of Roll or retention, or the next flush); a write with
// nothing pending pays one check under mu.

// syncRolledFlushMuHeld makes durable the data of the segments that are
// no longer active and hold offsets at or above the recovery point, if a
// roll left any unsynced (rolledUnsynced). The fsyncs run with mu
// released; flushMu keeps truncations and retention from removing the
// segments meanwhile, and an append that rolls again sets the mark again.
// A failed fsync fails the log.
//
// REQUIRES: l.flushMu held, l.mu not held.
func (l *UnifiedLog) syncRolledFlushMuHeld() error {
	if mutation.Disabled(mutation.RollSyncOrder) {
		return nil
	}
	l.mu.Lock()
	if !l.mu.rolledUnsynced {
		l.mu.Unlock()
		return nil
	}
	l.mu.rolledUnsynced = false
	from := l.mu.recoveryPoint
	v, err := l.acquireView()
	l.mu.Unlock()
	if err != nil {
		return err
	}
	defer v.unref()
	if err := l.syncSegmentData(v.segments, from); err != nil {
		return l.fail(err)
	}
	return nil
}

// syncRolledLocked is syncRolledFlushMuHeld with the fsyncs under l.mu,
// for the writes that hold it: truncations (which fsync under mu anyway)
// and the orphan removal of a roll (rare).
//
// REQUIRES: l.mu held.
func (l *UnifiedLog) syncRolledLocked() error {
	if mutation.Disabled(mutation.RollSyncOrder) || !l.mu.rolledUnsynced {
		return nil
	}
	l.mu.rolledUnsynced = false
	if err := l.syncSegmentData(l.mu.segments, l.mu.recoveryPoint); err != nil {
		return l.failLocked(err)
	}
	return nil
}

// syncSegmentData fdatasyncs the .log of every segment of segs but the
// last (the active one) that holds offsets at or above from, oldest
// first. Index files are left to Flush: recovery rebuilds them for every
// segment above the recovery point. The caller fails the log on an error
// (the kernel may have dropped the dirty pages).
func (l *UnifiedLog) syncSegmentData(segs []*segmentRef, from int64) error {
	for i, s := range segs[:max(0, len(segs)-1)] {
		if segs[i+1].BaseOffset() <= from {
			continue // wholly below the recovery point: durable
		}
		if err := l.timedSync(s.FlushData); err != nil {
			return err
		}
	}
	return nil
}

// syncBelowFlushMuHeld makes durable the records of segs (the segments
// after a log start raise to n, taken under mu) below n that lie above
// the recovery point, before the offsets checkpoint naming n is written.
// A durable log start above the durable log end would otherwise be what
// a crash that keeps no unsynced data leaves (flush.messages unlimited, a
// DeleteRecords to the log end): Open then empties the log at n (as
// Kafka's LogLoader does for a log ending below its log start) and the
// producers whose batches lay below n, which the raise keeps, are
// forgotten. With the records durable, the recovered log ends at or
// above n and its producer state is rebuilt from them. A no-op when n is
// at or below the recovery point (the usual case with the background
// flush) or at the base of the first kept segment (retention).
//
// REQUIRES: l.flushMu held (no truncation or retention removes segs'
// segments meanwhile), l.mu not held.
func (l *UnifiedLog) syncBelowFlushMuHeld(segs []*segmentRef, n int64) error {
	if mutation.Disabled(mutation.LogStartDataFirst) {
		return nil
	}
	l.mu.Lock()
	from := l.mu.recoveryPoint
	l.mu.Unlock()
	if n <= from {
		return nil
	}
	for i, s := range segs {
		if s.BaseOffset() >= n {
			break
		}
		if i+1 < len(segs) && segs[i+1].BaseOffset() <= from {
			continue
		}
		if err := l.timedSync(s.FlushData); err != nil {
			return l.fail(err)
		}
	}
	return nil
}
