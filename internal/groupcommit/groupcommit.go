// Package groupcommit gathers calls that arrive while a group of earlier
// ones is being written, so that a control plane writes them together in
// one durable step: the writer queue of LevelDB and Pebble's commit
// pipeline. The first caller to find no leader leads: it takes up to
// max calls from the head of the queue (its own first), writes them,
// and hands the lead to the new head of the queue, if any. Every other
// caller waits until a leader wrote its call or it becomes the leader.
//
// What a call carries (its request, its answer) is the caller's: write
// answers each call of the group it is given before it returns.
package groupcommit

import "sync"

// Queue is a group-commit queue of calls of type C. The zero value is
// ready to use.
type Queue[C any] struct {
	mu sync.Mutex
	// pending are the calls not yet taken, in arrival order. Guarded by
	// mu.
	pending []*waiter[C]
	// leading is true from a leader's enqueue to the hand-off that finds
	// the queue empty. Guarded by mu.
	leading bool
}

type waiter[C any] struct {
	c C
	// lead is set before wake is signalled when the waiter is to lead the
	// next group instead of having been written.
	lead bool
	wake chan struct{}
}

// Do enqueues c and returns once c has been written: by a leader that
// called write with a group holding c, or by this call leading. write
// gets at most max calls (max >= 1), in arrival order; it is called by
// one leader at a time.
func (q *Queue[C]) Do(c C, max int, write func(group []C)) {
	w := &waiter[C]{c: c, wake: make(chan struct{}, 1)}
	q.mu.Lock()
	q.pending = append(q.pending, w)
	lead := !q.leading
	q.leading = true
	q.mu.Unlock()
	if !lead {
		<-w.wake
		if !w.lead {
			return
		}
	}
	// The leader is the head of the queue (it enqueued into an empty one,
	// or was handed the lead as its head), so its call is in the group.
	ws := q.take(max)
	group := make([]C, len(ws))
	for i, x := range ws {
		group[i] = x.c
	}
	write(group)
	for _, x := range ws {
		if x != w {
			x.wake <- struct{}{}
		}
	}
	q.handOff()
}

// take removes up to n waiters from the head of the queue.
func (q *Queue[C]) take(n int) []*waiter[C] {
	q.mu.Lock()
	defer q.mu.Unlock()
	n = max(1, min(n, len(q.pending)))
	ws := append([]*waiter[C](nil), q.pending[:n]...)
	rest := copy(q.pending, q.pending[n:])
	clear(q.pending[rest:])
	q.pending = q.pending[:rest]
	return ws
}

// handOff ends a leader's turn: the head of the queue leads next.
func (q *Queue[C]) handOff() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.pending) == 0 {
		q.leading = false
		return
	}
	next := q.pending[0]
	next.lead = true
	next.wake <- struct{}{}
}

// Live is a group's calls in arrival order (the calls of one entry in
// their list order) without those refused answers first: a refused call
// (its context ended, say) is answered by refused itself and left out.
func Live[C any](group [][]C, refused func(C) bool) []C {
	n := 0
	for _, e := range group {
		n += len(e)
	}
	live := make([]C, 0, n)
	for _, e := range group {
		for _, c := range e {
			if !refused(c) {
				live = append(live, c)
			}
		}
	}
	return live
}
