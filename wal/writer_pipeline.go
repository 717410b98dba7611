package wal

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote/objstore"
)

// walObject is one object from its first buffered request to its answer.
//
//	buffered   reqs added under Writer.mu (active == this); its key's
//	           reservation (ControlPlane.ReserveObject) starts with the
//	           first request, in a goroutine of its own
//	sealed     rotateLocked: queued for commit, an upload goroutine started
//	reserved   the reservation answered; the upload waits for it
//	built      upload goroutine, in an upload slot: layout and commit
//	           list from the same entries
//	uploaded   Store.Put(key) succeeded; uploaded closed
//	committed  ControlPlane.CommitFiles answered (with the objects
//	           uploaded by then that follow it in sealing order)
//	answered   result/err set, done closed
//
// Without a Cache the object is never copied: Put reads it from the
// requests' own bytes (objectBody). From sealing on, the object runs under
// a deadline (ObjectTimeout): the timer closes expired and cancels ctx,
// and the committer answers the requests then if the upload or the commit
// has not answered yet.
type walObject struct {
	key        string
	firstWrite time.Time
	timer      Timer
	// ctx and cancel are set at creation: the reservation runs under ctx
	// from the first request on; the deadline timer (set at sealing)
	// cancels it.
	ctx    context.Context
	cancel context.CancelFunc

	// Written by the reservation goroutine before reserved is closed.
	reserveErr  error
	reservedAt  time.Time
	reserveCall time.Duration
	reserved    chan struct{}

	// Set by rotateLocked, before the upload goroutine starts.
	sealedAt time.Time
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

	// srcMu orders the upload's reads of the requests' bytes (the
	// callers' own: build, and every Read of the object's body during a
	// Put) against detach, by which a caller that leaves first takes its
	// bytes back. The fields below it are guarded by it.
	srcMu sync.Mutex
	// srcDone is set once the upload reads the requests' bytes no more:
	// it copied them (with a Cache), or its last Put returned.
	srcDone bool
	// sorted is reqs in object order (set by build): the body is their
	// bytes, then footer.
	sorted []*pendingRequest
	footer []byte

	// Written by the upload goroutine before uploaded is closed. data is
	// the object's bytes when they were copied (with a Cache, which keeps
	// them); nil otherwise.
	data      []byte
	size      int64
	commit    CommitFileRequest
	uploadErr error
	uploadDur time.Duration
	uploaded  chan struct{}
	// phases holds the upload goroutine's phases (ReserveCall,
	// ReserveWait to Put) and uploadedAt when the Put answered; the
	// committer adds the rest.
	phases     ObjectPhases
	uploadedAt time.Time

	// Written by the committer before done is closed.
	result CommitFileResult
	err    error
	done   chan struct{}
}

// pendingRequest is one validated request inside an object.
type pendingRequest struct {
	// req is guarded by the object's srcMu once the object exists (detach
	// replaces it with a private copy).
	req   checkedRequest
	index int // position in the caller's request list
	// first is the index of the request's first batch in the commit
	// list; set when the object is built.
	first int
	// one holds req.batches when the request has one batch, so that
	// framing it allocates nothing.
	one [1]record.Batch
}

func newWALObject(key string, now time.Time) *walObject {
	o := &walObject{key: key, firstWrite: now, reserved: make(chan struct{}), uploaded: make(chan struct{}), done: make(chan struct{})}
	o.ctx, o.cancel = context.WithCancel(context.Background())
	return o
}

// build lays the batches out grouped by partition and derives the commit
// list from the same builder, so the coordinates the control plane stores
// and the bytes never disagree. The requests are sorted here (stably, as
// ObjectBuilder.Build sorts its batches) so that each request's batches
// are a known, contiguous slice of the commit list, and its bytes a
// contiguous part of the object. With copy, the bytes are copied into
// data (the object a Cache keeps); otherwise Put reads them from the
// requests (body).
func (o *walObject) build(brokerID int32, brokerEpoch int64, copy bool) {
	o.srcMu.Lock()
	defer o.srcMu.Unlock()
	reqs := slices.Clone(o.reqs)
	slices.SortStableFunc(reqs, func(a, b *pendingRequest) int {
		if c := bytes.Compare(a.req.partition.TopicID[:], b.req.partition.TopicID[:]); c != 0 {
			return c
		}
		return cmp.Compare(a.req.partition.Partition, b.req.partition.Partition)
	})
	n := 0
	for _, pr := range reqs {
		n += len(pr.req.batches)
	}
	ob := ObjectBuilder{entries: make([]objectEntry, 0, n)}
	n = 0
	for _, pr := range reqs {
		pr.first = n
		for _, b := range pr.req.batches {
			// Framed and validated (its CRC too) by Produce: added
			// as it is.
			ob.addChecked(pr.req.partition, b)
			n++
		}
	}
	l := ob.layout()
	o.sorted, o.footer = reqs, l.parts[len(l.parts)-1]
	o.size = l.size
	o.commit = CommitFileRequest{ObjectKey: o.key, ObjectSize: l.size,
		BrokerID: brokerID, BrokerEpoch: brokerEpoch, Batches: l.batches}
	if copy {
		o.data = l.concat()
		o.srcDone = true
	}
}

// detach gives reqs private copies of their bytes unless the upload reads
// them no more: Produce calls it before it returns early, so that the
// writer never reads a caller's buffer after the call. A Put reading the
// body goes on from the copies, which hold the same bytes.
func (o *walObject) detach(reqs []*pendingRequest) {
	o.srcMu.Lock()
	defer o.srcMu.Unlock()
	if o.srcDone {
		return
	}
	for _, pr := range reqs {
		pr.req = pr.req.clone()
	}
}

// body returns a reader of the built object for one Put: its data if it
// was copied, else the requests' bytes and the footer. Call end once the
// Put returned: an objectBody then fails every later Read, so a store
// that reads after its Put returned (an HTTP transport may, after an
// error) never sees bytes a caller reused.
func (o *walObject) body() (io.Reader, func()) {
	if o.data != nil {
		return bytes.NewReader(o.data), func() {}
	}
	b := &objectBody{obj: o}
	return b, func() {
		o.srcMu.Lock()
		b.ended = true
		o.srcMu.Unlock()
	}
}

// objectBody reads an object that was not copied: the bytes of obj.sorted
// in order, then obj.footer, each Read under obj.srcMu (so that it reads
// either a caller's bytes or detach's copy of them, never a buffer the
// caller got back). It seeks, so that a store may rewind it for a retry.
type objectBody struct {
	obj   *walObject
	pos   int64 // the next byte to read
	seg   int   // the part holding pos: an index of obj.sorted, or len(obj.sorted) for the footer
	off   int   // pos's offset in that part
	ended bool  // guarded by obj.srcMu
}

// errBodyEnded is what an objectBody answers once its Put returned.
var errBodyEnded = errors.New("wal: object body read after its Put returned")

// part returns part i of the body. REQUIRES: obj.srcMu held.
func (b *objectBody) part(i int) []byte {
	if i < len(b.obj.sorted) {
		return b.obj.sorted[i].req.data
	}
	return b.obj.footer
}

func (b *objectBody) Read(p []byte) (int, error) {
	b.obj.srcMu.Lock()
	defer b.obj.srcMu.Unlock()
	if b.ended {
		return 0, errBodyEnded
	}
	n := 0
	for n < len(p) && b.seg <= len(b.obj.sorted) {
		part := b.part(b.seg)
		k := copy(p[n:], part[b.off:])
		n += k
		b.off += k
		if b.off == len(part) {
			b.seg, b.off = b.seg+1, 0
		}
	}
	b.pos += int64(n)
	if n == 0 && len(p) > 0 {
		return 0, io.EOF
	}
	return n, nil
}

func (b *objectBody) Seek(offset int64, whence int) (int64, error) {
	b.obj.srcMu.Lock()
	defer b.obj.srcMu.Unlock()
	switch whence {
	case io.SeekCurrent:
		offset += b.pos
	case io.SeekEnd:
		offset += b.obj.size
	case io.SeekStart:
	default:
		return 0, fmt.Errorf("wal: object body: whence %d", whence)
	}
	if offset < 0 || offset > b.obj.size {
		return 0, fmt.Errorf("wal: object body: seek to %d of %d bytes", offset, b.obj.size)
	}
	b.pos, b.seg, b.off = offset, 0, 0
	for rest := offset; rest > 0; b.seg++ {
		if n := int64(len(b.part(b.seg))); rest < n {
			b.off = int(rest)
			break
		} else {
			rest -= n
		}
	}
	return offset, nil
}

// reserve records the object's key with the control plane, from its
// first request on (overlapping its filling), at most UploadConcurrency
// at once, under the object's context.
func (w *Writer) reserve(obj *walObject) {
	defer close(obj.reserved)
	select {
	case w.reserves <- struct{}{}:
	case <-obj.ctx.Done():
		obj.reserveErr = obj.ctx.Err()
		return
	}
	defer func() { <-w.reserves }()
	start := w.opts.Clock.Now()
	obj.reserveErr = w.opts.ControlPlane.ReserveObject(obj.ctx, obj.key)
	obj.reservedAt = w.opts.Clock.Now()
	obj.reserveCall = obj.reservedAt.Sub(start)
}

// upload builds and stores one sealed object once its key is reserved. It
// runs in its own goroutine, in an upload slot (at most UploadConcurrency
// at once) from the build to the Put's answer, under the object's
// deadline: when it passes, obj.ctx is cancelled and the committer stops
// waiting for this goroutine (see abandonUpload).
func (w *Writer) upload(obj *walObject) {
	if h := w.afterUploadForTesting; h != nil {
		defer h(obj.key) // runs last, once uploaded is closed
	}
	defer close(obj.uploaded)
	defer func() {
		// Whatever happened, the requests' bytes are read no more.
		obj.srcMu.Lock()
		obj.srcDone = true
		obj.srcMu.Unlock()
	}()
	ctx := obj.ctx
	// The reservation first: if this process dies after the Put, it is
	// what lets the cleaner find and delete the orphan.
	select {
	case <-obj.reserved:
	case <-ctx.Done():
		obj.uploadErr = &StorageError{ObjectKey: obj.key, Err: ErrUploadFailed, Cause: w.deadlineErr()}
		return
	}
	obj.phases.ReserveCall = obj.reserveCall
	if obj.reserveErr != nil {
		obj.uploadErr = &StorageError{ObjectKey: obj.key, Err: ErrUploadFailed, Cause: obj.reserveErr}
		return
	}
	ready := obj.sealedAt
	if obj.reservedAt.After(ready) {
		obj.phases.ReserveWait = obj.reservedAt.Sub(ready)
		ready = obj.reservedAt
	}
	select {
	case w.uploads <- struct{}{}:
	case <-ctx.Done():
		obj.uploadErr = &StorageError{ObjectKey: obj.key, Err: ErrUploadFailed, Cause: w.deadlineErr()}
		return
	}
	defer func() { <-w.uploads }()
	slot := w.opts.Clock.Now()
	obj.phases.SlotWait = slot.Sub(ready)
	if h := w.beforeBuildForTesting; h != nil {
		h(obj.key)
	}
	obj.build(w.opts.BrokerID, w.opts.BrokerEpoch, w.opts.Cache != nil)
	start := w.opts.Clock.Now()
	obj.phases.Build = start.Sub(slot)
	var err error
	for attempt := 0; ; attempt++ {
		// The key is fresh and reserved for this writer, so a retry
		// after a lost response rewrites the same bytes.
		body, end := obj.body()
		err = w.opts.Store.Put(ctx, obj.key, body, obj.size, objstore.PutOptions{})
		end()
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
	obj.phases.Put = obj.uploadDur
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
	// have built or stored the object yet: it must not read the callers'
	// buffers after their Produce returned.
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
		switch {
		case b.Err == nil && b.BaseOffset < 0:
			return fmt.Errorf("%w: batch %d accepted at offset %d", ErrInconsistentAnswer, i, b.BaseOffset)
		case b.Err != nil && !isBatchRejected(b.Err):
			return fmt.Errorf("%w: batch %d: untyped rejection %v", ErrInconsistentAnswer, i, b.Err)
		}
		accepted = accepted || b.Err == nil
	}
	if accepted == res.MarkedForDeletion {
		return fmt.Errorf("%w: marked for deletion %v with accepted batches %v", ErrInconsistentAnswer, res.MarkedForDeletion, accepted)
	}
	return nil
}

// isBatchRejected reports whether err is a *BatchRejectedError. A
// function of its own so that the target errors.As needs escapes only
// when a batch was rejected, not once per batch of every answer.
func isBatchRejected(err error) bool {
	var rej *BatchRejectedError
	return errors.As(err, &rej)
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
