package s3_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/internal/s3test"
	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/remote/objstore/s3"
)

// fault is what the proxy does with one request.
type fault int

const (
	pass         fault = iota
	status503          // 503 SlowDown, request not forwarded
	status500          // 500 InternalError, request not forwarded
	status429          // 429 (throttling without an S3 body)
	reset              // connection reset before any response, not forwarded
	lostResponse       // forwarded (applied by the server), then the connection is closed
	truncateBody       // response forwarded with half its body, then the connection is closed
	wrongRange         // Content-Range shifted by one byte
	slowBody           // headers and 1 KiB of body, then nothing until the client leaves
	slowHeaders        // no response for 2 s, then forwarded
	status403          // 403 AccessDenied: never retried
)

// faultProxy is a TLS proxy in front of the real server that applies a
// fault to each request as its rule says. It keeps the Host header, so
// the client's SigV4 signature stays valid.
type faultProxy struct {
	ts       *httptest.Server
	upstream *http.Client
	target   string
	mu       sync.Mutex
	rule     func(r *http.Request, n int) fault // n counts matching requests from 0
	n        int
	faults   atomic.Int32 // faults applied
}

func newFaultProxy(t *testing.T, srv *s3test.Server) *faultProxy {
	p := &faultProxy{
		target: srv.URL,
		upstream: &http.Client{Transport: &http.Transport{
			TLSClientConfig: srv.TLSConfig(), ForceAttemptHTTP2: false,
		}},
	}
	p.ts = httptest.NewTLSServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.ts.Close)
	return p
}

// setRule installs a rule; the request counter restarts.
func (p *faultProxy) setRule(rule func(r *http.Request, n int) fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rule, p.n = rule, 0
	p.faults.Store(0)
}

// firstN applies f to the first n requests with the given method.
func firstN(method string, n int, f fault) func(*http.Request, int) fault {
	var seen atomic.Int32
	return func(r *http.Request, _ int) fault {
		if r.Method != method || r.URL.Query().Has("uploads") {
			return pass
		}
		if int(seen.Add(1)) <= n {
			return f
		}
		return pass
	}
}

func (p *faultProxy) pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(p.ts.Certificate())
	return pool
}

func (p *faultProxy) serve(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	f := pass
	if p.rule != nil {
		f = p.rule(r, p.n)
		p.n++
	}
	p.mu.Unlock()
	if f != pass {
		p.faults.Add(1)
	}
	switch f {
	case status503:
		writeS3Error(w, http.StatusServiceUnavailable, "SlowDown")
		return
	case status500:
		writeS3Error(w, http.StatusInternalServerError, "InternalError")
		return
	case status429:
		w.WriteHeader(http.StatusTooManyRequests)
		return
	case status403:
		writeS3Error(w, http.StatusForbidden, "AccessDenied")
		return
	case reset:
		_, _ = io.Copy(io.Discard, r.Body)
		hijackReset(w)
		return
	case slowHeaders:
		select {
		case <-time.After(2 * time.Second):
		case <-r.Context().Done():
			return
		}
	}
	resp, err := p.forward(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	if f == lostResponse {
		_, _ = io.Copy(io.Discard, resp.Body)
		hijackReset(w)
		return
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	if f == wrongRange {
		if first, last, total, ok := parseRange(resp.Header.Get("Content-Range")); ok {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", first+1, last+1, total))
		}
	}
	w.WriteHeader(resp.StatusCode)
	switch f {
	case truncateBody:
		_, _ = io.CopyN(w, resp.Body, resp.ContentLength/2)
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // closes the connection mid-body
	case slowBody:
		_, _ = io.CopyN(w, resp.Body, 1024)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		return
	}
	_, _ = io.Copy(w, resp.Body)
}

func (p *faultProxy) forward(r *http.Request) (*http.Response, error) {
	req, err := http.NewRequestWithContext(r.Context(), r.Method, p.target+r.URL.RequestURI(), r.Body)
	if err != nil {
		return nil, err
	}
	req.Header = r.Header.Clone()
	req.Host = r.Host
	req.ContentLength = r.ContentLength
	req.TransferEncoding = r.TransferEncoding
	return p.upstream.Do(req)
}

func parseRange(cr string) (first, last, total int64, ok bool) {
	_, err := fmt.Sscanf(cr, "bytes %d-%d/%d", &first, &last, &total)
	return first, last, total, err == nil
}

func writeS3Error(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>injected</Message></Error>`, code)
}

// hijackReset closes the client's connection with a TCP reset.
func hijackReset(w http.ResponseWriter) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*tls.Conn); ok {
		if nc, ok := tc.NetConn().(*net.TCPConn); ok {
			_ = nc.SetLinger(0)
		}
	}
	_ = conn.Close()
}

// proxied opens a store through the fault proxy, in a fresh bucket that
// the real server created, with fast retries.
func proxied(t *testing.T) (*s3.Store, *faultProxy) {
	srv := s3test.Start(t)
	o := testOptions(t, srv)
	open(t, o) // creates the bucket directly
	p := newFaultProxy(t, srv)
	o.Endpoint = p.ts.URL
	o.RootCAs = p.pool()
	o.CreateBucket = false
	o.RequestTimeout = 500 * time.Millisecond
	o.Retry = s3.RetryPolicy{MaxAttempts: 5, BaseDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond}
	return open(t, o), p
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
		fault fault
	}{{"503-SlowDown", status503}, {"500", status500}, {"429", status429}, {"reset", reset}, {"slow-headers", slowHeaders}} {
		t.Run(f.name, func(t *testing.T) {
			ctx := testCtx(t)
			key := "retried/" + f.name
			n := 3
			if f.fault == slowHeaders {
				n = 1 // each costs a RequestTimeout
			}
			for _, method := range []string{http.MethodPut, http.MethodGet, http.MethodHead, http.MethodDelete} {
				p.setRule(firstN(method, n, f.fault))
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
					p.setRule(firstN(method, n, f.fault))
					_, _, lerr := s.List(ctx, "retried/", "", 0)
					require.NoError(t, lerr, "list")
				case http.MethodHead:
					var info objstore.ObjectInfo
					info, err = s.Stat(ctx, key)
					require.EqualValues(t, len(data), info.Size)
				case http.MethodDelete:
					err = s.Delete(ctx, key)
				}
				require.NoError(t, err, method)
				require.EqualValues(t, n, p.faults.Load(), method)
			}
		})
	}
}

// TestFaultsGiveUp: a fault that never stops ends in a typed error after
// the policy's attempts; a 403 is not retried at all.
func TestFaultsGiveUp(t *testing.T) {
	s, p := proxied(t)
	ctx := testCtx(t)
	p.setRule(func(*http.Request, int) fault { return status503 })
	_, err := s.Stat(ctx, "k")
	require.Error(t, err)
	require.EqualValues(t, 5, p.faults.Load())
	var oe *objstore.OpError
	require.ErrorAs(t, err, &oe)
	require.Contains(t, err.Error(), "gave up after 5 attempts")

	p.setRule(func(*http.Request, int) fault { return status403 })
	_, err = s.Stat(ctx, "k")
	require.Error(t, err)
	require.False(t, objstore.IsNotExist(err))
	require.EqualValues(t, 1, p.faults.Load(), "4xx is not retried")
}

// TestFaultTruncatedBody: a body cut mid-way is ErrShortRead, never a
// short successful read.
func TestFaultTruncatedBody(t *testing.T) {
	s, p := proxied(t)
	ctx := testCtx(t)
	data := bytes.Repeat([]byte("x"), 256<<10)
	require.NoError(t, s.Put(ctx, "k", bytes.NewReader(data), int64(len(data)), objstore.PutOptions{}))
	p.setRule(firstN(http.MethodGet, 100, truncateBody))
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

	p.setRule(firstN(http.MethodGet, 1, wrongRange))
	got, err := objstore.ReadRange(ctx, s, "k", 2, 5)
	require.NoError(t, err)
	require.Equal(t, "23456", string(got))
	require.EqualValues(t, 1, p.faults.Load())

	p.setRule(firstN(http.MethodGet, 100, wrongRange))
	_, err = objstore.ReadRange(ctx, s, "k", 2, 5)
	require.ErrorIs(t, err, objstore.ErrSizeMismatch)
	require.EqualValues(t, 5, p.faults.Load())
}

// TestFaultSlowBody: a body that stalls fails once the caller's deadline
// passes; nothing hangs.
func TestFaultSlowBody(t *testing.T) {
	s, p := proxied(t)
	data := bytes.Repeat([]byte("y"), 64<<10)
	require.NoError(t, s.Put(testCtx(t), "k", bytes.NewReader(data), int64(len(data)), objstore.PutOptions{}))
	p.setRule(firstN(http.MethodGet, 100, slowBody))
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

	p.setRule(firstN(http.MethodPut, 1, lostResponse))
	require.NoError(t, s.Put(ctx, "plain", bytes.NewReader(data), int64(len(data)), objstore.PutOptions{}))
	require.EqualValues(t, 1, p.faults.Load())

	p.setRule(firstN(http.MethodPut, 1, lostResponse))
	err := s.Put(ctx, "once", bytes.NewReader(data), int64(len(data)), objstore.PutOptions{IfNoneMatch: true})
	require.ErrorIs(t, err, objstore.ErrPreconditionFailed)
	require.Contains(t, err.Error(), "response was lost")
	got, err := objstore.ReadAll(ctx, s, "once")
	require.NoError(t, err)
	require.Equal(t, data, got)

	// A reader that cannot be rewound gets one attempt: the lost response
	// is a typed error.
	p.setRule(firstN(http.MethodPut, 1, lostResponse))
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
	p.setRule(firstN(http.MethodPut, 2, status503))
	require.NoError(t, objstore.PutLarge(ctx, s, "mp", bytes.NewReader(data), size, opts))
	info, err := s.Stat(ctx, "mp")
	require.NoError(t, err)
	require.EqualValues(t, size, info.Size)

	p.setRule(func(r *http.Request, _ int) fault {
		if r.Method == http.MethodPut && r.URL.Query().Get("partNumber") == "2" {
			return reset
		}
		return pass
	})
	err = objstore.PutLarge(ctx, s, "mp-failed", bytes.NewReader(data), size, opts)
	require.Error(t, err)
	p.setRule(nil)
	_, err = s.Stat(ctx, "mp-failed")
	require.True(t, objstore.IsNotExist(err), "%v", err)
}
