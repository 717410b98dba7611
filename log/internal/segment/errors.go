package segment

import (
	"errors"
	"fmt"

	"github.com/tierlog/tierlog/internal/base"
)

// Errors returned by this package. Test for them with errors.Is. Any error
// leaving the package is one of these, wraps one of these, wraps a
// log/record error (ErrTornTail, ErrCorruption), or is an I/O error from the
// vfs.FS wrapped with the operation and file path.
var (
	// ErrClosed is returned by every method called after Close or Delete.
	ErrClosed = base.ErrClosed

	// ErrCorruption marks file contents that fail a format check: a batch
	// header with a bad magic byte or an impossible length found while
	// reading. It is never used for I/O failures. Errors carrying it name
	// the file and byte position.
	ErrCorruption = base.ErrCorruption

	// ErrInvalidArgument means the caller passed a value the API does not
	// accept (bad Options, batches that do not frame, offsets that go
	// backwards). It signals a bug in the caller; nothing is changed.
	ErrInvalidArgument = base.ErrInvalidArgument

	// ErrOffsetOverflow means an offset cannot be stored relative to the
	// segment's base offset: offset - base must lie in [0, MaxInt32].
	// Kafka: LogSegmentOffsetOverflowException. Returned as an
	// *OffsetOverflowError; the log must roll a new segment first.
	ErrOffsetOverflow = errors.New("segment: offset overflows the segment's relative offset range")

	// ErrSegmentTooLarge means an append would grow the .log file beyond
	// MaxInt32 bytes, the largest position an index entry can hold.
	// Kafka bounds segment.bytes to an int for the same reason.
	ErrSegmentTooLarge = errors.New("segment: segment would exceed 2 GiB")

	// ErrIndexFull is returned by an index append when the index holds
	// its capacity (the time index: capacity - 1, see timeIndex). Segment
	// appends never return it: they skip the entry (the index only gets
	// sparser) and ShouldRoll reports the segment full.
	ErrIndexFull = errors.New("segment: index is full")

	// ErrIndexOrder is returned by an index append whose entry does not
	// follow the last one (a non-increasing offset, an older timestamp).
	ErrIndexOrder = errors.New("segment: index entry out of order")
)

// OffsetOverflowError reports an offset that does not fit relative to the
// segment's base offset. errors.Is(err, ErrOffsetOverflow) reports true.
type OffsetOverflowError struct {
	Path       string // the segment's .log file
	BaseOffset int64  // the segment's base offset
	Offset     int64  // the offset that does not fit
}

func (e *OffsetOverflowError) Error() string {
	return fmt.Sprintf("segment: %s: offset %d does not fit relative to base offset %d (delta must be in [0, %d])",
		e.Path, e.Offset, e.BaseOffset, maxRelativeOffset)
}

// Unwrap returns ErrOffsetOverflow.
func (e *OffsetOverflowError) Unwrap() error { return ErrOffsetOverflow }

// TailError says why Recover stopped before the end of the .log file.
// It unwraps to the cause: a *record.TornTailError (errors.Is
// record.ErrTornTail) for a batch cut short by a crash, a
// *record.CorruptBatchError (errors.Is ErrCorruption) for a batch that
// fails its checks, or an ErrCorruption error for a valid batch whose
// offsets cannot belong to this segment.
type TailError struct {
	Path string // the .log file
	Pos  int64  // position of the first byte cut
	Err  error  // the cause
}

func (e *TailError) Error() string {
	return fmt.Sprintf("segment: %s: recovery stopped at position %d: %v", e.Path, e.Pos, e.Err)
}

// Unwrap returns the cause.
func (e *TailError) Unwrap() error { return e.Err }

// Torn reports whether the tail was torn (what a crash mid-append leaves)
// rather than corrupt. Logs cut a torn tail silently and report a corrupt
// one (DESIGN.md section 3).
func (e *TailError) Torn() bool { return !errors.Is(e.Err, ErrCorruption) }

// corruptionf returns an error wrapping ErrCorruption that names the file
// and byte position of the bad data.
func corruptionf(path string, pos int64, format string, args ...any) error {
	return &CorruptionError{Path: path, Pos: pos, Reason: fmt.Sprintf(format, args...)}
}

// invalidArgf returns an error wrapping ErrInvalidArgument.
func invalidArgf(format string, args ...any) error {
	return fmt.Errorf("segment: %s: %w", fmt.Sprintf(format, args...), ErrInvalidArgument)
}

// ioErr wraps an I/O error from the vfs.FS with the operation and path. It
// returns nil for a nil err.
func ioErr(op, path string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("segment: %s %s: %w", op, path, err)
}
