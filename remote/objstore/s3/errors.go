package s3

import (
	"context"
	"errors"
	"io"
	"strings"

	"github.com/tierlog/tierlog/remote/objstore"
)

// redactedError is an error whose message had credentials removed. It
// does not unwrap to the original (whose message holds them); errors.Is
// still finds the sentinels and context errors the original wrapped.
type redactedError struct {
	msg string
	is  []error
}

func (e *redactedError) Error() string { return e.msg }

func (e *redactedError) Is(target error) bool {
	for _, err := range e.is {
		if target == err {
			return true
		}
	}
	return false
}

// classes are the errors a redactedError keeps answering errors.Is for.
var classes = []error{
	objstore.ErrNotExist, objstore.ErrPreconditionFailed, objstore.ErrShortRead,
	objstore.ErrSizeMismatch, objstore.ErrInvalidRange, objstore.ErrInvalidKey,
	objstore.ErrInvalidArgument, objstore.ErrClosed, context.Canceled,
	context.DeadlineExceeded, io.ErrUnexpectedEOF, errReader, errBadResponse, ErrChecksum,
}

// redact returns err, or a redactedError when its message holds one of
// o's credentials. minio-go signs requests and never sends or prints the
// secret; this is the second line of defence.
func redact(o *Options, err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	out := msg
	for _, secret := range []string{o.SecretAccessKey, o.SessionToken, o.AccessKeyID} {
		if len(secret) >= 4 {
			out = strings.ReplaceAll(out, secret, "<redacted>")
		}
	}
	if out == msg {
		return err
	}
	r := &redactedError{msg: out}
	for _, c := range classes {
		if errors.Is(err, c) {
			r.is = append(r.is, c)
		}
	}
	return r
}
