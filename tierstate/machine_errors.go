package tierstate

import (
	"context"
	"errors"
	"fmt"

	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/remote"
)

// Errors of the rebuild (Machine.Rebuild). Every error Rebuild returns is a
// *RebuildError that unwraps to one of these, to an error of a source
// (the leader endpoint, the remote metadata or data, the local log), or to
// the context's error.
var (
	// ErrRemoteStorageNotEnabled: the local log is not tiered, so it cannot
	// hold a log start below its local log start. Kafka:
	// RemoteStorageException (the fetcher backs off and retries).
	ErrRemoteStorageNotEnabled = errors.New("tierstate: remote storage not enabled on the log")

	// ErrRemoteStorageNotReady: the remote log manager has not loaded the
	// partition's metadata yet. Retriable. Kafka:
	// RemoteStorageNotReadyException.
	ErrRemoteStorageNotReady = errors.New("tierstate: remote storage not ready for the partition")

	// ErrRemoteSegmentNotFound: no finished remote segment holds the
	// target offset in the target epoch. Returned as a
	// *SegmentNotFoundError. Kafka: RemoteStorageException ("remote log
	// segment metadata is not found"); the fetcher backs off and retries
	// (the copy may not have finished yet).
	ErrRemoteSegmentNotFound = errors.New("tierstate: remote segment not found")

	// ErrRemoteEpochsInconsistent: the segment's leader-epoch checkpoint
	// does not map the target offset to the epoch the segment was found
	// in, or has no entry below the next offset. The remote data is not
	// what the metadata says; nothing is restored from it.
	ErrRemoteEpochsInconsistent = errors.New("tierstate: remote leader-epoch checkpoint inconsistent with its segment")

	// ErrLeaderLogStartBeyondNextOffset: the leader's log start offset is
	// above the offset the rebuild would start the log at: the records
	// the segment covers are deleted. Wraps ErrOffsetOutOfRange; the next
	// fetch is answered OFFSET_OUT_OF_RANGE and resets the log [INF].
	ErrLeaderLogStartBeyondNextOffset = fmt.Errorf("tierstate: leader log start above the rebuild's next offset: %w", base.ErrOffsetOutOfRange)

	// ErrOffsetOutOfRange is base.ErrOffsetOutOfRange.
	ErrOffsetOutOfRange = base.ErrOffsetOutOfRange
)

// RebuildStep names the step of a rebuild that failed.
type RebuildStep string

const (
	StepPreconditions     RebuildStep = "preconditions"
	StepEarliestLocal     RebuildStep = "fetch-earliest-local-offset"
	StepEpochEndOffset    RebuildStep = "fetch-epoch-end-offset"
	StepSegmentLookup     RebuildStep = "segment-lookup"
	StepFetchLeaderEpochs RebuildStep = "fetch-leader-epochs"
	StepPlan              RebuildStep = "plan"
	StepFetchSnapshot     RebuildStep = "fetch-producer-snapshot"
	StepRestoreLocalLog   RebuildStep = "restore-local-log"
)

// RebuildError reports a failed rebuild: which step, what it looked for,
// and whether the local log was touched. errors.Is and errors.As see the
// cause through Unwrap.
type RebuildError struct {
	Partition remote.TopicIDPartition
	Mode      RebuildMode
	Step      RebuildStep
	// TargetEpoch and TargetOffset are the record the rebuild looks up, or
	// record.UndefinedEpoch and record.UndefinedOffset before they are known.
	TargetEpoch  int32
	TargetOffset int64
	// LocalLogChanged is false for every step before StepRestoreLocalLog:
	// all remote reads happen before the local log is touched. A
	// failed restore left the log refusing writes (an I/O failure); it
	// must be reopened, which shows the old log or an empty one that the
	// next fetch rebuilds again.
	LocalLogChanged bool
	Err             error
}

func (e *RebuildError) Error() string {
	target := ""
	if e.TargetOffset != base.UndefinedOffset || e.TargetEpoch != base.UndefinedEpoch {
		target = fmt.Sprintf(" (target %d@%d)", e.TargetEpoch, e.TargetOffset)
	}
	return fmt.Sprintf("tierstate: %s rebuild of %s failed at %s%s: %v", e.Mode, e.Partition, e.Step, target, e.Err)
}

func (e *RebuildError) Unwrap() error { return e.Err }

// SegmentNotFoundError is ErrRemoteSegmentNotFound with the lookup's
// epoch and offset.
type SegmentNotFoundError struct {
	Partition remote.TopicIDPartition
	Epoch     int32
	Offset    int64
}

func (e *SegmentNotFoundError) Error() string {
	return fmt.Sprintf("tierstate: no finished remote segment of %s holds offset %d in leader epoch %d", e.Partition, e.Offset, e.Epoch)
}

func (e *SegmentNotFoundError) Unwrap() error { return ErrRemoteSegmentNotFound }

// FetcherAction is what a fetcher does with a partition whose rebuild
// failed (Kafka: AbstractFetcherThread's handling of the tier state
// machine's exceptions).
type FetcherAction int8

const (
	// ActionNone: no error.
	ActionNone FetcherAction = iota
	// ActionRetry: back off (replica.fetch.backoff.ms) and fetch again;
	// the next OFFSET_MOVED_TO_TIERED_STORAGE restarts the rebuild. Every
	// remote and leader error but fencing: not ready, segment not found,
	// unknown leader epoch, not leader, I/O of the remote tier.
	ActionRetry
	// ActionMarkFailed: the leader epoch is fenced; remove the partition
	// from the fetcher and mark it failed.
	ActionMarkFailed
	// ActionStop: the context was cancelled (the fetcher is stopping).
	ActionStop
	// ActionOffline: the local log failed during the restore and refuses
	// writes; handle it as a storage error (reopen or mark the log
	// directory offline).
	ActionOffline
)

func (a FetcherAction) String() string {
	switch a {
	case ActionNone:
		return "none"
	case ActionRetry:
		return "retry"
	case ActionMarkFailed:
		return "mark-failed"
	case ActionStop:
		return "stop"
	case ActionOffline:
		return "offline"
	}
	return fmt.Sprintf("FetcherAction(%d)", int8(a))
}

// RebuildAction classifies an error of Machine.Rebuild.
func RebuildAction(err error) FetcherAction {
	var re *RebuildError
	switch {
	case err == nil:
		return ActionNone
	case errors.Is(err, context.Canceled):
		return ActionStop
	case errors.As(err, &re) && re.LocalLogChanged:
		return ActionOffline
	case errors.Is(err, base.ErrFencedEpoch):
		return ActionMarkFailed
	}
	return ActionRetry
}
