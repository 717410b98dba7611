package remote

import (
	"errors"
	"fmt"
	"strconv"
)

// Errors returned by the data plane (StorageManager). Test for them with
// errors.Is. Any error leaving a StorageManager method is one of these,
// wraps one of these, wraps ErrInvalidArgument, or wraps an
// *objstore.OpError from the store (a context error, an injected or
// network failure, objstore.ErrShortRead for a cut body, ...).
var (
	// ErrCorrupt marks remote segment data (a chunk, the manifest or an
	// index) that fails its checksum or a format check, or a manifest that
	// describes another segment. Returned as a *CorruptionError, which
	// also matches ErrCorruption. Never used for an I/O failure: a body the
	// store cuts short is objstore.ErrShortRead, not corruption (except for
	// the manifest, whose length is only known from its own bytes: a cut
	// manifest fails its format check).
	ErrCorrupt = errors.New("remote: corrupt segment data")

	// ErrSegmentDataNotFound means the segment's manifest (or a data object
	// it names) is not in the object store: the copy never finished, or
	// the segment was deleted. Kafka: RemoteResourceNotFoundException. It
	// wraps the store's objstore.ErrNotExist as well.
	ErrSegmentDataNotFound = errors.New("remote: segment data not found")

	// ErrIndexNotFound means FetchIndex asked for an index the segment does
	// not have: the transaction index of a segment without aborted
	// transactions. Kafka: RemoteResourceNotFoundException from
	// fetchIndex(TRANSACTION).
	ErrIndexNotFound = errors.New("remote: index not found")
)

// CorruptionError reports remote segment data that failed a check.
// errors.Is matches ErrCorrupt and ErrCorruption.
type CorruptionError struct {
	SegmentID SegmentID
	// Key is the object holding the bad bytes; empty when they are the
	// locator in the segment's custom metadata.
	Key string
	// Offset is the byte position of the bad data inside the object (the
	// chunk's or index's stored offset), -1 when the object as a whole is
	// bad (a manifest).
	Offset int64
	// Reason says which check failed.
	Reason string
}

func (e *CorruptionError) Error() string {
	where := e.Key
	if where == "" {
		where = "custom metadata"
	}
	if e.Offset >= 0 {
		where += "@" + strconv.FormatInt(e.Offset, 10)
	}
	return fmt.Sprintf("remote: corrupt segment data %s: %s: %s", e.SegmentID, where, e.Reason)
}

// Unwrap returns ErrCorrupt and ErrCorruption.
func (e *CorruptionError) Unwrap() []error { return []error{ErrCorrupt, ErrCorruption} }
