package segment

import (
	"sync"
	"sync/atomic"
)

// This file decides which reads copy from the mapping (mmap.go) and
// which use pread: reads copy only from pages that have been touched
// through the mapping before, and a background warmer touches the pages
// that readers come back to.
//
// Why. The first read of a page through a mapping pays a page fault (the
// kernel maps up to 16 pages around it) and the first touch of every
// page it mapped; on a virtual machine that costs several times a pread
// of the same bytes (measured: a 16 KiB read of a page-cache-resident
// batch, 10-20 µs through a fresh mapping, 3-5 µs with pread, 1-2 µs
// through a warm mapping; MADV_POPULATE_READ ahead of the read removes
// the fault but not the first touch). So the bytes a consumer at the tail
// reads right after the append, which no one has read before, and the
// first pass over a log the process has just opened, are read with
// pread: never slower than pread, never a fault on the read path. A
// chunk that is read again (a second read of a whole page of a full
// chunk) is handed to the warmer, which touches its pages in the
// background; from then on reads of it copy from the mapping (no system
// call). A pass that reads each batch once (a consumer, a first pass in
// any order) reads each page whole at most once and warms nothing. Pages written
// after a chunk is warm would be untouched, so only chunks wholly below
// the published size are warmed: the active segment's last, partial
// chunk is always read with pread.
//
// States of a chunk of a mapping, in order: cold (never read), seen (read
// once, with pread), queued (a page of it read twice, handed to the
// warmer), warm (its pages touched through this mapping). A state only
// moves forward, by compare-and-swap; a queued chunk the warmer drops (a
// full queue) goes back to seen. A longer mapping (growth) starts
// with every chunk cold or seen: its page table entries are new.
//
// Correctness does not depend on the states: a warm chunk is a hint that
// its pages are cheap to read, and the bytes a read returns are the same
// through the mapping or pread (one page cache). A page the kernel
// reclaimed after the warmer touched it faults again when read, as any
// mapping's would.

// warmChunkBytes is the size of a chunk: the kernel's fault-around
// window, so the warmer's touch of a chunk is one fault.
const warmChunkBytes = 64 << 10

// pageBytes is the stride of the warmer's touches: at most the smallest
// page size of the platforms with mappings.
const pageBytes = 4 << 10

// Chunk states, in the low stateBits of a chunk's word, which holds above
// them a bit per page of the chunk that a pread has read whole (a re-read
// of a page is what queues a chunk: a reader coming back, not one reading
// the next batch, which shares at most a partly read page with the one
// before).
const (
	chunkCold   = 0
	chunkSeen   = 1
	chunkQueued = 2
	chunkWarm   = 3

	stateBits = 2
	stateMask = 1<<stateBits - 1
)

// coldReadsPread is the policy of this file; false makes every read of
// at most mapCopyMaxBytes copy from the mapping (tests that exercise the
// mapping's copies).
var coldReadsPread = true

// newMapping returns the mapping of data with every chunk cold.
func newMapping(data []byte) *mapping {
	n := (len(data) + warmChunkBytes - 1) / warmChunkBytes
	return &mapping{data: data, chunks: make([]atomic.Uint32, n)}
}

// state returns chunk c's state.
func (m *mapping) state(c int64) uint32 {
	return m.chunks[c].Load() & stateMask
}

// advance moves chunk c from state from to state to (its quarter bits
// unchanged), and reports whether it was in from.
func (m *mapping) advance(c int64, from, to uint32) bool {
	w := &m.chunks[c]
	for {
		old := w.Load()
		if old&stateMask != from {
			return false
		}
		if w.CompareAndSwap(old, old&^stateMask|to) {
			return true
		}
	}
}

// noteRead records a pread of the pages of chunk c in mask: a chunk
// cold or seen whose pages include one read before becomes queued
// (noteRead returns true: the caller hands it to the warmer), else it
// becomes seen with the pages marked.
func (m *mapping) noteRead(c int64, mask uint32) bool {
	w := &m.chunks[c]
	for {
		old := w.Load()
		if old&stateMask >= chunkQueued {
			return false
		}
		next, queue := (old|mask<<stateBits)&^stateMask|chunkSeen, false
		if old>>stateBits&mask != 0 {
			next, queue = old&^stateMask|chunkQueued, true
		}
		if w.CompareAndSwap(old, next) {
			return queue
		}
	}
}

// warm reports whether every chunk holding a byte of [pos, end) is warm.
func (m *mapping) warm(pos, end int64) bool {
	for c := pos / warmChunkBytes; c*warmChunkBytes < end; c++ {
		if m.state(c) != chunkWarm {
			return false
		}
	}
	return true
}

// inherit copies the chunks of old that were read (seen, queued or warm
// there) into m as seen, with their page bits. REQUIRES: m is not yet
// published.
func (m *mapping) inherit(old *mapping) {
	for i := range old.chunks {
		if f := old.chunks[i].Load(); f&stateMask != chunkCold {
			m.chunks[i].Store(f&^stateMask | chunkSeen)
		}
	}
}

// noteColdRead counts a pread of [pos, end) against the chunks it
// covers (noteRead), by the pages it reads whole: the second read of a
// page queues its chunk for the warmer. Only chunks wholly below size
// (the published size the read loaded) count: the pages of a chunk the
// segment is still filling would be untouched after the warmer's pass.
func (s *Segment) noteColdRead(m *mapping, pos, end, size int64) {
	first, last := (pos+pageBytes-1)/pageBytes, end/pageBytes // whole pages [first, last)
	for c := pos / warmChunkBytes; c*warmChunkBytes < end; c++ {
		start := c * warmChunkBytes
		if start+warmChunkBytes > size {
			return
		}
		p0 := max(first, start/pageBytes) - start/pageBytes
		p1 := min(last, (start+warmChunkBytes)/pageBytes) - start/pageBytes
		if p1 <= p0 {
			continue // no whole page of this chunk: a header, a boundary
		}
		if m.noteRead(c, uint32(1)<<p1-uint32(1)<<p0) {
			warmer.enqueue(warmRequest{s: s, m: m, chunk: c})
		}
	}
}

// warmChunk touches every page of chunk c of m, which must lie below
// the published size, and marks it warm. It holds warmMu, so Close
// cannot unmap m meanwhile (growth, which readers wait for, does not
// take it), and does nothing once the segment's mappings are off
// (closed: m may be unmapped). The touches run under faultGuard: a page
// the file no longer has leaves the chunk queued (reads of it use
// pread) instead of crashing the process.
func (s *Segment) warmChunk(m *mapping, c int64) {
	s.mm.warmMu.Lock()
	defer s.mm.warmMu.Unlock()
	s.mm.mu.Lock()
	off := s.mm.mu.off
	s.mm.mu.Unlock()
	if off {
		return
	}
	start := c * warmChunkBytes
	warmTouches.Add(1)
	err := faultGuard(s.logPath, start, func() error {
		var sum byte
		for i := start; i < start+warmChunkBytes; i += pageBytes {
			sum += m.data[i]
		}
		warmSink.Store(uint32(sum))
		return nil
	})
	if err == nil {
		m.advance(c, chunkQueued, chunkWarm)
	}
}

// warmSink keeps the warmer's loads from being optimized away.
var warmSink atomic.Uint32

// warmTouches counts the chunks the warmer started touching (tests).
var warmTouches atomic.Int64

// warmRequest is one chunk to warm.
type warmRequest struct {
	s     *Segment
	m     *mapping
	chunk int64
}

// maxWarmQueue bounds the warmer's queue (a request is 24 bytes); a
// request past it is dropped and its chunk goes back to seen.
const maxWarmQueue = 4096

// warmer is the process's one background warmer: a goroutine that runs
// while its queue is not empty, so an idle process runs none.
var warmer warmQueue

type warmQueue struct {
	mu struct {
		sync.Mutex
		queue   []warmRequest
		running bool
		idle    *sync.Cond // broadcast when the goroutine exits (tests)
	}
}

// enqueue hands r to the warmer, starting its goroutine if it is not
// running.
func (q *warmQueue) enqueue(r warmRequest) {
	q.mu.Lock()
	if len(q.mu.queue) >= maxWarmQueue {
		q.mu.Unlock()
		r.m.advance(r.chunk, chunkQueued, chunkSeen)
		return
	}
	q.mu.queue = append(q.mu.queue, r)
	start := !q.mu.running
	q.mu.running = true
	q.mu.Unlock()
	if start {
		go q.run()
	}
}

// run warms the queued chunks, oldest first, and exits when the queue
// is empty.
func (q *warmQueue) run() {
	for {
		q.mu.Lock()
		if len(q.mu.queue) == 0 {
			q.mu.running = false
			q.mu.queue = nil
			if q.mu.idle != nil {
				q.mu.idle.Broadcast()
			}
			q.mu.Unlock()
			return
		}
		r := q.mu.queue[0]
		q.mu.queue[0] = warmRequest{}
		q.mu.queue = q.mu.queue[1:]
		q.mu.Unlock()
		r.s.warmChunk(r.m, r.chunk)
	}
}

// wait returns once the warmer has emptied its queue (tests).
func (q *warmQueue) wait() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.mu.idle == nil {
		q.mu.idle = sync.NewCond(&q.mu.Mutex)
	}
	for q.mu.running {
		q.mu.idle.Wait()
	}
}

// WaitWarmer returns once the background warmer has emptied its queue:
// every chunk queued before the call is warm (or was dropped). For tests
// and benchmarks that measure reads of warm chunks.
func WaitWarmer() { warmer.wait() }
