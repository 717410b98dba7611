package log

import (
	"context"
	"fmt"
	"sync/atomic"
)

// Waiting for data: a long-polling fetch (Kafka's DelayedFetch) parks
// until the bound it reads under passes its fetch offset.
//
// Each bound (log end offset, high watermark, last stable offset: one per
// Isolation) has a generation: a channel in an atomic pointer, installed
// by the first waiter that finds none and shared by every later one. The
// writer, when it publishes a state that moves the bound (storeStateLocked,
// under l.mu), swaps the pointer to nil and closes the channel: one close
// wakes every waiter of that generation, and each re-checks the published
// offsets and, if still short, joins the next generation. No goroutine
// per waiter, no lock taken by a waiter, and no allocation per waiter
// beyond its select; the writer pays one atomic load per bound and
// publication while nobody waits.
//
// No wake-up is lost: a waiter takes the channel before it loads the
// offsets, and the writer stores the offsets before it swaps the channel
// out, so either the waiter sees the new offsets or the writer closes the
// channel the waiter holds (a channel leaves the pointer only by that
// swap, which closes it).

// waitGen is one generation of a bound's waiters.
type waitGen struct{ ch chan struct{} }

// waitBounds are the log's generations, indexed by Isolation.
type waitBounds [3]atomic.Pointer[waitGen]

// closedChan is returned by Watch on a closed log.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// channel returns the current generation's channel of g, installing one
// if none exists.
func channel(g *atomic.Pointer[waitGen]) <-chan struct{} {
	for {
		if w := g.Load(); w != nil {
			return w.ch
		}
		w := &waitGen{ch: make(chan struct{})}
		if g.CompareAndSwap(nil, w) {
			return w.ch
		}
	}
}

// wake closes the current generation of g, if any waiter made one.
// Never blocks: safe under l.mu.
func wake(g *atomic.Pointer[waitGen]) {
	if g.Load() == nil {
		return
	}
	if w := g.Swap(nil); w != nil {
		close(w.ch)
	}
}

// wakeMovedLocked wakes the waiters of each bound that differs between
// the published offsets prev and next. A fall of the log end offset (a
// truncation) wakes every bound: a waiter whose offset is now beyond the
// log end must learn it even if its own bound did not change.
//
// REQUIRES: l.mu held, next already stored in l.state.
func (l *UnifiedLog) wakeMovedLocked(prev, next Offsets) {
	truncated := next.LogEndOffset < prev.LogEndOffset
	if truncated || next.LogEndOffset != prev.LogEndOffset {
		wake(&l.waits[IsolationLogEnd])
	}
	if truncated || next.HighWatermark != prev.HighWatermark {
		wake(&l.waits[IsolationHighWatermark])
	}
	if truncated || next.LastStableOffset != prev.LastStableOffset {
		wake(&l.waits[IsolationCommitted])
	}
}

// wakeAll wakes every waiter (Close, Delete, a write failure).
func (l *UnifiedLog) wakeAll() {
	for i := range l.waits {
		wake(&l.waits[i])
	}
}

// Watch returns the log's offsets and a channel that is closed once the
// bound of isolation (log end offset, high watermark or last stable
// offset) may have moved since those offsets: it changed, the log end
// offset fell (a truncation), the log went offline or was closed. It is
// the primitive under WaitFor for a caller that waits on many partitions
// at once (one select over their channels, or one goroutine that fans
// them in): after the channel closes, call Watch again. The channel is
// shared with every other watcher of the same bound; on a closed log it
// is already closed, and so it is for an isolation other than the three
// (WaitFor refuses one with ErrInvalidArgument).
func (l *UnifiedLog) Watch(isolation Isolation) (Offsets, <-chan struct{}) {
	if isolation < IsolationLogEnd || isolation > IsolationCommitted {
		return l.Offsets(), closedChan
	}
	// The channel first, then the offsets: see the comment at the top.
	ch := channel(&l.waits[isolation])
	if l.released.Load() {
		return l.Offsets(), closedChan
	}
	return l.Offsets(), ch
}

// isolationBound is the offset Read stops at under isolation.
func isolationBound(o Offsets, isolation Isolation) int64 {
	switch isolation {
	case IsolationHighWatermark:
		return o.HighWatermark
	case IsolationCommitted:
		return o.LastStableOffset
	}
	return o.LogEndOffset
}

// WaitFor blocks until the bound a Read under isolation stops at passes
// offset, that is, until a Read at offset with that isolation can return
// records: the log end offset (IsolationLogEnd, a follower's fetch), the
// high watermark (IsolationHighWatermark, a read_uncommitted consumer) or
// the last stable offset (IsolationCommitted, a read_committed consumer)
// is strictly greater than offset. A consumer at fetch offset o therefore
// waits with offset o. It returns the offsets it decided on, all from one
// instant, and:
//
//   - nil once the bound is > offset (immediately if it already is);
//   - ctx.Err() when ctx ends first;
//   - ErrClosed once the log is closed or deleted;
//   - an *OffsetRangeError wrapping ErrOffsetOutOfRange when offset is
//     above the log end offset: a truncation below offset wakes the
//     waiters with it, and a Read at offset would return the same error
//     (Kafka completes a DelayedFetch whose offset the log was truncated
//     below, and its read answers OFFSET_OUT_OF_RANGE);
//   - the log's write failure once the log refuses writes after an I/O
//     failure and the bound has not passed offset (it wraps ErrIO; Kafka
//     completes the fetch with KAFKA_STORAGE_ERROR).
//
// The check is made against published offsets only, as a Read's is: a
// truncation below offset followed by appends that carry the log end
// offset past it again before the waiter runs is seen as data arriving.
// Divergence is the follower's fetch protocol's to detect (the leader
// epoch it fetches with), not the wait's.
//
// WaitFor starts no goroutine and takes no lock; thousands of waiters on
// one bound share one channel, closed once by the publication that moves
// the bound. An isolation other than the three is ErrInvalidArgument.
func (l *UnifiedLog) WaitFor(ctx context.Context, offset int64, isolation Isolation) (Offsets, error) {
	if isolation < IsolationLogEnd || isolation > IsolationCommitted {
		return l.Offsets(), fmt.Errorf("log: wait for %v: %w", isolation, ErrInvalidArgument)
	}
	g := &l.waits[isolation]
	for {
		// A first check without a channel: a bound already past offset
		// (the common case of a fetch that finds data) costs nothing.
		if o, done, err := l.waitCheck(offset, isolation); done {
			return o, err
		}
		ch := channel(g) // before the offsets: see the comment at the top
		if o, done, err := l.waitCheck(offset, isolation); done {
			return o, err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return l.Offsets(), ctx.Err()
		}
	}
}

// waitCheck decides whether WaitFor returns, on the published offsets.
func (l *UnifiedLog) waitCheck(offset int64, isolation Isolation) (Offsets, bool, error) {
	if l.released.Load() {
		return l.Offsets(), true, ErrClosed
	}
	o := l.Offsets()
	if isolationBound(o, isolation) > offset {
		return o, true, nil
	}
	if offset > o.LogEndOffset {
		return o, true, rangeError(o, offset, ErrOffsetOutOfRange)
	}
	if f := l.offline.Load(); f != nil {
		return o, true, f.err
	}
	return o, false, nil
}

// offlineErr holds the write failure that took the log offline, for
// waiters, which do not take l.mu.
type offlineErr struct{ err error }
