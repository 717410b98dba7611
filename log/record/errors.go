package record

import (
	"errors"
	"fmt"

	"github.com/tierlog/tierlog/internal/base"
)

// Errors returned by this package. Test for them with errors.Is; the typed
// errors below carry the position and offsets and unwrap to one of these.
var (
	// ErrCorruption marks bytes that fail a format check: a bad CRC, a
	// magic byte other than 2, an impossible size or header field, a
	// malformed record, a compressed blob the codec rejects. Kafka:
	// CORRUPT_MESSAGE (2). Returned as a *CorruptBatchError.
	ErrCorruption = base.ErrCorruption

	// ErrTornTail means a batch declares more bytes than the input holds:
	// the tail of a log that was being written when the process stopped.
	// It deliberately does not wrap ErrCorruption: recovery truncates a
	// torn tail silently but reports corruption. Returned as a
	// *TornTailError.
	ErrTornTail = errors.New("record: torn tail")

	// ErrDecompressedTooLarge means a compressed batch expands beyond the
	// configured decompression limit. The bytes may be a valid batch; the
	// limit protects the reader's memory (a zip bomb never becomes an
	// out-of-memory crash). Returned as a *DecompressedSizeError.
	ErrDecompressedTooLarge = errors.New("record: decompressed batch too large")

	// ErrInvalidArgument means the caller passed a value the API does not
	// accept: an empty builder, an unknown codec, a bad compression level.
	ErrInvalidArgument = base.ErrInvalidArgument
)

// CorruptBatchError reports a batch that fails a format check.
// errors.Is(err, ErrCorruption) reports true for it; when the check failed
// inside a codec, errors.Is and errors.As also reach the codec's error.
type CorruptBatchError struct {
	// Pos is the byte position of the batch's first byte: relative to the
	// start of the Scanner's input plus ScannerOptions.StartPos, or 0 for
	// a batch checked on its own (Batch.Validate, Iter).
	Pos int64
	// BaseOffset is the batch's base offset, or UndefinedOffset when
	// fewer than 8 bytes were available to read it.
	BaseOffset int64
	// Reason says what was wrong, for humans.
	Reason string
	// Err is the codec's error when decompression failed, else nil.
	Err error
}

func (e *CorruptBatchError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("record: corrupt batch at position %d (base offset %d): %s: %v",
			e.Pos, e.BaseOffset, e.Reason, e.Err)
	}
	return fmt.Sprintf("record: corrupt batch at position %d (base offset %d): %s",
		e.Pos, e.BaseOffset, e.Reason)
}

// Unwrap returns ErrCorruption and, if set, the codec's error.
func (e *CorruptBatchError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrCorruption, e.Err}
	}
	return []error{ErrCorruption}
}

// TornTailError reports a batch whose declared size runs past the end of
// the input. errors.Is(err, ErrTornTail) reports true for it.
type TornTailError struct {
	// Pos is the byte position where the torn batch starts (see
	// CorruptBatchError.Pos).
	Pos int64
	// Declared is the batch size the length field declares (LogOverhead +
	// Length), or -1 when fewer than LogOverhead bytes remain, so that
	// the length field itself is cut.
	Declared int
	// Available is the number of bytes from Pos to the end of the input.
	Available int
}

func (e *TornTailError) Error() string {
	if e.Declared < 0 {
		return fmt.Sprintf("record: torn tail at position %d: %d bytes, too few for a batch length",
			e.Pos, e.Available)
	}
	return fmt.Sprintf("record: torn tail at position %d: batch declares %d bytes, %d available",
		e.Pos, e.Declared, e.Available)
}

// Unwrap returns ErrTornTail.
func (e *TornTailError) Unwrap() error { return ErrTornTail }

// DecompressedSizeError reports a compressed batch that expands beyond the
// decompression limit. errors.Is(err, ErrDecompressedTooLarge) reports true
// for it.
type DecompressedSizeError struct {
	// BaseOffset is the batch's base offset, or UndefinedOffset when
	// the data was not decompressed through an Iter.
	BaseOffset int64
	// Compression is the batch's codec.
	Compression Compression
	// Limit is the decompression limit in bytes that was exceeded.
	Limit int
}

func (e *DecompressedSizeError) Error() string {
	return fmt.Sprintf("record: %s batch (base offset %d) decompresses to more than %d bytes",
		e.Compression, e.BaseOffset, e.Limit)
}

// Unwrap returns ErrDecompressedTooLarge.
func (e *DecompressedSizeError) Unwrap() error { return ErrDecompressedTooLarge }

// corruptf returns a *CorruptBatchError at position 0 (the caller rebases
// it) with a formatted reason.
func corruptf(baseOffset int64, format string, args ...any) *CorruptBatchError {
	return &CorruptBatchError{BaseOffset: baseOffset, Reason: fmt.Sprintf(format, args...)}
}

// invalidArgf returns an error wrapping ErrInvalidArgument.
func invalidArgf(format string, args ...any) error {
	return fmt.Errorf("record: %s: %w", fmt.Sprintf(format, args...), ErrInvalidArgument)
}
