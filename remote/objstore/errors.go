package objstore

import (
	"errors"
	"fmt"
	"io"
)

// Errors returned by stores, always wrapped in an *OpError. Test for them
// with errors.Is (or IsNotExist); never compare error strings.
var (
	// ErrNotExist means no object has the key. S3: 404 NoSuchKey.
	ErrNotExist = errors.New("objstore: object does not exist")

	// ErrPreconditionFailed means a Put with IfNoneMatch found an object
	// already stored under the key; the existing object is unchanged.
	// S3: 412 PreconditionFailed (If-None-Match: *).
	ErrPreconditionFailed = errors.New("objstore: precondition failed: object exists")

	// ErrShortRead means a body ended before the bytes it promised: a Get
	// body shorter than the range asked for, or a Put reader shorter than
	// the declared size. errors.Is(err, io.ErrUnexpectedEOF) also holds.
	ErrShortRead = fmt.Errorf("objstore: short read: %w", io.ErrUnexpectedEOF)

	// ErrSizeMismatch means a body held more bytes than promised: a Put
	// reader longer than the declared size, or a Get body longer than the
	// range asked for (a server that ignored or misread the range).
	ErrSizeMismatch = errors.New("objstore: body longer than declared size")

	// ErrInvalidRange means a Get range does not lie within the object:
	// offset beyond the size, or offset+length beyond the size.
	// S3: 416 InvalidRange.
	ErrInvalidRange = errors.New("objstore: invalid range")

	// ErrInvalidKey means a key or a list prefix breaks the rules of
	// ValidateKey or ValidatePrefix.
	ErrInvalidKey = errors.New("objstore: invalid key")

	// ErrInvalidArgument means a caller passed a value the API does not
	// accept: a negative size, a negative offset, a length below -1.
	ErrInvalidArgument = errors.New("objstore: invalid argument")

	// ErrClosed is returned by every method called after the store's Close.
	ErrClosed = errors.New("objstore: closed")
)

// Operation names used in OpError.Op.
const (
	OpPut          = "put"
	OpPutMultipart = "put-multipart"
	OpGet          = "get"
	OpStat         = "stat"
	OpList         = "list"
	OpDelete       = "delete"
)

// OpError records a failed store operation and the key (or, for list, the
// prefix) it was applied to. It unwraps to the cause.
type OpError struct {
	Op  string // OpPut, OpGet, ...
	Key string // the object key, or the prefix for OpList
	Err error  // the cause: a sentinel of this package, a context error, an I/O error
}

func (e *OpError) Error() string {
	return fmt.Sprintf("%s %q: %v", e.Op, e.Key, e.Err)
}

func (e *OpError) Unwrap() error { return e.Err }

// NewOpError returns nil when err is nil, err itself when it already is an
// *OpError, and an *OpError for op and key otherwise. Store
// implementations use it so that every error they return names the
// operation exactly once.
func NewOpError(op, key string, err error) error {
	if err == nil {
		return nil
	}
	var oe *OpError
	if errors.As(err, &oe) {
		return err
	}
	return &OpError{Op: op, Key: key, Err: err}
}

// IsNotExist reports whether err says the object does not exist.
func IsNotExist(err error) bool { return errors.Is(err, ErrNotExist) }

// IsPreconditionFailed reports whether err says a Put with IfNoneMatch
// found an existing object.
func IsPreconditionFailed(err error) bool { return errors.Is(err, ErrPreconditionFailed) }
