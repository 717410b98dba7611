package remote

import (
	"slices"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/internal/mutation"
)

// This file decides what the expiration task deletes (Kafka:
// RemoteLogManager's RLMExpirationTask) as pure functions of listed
// metadata and the leader's state, so every rule has a datadriven test;
// manager_expire.go executes the decisions.

// RetentionInput is what one expiration run decides over.
type RetentionInput struct {
	// Segments lists the partition's remote segments per epoch of the
	// filtered lineage, in lineage order: SegmentsByEpoch[i] holds
	// ListSegmentsForEpoch(Lineage[i].Epoch), sorted by start offset.
	SegmentsByEpoch [][]SegmentMetadata
	// Lineage is the leader's epoch cache filtered by FilterLineage.
	Lineage []epochcache.Entry
	// LogStart is the reclaim floor (upstream: the log's log start; a
	// consolidating partition: the cross-tier log start).
	LogStart int64
	// LogEnd is the leader's log end offset.
	LogEnd int64
	// RetentionMs and RetentionBytes are retention.ms and
	// retention.bytes; -1 is infinite.
	RetentionMs, RetentionBytes int64
	// NowMs is the current time.
	NowMs int64
	// LocalOnlyBytes is the size of local segments not yet in remote
	// storage (Kafka's onlyLocalLogSegmentsSize).
	LocalOnlyBytes int64
	// BeingCopied reports whether a copy of the segment is running now.
	BeingCopied func(SegmentID) bool
}

// DeleteReason says why the expiration task deletes a segment.
type DeleteReason int8

const (
	// DeleteRetry retries a deletion that started earlier
	// (DELETE_SEGMENT_STARTED).
	DeleteRetry DeleteReason = iota + 1
	// DeleteLogStart: the segment lies below the log start, in epochs at
	// or before the first lineage epoch.
	DeleteLogStart
	// DeleteRetentionTime: its max timestamp is at or before now -
	// retention.ms.
	DeleteRetentionTime
	// DeleteRetentionSize: the partition exceeds retention.bytes.
	DeleteRetentionSize
	// DeleteEpochCleanup: all its epochs are older than the leader's
	// earliest cached epoch (unclean-election garbage).
	DeleteEpochCleanup
)

func (r DeleteReason) String() string {
	switch r {
	case DeleteRetry:
		return "retry"
	case DeleteLogStart:
		return "log-start"
	case DeleteRetentionTime:
		return "retention-time"
	case DeleteRetentionSize:
		return "retention-size"
	case DeleteEpochCleanup:
		return "epoch-cleanup"
	}
	return "unknown"
}

// ScheduledDelete is one segment an expiration run deletes.
type ScheduledDelete struct {
	Segment SegmentMetadata
	Reason  DeleteReason
}

// RetentionPlan is the retention part of an expiration run.
type RetentionPlan struct {
	// Delete lists the segments to delete, in decision order.
	Delete []ScheduledDelete
	// NewLogStart is the log start to report before deleting, or -1.
	NewLogStart int64
	// StoppedAtCopy is set when a running copy stopped the walk.
	StoppedAtCopy bool
}

// PlanRetention walks the lineage's epochs in order and each epoch's
// segments by start offset, as Kafka's RLMExpirationTask does. A segment
// being copied stops the walk; DELETE_STARTED ones are retried;
// DELETE_FINISHED and already scheduled ones are skipped. Otherwise a
// segment is breached by the log start (all its epochs at or before the
// first lineage epoch and ending below LogStart) or, if within the lineage,
// by time or size; a breached segment raises the new log start to its
// end + 1. The walk goes on while segments are breached or outside the lineage
// and stops at the first valid segment that is not breached.
func PlanRetention(in RetentionInput) RetentionPlan {
	plan := RetentionPlan{NewLogStart: base.UndefinedOffset}
	cleanupUntil, timeOn := in.NowMs-in.RetentionMs, in.RetentionMs > -1 && in.NowMs-in.RetentionMs >= 0
	remaining, sizeOn := retentionBreach(in)
	scheduled := map[SegmentID]bool{}
	raise := func(m *SegmentMetadata) { plan.NewLogStart = max(plan.NewLogStart, m.EndOffset+1) }
	for _, segs := range in.SegmentsByEpoch {
		for i := range segs {
			m := &segs[i]
			if in.BeingCopied != nil && in.BeingCopied(m.SegmentID) {
				plan.StoppedAtCopy = true
				return plan
			}
			switch {
			case m.State == DeleteSegmentStarted:
				if !scheduled[m.SegmentID] {
					scheduled[m.SegmentID] = true
					plan.Delete = append(plan.Delete, ScheduledDelete{*m, DeleteRetry})
				}
				continue
			case m.State == DeleteSegmentFinished, scheduled[m.SegmentID]:
				continue
			}
			reason := DeleteReason(0)
			valid := false
			if breachedByLogStart(m, in.LogStart, in.Lineage) {
				reason = DeleteLogStart
			} else if valid = SegmentWithinLineage(m, in.LogEnd, in.Lineage); valid {
				switch {
				case timeOn && m.MaxTimestampMs <= cleanupUntil:
					reason = DeleteRetentionTime
					remaining = max(0, remaining-m.SizeBytes)
				case sizeOn && remaining > 0 && remaining-m.SizeBytes >= 0:
					reason = DeleteRetentionSize
					remaining -= m.SizeBytes
				}
			}
			if reason != 0 {
				scheduled[m.SegmentID] = true
				plan.Delete = append(plan.Delete, ScheduledDelete{*m, reason})
				raise(m)
			}
			if reason == 0 && valid {
				return plan
			}
		}
	}
	return plan
}

// retentionBreach returns by how many bytes the partition exceeds
// retention.bytes: local-only bytes plus the finished remote segments
// within the lineage, each counted once.
func retentionBreach(in RetentionInput) (int64, bool) {
	if in.RetentionBytes <= -1 {
		return 0, false
	}
	total := in.LocalOnlyBytes
	seen := map[SegmentID]bool{}
	for _, segs := range in.SegmentsByEpoch {
		for i := range segs {
			m := &segs[i]
			if m.State != CopySegmentFinished || seen[m.SegmentID] {
				continue
			}
			if SegmentWithinLineage(m, in.LogEnd, in.Lineage) {
				seen[m.SegmentID] = true
				total += m.SizeBytes
			}
		}
	}
	if total <= in.RetentionBytes {
		return 0, false
	}
	return total - in.RetentionBytes, true
}

// breachedByLogStart: every epoch of the segment (unfiltered) is at or
// before the first lineage epoch, and the segment ends below logStart.
func breachedByLogStart(m *SegmentMetadata, logStart int64, lineage []epochcache.Entry) bool {
	if len(lineage) == 0 || m.EndOffset >= logStart {
		return false
	}
	first := lineage[0].Epoch
	return !slices.ContainsFunc(m.SegmentLeaderEpochs, func(e epochcache.Entry) bool { return e.Epoch > first })
}

// CrossTierGuard limits the epoch-cache cleanup of a consolidating
// partition (Inkless, https://github.com/aiven/inkless/pull/857): only
// segments ending below Start may go, so the classic prefix stays readable
// until retention moves the cross-tier log start past it. Without a known
// start nothing may go.
type CrossTierGuard struct {
	Consolidating bool
	// Start is the cross-tier log start; Known is false when the control
	// plane has none yet.
	Start int64
	Known bool
}

// PlanEpochCleanup picks the segments of remote epochs older than the
// leader's earliest cached epoch whose epochs are all older than it
// (Kafka's RLMExpirationTask epoch-cache cleanup): unclean-election garbage
// no lineage reaches. byEpoch[e] lists the segments of remote epoch e. For
// a consolidating partition only those ending below the cross-tier log
// start qualify: a recreated leader caches only its new epoch until the
// rebuild, and the classic prefix the rebuild reads must survive.
func PlanEpochCleanup(earliest int32, remoteEpochs []int32, byEpoch func(int32) []SegmentMetadata, guard CrossTierGuard) []ScheduledDelete {
	var out []ScheduledDelete
	seen := map[SegmentID]bool{}
	for _, e := range remoteEpochs {
		if e >= earliest {
			continue
		}
		for _, m := range byEpoch(e) {
			if seen[m.SegmentID] || m.State == DeleteSegmentFinished {
				continue
			}
			seen[m.SegmentID] = true
			if slices.ContainsFunc(m.SegmentLeaderEpochs, func(x epochcache.Entry) bool { return x.Epoch >= earliest }) {
				continue
			}
			if guard.Consolidating && (!guard.Known || m.EndOffset >= guard.Start) && !mutation.Disabled(mutation.EpochCleanupGuard) {
				continue
			}
			out = append(out, ScheduledDelete{m, DeleteEpochCleanup})
		}
	}
	return out
}
