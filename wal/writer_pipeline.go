package wal

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/tierlog/tierlog/remote/objstore"
)

// walObject is one object from its first buffered request to its answer.
//
//	buffered   reqs added under Writer.mu (active == this)
//	sealed     rotateLocked: queued for commit, an upload goroutine started
//	built      upload goroutine: data and commit list from the same entries
//	reserved   ControlPlane.ReserveObject(key)
//	uploaded   Store.Put(key) succeeded; uploaded closed
//	committed  ControlPlane.CommitFiles answered (with the objects
//	           uploaded by then that follow it in sealing order)
//	answered   result/err set, done closed
//
// From sealing on, the object runs under a deadline (ObjectTimeout): the
// timer closes expired and cancels ctx, and the committer answers the
// requests then if the upload or the commit has not answered yet.
type walObject struct {
	key        string
	firstWrite time.Time
	timer      Timer

	// Set by rotateLocked, before the upload goroutine starts.
	sealedAt time.Time
	ctx      context.Context
	cancel   context.CancelFunc
	deadline Timer
	expired  chan struct{} // closed by the deadline timer
	// committing is set by the committer when the object goes into a
	// CommitFiles call.
	committing bool
	// abandoned is set by the committer when the deadline passed before
	// the upload answered (or before the commit could start): the upload
	// goroutine's fields are not to be read before uploaded is closed.
	abandoned bool
	// reqs and bytes grow under Writer.mu while the object is active and
	// are immutable once it is sealed.
	reqs  []*pendingRequest
	bytes int64

	// buildMu orders build, which copies the requests' bytes (the
	// callers' own) into data, against detach, by which a caller that
	// leaves before that takes its bytes back. built is set under it.
	buildMu sync.Mutex
	built   bool

	// Written by the upload goroutine before uploaded is closed. data is
	// nil again once a Put without a Cache succeeded (its buffer went
	// back to Writer.buffers); size stays.
	data      []byte
	size      int64
	commit    CommitFileRequest
	uploadErr error
	uploadDur time.Duration
	uploaded  chan struct{}
	// phases holds the upload goroutine's phases (SlotWait to Put) and
	// uploadedAt when the Put answered; the committer adds the rest.
	phases     ObjectPhases
	uploadedAt time.Time

	// Written by the committer before done is closed.
	result CommitFileResult
	err    error
	done   chan struct{}
}

// pendingRequest is one validated request inside an object.
type pendingRequest struct {
	req   checkedRequest
	index int // position in the caller's request list
	// first is the index of the request's first batch in the commit
	// list; set when the object is built.
	first int
}

func newWALObject(key string, now time.Time) *walObject {
	return &walObject{key: key, firstWrite: now, uploaded: make(chan struct{}), done: make(chan struct{})}
}

// build lays the batches out grouped by partition and derives the commit
// list from the same builder, so the coordinates the control plane stores
// and the bytes never disagree. The requests are sorted here (stably, as
// ObjectBuilder.Build sorts its batches) so that each request's batches
// are a known, contiguous slice of the commit list.
func (o *walObject) build(brokerID int32, brokerEpoch int64, alloc func(size int) []byte) {
	o.buildMu.Lock()
	defer o.buildMu.Unlock()
	o.built = true
	reqs := slices.Clone(o.reqs)
	slices.SortStableFunc(reqs, func(a, b *pendingRequest) int {
		if c := bytes.Compare(a.req.partition.TopicID[:], b.req.partition.TopicID[:]); c != 0 {
			return c
		}
		return cmp.Compare(a.req.partition.Partition, b.req.partition.Partition)
	})
	var ob ObjectBuilder
	n := 0
	for _, pr := range reqs {
		pr.first = n
		for _, b := range pr.req.batches {
			// Framed and validated by Produce: added as it is.
			ob.addFramed(pr.req.partition, b)
			n++
		}
	}
	data, batches := ob.buildInto(alloc)
	o.data = data
	o.size = int64(len(data))
	o.commit = CommitFileRequest{ObjectKey: o.key, ObjectSize: int64(len(data)),
		BrokerID: brokerID, BrokerEpoch: brokerEpoch, Batches: batches}
}

// detach gives reqs private copies of their bytes unless the object has
// copied them already: Produce calls it before it returns early, so that
// the writer never reads a caller's buffer after the call.
func (o *walObject) detach(reqs []*pendingRequest) {
	o.buildMu.Lock()
	defer o.buildMu.Unlock()
	if o.built {
		return
	}
	for _, pr := range reqs {
		pr.req = pr.req.clone()
	}
}

// upload builds, reserves and stores one sealed object. It runs in its own
// goroutine, at most UploadConcurrency at once, under the object's
// deadline: when it passes, obj.ctx is cancelled and the committer stops
// waiting for this goroutine (see abandonUpload).
func (w *Writer) upload(obj *walObject) {
	if h := w.afterUploadForTesting; h != nil {
		defer h(obj.key) // runs last, once uploaded is closed
	}
	defer close(obj.uploaded)
	select {
	case w.uploads <- struct{}{}:
	case <-obj.ctx.Done():
		obj.uploadErr = &StorageError{ObjectKey: obj.key, Err: ErrUploadFailed, Cause: w.deadlineErr()}
		return
	}
	defer func() { <-w.uploads }()
	slot := w.opts.Clock.Now()
	obj.phases.SlotWait = slot.Sub(obj.sealedAt)
	if h := w.beforeBuildForTesting; h != nil {
		h(obj.key)
	}
	obj.build(w.opts.BrokerID, w.opts.BrokerEpoch, w.buffer)
	ctx := obj.ctx
	start := w.opts.Clock.Now()
	obj.phases.Build = start.Sub(slot)
	// Reserve first: if this process dies after the Put, the reservation
	// is what lets the cleaner find and delete the orphan.
	if err := w.opts.ControlPlane.ReserveObject(ctx, obj.key); err != nil {
		obj.uploadErr = &StorageError{ObjectKey: obj.key, Err: ErrUploadFailed, Cause: err}
		return
	}
	reserved := w.opts.Clock.Now()
	obj.phases.Reserve = reserved.Sub(start)
	var err error
	for attempt := 0; ; attempt++ {
		// The key is fresh and reserved for this writer, so a retry
		// after a lost response rewrites the same bytes.
		err = w.opts.Store.Put(ctx, obj.key, bytes.NewReader(obj.data), int64(len(obj.data)), objstore.PutOptions{})
		if err == nil || !retriablePutError(err) || ctx.Err() != nil || attempt+1 >= w.opts.UploadAttempts {
			break
		}
		if !w.sleep(ctx, w.uploadBackoff(attempt)) {
			break // the deadline came first; err is the last Put's
		}
		w.metrics.uploadRetries.Add(1)
	}
	obj.uploadedAt = w.opts.Clock.Now()
	obj.uploadDur = obj.uploadedAt.Sub(start)
	obj.phases.Put = obj.uploadedAt.Sub(reserved)
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w: %w", w.deadlineErr(), err)
		}
		// Never committed, so deleting is safe; if the delete fails too,
		// the reservation expires and the cleaner reaps the object. Not
		// under the object's context: it may have ended.
		_ = w.opts.Store.Delete(context.Background(), obj.key)
		obj.uploadErr = &StorageError{ObjectKey: obj.key, Err: ErrUploadFailed, Cause: err}
		return
	}
	w.metrics.objectsUploaded.Add(1)
	w.metrics.bytesUploaded.Add(obj.size)
	w.recycle(obj)
}

// retriablePutError reports whether a failed Put may succeed if tried
// again: not when the store is closed, the request is malformed, or the
// caller's context ended.
func retriablePutError(err error) bool {
	for _, perm := range []error{objstore.ErrClosed, objstore.ErrInvalidKey, objstore.ErrInvalidArgument,
		objstore.ErrSizeMismatch, context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, perm) {
			return false
		}
	}
	return true
}

// uploadBackoff is the wait before retry attempt+1: a nominal
// UploadBackoff * 2^attempt capped at UploadMaxBackoff, drawn uniformly
// from its upper half (equal jitter), so never above the cap.
func (w *Writer) uploadBackoff(attempt int) time.Duration {
	d := w.opts.UploadMaxBackoff
	// min(cap, UploadBackoff<<attempt), compared before shifting so that
	// the doubling never overflows into a negative wait.
	if attempt < 63 && w.opts.UploadBackoff <= d>>attempt {
		d = w.opts.UploadBackoff << attempt
	}
	half := d / 2
	return half + time.Duration(rand.Int64N(int64(d-half)+1))
}

// sleep waits d on the writer's clock; false if ctx ended first.
func (w *Writer) sleep(ctx context.Context, d time.Duration) bool {
	ch := make(chan struct{})
	t := w.opts.Clock.AfterFunc(d, func() { close(ch) })
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		t.Stop()
		return false
	}
}

func (w *Writer) deadlineErr() error {
	return fmt.Errorf("%w (%v after sealing)", ErrObjectTimeout, w.opts.ObjectTimeout)
}

// maxCommitObjects caps the objects of one CommitFiles call.
const maxCommitObjects = 32

// runCommitter answers the sealed objects in sealing order. It takes the
// oldest one once its upload answered (or its deadline passed) and with
// it every later one whose upload has answered too, up to
// maxCommitObjects, stopping at the first still uploading, and commits
// the uploaded ones in one ControlPlane.CommitFiles call, in sealing
// order (commitGroup). The plane decides them one after the other in
// that order, so one writer's objects get offsets in the order their
// requests were buffered, and its group commit writes them in one
// durable step; objects whose uploads end during the call go in the
// next one. A later object never waits for an earlier one's upload by
// more than that upload (head-of-line blocking by design, as in
// Inkless), and its commit is never sent before the earlier one's
// answer. An object that misses its deadline is answered then and left
// to finish in the background, so that a stalled store or control plane
// delays later objects by at most ObjectTimeout each and never hangs
// Produce or Close; a commit still in flight then may land after a later
// object's.
func (w *Writer) runCommitter() {
	defer close(w.committerDone)
	for {
		head, ok := w.queue.pop()
		if !ok {
			return
		}
		select {
		case <-head.uploaded:
		case <-head.expired:
		}
		group := []*walObject{head}
		for len(group) < maxCommitObjects {
			obj, ok := w.queue.popIf(func(o *walObject) bool { return isClosed(o.uploaded) })
			if !ok {
				break
			}
			group = append(group, obj)
		}
		w.commitGroup(group)
	}
}

// commitGroup commits the objects of group that uploaded in time in one
// CommitFiles call and answers every object of group in order: one whose
// upload failed or missed its deadline at once, the others with their
// commit's outcome, or at their deadline if the call has not answered by
// then. Every object but the head has finished its upload.
func (w *Writer) commitGroup(group []*walObject) {
	commit := make([]*walObject, 0, len(group))
	for _, obj := range group {
		select {
		case <-obj.uploaded:
			switch {
			case obj.uploadErr != nil:
				obj.err = obj.uploadErr
				if errors.Is(obj.err, ErrObjectTimeout) {
					w.metrics.objectsTimedOut.Add(1)
				}
			case isClosed(obj.expired):
				// Stored in time, but the committer got here only after
				// the deadline (held up by earlier objects): a commit
				// under the ended context could not succeed, so none is
				// sent and the object is deleted.
				w.abandonUpload(obj)
			default:
				obj.committing = true
				commit = append(commit, obj)
			}
		default:
			w.abandonUpload(obj)
		}
	}
	var done chan []commitOutcome
	if len(commit) > 0 {
		done = make(chan []commitOutcome, 1)
		// Under the context of the last object, whose deadline is the
		// latest: each earlier object is answered at its own deadline
		// if the call has not answered by then (below), and the call is
		// cancelled only once every object of it is answered.
		ctx := commit[len(commit)-1].ctx
		go func() { done <- w.commitObjects(ctx, commit) }()
	}
	var outs []commitOutcome
	k := 0 // commit[k] is the next object of the call to answer
	for _, obj := range group {
		if !obj.committing {
			w.finish(obj)
			continue
		}
		i := k
		k++
		if outs == nil {
			select {
			case outs = <-done:
			case <-obj.expired:
				select {
				case outs = <-done: // both ready: the answer wins
				default:
					w.metrics.objectsTimedOut.Add(1)
					obj.err = &StorageError{ObjectKey: obj.key, Err: ErrCommitFailed, Cause: w.deadlineErr()}
					w.finish(obj)
					continue
				}
			}
		}
		out := outs[i]
		obj.phases.CommitWait = out.start.Sub(obj.uploadedAt)
		obj.phases.Commit = out.end.Sub(out.start)
		obj.phases.Answer = w.opts.Clock.Now().Sub(out.end)
		if out.err != nil {
			obj.err = out.err
		} else {
			for _, b := range out.res.Batches {
				if b.Err != nil {
					w.metrics.rejected(b.Err)
				}
			}
			obj.result = out.res
		}
		w.finish(obj)
	}
}

// abandonUpload answers an object whose upload missed the deadline (or
// whose commit could not start before it). No CommitFile of it is ever
// sent, so whatever the upload stored is deleted
// when it returns (if it never returns, the reservation expires and the
// cleaner reaps the key).
func (w *Writer) abandonUpload(obj *walObject) {
	obj.abandoned = true
	// The requests are answered now, but the upload goroutine may not
	// have built the object yet: it must not read the callers' buffers
	// after their Produce returned.
	obj.detach(obj.reqs)
	w.metrics.objectsTimedOut.Add(1)
	obj.err = &StorageError{ObjectKey: obj.key, Err: ErrUploadFailed, Cause: w.deadlineErr()}
	go func() {
		<-obj.uploaded
		if obj.uploadErr != nil {
			return // upload cleaned up after itself
		}
		if err := w.opts.Store.Delete(context.Background(), obj.key); err != nil {
			w.opts.Logger.Warn("wal: delete of a timed-out upload failed; left to the reaper",
				zap.String("key", obj.key), zap.Error(err))
			return
		}
		w.metrics.objectsDeletedUncommitted.Add(1)
	}()
}

// isClosed reports whether ch is closed (it is never sent on).
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// commitOutcome is what the commit of one object came to.
type commitOutcome struct {
	res CommitFileResult
	err error
	// start and end bound the CommitFiles call (with retries).
	start, end time.Time
}

// commitObjects registers uploaded objects with one CommitFiles call
// (with retries) and returns each object's outcome. A failed commit is
// cleaned up here, before the answer, so that a caller who sees the
// failure sees the store without the object (unless its deadline passed
// first and it was answered already): the object is deleted only when
// the control plane proves it is not registered, which is a proof only
// now that no commit of it is in flight.
func (w *Writer) commitObjects(ctx context.Context, objs []*walObject) []commitOutcome {
	start := w.opts.Clock.Now()
	outs := w.commitWithRetries(ctx, objs)
	end := w.opts.Clock.Now()
	took := int64(end.Sub(start))
	for i, obj := range objs {
		outs[i].start, outs[i].end = start, end
		w.metrics.commitNanos.Add(took)
		err := outs[i].err
		if err == nil {
			err = checkCommitAnswer(obj.commit, outs[i].res)
		}
		if err != nil {
			w.metrics.commitErrors.Add(1)
			w.afterFailedCommit(obj, err)
			outs[i] = commitOutcome{err: &StorageError{ObjectKey: obj.key, Err: ErrCommitFailed, Cause: err}, start: start, end: end}
			continue
		}
		w.metrics.objectsCommitted.Add(1)
		if w.opts.Cache != nil && !outs[i].res.MarkedForDeletion {
			w.opts.Cache.Put(obj.key, obj.data)
		}
	}
	return outs
}

// commitWithRetries commits objs in one CommitFiles call and retries,
// with the same requests, the ones that failed with an error a retry may
// cure (a retry of a commit that did happen returns its first result).
// A failed object is retried only if no later object of the call
// committed: its retry would be decided after that one, and a later
// object would hold lower offsets than an earlier one.
func (w *Writer) commitWithRetries(ctx context.Context, objs []*walObject) []commitOutcome {
	outs := make([]commitOutcome, len(objs))
	todo := make([]int, len(objs))
	for i := range todo {
		todo[i] = i
	}
	reqs := make([]CommitFileRequest, 0, len(objs))
	for attempt := 0; attempt < w.opts.CommitAttempts && len(todo) > 0; attempt++ {
		reqs = reqs[:0]
		for _, i := range todo {
			reqs = append(reqs, objs[i].commit)
		}
		w.metrics.commitCalls.Add(1)
		res, err := w.opts.ControlPlane.CommitFiles(ctx, reqs)
		if err == nil && len(res) != len(reqs) {
			err = fmt.Errorf("%w: %d answers for %d objects", ErrInconsistentAnswer, len(res), len(reqs))
		}
		if err != nil {
			for _, i := range todo {
				outs[i] = commitOutcome{err: err}
			}
			if !retriableCommitError(err) || ctx.Err() != nil {
				break
			}
			continue
		}
		last := -1
		for j := range res {
			if res[j].Err == nil {
				last = j
			}
		}
		next := todo[:0]
		for j := range res {
			i := todo[j]
			outs[i] = commitOutcome{res: res[j].CommitFileResult, err: res[j].Err}
			if res[j].Err != nil && j > last && retriableCommitError(res[j].Err) {
				next = append(next, i)
			}
		}
		todo = next
		if ctx.Err() != nil {
			break
		}
	}
	return outs
}

// retriableCommitError reports whether a failed commit may succeed if
// sent again.
func retriableCommitError(err error) bool {
	return !errors.Is(err, ErrClosed) && !errors.Is(err, ErrInvalidArgument) &&
		!errors.Is(err, ErrObjectKeyReused) && !errors.Is(err, ErrInconsistentAnswer)
}

// afterFailedCommit decides the fate of an object whose commit failed
// (and returned: no commit of it is in flight). It runs on the commit's
// goroutine, before the requests are answered unless the deadline passes
// first, and not under the object's context, which may have ended.
func (w *Writer) afterFailedCommit(obj *walObject, cause error) {
	ctx := context.Background()
	safe, err := w.opts.ControlPlane.IsSafeToDeleteObject(ctx, obj.key)
	switch {
	case err != nil:
		w.opts.Logger.Warn("wal: commit outcome unknown and unprovable; object kept",
			zap.String("key", obj.key), zap.Error(err))
		w.metrics.objectsKept.Add(1)
	case !safe:
		// Committed after all: its batches are live and the cleaner
		// deletes it once they are gone.
		w.opts.Logger.Warn("wal: commit answer lost but the object is registered; kept",
			zap.String("key", obj.key), zap.Error(cause))
		w.metrics.objectsKept.Add(1)
	default:
		if derr := w.opts.Store.Delete(ctx, obj.key); derr != nil {
			w.opts.Logger.Warn("wal: delete of an uncommitted object failed; left to the reaper",
				zap.String("key", obj.key), zap.Error(derr))
			return
		}
		w.metrics.objectsDeletedUncommitted.Add(1)
	}
}

// checkCommitAnswer rejects an answer that contradicts its request, which
// would otherwise hand producers offsets nobody can read.
func checkCommitAnswer(req CommitFileRequest, res CommitFileResult) error {
	if len(res.Batches) != len(req.Batches) {
		return fmt.Errorf("%w: %d results for %d batches", ErrInconsistentAnswer, len(res.Batches), len(req.Batches))
	}
	accepted := false
	for i, b := range res.Batches {
		var rej *BatchRejectedError
		switch {
		case b.Err == nil && b.BaseOffset < 0:
			return fmt.Errorf("%w: batch %d accepted at offset %d", ErrInconsistentAnswer, i, b.BaseOffset)
		case b.Err != nil && !errors.As(b.Err, &rej):
			return fmt.Errorf("%w: batch %d: untyped rejection %v", ErrInconsistentAnswer, i, b.Err)
		}
		accepted = accepted || b.Err == nil
	}
	if accepted == res.MarkedForDeletion {
		return fmt.Errorf("%w: marked for deletion %v with accepted batches %v", ErrInconsistentAnswer, res.MarkedForDeletion, accepted)
	}
	return nil
}

// finish answers an object's requests and frees its budget.
func (w *Writer) finish(obj *walObject) {
	obj.deadline.Stop()
	info := ObjectInfo{Key: obj.key, Requests: len(obj.reqs), Phases: ObjectPhases{Filling: obj.sealedAt.Sub(obj.firstWrite)}}
	if !obj.abandoned {
		info.Bytes, info.Batches, info.UploadDuration = obj.size, len(obj.commit.Batches), obj.uploadDur
		p := obj.phases
		p.Filling = info.Phases.Filling
		info.Phases = p
		// The upload returned; a commit still in flight passed its
		// deadline, which cancelled the context already.
		obj.cancel()
	}
	if obj.err != nil {
		w.opts.Logger.Warn("wal: object failed", zap.String("key", obj.key), zap.Int("requests", len(obj.reqs)), zap.Error(obj.err))
		if f := w.opts.Listener.ObjectFailed; f != nil {
			f(info, obj.err)
		}
	} else if f := w.opts.Listener.ObjectCommitted; f != nil {
		f(info)
	}
	close(obj.done)
	w.release(obj)
}

// buffer returns a buffer of capacity at least size to build an object
// of size bytes into: a kept one, or a new one that holds an object of
// MaxBytes with its footer, so that it serves every later object too.
// Buffers are kept only without a Cache, which keeps the objects it is
// given (and then each gets a buffer of its own size).
func (w *Writer) buffer(size int) []byte {
	if w.opts.Cache != nil {
		return make([]byte, 0, size)
	}
	if b := w.buffers.get(size); b != nil {
		return b
	}
	return make([]byte, 0, max(size, w.buffers.maxCap))
}

// recycle keeps an object's buffer for a later build once its Put
// succeeded (a failed one may still be reading it; an abandoned upload
// runs this on its own goroutine, which owns the buffer), and only
// without a Cache. It runs on the upload goroutine, before uploaded is
// closed.
func (w *Writer) recycle(obj *walObject) {
	if w.opts.Cache != nil || obj.data == nil {
		return
	}
	w.buffers.put(obj.data[:0])
	obj.data = nil
}

// bufferPool keeps the buffers of stored objects for later builds, so
// that a busy writer builds into memory it has touched before instead of
// a fresh allocation per object (whose page faults and collections cost
// more than the copy into it). It keeps at most max buffers, each of at
// most maxCap bytes, preferring the largest: at most max * maxCap bytes.
// Safe for concurrent use.
type bufferPool struct {
	max    int
	maxCap int
	mu     sync.Mutex
	bufs   [][]byte // guarded by mu; each of length 0
}

// get returns the smallest kept buffer of capacity at least size, or nil.
func (p *bufferPool) get(size int) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	best := -1
	for i, b := range p.bufs {
		if cap(b) >= size && (best < 0 || cap(b) < cap(p.bufs[best])) {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	b := p.bufs[best]
	last := len(p.bufs) - 1
	p.bufs[best] = p.bufs[last]
	p.bufs[last] = nil
	p.bufs = p.bufs[:last]
	return b
}

// put keeps b unless it is larger than maxCap, or the pool is full of
// buffers no smaller than b.
func (p *bufferPool) put(b []byte) {
	if cap(b) > p.maxCap || p.max <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.bufs) < p.max {
		p.bufs = append(p.bufs, b)
		return
	}
	smallest := 0
	for i := range p.bufs {
		if cap(p.bufs[i]) < cap(p.bufs[smallest]) {
			smallest = i
		}
	}
	if cap(p.bufs[smallest]) < cap(b) {
		p.bufs[smallest] = b
	}
}

// commitQueue holds the sealed objects in sealing order. It is unbounded:
// the in-flight byte budget bounds it.
type commitQueue struct {
	mu     sync.Mutex
	items  []*walObject
	closed bool
	wake   chan struct{} // capacity 1
}

func (q *commitQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *commitQueue) push(o *walObject) {
	q.mu.Lock()
	q.items = append(q.items, o)
	q.mu.Unlock()
	q.signal()
}

func (q *commitQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.signal()
}

// popIf returns the oldest object if there is one and ok(o) holds; it
// never blocks.
func (q *commitQueue) popIf(ok func(*walObject) bool) (*walObject, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.items) == 0 || !ok(q.items[0]) {
		return nil, false
	}
	o := q.items[0]
	q.items[0] = nil
	q.items = q.items[1:]
	return o, true
}

// pop returns the oldest object, blocking until there is one; false once
// the queue is closed and empty.
func (q *commitQueue) pop() (*walObject, bool) {
	for {
		q.mu.Lock()
		if len(q.items) > 0 {
			o := q.items[0]
			q.items[0] = nil
			q.items = q.items[1:]
			q.mu.Unlock()
			return o, true
		}
		closed := q.closed
		q.mu.Unlock()
		if closed {
			return nil, false
		}
		<-q.wake
	}
}
