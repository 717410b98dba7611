package log

import (
	"slices"

	"github.com/tierlog/tierlog/internal/atomicfile"
)

// deletePredicate decides whether segment s (with successor next, nil for
// the active segment) breaches a retention rule. Predicates may keep
// state across calls (the size rule counts down), so each is called at
// most once per segment, oldest first.
type deletePredicate func(s, next *segmentRef) bool

// DeleteOldSegments deletes the local segments that breach the log start
// offset, the size limit or the time limit, oldest first, and returns how
// many it deleted (UnifiedLog.deleteOldSegments). It never deletes a segment holding offsets
// at or above the high watermark, and with remote storage copying it
// deletes a segment only once it is in remote storage (its last offset <=
// HighestOffsetInRemoteStorage) or below the log start offset. When the
// active segment itself breaches a rule on a remote-enabled log, it is
// rolled so that a later call can delete it once uploaded.
//
// Local retention settings resolve from the total ones when they are
// LocalRetentionDefault (-2), and apply only while segments are copied.
//
// It holds flushMu for its whole duration, as truncations do: a flush
// fsyncs segments and writes their indexes with mu released, and without
// flushMu it could write the index of a segment retention has just
// removed (a stray file) or race its removal.
func (l *UnifiedLog) DeleteOldSegments() (int, error) {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	var ev events
	startBefore := l.logStartOffset.Load()
	deleted, err := l.deleteOldSegmentsLocked(&ev)
	if err == nil {
		l.assertPublishedLocked()
	}
	startAfter := l.logStartOffset.Load()
	floor := snapshotFloor(l.mu.segments, startAfter)
	segs, ckpt := l.mu.segments, l.offsetsCheckpointLocked()
	l.mu.Unlock()
	l.fire(ev)
	if len(ev.rolled) > 0 {
		l.mu.Lock()
		snaps := slices.Clone(l.mu.pendingSnapshots)
		l.mu.Unlock()
		if werr := l.writeSnapshotsFlushMuHeld(snaps); err == nil {
			err = werr
		}
		// A roll's snapshot was written before the removal
		// (writeSnapshotsBeforeRemovalLocked): the removal is made
		// durable here, as the snapshot's write after it used to.
		if err == nil && deleted > 0 && len(snaps) == 0 {
			err = l.syncDirFlushMuHeld()
		}
	}
	if err != nil {
		return deleted, err
	}
	if startAfter > startBefore {
		// The raised log start before the epochs it truncated: the
		// removed segments are not durable yet, and a crash that
		// brings them back must not find the cache without their
		// epochs.
		if err := l.commitLogStartFlushMuHeld(segs, ckpt); err != nil {
			return deleted, err
		}
		l.deleteSnapshotsBelow(floor) // file I/O: after mu
	}
	return deleted, l.flushEpochs()
}

// deleteOldSegmentsLocked applies the three rules in Kafka's order.
//
// REQUIRES: l.mu held.
func (l *UnifiedLog) deleteOldSegmentsLocked(ev *events) (int, error) {
	if err := l.checkWritableLocked(); err != nil {
		return 0, err
	}
	total := 0
	for _, rule := range []struct {
		reason string
		pred   func() deletePredicate // nil: the rule is off
	}{
		{"log-start", l.logStartBreach},
		{"retention-size", l.sizeBreach},
		{"retention-time", l.timeBreach},
	} {
		pred := rule.pred()
		if pred == nil {
			continue
		}
		n, err := l.deleteSegmentsLocked(pred, rule.reason, ev)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

func (l *UnifiedLog) logStartBreach() deletePredicate {
	return func(_, next *segmentRef) bool {
		limit := l.logStartOffset.Load()
		if l.opts.RemoteStorageEnabled {
			limit = l.localLogStartOffset.Load()
		}
		return next != nil && next.BaseOffset() <= limit
	}
}

func (l *UnifiedLog) sizeBreach() deletePredicate {
	limit := l.opts.localRetentionBytes()
	var size int64
	for _, s := range l.mu.segments {
		size += s.Size()
	}
	if limit < 0 || size < limit {
		return nil
	}
	diff := size - limit
	return func(s, _ *segmentRef) bool {
		if diff-s.Size() < 0 {
			return false
		}
		diff -= s.Size()
		return true
	}
}

func (l *UnifiedLog) timeBreach() deletePredicate {
	limit := l.opts.localRetentionMs()
	if limit < 0 {
		return nil
	}
	now := l.opts.nowMs()
	return func(s, _ *segmentRef) bool { return now-s.LargestTimestamp() > limit }
}

// deleteSegmentsLocked finds the deletable prefix of the segments under
// pred and deletes it.
//
// REQUIRES: l.mu held.
func (l *UnifiedLog) deleteSegmentsLocked(pred deletePredicate, reason string, ev *events) (int, error) {
	deletable, roll := l.deletableLocked(pred)
	if roll {
		if err := l.rollLocked(l.logEndOffset.Load(), ev); err != nil {
			return 0, err
		}
	}
	if deletable == 0 {
		return 0, nil
	}
	if deletable == len(l.mu.segments) {
		// At least one segment must remain: start an empty one first. (The
		// active segment is deletable only when non-empty, so the new
		// segment never takes a deletable segment's base.)
		if err := l.rollLocked(l.logEndOffset.Load(), ev); err != nil {
			return 0, err
		}
	}
	if len(ev.rolled) > 0 {
		if err := l.writeSnapshotsBeforeRemovalLocked(); err != nil {
			return 0, err
		}
	}
	victims := l.mu.segments[:deletable]
	newStart := l.mu.segments[deletable].BaseOffset()
	// Move the start offset before the segments disappear, so a reader
	// never finds an offset above the start without its segment.
	if l.opts.copyEnabled() {
		if newStart > l.localLogStartOffset.Load() {
			l.localLogStartOffset.Store(newStart)
		}
	} else if _, err := l.maybeIncrementLogStartOffsetLocked(newStart); err != nil {
		return 0, err
	}
	for _, s := range victims {
		if err := l.removeSegmentLocked(s, reason, ev); err != nil {
			return 0, l.failLocked(err)
		}
	}
	l.mu.segments = append([]*segmentRef(nil), l.mu.segments[deletable:]...)
	l.mu.dirDirty = true
	l.publishLocked()
	l.checkOffsetsLocked()
	return deletable, nil
}

// syncDirFlushMuHeld fsyncs the log directory, the rolled segments' data
// first (rollsync.go).
//
// REQUIRES: l.flushMu held.
func (l *UnifiedLog) syncDirFlushMuHeld() error {
	if err := l.syncRolledFlushMuHeld(); err != nil {
		return err
	}
	if err := l.timedSync(func() error { return atomicfile.SyncDir(l.fs, l.dir) }); err != nil {
		return l.fail(err)
	}
	return nil
}

// writeSnapshotsBeforeRemovalLocked writes the producer snapshots queued
// by a roll of this deletion (the rolled-to segment's), durable, before
// any segment is removed: written after the removal, a crash between the
// two reopened a log with neither the removed segments nor a snapshot
// above them, its producers forgotten (an idempotent retry appended
// twice). The fsyncs run under mu, as a truncation's do: retention rolls
// rarely.
//
// REQUIRES: l.mu held, l.flushMu held.
func (l *UnifiedLog) writeSnapshotsBeforeRemovalLocked() error {
	if len(l.mu.pendingSnapshots) == 0 {
		return nil
	}
	if err := l.syncRolledLocked(); err != nil {
		return err
	}
	for _, p := range l.mu.pendingSnapshots {
		if err := p.write(l); err != nil {
			return l.failLocked(err)
		}
	}
	l.mu.pendingSnapshots = l.mu.pendingSnapshots[:0]
	return nil
}

// deletableLocked returns how many of the oldest segments may be deleted
// under pred, and whether the active segment should be rolled so that it
// becomes deletable later.
//
// REQUIRES: l.mu held.
func (l *UnifiedLog) deletableLocked(pred deletePredicate) (n int, roll bool) {
	segs := l.mu.segments
	hw := l.highWatermark.Load()
	for i, s := range segs {
		var next *segmentRef
		upper := l.logEndOffset.Load()
		if i+1 < len(segs) {
			next = segs[i+1]
			upper = next.BaseOffset()
		}
		// Never delete offsets at or above the high watermark: the log
		// start offset must not pass it.
		breach := hw >= upper && pred(s, next)
		if breach && l.opts.RemoteStorageEnabled && next == nil && s.Size() > 0 {
			roll = true
		}
		lastAndEmpty := next == nil && s.Size() == 0
		if !breach || lastAndEmpty || !l.uploadedOrBelowStart(next, upper) {
			break
		}
		n++
	}
	return n, roll
}

// uploadedOrBelowStart reports whether a segment ending before upper may
// leave local disk: always without remote copying; with it, only once its
// last offset is in remote storage or the log start offset has passed it.
func (l *UnifiedLog) uploadedOrBelowStart(next *segmentRef, upper int64) bool {
	if !l.opts.copyEnabled() {
		return true
	}
	if upper > 0 && upper-1 <= min(l.highestOffsetInRemoteStorage.Load(), l.remoteRetentionCap.Load()) {
		return true
	}
	return next != nil && l.logStartOffset.Load() >= next.BaseOffset()
}
