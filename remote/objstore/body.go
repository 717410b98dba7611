package objstore

import (
	"context"
	"fmt"
	"io"
)

// NewExactReader returns a reader that yields exactly n bytes of r and then
// io.EOF. If r ends before n bytes, Read fails with an error wrapping
// ErrShortRead; if r holds more than n bytes, the Read that would deliver
// the last of the n bytes fails with ErrSizeMismatch instead (so r must
// reach io.EOF right after n bytes, without waiting for its consumer). Each Read first checks ctx (nil means none), so a
// body or an upload stops once its context is done. Stores wrap both Put
// readers and Get bodies in it; what is the source's own error is
// returned as is.
func NewExactReader(ctx context.Context, r io.Reader, n int64) io.Reader {
	return &exactReader{ctx: ctx, r: r, remaining: n, size: n}
}

type exactReader struct {
	ctx       context.Context
	r         io.Reader
	remaining int64
	size      int64
	err       error // sticky
}

func (e *exactReader) Read(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	if e.ctx != nil {
		if err := e.ctx.Err(); err != nil {
			e.err = err
			return 0, err
		}
	}
	if e.remaining == 0 {
		e.err = e.checkEnd()
		return 0, e.err
	}
	if int64(len(p)) > e.remaining {
		p = p[:e.remaining]
	}
	n, err := e.r.Read(p)
	e.remaining -= int64(n)
	switch {
	case err == io.EOF && e.remaining > 0:
		e.err = fmt.Errorf("%w: body ended after %d of %d bytes", ErrShortRead, e.size-e.remaining, e.size)
		return n, e.err
	case err == io.EOF:
		// Exactly n bytes and the source says it is done.
		e.err = io.EOF
		return n, nil
	case err != nil:
		e.err = err
		return n, err
	case e.remaining == 0:
		// The last expected bytes: make sure the source ends here before
		// handing them over, so that an uploader that stops reading at
		// exactly n bytes (an HTTP client sending Content-Length bytes)
		// never completes an object from a longer reader.
		if err := e.checkEnd(); err != io.EOF {
			e.err = err
			return 0, err
		}
		e.err = io.EOF
	}
	return n, nil
}

// checkEnd reads past the last expected byte to make sure the source ends.
func (e *exactReader) checkEnd() error {
	var one [1]byte
	for range 100 {
		m, err := e.r.Read(one[:])
		if m > 0 {
			return fmt.Errorf("%w: more than %d bytes", ErrSizeMismatch, e.size)
		}
		if err == io.EOF {
			return io.EOF
		}
		if err != nil {
			return err
		}
	}
	return io.ErrNoProgress
}

// NewExactBody is NewExactReader for a Get body: Close closes rc.
func NewExactBody(ctx context.Context, rc io.ReadCloser, n int64) io.ReadCloser {
	return &exactBody{Reader: NewExactReader(ctx, rc, n), c: rc, size: n}
}

type exactBody struct {
	io.Reader
	c    io.Closer
	size int64 // ReadAll allocates this much up front
}

func (b *exactBody) Close() error { return b.c.Close() }
