package s3test_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/internal/harness/s3test"
)

// fakeUpstream is a TLS server standing in for versitygw: PUT stores a
// body, GET serves it with Range support. It counts the requests that
// reached it, so a test sees which faults forward.
type fakeUpstream struct {
	srv  *s3test.Server
	hits atomic.Int32
	mu   sync.Mutex
	objs map[string][]byte
}

func newFakeUpstream(t *testing.T) *fakeUpstream {
	u := &fakeUpstream{objs: map[string][]byte{}}
	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		switch r.Method {
		case http.MethodPut:
			b, _ := io.ReadAll(r.Body)
			u.mu.Lock()
			u.objs[r.URL.Path] = b
			u.mu.Unlock()
		case http.MethodGet:
			u.mu.Lock()
			b, ok := u.objs[r.URL.Path]
			u.mu.Unlock()
			if !ok {
				http.NotFound(w, r)
				return
			}
			http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b))
		}
	}))
	t.Cleanup(ts.Close)
	pool := ts.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	u.srv = &s3test.Server{URL: ts.URL, Endpoint: strings.TrimPrefix(ts.URL, "https://"), RootCAs: pool}
	return u
}

func (u *fakeUpstream) object(path string) []byte {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.objs[path]
}

func proxyClient(t *testing.T, p *s3test.FaultProxy) *http.Client {
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: p.TLSConfig()}, Timeout: 5 * time.Second}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// TestFaultProxyFaults applies each fault once, to a ranged GET (a PUT for
// LostResponse), and checks what the client sees, whether the request
// reached the server, and the counters.
func TestFaultProxyFaults(t *testing.T) {
	u := newFakeUpstream(t)
	p := s3test.NewFaultProxy(t, u.srv)
	c := proxyClient(t, p)
	data := bytes.Repeat([]byte("0123456789"), 1000)
	put := func(path string) (*http.Response, error) {
		req, err := http.NewRequest(http.MethodPut, p.URL()+path, bytes.NewReader(data))
		require.NoError(t, err)
		return c.Do(req)
	}
	getRange := func(ctx context.Context, first, last int) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL()+"/obj", nil)
		require.NoError(t, err)
		req.Header.Set("Range", "bytes="+strconv.Itoa(first)+"-"+strconv.Itoa(last))
		return c.Do(req)
	}
	resp, err := put("/obj")
	require.NoError(t, err)
	resp.Body.Close()

	for _, tc := range []struct {
		fault     s3test.Fault
		forwarded bool
		check     func(t *testing.T)
	}{
		{s3test.Pass, true, func(t *testing.T) {
			resp, err := getRange(context.Background(), 10, 29)
			require.NoError(t, err)
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.Equal(t, data[10:30], b)
			require.Equal(t, "bytes 10-29/10000", resp.Header.Get("Content-Range"))
		}},
		{s3test.Status503, false, statusCheck(getRange, http.StatusServiceUnavailable, "SlowDown")},
		{s3test.Status500, false, statusCheck(getRange, http.StatusInternalServerError, "InternalError")},
		{s3test.Status429, false, statusCheck(getRange, http.StatusTooManyRequests, "")},
		{s3test.Status403, false, statusCheck(getRange, http.StatusForbidden, "AccessDenied")},
		{s3test.Reset, false, func(t *testing.T) {
			// A fresh connection: net/http resends an idempotent request
			// that fails on a reused one before any response byte, which
			// would make this two requests.
			fresh := &http.Client{Transport: &http.Transport{TLSClientConfig: p.TLSConfig(), DisableKeepAlives: true}}
			_, err := fresh.Get(p.URL() + "/obj")
			require.Error(t, err)
		}},
		{s3test.LostResponse, true, func(t *testing.T) {
			_, err := put("/lost")
			require.Error(t, err)
			require.Equal(t, data, u.object("/lost"), "the server applied the lost request")
		}},
		{s3test.TruncateBody, true, func(t *testing.T) {
			resp, err := getRange(context.Background(), 0, 999)
			require.NoError(t, err)
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			require.ErrorIs(t, err, io.ErrUnexpectedEOF)
			require.Len(t, b, 500)
		}},
		{s3test.WrongRange, true, func(t *testing.T) {
			resp, err := getRange(context.Background(), 10, 29)
			require.NoError(t, err)
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.Equal(t, data[10:30], b, "the bytes are the ones asked for")
			require.Equal(t, "bytes 11-30/10000", resp.Header.Get("Content-Range"))
		}},
		{s3test.SlowBody, true, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			start := time.Now()
			resp, err := getRange(ctx, 0, 4999)
			require.NoError(t, err)
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.Len(t, b, 1024, "at most 1 KiB before the stall")
			require.Less(t, time.Since(start), 2*time.Second)
		}},
	} {
		t.Run(tc.fault.String(), func(t *testing.T) {
			p.SetRule(func(*http.Request, int) s3test.Fault { return tc.fault })
			before := u.hits.Load()
			tc.check(t)
			require.Equal(t, 1, p.Requests())
			want := map[s3test.Fault]int{tc.fault: 1}
			require.Equal(t, want, p.Counts())
			require.Equal(t, 1, p.Count(tc.fault))
			if tc.fault == s3test.Pass {
				require.Zero(t, p.Faults())
			} else {
				require.Equal(t, 1, p.Faults())
			}
			require.Equal(t, tc.forwarded, u.hits.Load() > before, "forwarded")
		})
	}

	// WrongRange on a response without Content-Range changes nothing and
	// counts as Pass.
	p.SetRule(func(*http.Request, int) s3test.Fault { return s3test.WrongRange })
	resp, err = c.Get(p.URL() + "/obj")
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, data, b)
	require.Equal(t, map[s3test.Fault]int{s3test.Pass: 1}, p.Counts())
}

func statusCheck(get func(context.Context, int, int) (*http.Response, error), status int, code string) func(*testing.T) {
	return func(t *testing.T) {
		resp, err := get(context.Background(), 0, 9)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		require.Equal(t, status, resp.StatusCode)
		if code != "" {
			require.Contains(t, string(b), "<Code>"+code+"</Code>")
		}
	}
}

// TestFaultProxyFirstN: FirstN hits only the first n requests of its
// method, and SetRule restarts the counters.
func TestFaultProxyFirstN(t *testing.T) {
	u := newFakeUpstream(t)
	p := s3test.NewFaultProxy(t, u.srv)
	c := proxyClient(t, p)
	p.SetRule(s3test.FirstN(http.MethodGet, 2, s3test.Status503))
	var codes []int
	for _, m := range []string{http.MethodPut, http.MethodGet, http.MethodPut, http.MethodGet, http.MethodGet} {
		req, err := http.NewRequest(m, p.URL()+"/k", strings.NewReader("v"))
		require.NoError(t, err)
		resp, err := c.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		codes = append(codes, resp.StatusCode)
	}
	require.Equal(t, []int{200, 503, 200, 503, 200}, codes)
	require.Equal(t, 5, p.Requests())
	require.Equal(t, 2, p.Faults())
	p.SetRule(nil)
	require.Zero(t, p.Requests())
	require.Zero(t, p.Faults())
}

// TestFaultProxyRandomFaults: the seeded rule is a function of the seed
// and the request sequence, keeps to its rates and methods, and refuses
// impossible rates.
func TestFaultProxyRandomFaults(t *testing.T) {
	rates := []s3test.FaultRate{
		{Fault: s3test.Status503, Rate: 0.2},
		{Fault: s3test.Reset, Rate: 0.1},
		{Fault: s3test.SlowBody, Rate: 0.1, Method: http.MethodGet},
	}
	get, _ := http.NewRequest(http.MethodGet, "https://x/k", nil)
	put, _ := http.NewRequest(http.MethodPut, "https://x/k", nil)
	draw := func(seed uint64) ([]s3test.Fault, map[s3test.Fault]int) {
		rule := s3test.RandomFaults(seed, rates...)
		var seq []s3test.Fault
		counts := map[s3test.Fault]int{}
		for i := range 10_000 {
			r := get
			if i%2 == 1 {
				r = put
			}
			f := rule(r, i)
			if r == put {
				require.NotEqual(t, s3test.SlowBody, f, "SlowBody is for GETs only")
			}
			seq = append(seq, f)
			counts[f]++
		}
		return seq, counts
	}
	a, counts := draw(1)
	b, _ := draw(1)
	c, _ := draw(2)
	require.Equal(t, a, b, "same seed, same faults")
	require.NotEqual(t, a, c)
	require.InDelta(t, 2000, counts[s3test.Status503], 250)
	require.InDelta(t, 1000, counts[s3test.Reset], 200)
	require.InDelta(t, 500, counts[s3test.SlowBody], 150, "10%% of the GETs")
	require.InDelta(t, 6500, counts[s3test.Pass], 300)

	require.Panics(t, func() {
		s3test.RandomFaults(1, s3test.FaultRate{Fault: s3test.Reset, Rate: 0.6}, s3test.FaultRate{Fault: s3test.Status500, Rate: 0.6})
	})
	require.Panics(t, func() { s3test.RandomFaults(1, s3test.FaultRate{Fault: s3test.Reset, Rate: -0.1}) })
}

// TestFaultProxyCloseReleasesStalls: a test that ends with a SlowBody
// response still open does not wait for it at cleanup.
func TestFaultProxyCloseReleasesStalls(t *testing.T) {
	u := newFakeUpstream(t)
	var body io.ReadCloser
	start := time.Now()
	t.Run("stall", func(t *testing.T) {
		p := s3test.NewFaultProxy(t, u.srv)
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: p.TLSConfig()}}
		req, err := http.NewRequest(http.MethodPut, p.URL()+"/k", strings.NewReader(strings.Repeat("x", 4096)))
		require.NoError(t, err)
		resp, err := c.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		p.SetRule(func(*http.Request, int) s3test.Fault { return s3test.SlowBody })
		resp, err = c.Get(p.URL() + "/k")
		require.NoError(t, err)
		body = resp.Body // left open: the proxy's cleanup must not wait for it
	})
	require.Less(t, time.Since(start), 3*time.Second)
	_, err := io.ReadAll(body)
	require.Error(t, err, "the proxy closed the stalled connection")
	body.Close()
}
