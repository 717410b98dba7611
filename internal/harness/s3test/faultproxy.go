package s3test

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// Fault is what a FaultProxy does with one request.
type Fault int

// The faults a FaultProxy injects. Those that answer without forwarding
// leave the server untouched; LostResponse, TruncateBody, WrongRange and
// SlowBody forward first, so the server has applied the request whatever
// the client sees.
const (
	// Pass forwards the request and the response unchanged.
	Pass Fault = iota
	// Status503 answers 503 SlowDown (S3's throttling) without forwarding.
	Status503
	// Status500 answers 500 InternalError without forwarding.
	Status500
	// Status429 answers 429 Too Many Requests without an S3 error body
	// (a throttling load balancer in front of S3), without forwarding.
	Status429
	// Status403 answers 403 AccessDenied without forwarding: a fault no
	// client may retry.
	Status403
	// Reset reads the request body, then closes the connection with a
	// TCP reset before any response; the request is not forwarded.
	Reset
	// LostResponse forwards the request and waits for the server's
	// answer (the request is applied), then resets the connection
	// instead of answering.
	LostResponse
	// TruncateBody answers with the server's headers and half its body,
	// then closes the connection (a response without a body ends right
	// after its headers).
	TruncateBody
	// WrongRange answers with the server's body under a Content-Range
	// shifted one byte up. Only ranged GETs carry a Content-Range; any
	// other response passes unchanged and is counted as Pass.
	WrongRange
	// SlowBody answers with the server's headers and half its body, at
	// most 1 KiB of it, then sends nothing more until the client leaves
	// (a stall past the client's deadline). A response without a body is
	// withheld whole: the request was applied and the client times out.
	SlowBody
	// SlowHeaders waits SlowHeadersDelay before forwarding; a client that
	// leaves earlier is never forwarded.
	SlowHeaders

	numFaults = iota
)

// SlowHeadersDelay is how long SlowHeaders holds a request back.
const SlowHeadersDelay = 2 * time.Second

// slowBodyMax bounds the bytes SlowBody sends before it stalls.
const slowBodyMax = 1 << 10

var faultNames = [numFaults]string{
	"pass", "503-slowdown", "500-internal", "429", "403-denied", "reset",
	"lost-response", "truncate-body", "wrong-range", "slow-body", "slow-headers",
}

func (f Fault) String() string {
	if f < 0 || f >= numFaults {
		return fmt.Sprintf("fault(%d)", int(f))
	}
	return faultNames[f]
}

// Rule chooses the fault for one request. n counts the requests the proxy
// received since the rule was installed, from 0. A rule is called with the
// proxy's mutex held, one request at a time, in the order the requests
// arrive.
type Rule func(r *http.Request, n int) Fault

// FaultProxy is a TLS proxy in front of a Server that applies a fault to
// each request as its Rule says. Clients reach it at URL, trusting
// RootCAs. It forwards the Host header unchanged, so SigV4 signatures made
// for the proxy stay valid upstream. It speaks HTTP/1.1 only, so every
// fault is visible per request. A test points its store at the proxy:
//
//	p := s3test.NewFaultProxy(t, s3test.Start(t))
//	o.Endpoint, o.RootCAs = p.URL(), p.RootCAs()
//	p.SetRule(s3test.RandomFaults(seed, s3test.FaultRate{Fault: s3test.Status503, Rate: 0.1}))
//
// The counters (Requests, Faults, Count, Counts) restart with each SetRule.
// They count what the proxy saw, which can exceed what the client sent:
// net/http resends an idempotent request (GET, HEAD) that fails on a
// reused connection before any response byte, so a Reset or LostResponse
// of such a request may be followed by a resend the client never reports.
// A FaultProxy is safe for concurrent use; it is closed at the test's
// cleanup, after releasing every request it holds (SlowBody, SlowHeaders).
type FaultProxy struct {
	ts       *httptest.Server
	upstream *http.Client
	target   string
	closing  chan struct{} // closed at cleanup: stalled handlers return

	mu struct {
		sync.Mutex
		rule     Rule
		gen      int            // SetRule calls: a late record of an older rule is dropped
		requests int            // since SetRule; the n passed to rule
		counts   [numFaults]int // applied faults by kind, since SetRule
	}
}

// NewFaultProxy starts a proxy in front of srv with no rule (every request
// passes) and closes it at tb's cleanup.
func NewFaultProxy(tb testing.TB, srv *Server) *FaultProxy {
	tb.Helper()
	p := &FaultProxy{
		target:  srv.URL,
		closing: make(chan struct{}),
		upstream: &http.Client{Transport: &http.Transport{
			TLSClientConfig: srv.TLSConfig(), ForceAttemptHTTP2: false,
		}},
	}
	p.ts = httptest.NewTLSServer(http.HandlerFunc(p.serve))
	tb.Cleanup(func() {
		close(p.closing)
		p.ts.CloseClientConnections()
		p.ts.Close()
		p.upstream.CloseIdleConnections()
	})
	return p
}

// URL is the proxy's https://host:port, the endpoint clients use.
func (p *FaultProxy) URL() string { return p.ts.URL }

// RootCAs returns a pool holding the proxy's certificate, for clients.
func (p *FaultProxy) RootCAs() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(p.ts.Certificate())
	return pool
}

// TLSConfig returns a client TLS configuration that trusts the proxy.
func (p *FaultProxy) TLSConfig() *tls.Config {
	return &tls.Config{RootCAs: p.RootCAs(), MinVersion: tls.VersionTLS12}
}

// SetRule installs rule (nil: every request passes) and restarts the
// counters.
func (p *FaultProxy) SetRule(rule Rule) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.rule, p.mu.requests, p.mu.counts = rule, 0, [numFaults]int{}
	p.mu.gen++
}

// record counts an applied fault of the rule of generation gen.
func (p *FaultProxy) record(gen int, f Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if gen == p.mu.gen {
		p.mu.counts[f]++
	}
}

// Requests returns the number of requests received since SetRule.
func (p *FaultProxy) Requests() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.requests
}

// Faults returns the number of faults applied since SetRule (requests
// that did not pass unchanged).
func (p *FaultProxy) Faults() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for f := Pass + 1; f < numFaults; f++ {
		n += p.mu.counts[f]
	}
	return n
}

// Count returns how many times f was applied since SetRule.
func (p *FaultProxy) Count(f Fault) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if f < 0 || f >= numFaults {
		return 0
	}
	return p.mu.counts[f]
}

// Counts returns the applied faults by kind since SetRule, Pass included,
// without the kinds never applied.
func (p *FaultProxy) Counts() map[Fault]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[Fault]int{}
	for f, n := range p.mu.counts {
		if n > 0 {
			out[Fault(f)] = n
		}
	}
	return out
}

// FirstN is a rule that applies f to the first n requests with the given
// method (the multipart upload initiation, ?uploads, excepted) and passes
// everything else.
func FirstN(method string, n int, f Fault) Rule {
	seen := 0 // rules run under the proxy's mutex
	return func(r *http.Request, _ int) Fault {
		if r.Method != method || r.URL.Query().Has("uploads") {
			return Pass
		}
		seen++
		if seen <= n {
			return f
		}
		return Pass
	}
}

// FaultRate is one fault of a RandomFaults rule: the probability, in
// [0, 1], that a request gets it.
type FaultRate struct {
	Fault Fault
	Rate  float64
	// Method limits the fault to requests with this HTTP method; empty
	// means any.
	Method string
}

// RandomFaults is a rule that draws each request's fault from rates with
// a generator seeded by seed: one draw per request, whatever its method,
// so a given sequence of requests always gets the same faults. A request
// whose draw falls outside every rate (or on a rate for another method)
// passes. It panics if a rate is outside [0, 1] or the rates sum above 1
// (a bug in the calling test).
func RandomFaults(seed uint64, rates ...FaultRate) Rule {
	sum := 0.0
	for _, fr := range rates {
		if fr.Rate < 0 || fr.Rate > 1 || fr.Fault < 0 || fr.Fault >= numFaults {
			panic(fmt.Sprintf("s3test: RandomFaults: bad rate %+v", fr))
		}
		sum += fr.Rate
	}
	if sum > 1+1e-9 {
		panic(fmt.Sprintf("s3test: RandomFaults: rates sum to %v > 1", sum))
	}
	rates = append([]FaultRate(nil), rates...)
	var mu sync.Mutex // the rule may be shared by several proxies
	rng := rand.New(rand.NewPCG(seed, 0x5f3759df))
	return func(r *http.Request, _ int) Fault {
		mu.Lock()
		u := rng.Float64()
		mu.Unlock()
		for _, fr := range rates {
			if u < fr.Rate {
				if fr.Method == "" || fr.Method == r.Method {
					return fr.Fault
				}
				return Pass
			}
			u -= fr.Rate
		}
		return Pass
	}
}

func (p *FaultProxy) serve(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	f := Pass
	if p.mu.rule != nil {
		f = p.mu.rule(r, p.mu.requests)
	}
	p.mu.requests++
	gen := p.mu.gen
	p.mu.Unlock()
	// A fault is counted when it is applied, before any stall, so the
	// counters are exact once the client has its error. WrongRange is
	// counted once the response shows whether it has a range to shift.
	if f != WrongRange {
		p.record(gen, f)
	}

	switch f {
	case Status503:
		writeS3Error(w, http.StatusServiceUnavailable, "SlowDown")
		return
	case Status500:
		writeS3Error(w, http.StatusInternalServerError, "InternalError")
		return
	case Status429:
		w.WriteHeader(http.StatusTooManyRequests)
		return
	case Status403:
		writeS3Error(w, http.StatusForbidden, "AccessDenied")
		return
	case Reset:
		_, _ = io.Copy(io.Discard, r.Body)
		hijackReset(w)
		return
	case SlowHeaders:
		t := time.NewTimer(SlowHeadersDelay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			abandon()
		case <-p.closing:
			abandon()
		}
	}
	resp, err := p.forward(r)
	if err != nil {
		if f == WrongRange {
			p.record(gen, Pass)
		}
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	if f == LostResponse {
		_, _ = io.Copy(io.Discard, resp.Body)
		hijackReset(w)
		return
	}
	if f == SlowBody && resp.ContentLength == 0 {
		p.stall(r) // withhold the whole (bodyless) response
		abandon()
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	if f == WrongRange {
		first, last, total, ok := parseContentRange(resp.Header.Get("Content-Range"))
		if ok {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", first+1, last+1, total))
			p.record(gen, WrongRange)
		} else {
			p.record(gen, Pass)
		}
	}
	w.WriteHeader(resp.StatusCode)
	switch f {
	case TruncateBody:
		_, _ = io.CopyN(w, resp.Body, resp.ContentLength/2)
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // closes the connection mid-body
	case SlowBody:
		n := int64(slowBodyMax)
		if resp.ContentLength > 0 {
			n = min(n, resp.ContentLength/2)
		}
		_, _ = io.CopyN(w, resp.Body, n)
		w.(http.Flusher).Flush()
		p.stall(r)
		return
	}
	_, _ = io.Copy(w, resp.Body)
}

// abandon ends a request the proxy held without answering it: the
// connection is closed and no status line is written. A handler that
// just returned would make the server answer 200 OK with no body, which
// a client whose request is still open takes for the operation's
// success (a DELETE answered 200 instead of 204 failed TestFaultsRetried
// once under load).
func abandon() { panic(http.ErrAbortHandler) }

// stall waits until the client leaves or the proxy closes.
func (p *FaultProxy) stall(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-p.closing:
	}
}

func (p *FaultProxy) forward(r *http.Request) (*http.Response, error) {
	req, err := http.NewRequestWithContext(r.Context(), r.Method, p.target+r.URL.RequestURI(), r.Body)
	if err != nil {
		return nil, err
	}
	req.Header = r.Header.Clone()
	req.Host = r.Host
	req.ContentLength = r.ContentLength
	req.TransferEncoding = r.TransferEncoding
	if r.ContentLength == 0 {
		req.Body = http.NoBody
	}
	return p.upstream.Do(req)
}

func parseContentRange(cr string) (first, last, total int64, ok bool) {
	_, err := fmt.Sscanf(cr, "bytes %d-%d/%d", &first, &last, &total)
	return first, last, total, err == nil
}

func writeS3Error(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>injected by s3test.FaultProxy</Message></Error>`, code)
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
