package remote

import (
	"fmt"
	"strings"

	"github.com/tierlog/tierlog/epochcache"
)

// The per-run results of the manager's tasks: what one run of RunCopy,
// RunExpiration or RunFollower did and why it stopped. They are returned
// beside the error, also when the run fails partway, and agree with the
// ManagerListener events of the same run: each CopyResult.Copied segment
// had a CopyStart and a CopyEnd event, CopyResult.Failed a CopyStart and a
// CopyError, each ExpirationResult.Deleted segment a SegmentDeleted event
// with the same reason. A task the Manager runs on its own timer
// (TaskInterval > 0) logs its result at debug level.

// CopyStop says why a copy run uploaded no further segment.
type CopyStop int8

const (
	// CopyCaughtUp: every rolled segment whose records are all below the
	// last stable offset is in remote storage; the rest is the active
	// segment or not yet stable.
	CopyCaughtUp CopyStop = iota + 1
	// CopyTruncated: the log truncated during the lookup of the copied
	// offset or during an upload; the next run derives the copied offset
	// again.
	CopyTruncated
	// CopyStalled: the run stopped at a corrupt local segment an earlier
	// run refused (ErrCopyStalled); Failed is nil.
	CopyStalled
	// CopyFailed: the run failed (the returned error): a copy (Failed is
	// set), a metadata write or a read of the log.
	CopyFailed
	// CopyCancelled: the run's context ended or the task is cancelled
	// (ErrTaskCancelled).
	CopyCancelled
)

func (s CopyStop) String() string {
	switch s {
	case CopyCaughtUp:
		return "caught-up"
	case CopyTruncated:
		return "truncated"
	case CopyStalled:
		return "stalled"
	case CopyFailed:
		return "failed"
	case CopyCancelled:
		return "cancelled"
	}
	return fmt.Sprintf("CopyStop(%d)", int8(s))
}

// CopyResult is what one run of a leader's copy task did (RunCopy).
type CopyResult struct {
	// DanglingDeleted lists the COPY_SEGMENT_STARTED segments that an
	// earlier leader or a crashed copy left and the run deleted. Only a
	// task's first run looks for them.
	DanglingDeleted []SegmentMetadata
	// LogStartReported is the log start the run reported from the remote
	// tier (Kafka: findLogStartOffset), -1 when it reported none. Only a
	// task's first run reports it.
	LogStartReported int64
	// LastStableOffset is the log's last stable offset the run copied
	// below, -1 when the run did not get that far.
	LastStableOffset int64
	// Copied lists the segments the run uploaded and committed
	// (COPY_SEGMENT_FINISHED), in offset order.
	Copied []SegmentMetadata
	// Failed is the segment whose copy failed, nil when none. Its
	// metadata was deleted again (or is left DELETE_SEGMENT_STARTED for
	// the expiration task to retry).
	Failed *SegmentMetadata
	// Stop says why the run uploaded no further segment; StoppedAt is
	// the base offset of the local segment it stopped at (the failed or
	// stalled one), -1 when none.
	Stop      CopyStop
	StoppedAt int64
	// CopiedOffset is the copy progress after the run: the highest offset
	// of the log's lineage in remote storage, -1 when none or not known
	// (CopyTruncated: the next run derives it again).
	CopiedOffset int64
}

func newCopyResult() CopyResult {
	return CopyResult{LogStartReported: -1, LastStableOffset: -1, StoppedAt: -1, CopiedOffset: -1}
}

func (r CopyResult) String() string {
	var b strings.Builder
	for _, s := range r.DanglingDeleted {
		fmt.Fprintf(&b, "deleted unfinished copy %s\n", formatSegmentRange(s))
	}
	if r.LogStartReported >= 0 {
		fmt.Fprintf(&b, "reported log start %d\n", r.LogStartReported)
	}
	for _, s := range r.Copied {
		fmt.Fprintf(&b, "copied %s\n", formatSegmentRange(s))
	}
	if r.Failed != nil {
		fmt.Fprintf(&b, "failed %s\n", formatSegmentRange(*r.Failed))
	}
	fmt.Fprintf(&b, "stop: %s", r.Stop)
	if r.StoppedAt >= 0 {
		fmt.Fprintf(&b, " at segment %d", r.StoppedAt)
	}
	fmt.Fprintf(&b, " (copied offset %d, last stable offset %d)", r.CopiedOffset, r.LastStableOffset)
	return b.String()
}

// FailedDelete is a deletion an expiration run attempted and that failed.
// The segment stays DELETE_SEGMENT_STARTED (or as it was, if even that
// write failed) and the next run retries it.
type FailedDelete struct {
	Delete ScheduledDelete
	Err    error
}

// ExpirationResult is what one run of a leader's expiration task did
// (RunExpiration).
type ExpirationResult struct {
	// Listed is the number of remote segments of the partition the run
	// decided over (one listing, any state).
	Listed int
	// LogStart is the reclaim floor the run used: the log's log start, or
	// for a consolidating partition the cross-tier log start; -1 when the
	// run did not get that far.
	LogStart int64
	// NewLogStart is the log start the run reported before deleting (one
	// past the last segment retention breached), -1 when none.
	NewLogStart int64
	// StoppedAtCopy: a running copy stopped the retention walk there.
	StoppedAtCopy bool
	// Deleted lists the segments the run deleted (DELETE_SEGMENT_FINISHED)
	// and why, in deletion order: the retention walk's, the retried
	// DELETE_SEGMENT_STARTED ones, then the epoch cleanup's.
	Deleted []ScheduledDelete
	// Failed lists the deletions that failed; their errors are joined in
	// the returned error.
	Failed []FailedDelete
}

func newExpirationResult() ExpirationResult {
	return ExpirationResult{LogStart: -1, NewLogStart: -1}
}

func (r ExpirationResult) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "listed %d, log start %d, new log start %d", r.Listed, r.LogStart, r.NewLogStart)
	if r.StoppedAtCopy {
		b.WriteString(", stopped at a running copy")
	}
	for _, d := range r.Deleted {
		fmt.Fprintf(&b, "\ndeleted %s, %d bytes (%s)", formatSegmentRange(d.Segment), d.Segment.SizeBytes, d.Reason)
	}
	for _, f := range r.Failed {
		fmt.Fprintf(&b, "\nfailed %s, %d bytes (%s): %v", formatSegmentRange(f.Delete.Segment), f.Delete.Segment.SizeBytes,
			f.Delete.Reason, f.Err)
	}
	return b.String()
}

// FollowerResult is what one run of a follower's task did (RunFollower).
type FollowerResult struct {
	// HighestRemoteOffset is the highest offset of the log's lineage the
	// leader tiered, -1 when none (or the run did not get that far).
	HighestRemoteOffset int64
	// Dropped: a truncation during the lookup fenced the install; the
	// log's highest offset in remote storage is unchanged.
	Dropped bool
}

func (r FollowerResult) String() string {
	if r.Dropped {
		return fmt.Sprintf("highest remote offset %d dropped: truncated during the lookup", r.HighestRemoteOffset)
	}
	return fmt.Sprintf("highest remote offset %d", r.HighestRemoteOffset)
}

// formatSegmentRange is "[start, end] epochs" of a segment (offsets
// inclusive).
func formatSegmentRange(s SegmentMetadata) string {
	return fmt.Sprintf("[%d, %d] %s", s.StartOffset, s.EndOffset, epochcache.FormatEntries(s.SegmentLeaderEpochs))
}
