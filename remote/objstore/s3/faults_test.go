package s3_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/internal/harness/s3test"
	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/remote/objstore/s3"
)

// proxied opens a store through the fault proxy, in a fresh bucket that
// the real server created, with fast retries.
func proxied(t *testing.T) (*s3.Store, *s3test.FaultProxy) {
	srv := s3test.Start(t)
	o := srv.StoreOptions(t)
	s3test.OpenStore(t, o) // creates the bucket directly
	p := s3test.NewFaultProxy(t, srv)
	o.Endpoint = p.URL()
	o.RootCAs = p.RootCAs()
	o.CreateBucket = false
	// Below SlowHeadersDelay (2 s), so a held request times out, but not
	// so short that a loaded machine (the race detector on 2 cores) times
	// out the retries too: 500 ms did once (.ci/run, 2026-12-06).
	o.RequestTimeout = time.Second
	o.Retry = s3.RetryPolicy{MaxAttempts: 5, BaseDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond}
	return s3test.OpenStore(t, o), p
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestFaultsRetried: bursts of 5xx, throttling and connection resets
// before the server answers are retried until the operation succeeds.
func TestFaultsRetried(t *testing.T) {
	s, p := proxied(t)
	data := bytes.Repeat([]byte("0123456789abcdef"), 4096)
	for _, f := range []struct {
		name  string
		fault s3test.Fault
	}{{"503-SlowDown", s3test.Status503}, {"500", s3test.Status500}, {"429", s3test.Status429}, {"reset", s3test.Reset}, {"slow-headers", s3test.SlowHeaders}} {
		t.Run(f.name, func(t *testing.T) {
			ctx := testCtx(t)
			key := "retried/" + f.name
			n := 3
			if f.fault == s3test.SlowHeaders {
				n = 1 // each costs a RequestTimeout
			}
			for _, method := range []string{http.MethodPut, http.MethodGet, http.MethodHead, http.MethodDelete} {
				p.SetRule(s3test.FirstN(method, n, f.fault))
				var err error
				switch method {
				case http.MethodPut:
					err = s.Put(ctx, key, bytes.NewReader(data), int64(len(data)), objstore.PutOptions{})
				case http.MethodGet:
					var got []byte
					got, err = objstore.ReadRange(ctx, s, key, 10, 100)
					if err == nil {
						require.Equal(t, data[10:110], got)
					}
					p.SetRule(s3test.FirstN(method, n, f.fault))
					_, _, lerr := s.List(ctx, "retried/", "", 0)
					require.NoError(t, lerr, "list")
				case http.MethodHead:
					var info objstore.ObjectInfo
					info, err = s.Stat(ctx, key)
					require.NoError(t, err, method)
					require.EqualValues(t, len(data), info.Size)
				case http.MethodDelete:
					err = s.Delete(ctx, key)
				}
				require.NoError(t, err, method)
				require.EqualValues(t, n, p.Faults(), method)
			}
		})
	}
}

// TestFaultsGiveUp: a fault that never stops ends in a typed error after
// the policy's attempts; a 403 is not retried at all.
func TestFaultsGiveUp(t *testing.T) {
	s, p := proxied(t)
	ctx := testCtx(t)
	p.SetRule(func(*http.Request, int) s3test.Fault { return s3test.Status503 })
	_, err := s.Stat(ctx, "k")
	require.Error(t, err)
	require.EqualValues(t, 5, p.Faults())
	var oe *objstore.OpError
	require.ErrorAs(t, err, &oe)
	require.Contains(t, err.Error(), "gave up after 5 attempts")

	p.SetRule(func(*http.Request, int) s3test.Fault { return s3test.Status403 })
	_, err = s.Stat(ctx, "k")
	require.Error(t, err)
	require.False(t, objstore.IsNotExist(err))
	require.EqualValues(t, 1, p.Faults(), "4xx is not retried")
}

// TestFaultTruncatedBody: a body cut mid-way is ErrShortRead, never a
// short successful read.
func TestFaultTruncatedBody(t *testing.T) {
	s, p := proxied(t)
	ctx := testCtx(t)
	data := bytes.Repeat([]byte("x"), 256<<10)
	require.NoError(t, s.Put(ctx, "k", bytes.NewReader(data), int64(len(data)), objstore.PutOptions{}))
	p.SetRule(s3test.FirstN(http.MethodGet, 100, s3test.TruncateBody))
	_, err := objstore.ReadAll(ctx, s, "k")
	require.ErrorIs(t, err, objstore.ErrShortRead)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	var oe *objstore.OpError
	require.ErrorAs(t, err, &oe)
	_, err = objstore.ReadRange(ctx, s, "k", 1000, 100_000)
	require.ErrorIs(t, err, objstore.ErrShortRead)
}

// TestFaultWrongContentRange: a response for another range is retried;
// if it persists, the Get fails with ErrSizeMismatch.
func TestFaultWrongContentRange(t *testing.T) {
	s, p := proxied(t)
	ctx := testCtx(t)
	data := []byte("0123456789")
	require.NoError(t, s.Put(ctx, "k", bytes.NewReader(data), 10, objstore.PutOptions{}))

	p.SetRule(s3test.FirstN(http.MethodGet, 1, s3test.WrongRange))
	got, err := objstore.ReadRange(ctx, s, "k", 2, 5)
	require.NoError(t, err)
	require.Equal(t, "23456", string(got))
	require.EqualValues(t, 1, p.Faults())

	p.SetRule(s3test.FirstN(http.MethodGet, 100, s3test.WrongRange))
	_, err = objstore.ReadRange(ctx, s, "k", 2, 5)
	require.ErrorIs(t, err, objstore.ErrSizeMismatch)
	require.EqualValues(t, 5, p.Faults())
}

// TestFaultSlowBody: a body that stalls fails once the caller's deadline
// passes; nothing hangs.
func TestFaultSlowBody(t *testing.T) {
	s, p := proxied(t)
	data := bytes.Repeat([]byte("y"), 64<<10)
	require.NoError(t, s.Put(testCtx(t), "k", bytes.NewReader(data), int64(len(data)), objstore.PutOptions{}))
	p.SetRule(s3test.FirstN(http.MethodGet, 100, s3test.SlowBody))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := objstore.ReadAll(ctx, s, "k")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 5*time.Second)
}

// TestFaultLostPutResponse: the server stores the object but the response
// is lost. A plain Put is retried and succeeds; an IfNoneMatch Put then
// finds its own object and says so with ErrPreconditionFailed.
func TestFaultLostPutResponse(t *testing.T) {
	s, p := proxied(t)
	ctx := testCtx(t)
	data := []byte("segment bytes")

	p.SetRule(s3test.FirstN(http.MethodPut, 1, s3test.LostResponse))
	require.NoError(t, s.Put(ctx, "plain", bytes.NewReader(data), int64(len(data)), objstore.PutOptions{}))
	require.EqualValues(t, 1, p.Faults())

	p.SetRule(s3test.FirstN(http.MethodPut, 1, s3test.LostResponse))
	err := s.Put(ctx, "once", bytes.NewReader(data), int64(len(data)), objstore.PutOptions{IfNoneMatch: true})
	require.ErrorIs(t, err, objstore.ErrPreconditionFailed)
	require.Contains(t, err.Error(), "response was lost")
	got, err := objstore.ReadAll(ctx, s, "once")
	require.NoError(t, err)
	require.Equal(t, data, got)

	// A reader that cannot be rewound gets one attempt: the lost response
	// is a typed error.
	p.SetRule(s3test.FirstN(http.MethodPut, 1, s3test.LostResponse))
	err = s.Put(ctx, "unseekable", io.MultiReader(bytes.NewReader(data)), int64(len(data)), objstore.PutOptions{})
	require.Error(t, err)
	var oe *objstore.OpError
	require.ErrorAs(t, err, &oe)
}

// TestFaultMultipart: failing parts are retried as a whole upload; a
// fault that persists leaves no object.
func TestFaultMultipart(t *testing.T) {
	s, p := proxied(t)
	ctx := testCtx(t)
	const size = 11 << 20
	data := bytes.Repeat([]byte("m"), size)
	opts := objstore.MultipartOptions{PartBytes: 5 << 20, Concurrency: 2}
	p.SetRule(s3test.FirstN(http.MethodPut, 2, s3test.Status503))
	require.NoError(t, objstore.PutLarge(ctx, s, "mp", bytes.NewReader(data), size, opts))
	info, err := s.Stat(ctx, "mp")
	require.NoError(t, err)
	require.EqualValues(t, size, info.Size)

	p.SetRule(func(r *http.Request, _ int) s3test.Fault {
		if r.Method == http.MethodPut && r.URL.Query().Get("partNumber") == "2" {
			return s3test.Reset
		}
		return s3test.Pass
	})
	err = objstore.PutLarge(ctx, s, "mp-failed", bytes.NewReader(data), size, opts)
	require.Error(t, err)
	p.SetRule(nil)
	_, err = s.Stat(ctx, "mp-failed")
	require.True(t, objstore.IsNotExist(err), "%v", err)
}
