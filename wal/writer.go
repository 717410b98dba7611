package wal

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote/objstore"
)

// WriterOptions configure a Writer. Zero values mean the defaults.
type WriterOptions struct {
	// Store receives the objects. Required.
	Store objstore.Store
	// ControlPlane commits the objects and assigns offsets. Required.
	ControlPlane ControlPlane
	// KeyPrefix is the first part of every object key, before "/" and a
	// random name (NewObjectKey); it must not start or end with "/".
	// Default "wal". Inkless: inkless.object.key.prefix.
	KeyPrefix string
	// MaxBytes is the size at which the active object rotates: before a
	// request that would overflow it, and as soon as it is reached. A
	// single request larger than MaxBytes becomes one object of its own.
	// Default 8 MiB. Inkless: inkless.produce.buffer.max.bytes.
	MaxBytes int64
	// CommitInterval is the longest a non-empty active object waits,
	// counted from its first write. Default 250 ms. Inkless:
	// inkless.produce.commit.interval.ms.
	CommitInterval time.Duration
	// UploadConcurrency is how many objects upload at once. Default 8.
	// Inkless: inkless.produce.upload.thread.pool.size.
	UploadConcurrency int
	// UploadAttempts is how many times one object's Put is tried (the key
	// is the writer's own, so a retry is idempotent). Only retriable
	// store errors are retried (not ErrClosed, ErrInvalidKey,
	// ErrInvalidArgument, ErrSizeMismatch, nor the object's own
	// deadline). Default 3. Inkless: inkless.produce.max.upload.attempts.
	UploadAttempts int
	// UploadBackoff is the wait before the first retry of a Put; each
	// later wait doubles, up to UploadMaxBackoff, and each is drawn
	// uniformly from [d/2, d] of its nominal d (equal jitter), so that
	// writers failing together do not retry together. Waits run on
	// Clock and end early at the object's deadline. Default 100 ms.
	// Kafka: retry.backoff.ms.
	UploadBackoff time.Duration
	// UploadMaxBackoff caps the nominal wait; at least UploadBackoff.
	// Default 1 s. Kafka: retry.backoff.max.ms (KIP-580).
	UploadMaxBackoff time.Duration
	// ObjectTimeout is the deadline of one object, counted from its
	// sealing: reservation, upload with its retries and commit with its
	// retries must be answered within it. When it passes, the object's
	// requests fail with a retriable *StorageError wrapping
	// ErrObjectTimeout (and ErrUploadFailed or ErrCommitFailed), the
	// calls in flight have their context cancelled, and the committer
	// goes on with the next object. The object itself is cleaned up in
	// the background once the call in flight returns: an upload that
	// was never committed is deleted; after a commit, the control plane
	// must prove it unregistered first (IsSafeToDeleteObject). A call
	// that never returns leaves the reservation to the cleaner's
	// reaper, whose CleanerOptions.ReservationTimeout must therefore
	// exceed this plus CommitInterval (a key is reserved as its object
	// starts filling). Default 30 s. Kafka: request.timeout.ms.
	ObjectTimeout time.Duration
	// CommitAttempts is how many times a commit is tried: a
	// CommitFiles call that failed as a whole is sent again with the
	// same list, and an object that failed alone with an error a retry
	// may cure is sent again if no later object of its call committed
	// (else its retry would land above that later object); a retry of a
	// commit that did happen returns its first result, so a lost answer
	// costs no data. Default 3.
	CommitAttempts int
	// MaxBytesInFlight bounds the bytes of requests accepted but not yet
	// answered; Produce blocks while a call would exceed it (a call alone
	// larger than the bound is admitted when nothing else is in flight).
	// Default MaxBytes * (UploadConcurrency + 1): every upload slot busy
	// with a full object and one more filling.
	MaxBytesInFlight int64
	// MaxMessageBytes is the largest batch accepted. Default 1048588.
	// Kafka: message.max.bytes.
	MaxMessageBytes int
	// BrokerID and BrokerEpoch are recorded with each commit.
	BrokerID    int32
	BrokerEpoch int64
	// Cache, if non-nil, receives every committed object (write-through),
	// so that tail reads on this broker need no GET.
	Cache *ObjectCache
	// Clock is the time source. Default SystemClock.
	Clock Clock
	// Logger; default zap.NewNop().
	Logger *zap.Logger
	// Listener receives events; callbacks run on the committer goroutine
	// with no lock held.
	Listener WriterListener
}

const (
	defaultMaxBytes        = 8 << 20
	defaultCommitInterval  = 250 * time.Millisecond
	defaultUploads         = 8
	defaultAttempts        = 3
	defaultUploadBackoff   = 100 * time.Millisecond
	defaultUploadMaxBack   = time.Second
	defaultObjectTimeout   = 30 * time.Second
	defaultMaxMessageBytes = 1048588
	// maxObjectBytes bounds an object (and every byte range a reader
	// accepts) so that offsets fit an int on 32-bit platforms, as
	// Inkless's int byte offsets bound its objects below 2 GiB.
	maxObjectBytes = math.MaxInt32
)

// defaultMaxBytesInFlight is enough for every upload slot to hold a full
// object plus one filling: beyond that, more bytes would only queue.
func defaultMaxBytesInFlight(o WriterOptions) int64 {
	return o.MaxBytes * int64(o.UploadConcurrency+1)
}

func (o WriterOptions) withDefaults() (WriterOptions, error) {
	if o.Store == nil || o.ControlPlane == nil {
		return o, invalidf("writer needs a Store and a ControlPlane")
	}
	if o.KeyPrefix == "" {
		o.KeyPrefix = "wal"
	}
	if err := objstore.ValidateKey(NewObjectKey(o.KeyPrefix)); err != nil || strings.HasSuffix(o.KeyPrefix, "/") {
		return o, invalidf("key prefix %q makes no valid key: %v", o.KeyPrefix, err)
	}
	setDefault(&o.MaxBytes, defaultMaxBytes)
	setDefault(&o.CommitInterval, defaultCommitInterval)
	setDefault(&o.UploadConcurrency, defaultUploads)
	setDefault(&o.UploadAttempts, defaultAttempts)
	setDefault(&o.CommitAttempts, defaultAttempts)
	setDefault(&o.UploadBackoff, defaultUploadBackoff)
	setDefault(&o.UploadMaxBackoff, max(defaultUploadMaxBack, o.UploadBackoff))
	setDefault(&o.ObjectTimeout, defaultObjectTimeout)
	if o.UploadMaxBackoff < o.UploadBackoff {
		return o, invalidf("UploadMaxBackoff %v below UploadBackoff %v", o.UploadMaxBackoff, o.UploadBackoff)
	}
	setDefault(&o.MaxMessageBytes, defaultMaxMessageBytes)
	setDefault(&o.MaxBytesInFlight, defaultMaxBytesInFlight(o))
	if o.MaxBytes > maxObjectBytes/2 {
		return o, invalidf("MaxBytes %d above %d", o.MaxBytes, maxObjectBytes/2)
	}
	if o.Clock == nil {
		o.Clock = SystemClock{}
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	return o, nil
}

func setDefault[T int | int64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// Writer buffers produce requests of many partitions into one active
// object, uploads sealed objects in parallel and commits them to the
// control plane in the order they were sealed: one CommitFiles call at a
// time, of the oldest object and the later ones uploaded by then, which
// the plane decides in list order and writes in one durable step (group
// commit). A request is answered only after its object is stored and
// committed. Each object's key is reserved (ControlPlane.ReserveObject)
// from its first request on, while it fills, so that the reservation's
// durable write is off the upload slot. Without a Cache an object is
// never copied: its Put reads the requests' own bytes, then the footer
// (with a Cache, which keeps the object, it is copied once, into the
// object the cache keeps).
//
// Concurrency: Produce may be called from any number of goroutines. The
// committer goroutine and the upload goroutines never hold Writer.mu
// across store or control-plane calls.
//
// Lock order: Writer.mu -> commitQueue.mu; walObject.srcMu is taken
// alone. Listener callbacks, reservations, uploads and commits run with
// no lock held (a Put's Reads of an object take its srcMu, briefly).
type Writer struct {
	opts    WriterOptions // immutable after NewWriter
	uploads chan struct{} // UploadConcurrency tokens
	queue   commitQueue
	// committerDone is closed when the committer has answered every
	// sealed object after Close.
	committerDone chan struct{}
	metrics       writerCounters
	// iters holds record iterators for validate: an Iter with its
	// decompressor is large, and Produce is called once per request.
	iters sync.Pool
	// reserves bounds the reservations in flight (UploadConcurrency).
	reserves chan struct{}
	// beforeBuildForTesting, if set, runs in an upload goroutine between
	// taking its upload slot and building the object. Set only by tests,
	// before the first Produce.
	beforeBuildForTesting func(key string)
	// afterUploadForTesting, if set, runs in an upload goroutine once
	// the object's upload answered (uploaded is closed). Set only by
	// tests, before the first Produce.
	afterUploadForTesting func(key string)

	mu struct {
		sync.Mutex
		// active is the object being filled; nil when empty.
		active *walObject
		// bytesInFlight counts the bytes of admitted requests not yet
		// answered. Invariant: >= 0.
		bytesInFlight int64
		// room is closed (and replaced) whenever bytesInFlight drops.
		room   chan struct{}
		closed bool
	}
}

// NewWriter starts a Writer.
func NewWriter(opts WriterOptions) (*Writer, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	w := &Writer{
		opts:          opts,
		uploads:       make(chan struct{}, opts.UploadConcurrency),
		reserves:      make(chan struct{}, opts.UploadConcurrency),
		committerDone: make(chan struct{}),
	}
	w.queue.wake = make(chan struct{}, 1)
	w.iters.New = func() any { return record.NewIter(record.IterOptions{}) }
	w.mu.room = make(chan struct{})
	go w.runCommitter()
	return w, nil
}

// Produce validates and buffers the requests (one partition each; the
// same partition may appear more than once), and answers them once their
// object is committed: results[i] answers reqs[i]. All requests of one
// call go into the same object. The error is for the whole call: ErrClosed,
// or the context's error (if it ends after the requests were buffered
// their outcome is unknown, as for a produce request whose connection
// drops). The writer reads the requests' bytes until their object is
// stored (the store's Put reads them; with a Cache, until it is copied)
// and never after Produce returns (a call that returns early leaves a
// private copy behind); the caller must not modify them during the call.
func (w *Writer) Produce(ctx context.Context, reqs []ProduceRequest) ([]ProduceResult, error) {
	results := make([]ProduceResult, len(reqs))
	checked, need := w.validate(reqs, results)
	if len(checked) == 0 {
		return results, w.closedErr()
	}
	obj, err := w.admit(ctx, checked, need)
	if err != nil {
		return nil, err
	}
	if ctxDone := ctx.Done(); ctxDone == nil {
		// A context that never ends: a plain receive. Every caller of an
		// object wakes when done closes, and a select re-locks each of
		// its channels on waking, so the hundreds of callers of one
		// object would contend for done's lock (4% of the writer's CPU
		// at 16 KiB batches in BenchmarkWriterCPU).
		<-obj.done
	} else {
		select {
		case <-obj.done:
		case <-ctxDone:
			obj.detach(checked)
			return nil, ctx.Err()
		}
	}
	for _, pr := range checked {
		if obj.err != nil {
			results[pr.index].Err = obj.err
			continue
		}
		results[pr.index].Batches = obj.result.Batches[pr.first : pr.first+len(pr.req.batches)]
	}
	return results, nil
}

// validate checks every request; refused ones get their result now.
func (w *Writer) validate(reqs []ProduceRequest, results []ProduceResult) ([]*pendingRequest, int64) {
	it := w.iters.Get().(*record.Iter)
	defer func() {
		it.Clear() // keeps no caller's bytes alive
		w.iters.Put(it)
	}()
	// One allocation for the call's requests, each with room for one
	// batch (a client's usual request), and one for the list.
	prs := make([]pendingRequest, len(reqs))
	checked := make([]*pendingRequest, 0, len(reqs))
	var need int64
	for i, r := range reqs {
		if len(r.Batches) == 0 {
			continue // answered with no batches, as Kafka answers NONE
		}
		pr := &prs[i]
		cr, err := validateRequest(r, w.opts.MaxMessageBytes, it, pr.one[:0])
		if err != nil {
			w.metrics.rejected(err)
			if errors.Is(err, ErrTransactionalBatch) {
				// The whole call is refused (Inkless: INVALID_REQUEST
				// for every partition).
				for j := range results {
					results[j] = ProduceResult{Err: err}
				}
				return nil, 0
			}
			results[i].Err = err
			continue
		}
		pr.req, pr.index = cr, i
		checked = append(checked, pr)
		need += cr.size()
	}
	return checked, need
}

func (w *Writer) closedErr() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.closed {
		return fmt.Errorf("wal: writer: %w", ErrClosed)
	}
	return nil
}

// admit waits for room, then adds the requests to the active object,
// rotating before and after as the size and age rules say.
func (w *Writer) admit(ctx context.Context, reqs []*pendingRequest, need int64) (*walObject, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for {
		if w.mu.closed {
			return nil, fmt.Errorf("wal: writer: %w", ErrClosed)
		}
		inFlight := w.mu.bytesInFlight
		if inFlight == 0 || inFlight+need <= w.opts.MaxBytesInFlight {
			break
		}
		// Blocked: the buffered requests will not get company soon
		// enough to be worth their wait.
		w.rotateLocked()
		w.metrics.backPressureWaits.Add(1)
		room := w.mu.room
		w.mu.Unlock()
		select {
		case <-room:
			w.mu.Lock()
		case <-ctx.Done():
			w.mu.Lock()
			return nil, ctx.Err()
		}
	}
	now := w.opts.Clock.Now()
	if a := w.mu.active; a != nil && (a.bytes+need > w.opts.MaxBytes || now.Sub(a.firstWrite) >= w.opts.CommitInterval) {
		w.rotateLocked()
	}
	if w.mu.active == nil {
		w.mu.active = newWALObject(NewObjectKey(w.opts.KeyPrefix), now)
		a := w.mu.active
		a.timer = w.opts.Clock.AfterFunc(w.opts.CommitInterval, func() { w.rotateIfActive(a) })
		go w.reserve(a)
	}
	obj := w.mu.active
	obj.reqs = append(obj.reqs, reqs...)
	obj.bytes += need
	w.mu.bytesInFlight += need
	w.metrics.bytesInFlight.Add(need)
	if obj.bytes >= w.opts.MaxBytes {
		w.rotateLocked()
	}
	return obj, nil
}

// rotateIfActive is the interval timer's callback.
func (w *Writer) rotateIfActive(obj *walObject) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.active == obj {
		w.rotateLocked()
	}
}

// rotateLocked seals the active object, if any, and hands it to an
// upload goroutine and to the committer queue (in sealing order).
//
// REQUIRES: w.mu held.
func (w *Writer) rotateLocked() {
	obj := w.mu.active
	if obj == nil {
		return
	}
	w.mu.active = nil
	obj.timer.Stop()
	obj.sealedAt = w.opts.Clock.Now()
	obj.expired = make(chan struct{})
	obj.deadline = w.opts.Clock.AfterFunc(w.opts.ObjectTimeout, func() {
		close(obj.expired)
		obj.cancel()
	})
	w.metrics.objectsInFlight.Add(1)
	w.queue.push(obj)
	go w.upload(obj)
}

// release returns an answered object's bytes to the in-flight budget.
func (w *Writer) release(obj *walObject) {
	w.mu.Lock()
	w.mu.bytesInFlight -= obj.bytes
	close(w.mu.room)
	w.mu.room = make(chan struct{})
	w.mu.Unlock()
	w.metrics.bytesInFlight.Add(-obj.bytes)
	w.metrics.objectsInFlight.Add(-1)
}

// Close seals the active object and waits until every sealed object is
// answered (uploaded and committed, or failed), at most ObjectTimeout per
// object. A clean shutdown leaves no uncommitted upload, except of an
// object answered at its deadline: its stalled Put or CommitFile may
// still be running after Close returns, and what it stored is deleted
// when it returns (or reaped by the cleaner once its reservation
// expires). Later Produce calls fail with ErrClosed. A second Close
// returns nil at once. Close does not close the store or the control
// plane.
func (w *Writer) Close() error {
	w.mu.Lock()
	if w.mu.closed {
		w.mu.Unlock()
		return nil
	}
	w.mu.closed = true
	w.rotateLocked()
	w.queue.close()
	// Wake producers blocked on room so that they see closed.
	close(w.mu.room)
	w.mu.room = make(chan struct{})
	w.mu.Unlock()
	<-w.committerDone
	return nil
}
