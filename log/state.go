package log

import "github.com/tierlog/tierlog/internal/invariants"

// Offsets are the log's offsets at one instant: every value was current
// at the same moment, so log start <= local log start and last stable
// offset <= high watermark <= log end offset hold between them.
type Offsets struct {
	// LogStartOffset is the first offset readable anywhere (local or
	// remote); LocalLogStartOffset the first readable locally.
	LogStartOffset      int64
	LocalLogStartOffset int64
	// HighWatermark: offsets below it are committed.
	HighWatermark int64
	// LastStableOffset is min(first unstable offset, high watermark).
	LastStableOffset int64
	// FirstUnstableOffset is the first offset of the oldest transaction
	// not yet decided, -1 if none.
	FirstUnstableOffset int64
	// LogEndOffset is the offset the next appended record receives.
	LogEndOffset int64
}

// readState is what a reader sees of the log in one atomic load: the
// segment view and the offsets that describe it. The writer builds its
// changes with l.mu held and publishes them together, so a reader never
// pairs a high watermark from before a truncation with the log end
// offset after it, nor a segment list with offsets it does not hold.
//
// view is not a counted reference of the state: the log holds the one
// reference of the current view (l.view). A reader pins the view with
// tryRef; if the view died meanwhile, the writer has already published
// the state that replaced it (publishLocked stores the new state before
// it releases the old view), so the reader's retry finds it at once.
type readState struct {
	view    *segmentView
	offsets Offsets
}

// Offsets returns the log's offsets, all from one instant. Lock-free.
func (l *UnifiedLog) Offsets() Offsets {
	s := l.state.Load()
	if s == nil { // only inside Open, before the first publication
		return Offsets{FirstUnstableOffset: -1}
	}
	return s.offsets
}

// acquireState loads the current state and pins its view; the caller
// must unref the view. It fails only after Close or Delete released the
// last view.
func (l *UnifiedLog) acquireState() (*readState, error) {
	for {
		s := l.state.Load()
		if s == nil { // only inside Open, before the first publication
			return nil, ErrClosed
		}
		if s.view.tryRef() {
			return s, nil
		}
		// The view died: either the writer replaced it (retry: the new
		// state is already stored) or the log was closed.
		if l.released.Load() {
			return nil, ErrClosed
		}
	}
}

// acquireView pins the current segment view; the caller must unref it.
func (l *UnifiedLog) acquireView() (*segmentView, error) {
	s, err := l.acquireState()
	if err != nil {
		return nil, err
	}
	return s.view, nil
}

// stagedOffsetsLocked collects the writer's working copy of the offsets.
//
// REQUIRES: l.mu held.
func (l *UnifiedLog) stagedOffsetsLocked() Offsets {
	o := Offsets{
		LogStartOffset:      l.logStartOffset.Load(),
		LocalLogStartOffset: l.localLogStartOffset.Load(),
		HighWatermark:       l.highWatermark.Load(),
		FirstUnstableOffset: l.firstUnstableOffset.Load(),
		LogEndOffset:        l.logEndOffset.Load(),
	}
	o.LastStableOffset = o.HighWatermark
	if fuo := o.FirstUnstableOffset; fuo >= 0 && fuo < o.HighWatermark {
		o.LastStableOffset = fuo
	}
	return o
}

// publishLocked makes l.mu.segments the view readers see, with the
// staged offsets, and releases the log's reference to the previous view.
// Callers stage every offset change of the operation first.
//
// REQUIRES: l.mu held.
func (l *UnifiedLog) publishLocked() {
	segs := make([]*segmentRef, len(l.mu.segments))
	copy(segs, l.mu.segments)
	v := newView(segs)
	old := l.view.Swap(v)
	l.storeStateLocked(v)
	if old != nil {
		old.unref() // after the new state is stored: see readState
	}
}

// publishOffsetsLocked publishes the staged offsets with the current
// view. Every writer operation that changes an offset ends with it (or
// with publishLocked), after its last change: readers see the operation
// whole or not at all.
//
// REQUIRES: l.mu held.
func (l *UnifiedLog) publishOffsetsLocked() { l.storeStateLocked(l.view.Load()) }

// assertPublishedLocked checks, under invariants, that the operation
// ending here published every offset it staged. Called on success only:
// a failed operation may leave staged changes on a log that refuses
// writes from then on.
//
// REQUIRES: l.mu held.
func (l *UnifiedLog) assertPublishedLocked() {
	if !invariants.Enabled {
		return
	}
	s := l.state.Load()
	invariants.Assertf(s != nil && s.view == l.view.Load() && s.offsets == l.stagedOffsetsLocked(),
		"unpublished log state: staged %+v", l.stagedOffsetsLocked())
}

// storeStateLocked stores a new state for view v.
//
// REQUIRES: l.mu held.
func (l *UnifiedLog) storeStateLocked(v *segmentView) {
	o := l.stagedOffsetsLocked()
	invariants.Assertf(o.LogStartOffset <= o.LocalLogStartOffset && o.LogStartOffset <= o.HighWatermark &&
		o.LastStableOffset <= o.HighWatermark && o.HighWatermark <= o.LogEndOffset,
		"publishing inconsistent offsets %+v", o)
	s := l.nextStateLocked()
	*s = readState{view: v, offsets: o}
	prev := l.state.Swap(s)
	if prev != nil {
		l.wakeMovedLocked(prev.offsets, o) // after the store: see wait.go
	}
}

// stateSlabLen is how many read states one allocation provides.
const stateSlabLen = 64

// nextStateLocked returns an unused readState. Every append publishes a
// new state, so states come from slabs of stateSlabLen: one allocation per
// stateSlabLen publications instead of one per append, and the append
// path stays allocation-free on average. Race-free because each element
// is written exactly once, under l.mu, before the atomic store that
// publishes it, and never written again; a reader still holding an old
// state keeps its slab alive, which the garbage collector handles.
//
// REQUIRES: l.mu held.
func (l *UnifiedLog) nextStateLocked() *readState {
	if len(l.mu.stateSlab) == 0 {
		l.mu.stateSlab = make([]readState, stateSlabLen)
	}
	s := &l.mu.stateSlab[0]
	l.mu.stateSlab = l.mu.stateSlab[1:]
	return s
}
