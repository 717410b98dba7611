package remote

import (
	"context"
	"errors"
	"slices"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/mutation"
	"go.uber.org/zap"
)

// runFollower is one run of a follower's task (Kafka: RemoteLogManager's
// follower task): install the
// highest offset of this log's lineage that the leader tiered, so the
// follower may delete local segments below it. The truncation count is
// read first and fences the install (the Inkless truncation counter of
// https://github.com/aiven/inkless/pull/857): an offset computed from
// an epoch cache that a truncation then cut is dropped.
func (m *Manager) runFollower(ctx context.Context, pt *partitionTasks) (FollowerResult, error) {
	pt.followerMu.Lock()
	defer pt.followerMu.Unlock()
	res := FollowerResult{HighestRemoteOffset: -1}
	if err := context.Cause(ctx); err != nil {
		return res, err
	}
	tp, l := pt.p.TopicIDPartition, pt.p.Log
	count := l.TruncationCount()
	off, _, err := m.findHighestRemoteOffset(tp, l)
	if err != nil {
		return res, err
	}
	res.HighestRemoteOffset = off
	capUnheldRemoteOffset(l, off, count)
	if !installRemoteOffset(l, off, count) {
		res.Dropped = true
		m.logger.Debug("follower task: truncation during the lookup; offset dropped",
			zap.Stringer("partition", tp), zap.Int64("offset", off))
	}
	return res, nil
}

// runExpiration is one run of a leader's expiration task (Kafka:
// RemoteLogManager's RLMExpirationTask).
func (m *Manager) runExpiration(ctx context.Context, pt *partitionTasks) (ExpirationResult, error) {
	pt.expireMu.Lock()
	defer pt.expireMu.Unlock()
	res := newExpirationResult()
	tp, l := pt.p.TopicIDPartition, pt.p.Log
	all, err := m.meta.ListSegments(tp)
	res.Listed = len(all)
	if err != nil || len(all) == 0 {
		return res, err
	}
	remoteEpochs := segmentEpochs(all)
	entries := l.EpochEntries()
	lineage := FilterLineage(entries)
	guard := m.crossTier(tp)
	logStart := l.LogStartOffset()
	if guard.Consolidating && !mutation.Disabled(mutation.RetentionLogStart) {
		// The seal pins the local log start of a consolidating partition;
		// the cross-tier start is its real log start.
		if guard.Known {
			logStart = guard.Start
		} else if logStart, err = m.findLogStartOffset(tp, l); err != nil {
			return res, err
		}
	}
	res.LogStart = logStart
	retentionMs, retentionBytes := l.Retention()
	in := RetentionInput{
		Lineage: lineage, LogStart: logStart, LogEnd: l.LogEndOffset(),
		RetentionMs: retentionMs, RetentionBytes: retentionBytes, NowMs: m.opts.Now().UnixMilli(),
		BeingCopied: m.beingCopied,
	}
	if retentionBytes > -1 {
		if in.LocalOnlyBytes, err = localOnlyBytes(l); err != nil {
			return res, err
		}
	}
	// Every decision of the run is taken over the one listing above, so
	// the walk never mixes two states of the metadata.
	for _, e := range lineage {
		in.SegmentsByEpoch = append(in.SegmentsByEpoch, segmentsOfEpoch(all, e.Epoch))
	}
	plan := PlanRetention(in)
	res.StoppedAtCopy = plan.StoppedAtCopy
	// Report the new log start before deleting, as Kafka does: a
	// reader is never sent to a segment being deleted.
	if plan.NewLogStart >= 0 {
		if _, err := l.UpdateLogStartOffsetFromRemoteTier(plan.NewLogStart); err != nil {
			return res, err
		}
		res.NewLogStart = plan.NewLogStart
	}
	// Every pending deletion is retried on every run, not only those the
	// walk reaches (Kafka retries DELETE_SEGMENT_STARTED only on
	// the walk, which stops at the first valid segment retention keeps: a
	// failed cleanup above it would keep its objects for as long as
	// retention keeps that segment, forever with infinite retention).
	// Such segments are invisible to readers already.
	scheduled := map[SegmentID]bool{}
	for _, d := range plan.Delete {
		scheduled[d.Segment.SegmentID] = true
	}
	for _, s := range all {
		if s.State == DeleteSegmentStarted && !scheduled[s.SegmentID] {
			plan.Delete = append(plan.Delete, ScheduledDelete{Segment: s, Reason: DeleteRetry})
		}
	}
	var errs []error
	del := func(d ScheduledDelete) {
		if err := m.deleteScheduled(ctx, tp, &d); err != nil {
			errs = append(errs, err)
			res.Failed = append(res.Failed, FailedDelete{Delete: d, Err: err})
			return
		}
		res.Deleted = append(res.Deleted, d)
	}
	attempted := map[SegmentID]bool{}
	for _, d := range plan.Delete {
		if err := context.Cause(ctx); err != nil {
			return res, errors.Join(append(errs, err)...)
		}
		attempted[d.Segment.SegmentID] = true
		del(d)
	}
	if len(entries) > 0 {
		cleanup := PlanEpochCleanup(entries[0].Epoch, remoteEpochs, func(e int32) []SegmentMetadata {
			return slices.DeleteFunc(segmentsOfEpoch(all, e), func(s SegmentMetadata) bool { return attempted[s.SegmentID] })
		}, guard)
		for _, d := range cleanup {
			if err := context.Cause(ctx); err != nil {
				return res, errors.Join(append(errs, err)...)
			}
			del(d)
		}
	}
	return res, errors.Join(errs...)
}

// deleteScheduled deletes d's segment and reports it (SegmentDeleted,
// with the segment's state DELETE_SEGMENT_FINISHED).
func (m *Manager) deleteScheduled(ctx context.Context, tp TopicIDPartition, d *ScheduledDelete) error {
	if err := m.deleteSegment(ctx, &d.Segment); err != nil {
		return err
	}
	d.Segment.State = DeleteSegmentFinished
	m.logger.Info("deleted remote segment", zap.Stringer("partition", tp),
		zap.Stringer("segment", d.Segment.SegmentID), zap.Int64("start", d.Segment.StartOffset),
		zap.Int64("end", d.Segment.EndOffset), zap.Stringer("reason", d.Reason))
	m.notify(func(ls *ManagerListener) {
		if ls.SegmentDeleted != nil {
			ls.SegmentDeleted(d.Segment, d.Reason)
		}
	})
	return nil
}

// crossTier asks the consolidation state about tp.
func (m *Manager) crossTier(tp TopicIDPartition) CrossTierGuard {
	if m.opts.Consolidation == nil {
		return CrossTierGuard{}
	}
	c, start, known := m.opts.Consolidation.CrossTierLogStart(tp)
	return CrossTierGuard{Consolidating: c, Start: start, Known: known}
}

// segmentsOfEpoch returns the segments of segs (a ListSegments listing,
// sorted by start offset) with records in epoch, in the same order: what
// ListSegmentsForEpoch answers, from the same snapshot.
func segmentsOfEpoch(segs []SegmentMetadata, epoch int32) []SegmentMetadata {
	var out []SegmentMetadata
	for _, s := range segs {
		if slices.ContainsFunc(s.SegmentLeaderEpochs, func(e epochcache.Entry) bool { return e.Epoch == epoch }) {
			out = append(out, s)
		}
	}
	return out
}

// segmentEpochs returns the sorted distinct epochs of segs.
func segmentEpochs(segs []SegmentMetadata) []int32 {
	var out []int32
	for _, s := range segs {
		for _, e := range s.SegmentLeaderEpochs {
			out = append(out, e.Epoch)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// localOnlyBytes sums the local segments not yet in remote storage: those
// based at or above the highest remote offset (Kafka:
// onlyLocalLogSegmentsSize).
func localOnlyBytes(l PartitionLog) (int64, error) {
	segs, err := l.Segments(0)
	if err != nil {
		return 0, err
	}
	h := l.HighestOffsetInRemoteStorage()
	var n int64
	for _, s := range segs {
		if s.BaseOffset >= h {
			n += s.SizeBytes
		}
	}
	return n, nil
}
