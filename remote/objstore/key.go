package objstore

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxKeyLen is the longest key in bytes, S3's limit.
const MaxKeyLen = 1024

// ValidateKey returns nil when key is a valid object key and an error
// wrapping ErrInvalidKey saying why otherwise. A valid key is valid UTF-8,
// 1 to MaxKeyLen bytes long, holds no NUL byte, does not start with '/',
// and every '/'-separated segment is non-empty and neither "." nor "..".
// (So a key does not end in '/' and holds no "//".)
func ValidateKey(key string) error {
	if err := validateCommon(key); err != nil {
		return err
	}
	if key == "" {
		return fmt.Errorf("%w: empty", ErrInvalidKey)
	}
	for seg := range strings.SplitSeq(key, "/") {
		switch seg {
		case "":
			return fmt.Errorf("%w: empty segment in %q", ErrInvalidKey, key)
		case ".", "..":
			return fmt.Errorf("%w: segment %q in %q", ErrInvalidKey, seg, key)
		}
	}
	return nil
}

// ValidatePrefix returns nil when prefix may be passed to List: empty, or
// valid UTF-8 up to MaxKeyLen bytes without NUL and not starting with '/'.
// A prefix need not be a key ("topic-0/000" is fine).
func ValidatePrefix(prefix string) error {
	return validateCommon(prefix)
}

func validateCommon(s string) error {
	switch {
	case len(s) > MaxKeyLen:
		return fmt.Errorf("%w: %d bytes, more than %d", ErrInvalidKey, len(s), MaxKeyLen)
	case strings.HasPrefix(s, "/"):
		return fmt.Errorf("%w: leading '/' in %q", ErrInvalidKey, s)
	case strings.IndexByte(s, 0) >= 0:
		return fmt.Errorf("%w: NUL byte in %q", ErrInvalidKey, s)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: not valid UTF-8: %q", ErrInvalidKey, s)
	}
	return nil
}

// ValidateRange checks a Get range against an object of size bytes and
// returns the number of bytes the range covers. The error wraps
// ErrInvalidArgument (negative offset, length below -1) or ErrInvalidRange
// (past the end). Stores that know the size up front use it so that every
// store draws the same boundaries.
func ValidateRange(offset, length, size int64) (int64, error) {
	if err := ValidateRangeArgs(offset, length); err != nil {
		return 0, err
	}
	if offset > size {
		return 0, fmt.Errorf("%w: offset %d beyond size %d", ErrInvalidRange, offset, size)
	}
	if length == -1 {
		return size - offset, nil
	}
	if length > size-offset {
		return 0, fmt.Errorf("%w: [%d, %d) beyond size %d", ErrInvalidRange, offset, offset+length, size)
	}
	return length, nil
}

// ValidateRangeArgs checks a Get range before the size is known.
func ValidateRangeArgs(offset, length int64) error {
	if offset < 0 || length < -1 {
		return fmt.Errorf("%w: range offset %d length %d", ErrInvalidArgument, offset, length)
	}
	return nil
}
