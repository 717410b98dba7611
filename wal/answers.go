package wal

import (
	"math/bits"
	"sync"

	"github.com/tierlog/tierlog/internal/invariants"
)

// DefaultAnswerPoolBytes is ReaderOptions.AnswerPoolBytes' default: two
// fetches of Kafka's default fetch.max.bytes (50 MiB), what a
// consolidation fetcher has in flight when it appends one round while it
// reads the next, with the size classes' rounding (at most 1/8).
const DefaultAnswerPoolBytes = 128 << 20

// answerPool keeps the buffers of released answers (Reader.Release) for
// the answers of later fetches: an answer read into memory the process
// touched before costs the read's copy only, where a fresh buffer also
// costs its zeroing and a page fault per page (52-67% of a
// consolidation's CPU over 64 partitions before the pool).
//
// Buffers have size classes, eight per doubling ((8+j) << s bytes, j in
// [0, 8)): an answer of n bytes takes a free buffer of the smallest class
// of at least n bytes or of one of the eight above it (at most twice n),
// else one allocated at the smallest class's size (at most 1/8 more than
// n); a released buffer is filed under the largest class it holds. Answers under minPooledBytes are allocated at their
// size and never pooled.
//
// Concurrency: safe for concurrent use; mu guards the free lists and is
// held only to push or pop one buffer.
type answerPool struct {
	max int64 // bytes of free buffers kept; <= 0: none
	mu  struct {
		sync.Mutex
		free [64 * 8][][]byte
		held int64
	}
}

// minPooledBytes: smaller answers are not worth a lock.
const minPooledBytes = 4 << 10

// classUp returns the smallest size class of at least n bytes (n >= 9).
func classUp(n int64) (int, int64) {
	k := bits.Len64(uint64(n-1)) - 1 // 2^k <= n-1 < 2^(k+1)
	shift := k - 3
	m := (n-1)>>shift + 1 // in [9, 16]
	return k*8 + int(m-8), m << shift
}

// classDown returns the largest size class of at most c bytes (c >= 8).
func classDown(c int64) int {
	k := bits.Len64(uint64(c)) - 1 // 2^k <= c < 2^(k+1)
	m := c >> (k - 3)              // in [8, 16)
	return k*8 + int(m-8)
}

// poisonReleased, when set, overwrites every released buffer with
// poisonByte before it is pooled, so that a use after release reads
// bytes no batch checks: on in invariants builds (and -race), and in
// tests (export_test.go).
var poisonReleased = invariants.Enabled

const poisonByte = 0xA5

// get returns a buffer of length n, pooled if one fits.
func (p *answerPool) get(n int64) []byte {
	if n <= 0 {
		return nil
	}
	if p.max <= 0 || n < minPooledBytes || n > p.max {
		return make([]byte, n)
	}
	c, size := classUp(n)
	p.mu.Lock()
	// The answer's class or up to a doubling above it: answers of one
	// workload vary in size (a partition's share of a fetch), and a
	// free larger buffer beats a fresh one.
	for k := c; k < min(c+9, len(p.mu.free)); k++ {
		if l := p.mu.free[k]; len(l) > 0 {
			b := l[len(l)-1]
			l[len(l)-1] = nil
			p.mu.free[k] = l[:len(l)-1]
			p.mu.held -= int64(cap(b))
			p.mu.Unlock()
			return b[:n]
		}
	}
	p.mu.Unlock()
	return make([]byte, n, size)
}

// put keeps b (a whole buffer get returned, no longer referenced by the
// caller) for a later get, unless the pool holds its maximum already.
func (p *answerPool) put(b []byte) {
	if p.max <= 0 || cap(b) < minPooledBytes || int64(cap(b)) > p.max {
		return
	}
	b = b[:cap(b)]
	if poisonReleased {
		for i := range b {
			b[i] = poisonByte
		}
	}
	c := classDown(int64(cap(b)))
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.held+int64(cap(b)) > p.max {
		return
	}
	p.mu.free[c] = append(p.mu.free[c], b)
	p.mu.held += int64(cap(b))
}

// heldBytes is the bytes of free buffers the pool keeps.
func (p *answerPool) heldBytes() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.held
}
