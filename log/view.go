package log

import (
	"sort"
	"sync/atomic"

	"github.com/tierlog/tierlog/internal/invariants"
	"github.com/tierlog/tierlog/log/internal/producer"
	"github.com/tierlog/tierlog/log/internal/segment"
)

// segmentRef is a segment shared by the views that list it. refs counts
// those views; when it drops to zero the segment's file handles are
// closed. Its files are removed (or replaced, by a truncation) when the
// log drops it from the current view, not when the last reader lets go:
// on Linux and in pebble's MemFS an open handle keeps reading the old
// file, so a reader of an older view is never cut short.
type segmentRef struct {
	*segment.Segment
	refs atomic.Int32
	// txn is the segment's aborted-transaction index (never nil). The
	// writer appends to the active segment's under l.mu; readers collect
	// from it concurrently (TxnIndex has its own leaf mutex).
	txn *producer.TxnIndex
	// txnPersisted is the number of entries the .txnindex file holds, -1
	// if unknown (the file must be rewritten). Written by the writer with
	// l.flushMu or on a closed log; see writeTxnIndex.
	txnPersisted atomic.Int64
}

// newSegmentRef wraps a segment with its transaction index (nil: empty)
// and the number of entries its file holds (-1: unknown).
func newSegmentRef(s *segment.Segment, txn *producer.TxnIndex, persisted int64) *segmentRef {
	if txn == nil {
		txn = &producer.TxnIndex{}
	}
	r := &segmentRef{Segment: s, txn: txn}
	r.txnPersisted.Store(persisted)
	return r
}

// segmentView is an immutable list of the log's segments, sorted by base
// offset; the last one is the active segment. Readers pin a view with
// acquire and release it when done, so the writer can replace the list
// (roll, truncation, retention) without waiting for them.
//
// refs counts the log's own reference (while the view is current) plus
// one per reader. Race-free because a reader only increments a count that
// is still positive (CAS loop in acquire): once the count reached zero the
// view is dead and the reader retries with the current one.
type segmentView struct {
	segments []*segmentRef
	refs     atomic.Int32
}

func newView(segments []*segmentRef) *segmentView {
	v := &segmentView{segments: segments}
	v.refs.Store(1) // the log's reference
	for _, s := range segments {
		s.refs.Add(1)
	}
	if invariants.Enabled {
		for i := 1; i < len(segments); i++ {
			invariants.Assertf(segments[i-1].BaseOffset() < segments[i].BaseOffset(),
				"segments out of order: %d then %d", segments[i-1].BaseOffset(), segments[i].BaseOffset())
		}
	}
	return v
}

// tryRef takes a reference if the view is still alive.
func (v *segmentView) tryRef() bool {
	for {
		r := v.refs.Load()
		if r <= 0 {
			return false
		}
		if v.refs.CompareAndSwap(r, r+1) {
			return true
		}
	}
}

// unref drops a reference; the last one releases the view's segments.
func (v *segmentView) unref() {
	r := v.refs.Add(-1)
	invariants.Assertf(r >= 0, "segment view released %d times too often", -r)
	if r != 0 {
		return
	}
	for _, s := range v.segments {
		if s.refs.Add(-1) == 0 {
			// Every view listing s is gone; nobody can reach it. A close
			// error on a handle only read from loses nothing.
			_ = s.Close()
		}
	}
}

// active returns the active (last) segment.
func (v *segmentView) active() *segmentRef { return v.segments[len(v.segments)-1] }

// floor returns the index of the segment holding offset: the last one
// whose base offset is <= offset, or -1 if offset is below every base.
func (v *segmentView) floor(offset int64) int {
	i := sort.Search(len(v.segments), func(i int) bool { return v.segments[i].BaseOffset() > offset })
	return i - 1
}

// size returns the total bytes of the view's segment files.
func (v *segmentView) size() int64 {
	var n int64
	for _, s := range v.segments {
		n += s.Size()
	}
	return n
}
