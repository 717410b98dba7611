package remote

import (
	"errors"
	"fmt"

	"github.com/tierlog/tierlog/internal/base"
)

// Errors returned by the metadata part of this package. Test for them with
// errors.Is. Any error leaving a MetadataManager method is one of these,
// wraps one of these, or is an error from Pebble wrapped with the
// operation.
var (
	// ErrClosed is returned by every MetadataManager method called after
	// Close.
	ErrClosed = base.ErrClosed

	// ErrCorruption marks stored metadata that fails its checksum or a
	// format check, or keys that contradict each other. Never used for an
	// I/O failure.
	ErrCorruption = base.ErrCorruption

	// ErrInvalidArgument means the caller passed a value the API refuses.
	// Every *SegmentMetadataError also matches it.
	ErrInvalidArgument = base.ErrInvalidArgument

	// ErrInvalidSegmentMetadata means a SegmentMetadata breaks one of the
	// rules of Kafka's RemoteLogSegmentMetadata (start >= 0, end >= start,
	// epochs non-empty, sorted, starting at the segment start and inside
	// it). Returned as a *SegmentMetadataError.
	ErrInvalidSegmentMetadata = errors.New("remote: invalid segment metadata")

	// ErrInvalidTransition means a segment or partition-delete state change
	// that IsValidTransition does not allow (FINISHED -> STARTED, anything
	// out of DELETE_SEGMENT_FINISHED, add with a state other than
	// COPY_SEGMENT_STARTED). Returned as a *TransitionError. Kafka's cache
	// logs and drops such events; here the caller learns of them and
	// nothing is written.
	ErrInvalidTransition = errors.New("remote: invalid state transition")

	// ErrSegmentNotFound means an update named a segment id the manager
	// does not know: never added, or forgotten after DELETE_SEGMENT_FINISHED.
	// Kafka: RemoteResourceNotFoundException.
	ErrSegmentNotFound = errors.New("remote: segment not found")

	// ErrSegmentIDReused means AddSegment was called again for a segment id
	// still in COPY_SEGMENT_STARTED, with different offsets, epochs, size,
	// timestamps or txn flag. A retry must send the same metadata; a new
	// copy attempt must use a new id (as in Kafka, each attempt has a
	// fresh RemoteLogSegmentId).
	ErrSegmentIDReused = errors.New("remote: segment id reused with different metadata")
)

// SegmentMetadataError reports why a SegmentMetadata is invalid.
// errors.Is matches both ErrInvalidSegmentMetadata and ErrInvalidArgument.
type SegmentMetadataError struct {
	SegmentID SegmentID
	Reason    string
}

func (e *SegmentMetadataError) Error() string {
	return fmt.Sprintf("remote: invalid segment metadata %s: %s", e.SegmentID, e.Reason)
}

// Unwrap returns the two sentinels the error matches.
func (e *SegmentMetadataError) Unwrap() []error {
	return []error{ErrInvalidSegmentMetadata, ErrInvalidArgument}
}

// TransitionError reports a state change that IsValidTransition does not
// allow.
// For a segment, From is NoSegmentState when the segment is unknown (an add);
// for a partition delete, the partition's states are reported instead.
type TransitionError struct {
	// What names the object: a segment id or a partition.
	What string
	// From and To are the states' names (SegmentState or
	// PartitionDeleteState String values).
	From, To string
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("remote: invalid state transition for %s: %s -> %s", e.What, e.From, e.To)
}

// Unwrap returns ErrInvalidTransition.
func (e *TransitionError) Unwrap() error { return ErrInvalidTransition }

// corruptionf returns an error wrapping ErrCorruption.
func corruptionf(format string, args ...any) error {
	return fmt.Errorf("%w: remote metadata: %s", ErrCorruption, fmt.Sprintf(format, args...))
}
