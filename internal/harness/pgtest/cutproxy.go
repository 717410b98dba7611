package pgtest

import (
	"encoding/binary"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// CutProxy is a TCP proxy in front of a server that cuts connections:
// each connection it accepts is given a byte budget, drawn from a seeded
// generator between MinBytes and MaxBytes, and once that many bytes have
// crossed it (both directions together) both sides are closed, wherever
// the protocol stands: in the startup, inside a transaction, after a
// COMMIT was sent and before its answer came back. Cuts are counted in
// bytes, not time, so a seed replays the same cut points for the same
// traffic.
type CutProxy struct {
	// Addr is the proxy's host:port.
	Addr string

	target string
	ln     net.Listener
	cuts   atomic.Int64

	mu struct {
		sync.Mutex
		rng      *rand.Rand
		min, max int64
		conns    map[net.Conn]bool
		pairs    map[*cutConn]bool
		closed   bool
	}
	wg sync.WaitGroup
}

// NewCutProxy starts a proxy to target (host:port) on 127.0.0.1, closed
// at tb's cleanup. minBytes <= 0 passes everything (no cuts) until
// SetBudget.
func NewCutProxy(tb testing.TB, target string, seed uint64, minBytes, maxBytes int64) *CutProxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("pgtest: cut proxy: %v", err)
	}
	p := &CutProxy{Addr: ln.Addr().String(), target: target, ln: ln}
	p.mu.rng = rand.New(rand.NewPCG(seed, seed+1))
	p.mu.conns = map[net.Conn]bool{}
	p.mu.pairs = map[*cutConn]bool{}
	p.SetBudget(minBytes, maxBytes)
	p.wg.Add(1)
	go p.accept()
	tb.Cleanup(p.Close)
	return p
}

// SetBudget changes the budget range of connections accepted from now
// on; minBytes <= 0 turns cutting off.
func (p *CutProxy) SetBudget(minBytes, maxBytes int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.min, p.mu.max = minBytes, max(maxBytes, minBytes)
}

// Cuts is how many connections the proxy cut.
func (p *CutProxy) Cuts() int64 { return p.cuts.Load() }

// LoseNextAnswer arms every connection open now: the client's next
// request (its protocol messages up to one that ends a request: Sync or
// a simple Query, however many reads they arrive in) is forwarded, the
// server's answer is dropped, and the connection is cut once the server
// has finished the request (its ReadyForQuery). The server acted on the
// whole request; the client cannot know: a COMMIT lost this way is the
// ambiguous outcome, and it did commit.
//
// The cut waits for the server because a client that loses its
// connection may cancel what it sent (pgx's pgconn sends a CancelRequest
// on a new connection when a connection fails): cutting at once would
// race that cancel against the COMMIT, and the test would not know which
// outcome it set up.
func (p *CutProxy) LoseNextAnswer() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.mu.pairs {
		c.loseAnswer.Store(true)
	}
}

// Close stops accepting and closes every connection.
func (p *CutProxy) Close() {
	p.mu.Lock()
	if p.mu.closed {
		p.mu.Unlock()
		return
	}
	p.mu.closed = true
	for c := range p.mu.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	_ = p.ln.Close()
	p.wg.Wait()
}

func (p *CutProxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		p.mu.Lock()
		if p.mu.closed {
			p.mu.Unlock()
			_ = client.Close()
			_ = server.Close()
			return
		}
		budget := int64(-1)
		if p.mu.min > 0 {
			budget = p.mu.min + p.mu.rng.Int64N(p.mu.max-p.mu.min+1)
		}
		c := &cutConn{p: p, client: client, server: server, left: budget}
		p.mu.conns[client], p.mu.conns[server] = true, true
		p.mu.pairs[c] = true
		p.mu.Unlock()
		p.wg.Add(2)
		go c.pipe(server, client, true)
		go c.pipe(client, server, false)
	}
}

// cutConn is one proxied connection and its remaining budget.
type cutConn struct {
	p              *CutProxy
	client, server net.Conn
	mu             sync.Mutex
	left           int64 // bytes still allowed; < 0: unlimited
	cut            bool
	loseAnswer     atomic.Bool    // LoseNextAnswer armed it
	requestSent    atomic.Bool    // the armed request went to the server whole
	request        messageScanner // the client's messages, once armed
	answer         messageScanner // the server's messages, once armed
}

// messageScanner follows one direction's protocol messages (a type
// byte, a big-endian length counting itself, the payload) after
// LoseNextAnswer armed the connection: the client's, so that the cut
// comes after a whole request (under load a pipelined request can arrive
// in several reads, and cutting after the first would keep its COMMIT
// from the server), and the server's, to see it finish.
type messageScanner struct {
	hdr  [5]byte
	nhdr int
	left int64 // payload bytes of the current message still to come
	last byte  // type of the last message whose header was read
}

// feed scans b and reports whether the bytes so far end right after a
// whole message of one of the types in ends.
func (r *messageScanner) feed(b []byte, ends string) bool {
	for len(b) > 0 {
		if r.left > 0 {
			n := min(int64(len(b)), r.left)
			b, r.left = b[n:], r.left-n
			continue
		}
		k := copy(r.hdr[r.nhdr:], b)
		r.nhdr, b = r.nhdr+k, b[k:]
		if r.nhdr == len(r.hdr) {
			r.last, r.nhdr = r.hdr[0], 0
			r.left = max(int64(binary.BigEndian.Uint32(r.hdr[1:]))-4, 0)
		}
	}
	return r.nhdr == 0 && r.left == 0 && r.last != 0 && strings.IndexByte(ends, r.last) >= 0
}

// Message types that end a client's request (Sync, a simple Query) and a
// server's answer to it (ReadyForQuery).
const (
	endsRequest = "SQ"
	endsAnswer  = "Z"
)

func (c *cutConn) pipe(dst, src net.Conn, toServer bool) {
	defer c.p.wg.Done()
	defer c.close()
	buf := make([]byte, 16<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !toServer && c.loseAnswer.Load() {
			// An answer the client must not see; the server's
			// ReadyForQuery after the whole request ends the
			// connection.
			if c.answer.feed(buf[:n], endsAnswer) && c.requestSent.Load() {
				c.p.cuts.Add(1)
				return
			}
			continue
		}
		if n > 0 && toServer && c.loseAnswer.Load() {
			if c.requestSent.Load() {
				continue // nothing after the request reaches the server
			}
			// Marked before the write: the server cannot answer
			// before it has the bytes.
			if c.request.feed(buf[:n], endsRequest) {
				c.requestSent.Store(true)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
			continue
		}
		if n > 0 {
			allowed, cutNow := c.take(int64(n))
			if allowed > 0 {
				if _, werr := dst.Write(buf[:allowed]); werr != nil {
					return
				}
			}
			if cutNow {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// take charges n bytes and returns how many may pass and whether the
// connection is cut now. The call that exhausts the budget counts the
// cut.
func (c *cutConn) take(n int64) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.cut:
		return 0, true
	case c.left < 0:
		return n, false
	case n < c.left:
		c.left -= n
		return n, false
	}
	allowed := c.left
	c.left, c.cut = 0, true
	c.p.cuts.Add(1)
	return allowed, true
}

// close closes both sides (either direction ending ends the connection).
func (c *cutConn) close() {
	_ = c.client.Close()
	_ = c.server.Close()
	c.p.mu.Lock()
	delete(c.p.mu.conns, c.client)
	delete(c.p.mu.conns, c.server)
	delete(c.p.mu.pairs, c)
	c.p.mu.Unlock()
}
