package log

import (
	"fmt"

	"github.com/tierlog/tierlog/log/internal/segment"
	"go.uber.org/zap"
)

// events collects what happened inside a critical section so the
// listener can be told after the mutex is released.
type events struct {
	rolled    []int64
	deleted   []SegmentDeleteInfo
	recovered []RecoveryTruncation
	damaged   []*CorruptionError
}

// fire calls the listener's callbacks. REQUIRES: l.mu not held.
func (l *UnifiedLog) fire(ev events) {
	ls := l.opts.Listener
	for _, b := range ev.rolled {
		if ls.SegmentRolled != nil {
			ls.SegmentRolled(b)
		}
	}
	for _, d := range ev.deleted {
		if ls.SegmentDeleted != nil {
			ls.SegmentDeleted(d)
		}
	}
	for _, r := range ev.recovered {
		if ls.RecoveryTruncated != nil {
			ls.RecoveryTruncated(r)
		}
		if ls.Corruption != nil && isCorruption(r.Err) {
			ls.Corruption(r)
		}
	}
	for _, d := range ev.damaged {
		if ls.DamageFound != nil {
			ls.DamageFound(d)
		}
	}
}

// Roll closes the active segment to appends and starts a new, empty one at
// the log end offset, even if the active segment is not full. A no-op if
// the active segment is empty.
func (l *UnifiedLog) Roll() error {
	l.mu.Lock()
	var ev events
	err := l.checkWritableLocked()
	if err == nil {
		err = l.rollLocked(l.logEndOffset.Load(), &ev)
	}
	l.mu.Unlock()
	l.fire(ev)
	if err != nil || len(ev.rolled) == 0 {
		return err
	}
	return l.writePendingSnapshots()
}

// rollLocked starts a new active segment at max(expectedNextOffset, LEO)
// (Kafka LocalLog.roll). If the active segment already starts there and is
// empty, it stays. Nothing is fsynced here, neither the old segment's
// data nor the directory (an fsync under mu would stall appends): the
// old segment's unsynced data is marked (rolledUnsynced) and synced
// before the next directory fsync of the log (syncRolled, Flush), which
// is what may make the new segment's file durable. A producer snapshot
// at the new base is queued; the caller writes it after releasing mu.
//
// REQUIRES: l.mu held.
func (l *UnifiedLog) rollLocked(expectedNextOffset int64, ev *events) error {
	active := l.mu.segments[len(l.mu.segments)-1]
	newBase := max(expectedNextOffset, l.logEndOffset.Load())
	switch {
	case newBase == active.BaseOffset() && active.Size() == 0:
		return nil
	case newBase <= active.BaseOffset():
		return fmt.Errorf("log: roll to %d at or below the active segment's base %d: %w",
			newBase, active.BaseOffset(), ErrInvalidArgument)
	}
	if err := active.OnBecomeInactive(); err != nil {
		return l.failLocked(err)
	}
	seg, err := l.createSegment(newBase)
	if err != nil {
		return l.failLocked(err)
	}
	l.mu.segments = append(l.mu.segments, newSegmentRef(seg, nil, 0))
	l.mu.dirDirty = true
	if l.logEndOffset.Load() > l.mu.recoveryPoint {
		l.mu.rolledUnsynced = true
	}
	// The producer snapshot named by the new base (Kafka takes one at
	// every roll): the state is known up to newBase, every batch below it
	// being applied. Queued here, written with mu released
	// (writePendingSnapshots, Flush) and always before the recovery point
	// passes newBase.
	pm := l.mu.producers
	pm.SetMapEndOffset(newBase)
	l.mu.pendingSnapshots = append(l.mu.pendingSnapshots, takeSnapshot(pm, newBase))
	l.publishLocked()
	l.counters.rolls.Add(1)
	ev.rolled = append(ev.rolled, newBase)
	return nil
}

// createSegment creates the segment at base, at or above the log end
// offset, removing orphan index files there (segment.CreateOverOrphans):
// they would otherwise make every roll fail. Removing them fsyncs the
// directory, under l.mu when the caller holds it: that happens only when
// orphans exist, which is rare and must be durable before the new .log.
// The data of rolled segments is synced before that fsync
// (syncRolledLocked), under l.mu too.
//
// REQUIRES: l.mu held.
func (l *UnifiedLog) createSegment(base int64) (*segment.Segment, error) {
	return l.createSegmentOverOrphans(base, l.syncRolledLocked)
}

// createSegmentOverOrphans is createSegment with beforeDirSync run before
// the orphans' directory fsync (nil: none). A full truncation and a
// rebuild create their segment with nil: every segment of the log was
// removed first, so no rolled data is left to sync. An orphan there is
// as likely as at a roll: a crash inside the removal of a segment at
// that base (local retention, a truncation) leaves its index files.
//
// REQUIRES: l.mu held.
func (l *UnifiedLog) createSegmentOverOrphans(base int64, beforeDirSync func() error) (*segment.Segment, error) {
	seg, removed, err := segment.CreateOverOrphans(l.fs, l.dir, base, l.opts.nowMs(), l.segOpts, beforeDirSync)
	if len(removed) > 0 {
		l.counters.orphansRemoved.Add(int64(len(removed)))
		l.logger.Warn("removed orphan index files where a segment is created",
			zap.Int64("base", base), zap.Strings("files", removed))
	}
	return seg, err
}
