package log

import (
	"errors"
	"fmt"

	"github.com/tierlog/tierlog/log/internal/segment"
)

// CorruptionError reports damaged data found where the log expected
// records: a read or a timestamp lookup of a segment whose batches run
// past its end, whose .log is shorter than its index says (a zero-length
// .log beside a non-empty .index), or whose bytes fail a format check
// (with Options.VerifyReads, a batch failing its CRC); or the same damage
// noticed by Open's checks of the segments it trusts. A read never skips
// such a region to serve the next segment's records: it returns this
// error, and the log counts it (Metrics.DamagedReads). errors.Is(err,
// ErrCorruption) reports true. Kafka: CORRUPT_MESSAGE (2).
type CorruptionError struct {
	// Segment is the base offset of the damaged segment.
	Segment int64
	// Offset is the offset a read asked for, or, from Open's checks and
	// timestamp lookups, the segment's base offset.
	Offset int64
	// Position is the byte position of the damage in the segment's .log,
	// -1 if not known.
	Position int64
	// Err is the damage found; it wraps ErrCorruption.
	Err error
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("log: damaged segment %d at offset %d (position %d): %v",
		e.Segment, e.Offset, e.Position, e.Err)
}

// Unwrap returns the damage found, which wraps ErrCorruption.
func (e *CorruptionError) Unwrap() error { return e.Err }

// newCorruptionError wraps a segment's corruption error with the offsets.
func newCorruptionError(segmentBase, offset int64, err error) *CorruptionError {
	pos := int64(-1)
	var ce *segment.CorruptionError
	if errors.As(err, &ce) {
		pos = ce.Pos
	}
	return &CorruptionError{Segment: segmentBase, Offset: offset, Position: pos, Err: err}
}

// readFailed is what a read returns for an error from segment s: damage
// becomes a counted *CorruptionError, anything else (an I/O error, a
// closed segment) passes unchanged.
func (l *UnifiedLog) readFailed(s *segmentRef, offset int64, err error) error {
	if !isCorruption(err) {
		return err
	}
	l.counters.damagedReads.Add(1)
	return newCorruptionError(s.BaseOffset(), offset, err)
}

// damagedRead is what a verifying read (Options.VerifyReads) returns when
// the first batch it would return, at position pos of segment s, fails
// its checks: a counted *CorruptionError.
func (l *UnifiedLog) damagedRead(s *segmentRef, offset, pos int64, err error) error {
	l.counters.damagedReads.Add(1)
	return &CorruptionError{Segment: s.BaseOffset(), Offset: offset, Position: pos, Err: err}
}
