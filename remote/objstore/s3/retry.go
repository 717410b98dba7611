package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/tierlog/tierlog/remote/objstore"
)

// errBadResponse marks a response that contradicts the request (a wrong
// Content-Range): retried, then reported wrapping ErrSizeMismatch.
var errBadResponse = errors.New("s3: response does not match the request")

// retry runs attempt until it succeeds, fails with an error not worth
// retrying, the policy's attempts run out, or ctx ends. attempt receives
// its number, 0 first.
func (s *Store) retry(ctx context.Context, attempt func(ctx context.Context, n int) error) error {
	return s.retryN(ctx, s.opts.Retry.MaxAttempts, attempt)
}

// retryN is retry with at most attempts attempts.
func (s *Store) retryN(ctx context.Context, attempts int, attempt func(ctx context.Context, n int) error) error {
	var err error
	for n := range attempts {
		if n > 0 {
			if werr := s.sleep(ctx, n); werr != nil {
				return fmt.Errorf("%w (after %d attempts, last: %v)", werr, n, err)
			}
		}
		err = attempt(ctx, n)
		if err == nil || !s.retryable(ctx, err) {
			return err
		}
	}
	if attempts > 1 {
		return fmt.Errorf("%w (gave up after %d attempts)", err, attempts)
	}
	return err
}

// sleep waits the backoff before attempt n (n >= 1): BaseDelay * 2^(n-1),
// capped at MaxDelay, minus a random jitter of up to half of it.
func (s *Store) sleep(ctx context.Context, n int) error {
	d := s.opts.Retry.BaseDelay
	for i := 1; i < n && d < s.opts.Retry.MaxDelay; i++ {
		d *= 2
	}
	d = min(d, s.opts.Retry.MaxDelay)
	if half := int64(d / 2); half > 0 {
		d -= time.Duration(rand.Int64N(half + 1))
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// retryable classifies a failed attempt; ctx is the caller's context.
func (s *Store) retryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false // the caller gave up
	}
	switch {
	case errors.Is(err, errBadResponse):
		return true
	case errors.Is(err, errReader),
		errors.Is(err, objstore.ErrShortRead), errors.Is(err, objstore.ErrSizeMismatch),
		errors.Is(err, objstore.ErrInvalidRange), errors.Is(err, objstore.ErrInvalidKey),
		errors.Is(err, objstore.ErrInvalidArgument), errors.Is(err, objstore.ErrNotExist),
		errors.Is(err, objstore.ErrPreconditionFailed), errors.Is(err, objstore.ErrClosed):
		return false
	}
	var er minio.ErrorResponse
	if errors.As(err, &er) && er.StatusCode != 0 {
		if s.opts.PathSafeKeys && (er.Code == "ExistingObjectIsDirectory" || er.Code == "ObjectParentIsFile") {
			// With path-safe names no object name is a directory and no
			// directory an object, so on a file-backed server these 409s
			// are a race, not a conflict: versitygw's posix backend creates
			// the parent directories of a put, and a concurrent delete of
			// a sibling removes them again (now empty) before the put
			// links its file. A retry creates them again.
			return true
		}
		return retryableStatus(er.StatusCode, er.Code)
	}
	// An attempt's own timeout (RequestTimeout), not the caller's.
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	if errors.Is(err, context.Canceled) {
		return false
	}
	return isConnError(err)
}

func retryableStatus(status int, code string) bool {
	switch code {
	case "SlowDown", "Throttling", "ThrottlingException", "RequestThrottled",
		"RequestTimeout", "InternalError", "ServiceUnavailable", "RequestLimitExceeded":
		return true
	}
	return status >= 500 || status == http.StatusTooManyRequests || status == http.StatusRequestTimeout
}

// isConnError reports whether err is a transport failure: the request may
// or may not have reached the server, and a retry is the answer.
func isConnError(err error) bool {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	// net/http reports some transport failures only as text.
	msg := err.Error()
	for _, s := range []string{"connection reset", "broken pipe", "server closed", "EOF", "transport connection broken"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// mayHaveApplied reports whether a failed attempt may still have been
// applied by the server: its response was lost (a transport error or a
// 5xx after the request was sent).
func mayHaveApplied(err error) bool {
	var er minio.ErrorResponse
	if errors.As(err, &er) && er.StatusCode != 0 {
		return er.StatusCode >= 500
	}
	return isConnError(err) || errors.Is(err, context.DeadlineExceeded)
}
