package wal_test

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/remote/objstore/mem"
	"github.com/tierlog/tierlog/wal"
)

// TestWriterOffsets: one call for many partitions gets, per partition,
// offsets in request order; a second call continues from the high
// watermark.
func TestWriterOffsets(t *testing.T) {
	e := newEnv(t, 4)
	w := e.writer(wal.WriterOptions{})
	var reqs []wal.ProduceRequest
	for i := range 8 {
		reqs = append(reqs, wal.ProduceRequest{Partition: e.tp(int32(i % 4)), Batches: batch(t, i+1, "a")})
	}
	ch := produceAsync(e.ctx, w, reqs...)
	waitUntil(func() bool { return w.Metrics().BytesInFlight > 0 })
	e.clock.Advance(250 * time.Millisecond)
	got := <-ch
	require.NoError(t, got.err)
	// Partition p got requests p and p+4, of p+1 and p+5 records.
	for i, r := range got.res {
		require.NoError(t, r.Err)
		require.Len(t, r.Batches, 1)
		want := int64(0)
		if i >= 4 {
			want = int64(i%4 + 1)
		}
		require.NoError(t, r.Batches[0].Err)
		require.Equal(t, want, r.Batches[0].BaseOffset, "request %d", i)
	}
	for p := range int32(4) {
		info, err := e.cp.LogInfo(e.ctx, e.tp(p))
		require.NoError(t, err)
		require.Equal(t, int64(2*p+6), info.HighWatermark)
	}
	// The object checks against its footer.
	keys := e.store.Keys()
	require.Len(t, keys, 1)
	data, err := objstore.ReadAll(e.ctx, e.store, keys[0])
	require.NoError(t, err)
	parsed, err := wal.ParseObject(data)
	require.NoError(t, err)
	require.Len(t, parsed, 8)
	for i, b := range parsed {
		// Grouped by partition, arrival order within one.
		require.Equal(t, int32(i/2), b.Partition.Partition)
		require.Equal(t, int64(i/2+1+4*(i%2)), b.OffsetCount())
	}
	require.Equal(t, int64(1), w.Metrics().ObjectsCommitted)
	require.NoError(t, w.Close())
	m := w.Metrics()
	require.Zero(t, m.BytesInFlight)
	require.Zero(t, m.ObjectsInFlight)
}

// TestWriterRotateBySize: a request that would overflow MaxBytes seals
// the active object first; one that fills it seals it at once.
func TestWriterRotateBySize(t *testing.T) {
	e := newEnv(t, 2)
	b := batch(t, 3, "s")
	w := e.writer(wal.WriterOptions{MaxBytes: int64(2 * len(b))})
	first := produceAsync(e.ctx, w, wal.ProduceRequest{Partition: e.tp(0), Batches: b})
	waitUntil(func() bool { return w.Metrics().BytesInFlight > 0 })
	require.Zero(t, w.Metrics().ObjectsInFlight, "one batch does not fill the object")
	second := produceAsync(e.ctx, w, wal.ProduceRequest{Partition: e.tp(0), Batches: append(append([]byte(nil), b...), b...)})
	// The second call's two batches overflow: the first object is sealed
	// before them, then they fill their own object and seal it.
	r1, r2 := <-first, <-second
	require.NoError(t, r1.err)
	require.NoError(t, r2.err)
	require.Equal(t, int64(0), r1.res[0].Batches[0].BaseOffset)
	require.Equal(t, []int64{3, 6}, []int64{r2.res[0].Batches[0].BaseOffset, r2.res[0].Batches[1].BaseOffset})
	require.Len(t, e.store.Keys(), 2)
}

// TestWriterRotateByInterval: the active object seals CommitInterval
// after its first write, not after the last.
func TestWriterRotateByInterval(t *testing.T) {
	e := newEnv(t, 1)
	w := e.writer(wal.WriterOptions{CommitInterval: 100 * time.Millisecond})
	first := produceAsync(e.ctx, w, wal.ProduceRequest{Partition: e.tp(0), Batches: batch(t, 1, "i")})
	waitUntil(func() bool { return w.Metrics().BytesInFlight > 0 })
	e.clock.Advance(60 * time.Millisecond)
	second := produceAsync(e.ctx, w, wal.ProduceRequest{Partition: e.tp(0), Batches: batch(t, 1, "j")})
	waitUntil(func() bool { return w.Metrics().BytesInFlight > int64(len(batch(t, 1, "i"))) })
	e.clock.Advance(39 * time.Millisecond)
	require.Zero(t, w.Metrics().ObjectsInFlight, "99 ms after the first write")
	e.clock.Advance(1 * time.Millisecond)
	r1, r2 := <-first, <-second
	require.NoError(t, r1.err)
	require.NoError(t, r2.err)
	require.Equal(t, int64(1), r2.res[0].Batches[0].BaseOffset)
	require.Len(t, e.store.Keys(), 1, "both requests in one object")
}

// TestWriterCommitOrder: the second object finishes its upload first, yet
// the first object commits first and gets the lower offsets.
func TestWriterCommitOrder(t *testing.T) {
	e := newEnv(t, 1)
	gs := newGatedStore(e.store, 1)
	cp := &faultCP{ControlPlane: e.cp}
	b := batch(t, 2, "o")
	w := e.writer(wal.WriterOptions{Store: gs, ControlPlane: cp, MaxBytes: int64(len(b))})
	first := produceAsync(e.ctx, w, wal.ProduceRequest{Partition: e.tp(0), Batches: b})
	waitUntil(func() bool { return gs.putsStarted() == 1 })
	second := produceAsync(e.ctx, w, wal.ProduceRequest{Partition: e.tp(0), Batches: b})
	waitUntil(func() bool { return len(e.store.Keys()) == 1 }) // the second upload is done
	require.Empty(t, cp.commitKeys(), "the second object waits for the first")
	gs.open(1)
	r1, r2 := <-first, <-second
	require.NoError(t, r1.err)
	require.NoError(t, r2.err)
	require.Equal(t, int64(0), r1.res[0].Batches[0].BaseOffset)
	require.Equal(t, int64(2), r2.res[0].Batches[0].BaseOffset)
	require.Len(t, cp.commitKeys(), 2)
}

// TestWriterUploadFailure: every request of the object fails, retriably;
// nothing is committed and the object is not left in the store.
func TestWriterUploadFailure(t *testing.T) {
	e := newEnv(t, 2)
	e.clock.fireAtOnceBelow = 5 * time.Second // upload backoffs, not the 30 s deadline
	e.store.SetFaults(mem.FaultConfig{Put: mem.Faults{LostResponseRate: 1}})
	w := e.writer(wal.WriterOptions{MaxBytes: 1})
	res, err := w.Produce(e.ctx, []wal.ProduceRequest{
		{Partition: e.tp(0), Batches: batch(t, 1, "u")}, {Partition: e.tp(1), Batches: batch(t, 1, "v")}})
	require.NoError(t, err)
	for _, r := range res {
		require.ErrorIs(t, r.Err, wal.ErrUploadFailed)
		require.ErrorIs(t, r.Err, mem.ErrInjected)
		require.True(t, wal.IsRetriable(r.Err))
	}
	require.Empty(t, e.store.Keys(), "a stored but uncommitted object is deleted")
	info, err := e.cp.LogInfo(e.ctx, e.tp(0))
	require.NoError(t, err)
	require.Zero(t, info.HighWatermark)

	e.store.SetFaults(mem.FaultConfig{})
	res, err = w.Produce(e.ctx, []wal.ProduceRequest{{Partition: e.tp(0), Batches: batch(t, 1, "w")}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	require.Equal(t, int64(0), res[0].Batches[0].BaseOffset)
}

// TestWriterCommitFailure covers the three outcomes of a failed commit.
func TestWriterCommitFailure(t *testing.T) {
	errDown := errors.New("control plane down")
	for _, tc := range []struct {
		name string
		// lost: the commit happens, its answer is lost; first: only the
		// first attempt fails.
		lost, onlyFirst bool
		wantErr         bool
		wantKept        bool
	}{
		{name: "not-committed", wantErr: true, wantKept: false},
		{name: "committed-answer-lost", lost: true, wantErr: true, wantKept: true},
		{name: "retry-returns-first-result", lost: true, onlyFirst: true, wantErr: false, wantKept: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 1)
			cp := &faultCP{ControlPlane: e.cp}
			calls := 0
			cp.commit = func(ctx context.Context, req wal.CommitFileRequest) (wal.CommitFileResult, error) {
				calls++
				if tc.onlyFirst && calls > 1 {
					return e.cp.CommitFile(ctx, req)
				}
				if tc.lost {
					_, _ = e.cp.CommitFile(ctx, req)
				}
				return wal.CommitFileResult{}, errDown
			}
			w := e.writer(wal.WriterOptions{ControlPlane: cp, MaxBytes: 1})
			res, err := w.Produce(e.ctx, []wal.ProduceRequest{{Partition: e.tp(0), Batches: batch(t, 3, "c")}})
			require.NoError(t, err)
			if tc.wantErr {
				require.ErrorIs(t, res[0].Err, wal.ErrCommitFailed)
				require.ErrorIs(t, res[0].Err, errDown)
				require.True(t, wal.IsRetriable(res[0].Err))
			} else {
				require.NoError(t, res[0].Err)
				require.Equal(t, int64(0), res[0].Batches[0].BaseOffset)
			}
			if tc.wantKept {
				require.Len(t, e.store.Keys(), 1)
			} else {
				require.Empty(t, e.store.Keys())
				require.Equal(t, int64(1), w.Metrics().ObjectsDeletedUncommitted)
			}
		})
	}
}

// TestWriterInconsistentAnswer: a control plane answering fewer results
// than batches fails the commit instead of handing out offsets.
func TestWriterInconsistentAnswer(t *testing.T) {
	e := newEnv(t, 1)
	cp := &faultCP{ControlPlane: e.cp}
	cp.commit = func(ctx context.Context, req wal.CommitFileRequest) (wal.CommitFileResult, error) {
		res, err := e.cp.CommitFile(ctx, req)
		res.Batches = res.Batches[:0]
		return res, err
	}
	w := e.writer(wal.WriterOptions{ControlPlane: cp, MaxBytes: 1})
	res, err := w.Produce(e.ctx, []wal.ProduceRequest{{Partition: e.tp(0), Batches: batch(t, 1, "x")}})
	require.NoError(t, err)
	require.ErrorIs(t, res[0].Err, wal.ErrInconsistentAnswer)
	require.ErrorIs(t, res[0].Err, wal.ErrCommitFailed)
	require.Len(t, e.store.Keys(), 1, "registered, so kept")
}

// TestWriterBackPressure: a call that would pass MaxBytesInFlight waits
// until an object is answered, or until its context ends.
func TestWriterBackPressure(t *testing.T) {
	e := newEnv(t, 1)
	gs := newGatedStore(e.store, 1)
	b := batch(t, 2, "b")
	w := e.writer(wal.WriterOptions{Store: gs, MaxBytes: int64(len(b)), MaxBytesInFlight: int64(len(b))})
	first := produceAsync(e.ctx, w, wal.ProduceRequest{Partition: e.tp(0), Batches: b})
	waitUntil(func() bool { return gs.putsStarted() == 1 })

	ctx, cancel := context.WithCancel(e.ctx)
	blocked := produceAsync(ctx, w, wal.ProduceRequest{Partition: e.tp(0), Batches: b})
	waitUntil(func() bool { return w.Metrics().BackPressureWaits == 1 })
	cancel()
	require.ErrorIs(t, (<-blocked).err, context.Canceled)

	third := produceAsync(e.ctx, w, wal.ProduceRequest{Partition: e.tp(0), Batches: b})
	waitUntil(func() bool { return w.Metrics().BackPressureWaits == 2 })
	require.Equal(t, int64(len(b)), w.Metrics().BytesInFlight, "only the first call is in flight")
	gs.open(1)
	r1, r3 := <-first, <-third
	require.NoError(t, r1.res[0].Err)
	require.NoError(t, r3.res[0].Err)
	require.Equal(t, int64(2), r3.res[0].Batches[0].BaseOffset, "the cancelled call took no offsets")
}

// TestWriterBadInput: every damaged request gets a typed error of its
// own, and the good requests of the same call are committed.
func TestWriterBadInput(t *testing.T) {
	e := newEnv(t, 1)
	w := e.writer(wal.WriterOptions{MaxBytes: 1, MaxMessageBytes: 200})
	good := batch(t, 2, "g")
	crc := append([]byte(nil), good...)
	crc[len(crc)-1]++
	offset := append([]byte(nil), good...)
	rb, err := record.ReadBatch(offset)
	require.NoError(t, err)
	rb.SetBaseOffset(5)
	ctrlOpts := record.DefaultBuilderOptions()
	ctrlOpts.Control = true
	cases := []struct {
		name  string
		bytes []byte
		want  error
	}{
		{"crc", crc, wal.ErrCorruption},
		{"torn", good[:len(good)-3], wal.ErrCorruption},
		{"garbage", []byte("not a batch at all, but long enough for a header ......................"), wal.ErrCorruption},
		{"base-offset", offset, wal.ErrInvalidRecord},
		{"too-large", batch(t, 40, "large-value-padding"), wal.ErrRecordTooLarge},
		{"control", buildWith(t, ctrlOpts), wal.ErrInvalidRecord},
	}
	reqs := []wal.ProduceRequest{{Partition: e.tp(0), Batches: good}}
	for _, c := range cases {
		reqs = append(reqs, wal.ProduceRequest{Partition: e.tp(0), Batches: c.bytes})
	}
	res, err := w.Produce(e.ctx, reqs)
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	require.Equal(t, int64(0), res[0].Batches[0].BaseOffset)
	for i, c := range cases {
		var pe *wal.ProduceError
		require.ErrorAs(t, res[i+1].Err, &pe, c.name)
		require.ErrorIs(t, res[i+1].Err, c.want, c.name)
		require.False(t, wal.IsRetriable(res[i+1].Err), c.name)
	}

	// A transactional batch refuses the whole call.
	txOpts := record.DefaultBuilderOptions()
	txOpts.Transactional, txOpts.ProducerID, txOpts.ProducerEpoch, txOpts.BaseSequence = true, 7, 0, 0
	res, err = w.Produce(e.ctx, []wal.ProduceRequest{{Partition: e.tp(0), Batches: good}, {Partition: e.tp(0), Batches: buildWith(t, txOpts)}})
	require.NoError(t, err)
	for _, r := range res {
		require.ErrorIs(t, r.Err, wal.ErrTransactionalBatch)
	}
	info, err := e.cp.LogInfo(e.ctx, e.tp(0))
	require.NoError(t, err)
	require.Equal(t, int64(2), info.HighWatermark)
	require.Equal(t, int64(1), w.Metrics().Rejected[wal.ErrTransactionalBatch.Error()])
}

func buildWith(t *testing.T, opts record.BuilderOptions) []byte {
	b := record.NewBuilder(opts)
	b.Add(1, nil, []byte("v"))
	buf, err := b.Build()
	require.NoError(t, err)
	return buf
}

// TestWriterUnknownPartition: the control plane's per-batch rejection
// reaches the request; the object holds no live batch and is marked.
func TestWriterUnknownPartition(t *testing.T) {
	e := newEnv(t, 1)
	w := e.writer(wal.WriterOptions{MaxBytes: 1})
	res, err := w.Produce(e.ctx, []wal.ProduceRequest{{Partition: e.tp(9), Batches: batch(t, 1, "z")}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	require.ErrorIs(t, res[0].Batches[0].Err, wal.ErrUnknownTopicOrPartition)
	files, err := e.cp.FilesToDelete(e.ctx, e.clock.Now().Add(time.Second), 0)
	require.NoError(t, err)
	require.Len(t, files, 1)
}

// TestWriterClose: Close drains what is buffered; later calls fail.
func TestWriterClose(t *testing.T) {
	e := newEnv(t, 1)
	w := e.writer(wal.WriterOptions{})
	ch := produceAsync(e.ctx, w, wal.ProduceRequest{Partition: e.tp(0), Batches: batch(t, 2, "c")})
	waitUntil(func() bool { return w.Metrics().BytesInFlight > 0 })
	require.NoError(t, w.Close())
	got := <-ch
	require.NoError(t, got.err)
	require.NoError(t, got.res[0].Err)
	require.NoError(t, w.Close())
	_, err := w.Produce(e.ctx, []wal.ProduceRequest{{Partition: e.tp(0), Batches: batch(t, 1, "d")}})
	require.ErrorIs(t, err, wal.ErrClosed)
	require.Len(t, e.store.Keys(), 1)
}

// TestWriterOptions: bad options are errors, not panics.
func TestWriterOptions(t *testing.T) {
	_, err := wal.NewWriter(wal.WriterOptions{})
	require.ErrorIs(t, err, wal.ErrInvalidArgument)
	e := newEnv(t, 1)
	_, err = wal.NewWriter(wal.WriterOptions{Store: e.store, ControlPlane: e.cp, KeyPrefix: "/abs"})
	require.ErrorIs(t, err, wal.ErrInvalidArgument)
	_, err = wal.NewWriter(wal.WriterOptions{Store: e.store, ControlPlane: e.cp,
		UploadBackoff: time.Second, UploadMaxBackoff: time.Millisecond})
	require.ErrorIs(t, err, wal.ErrInvalidArgument, "a cap below the first wait")
}

// TestWriterListener: every object is reported once, committed or failed,
// on the committer goroutine.
func TestWriterListener(t *testing.T) {
	e := newEnv(t, 1)
	e.clock.fireAtOnceBelow = 5 * time.Second // upload backoffs, not the 30 s deadline
	var committed []wal.ObjectInfo
	var failed []error
	w := e.writer(wal.WriterOptions{MaxBytes: 1, Listener: wal.WriterListener{
		ObjectCommitted: func(o wal.ObjectInfo) { committed = append(committed, o) },
		ObjectFailed:    func(_ wal.ObjectInfo, err error) { failed = append(failed, err) },
	}})
	_, err := w.Produce(e.ctx, []wal.ProduceRequest{{Partition: e.tp(0), Batches: batch(t, 2, "l")}})
	require.NoError(t, err)
	e.store.SetFaults(mem.FaultConfig{Put: mem.Faults{ErrorRate: 1}})
	_, err = w.Produce(e.ctx, []wal.ProduceRequest{{Partition: e.tp(0), Batches: batch(t, 2, "m")}})
	require.NoError(t, err)
	require.NoError(t, w.Close())
	require.Len(t, committed, 1)
	require.Equal(t, 1, committed[0].Batches)
	require.Equal(t, 1, committed[0].Requests)
	require.Len(t, failed, 1)
	require.ErrorIs(t, failed[0], wal.ErrUploadFailed)
	m := w.Metrics()
	require.Equal(t, int64(1), m.ObjectsCommitted)
	require.Equal(t, int64(1), m.ObjectsUploaded)
}

// TestWriterCommitAfterOrphanReaped: a writer slower than the reaper. Its
// upload stalls past the reservation timeout; meanwhile the cleaner reaps
// the key and, a grace period later, forgets its row. Then the upload
// lands and the commit is refused (ErrObjectReaped): the request fails
// with a retriable error, the writer deletes the object its late Put
// created, and nothing serves it (no offsets, no cache entry).
func TestWriterCommitAfterOrphanReaped(t *testing.T) {
	e := newEnv(t, 1)
	gated := newGatedStore(e.store, 1)
	cache := wal.NewObjectCache(1 << 20)
	// The deadline is longer than the reservation timeout here: the
	// same happens to a writer frozen past both (a GC pause, a VM
	// migration) or to a reaper on a broker whose clock runs ahead.
	w := e.writer(wal.WriterOptions{Store: gated, MaxBytes: 1, Cache: cache, ObjectTimeout: time.Hour})
	ch := produceAsync(e.ctx, w, wal.ProduceRequest{Partition: e.tp(0), Batches: batch(t, 2, "slow")})
	waitUntil(func() bool { return gated.putsStarted() == 1 })

	c := e.cleaner(wal.CleanerOptions{ReservationTimeout: time.Minute, GracePeriod: time.Minute})
	e.clock.Advance(time.Minute + time.Millisecond)
	res, err := c.Run(e.ctx)
	require.NoError(t, err)
	require.Equal(t, wal.CleanResult{OrphansReaped: 1}, res)
	e.clock.Advance(time.Minute + time.Millisecond)
	res, err = c.Run(e.ctx)
	require.NoError(t, err)
	require.Equal(t, wal.CleanResult{Deleted: 1}, res, "the orphan's row is forgotten")

	gated.open(1)
	p := <-ch
	require.NoError(t, p.err)
	require.ErrorIs(t, p.res[0].Err, wal.ErrCommitFailed)
	require.ErrorIs(t, p.res[0].Err, wal.ErrObjectReaped)
	require.True(t, wal.IsRetriable(p.res[0].Err))
	var se *wal.StorageError
	require.ErrorAs(t, p.res[0].Err, &se)

	require.Empty(t, e.store.Keys(), "the late upload is deleted")
	require.Equal(t, int64(1), w.Metrics().ObjectsDeletedUncommitted)
	_, cached := cache.Get(se.ObjectKey)
	require.False(t, cached)
	info, err := e.cp.LogInfo(e.ctx, e.tp(0))
	require.NoError(t, err)
	require.Zero(t, info.HighWatermark)
	r, err := wal.NewReader(wal.ReaderOptions{Store: e.store, ControlPlane: e.cp, Cache: cache})
	require.NoError(t, err)
	fetched := fetchAll(t, e, r, 1)
	require.NoError(t, fetched[0].Err)
	require.Empty(t, fetched[0].Records)

	// The producer's retry goes into a new object and succeeds.
	out, err := w.Produce(e.ctx, []wal.ProduceRequest{{Partition: e.tp(0), Batches: batch(t, 2, "slow")}})
	require.NoError(t, err)
	require.NoError(t, out[0].Err)
	require.Equal(t, int64(0), out[0].Batches[0].BaseOffset)
}

// phaseCP and phaseStore move the env's clock inside their calls, so that
// each phase of an object takes a known time.
type phaseCP struct {
	wal.ControlPlane
	clock *fakeClock
	// returned is set as ReserveObject returns; phaseClock closes
	// reserved at the writer's next clock read, the one that times the
	// reservation, so the test advances the clock only after it.
	returned *atomic.Bool
}

func (c phaseCP) ReserveObject(ctx context.Context, key string) error {
	c.clock.Advance(3 * time.Millisecond)
	err := c.ControlPlane.ReserveObject(ctx, key)
	c.returned.Store(true)
	return err
}

// phaseClock is the writer's clock in TestWriterObjectPhases.
type phaseClock struct {
	*fakeClock
	returned *atomic.Bool
	reserved chan struct{}
}

func (c phaseClock) Now() time.Time {
	now := c.fakeClock.Now()
	if c.returned.CompareAndSwap(true, false) {
		close(c.reserved)
	}
	return now
}

func (c phaseCP) CommitFiles(ctx context.Context, reqs []wal.CommitFileRequest) ([]wal.CommitFilesResult, error) {
	c.clock.Advance(5 * time.Millisecond)
	return c.ControlPlane.CommitFiles(ctx, reqs)
}

type phaseStore struct {
	objstore.Store
	clock *fakeClock
}

func (s phaseStore) Put(ctx context.Context, key string, r io.Reader, size int64, opts objstore.PutOptions) error {
	s.clock.Advance(7 * time.Millisecond)
	return s.Store.Put(ctx, key, r, size, opts)
}

// TestWriterObjectPhases: ObjectInfo.Phases tells where an object's time
// went. The key is reserved while the object fills (3 ms of its 250 ms
// CommitInterval), so the upload does not wait for it; the Put takes
// 7 ms and the commit 5 ms.
func TestWriterObjectPhases(t *testing.T) {
	e := newEnv(t, 1)
	returned := &atomic.Bool{}
	cp := phaseCP{ControlPlane: e.cp, clock: e.clock, returned: returned}
	clock := phaseClock{fakeClock: e.clock, returned: returned, reserved: make(chan struct{})}
	infos := make(chan wal.ObjectInfo, 1)
	w := e.writer(wal.WriterOptions{ControlPlane: cp, Store: phaseStore{Store: e.store, clock: e.clock},
		Clock: clock, Listener: wal.WriterListener{ObjectCommitted: func(o wal.ObjectInfo) { infos <- o }}})
	ch := produceAsync(e.ctx, w, wal.ProduceRequest{Partition: e.tp(0), Batches: batch(t, 2, "p")})
	<-clock.reserved
	e.clock.Advance(247 * time.Millisecond) // the CommitInterval seals it
	p := <-ch
	require.NoError(t, p.err)
	require.NoError(t, p.res[0].Err)
	info := <-infos
	require.Equal(t, wal.ObjectPhases{Filling: 250 * time.Millisecond, Put: 7 * time.Millisecond,
		Commit: 5 * time.Millisecond, ReserveCall: 3 * time.Millisecond}, info.Phases)
	require.Equal(t, 7*time.Millisecond, info.UploadDuration)
}
