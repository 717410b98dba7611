package wal_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/wal"
)

// stallStore makes chosen Puts (by number, from 1) fail or stall. A
// stalled Put waits for its gate, or, with honourContext, for its
// context to end.
type stallStore struct {
	objstore.Store
	honourContext bool
	mu            sync.Mutex
	puts          int
	fail          map[int]error
	gates         map[int]chan struct{}
}

func newStallStore(s objstore.Store) *stallStore {
	return &stallStore{Store: s, fail: map[int]error{}, gates: map[int]chan struct{}{}}
}

func (s *stallStore) Put(ctx context.Context, key string, r io.Reader, size int64, opts objstore.PutOptions) error {
	s.mu.Lock()
	s.puts++
	n := s.puts
	err, gate := s.fail[n], s.gates[n]
	s.mu.Unlock()
	if err != nil {
		return err
	}
	if gate != nil {
		if s.honourContext {
			select {
			case <-gate:
			case <-ctx.Done():
				return ctx.Err()
			}
		} else {
			<-gate
			ctx = context.Background() // the stall ignored the context
		}
	}
	return s.Store.Put(ctx, key, r, size, opts)
}

func (s *stallStore) putCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.puts
}

// shortTimers returns the pending timers of the clock shorter than a
// second: the upload backoffs (the deadline is 30 s).
func shortTimers(c *fakeClock) []time.Duration {
	var out []time.Duration
	for _, d := range c.pending() {
		if d < time.Second {
			out = append(out, d)
		}
	}
	return out
}

// TestWriterUploadBackoff: a Put that fails with a retriable error is
// retried after a wait on the writer's clock, doubling from
// UploadBackoff, capped at UploadMaxBackoff, jittered within [d/2, d]; a
// permanent error is not retried.
func TestWriterUploadBackoff(t *testing.T) {
	e := newEnv(t, 1)
	store := newStallStore(e.store)
	errFlaky := errors.New("503 slow down")
	store.fail[1], store.fail[2] = errFlaky, errFlaky
	w := e.writer(wal.WriterOptions{Store: store, MaxBytes: 1, UploadAttempts: 3,
		UploadBackoff: 100 * time.Millisecond, UploadMaxBackoff: 150 * time.Millisecond})
	// Cleanups run last-in first-out, so this runs before the writer's
	// Close: if an assertion fails mid-retry, the object's deadline
	// ends the wait on the fake clock instead of Close waiting forever.
	t.Cleanup(func() { e.clock.Advance(time.Minute) })
	ch := produceAsync(e.ctx, w, wal.ProduceRequest{Partition: e.tp(0), Batches: batch(t, 1, "b")})

	for i, bounds := range [][2]time.Duration{{50 * time.Millisecond, 100 * time.Millisecond}, {75 * time.Millisecond, 150 * time.Millisecond}} {
		// Read the timers only after seeing the failed Put, in that
		// order: before the Put the one short timer can be Produce's
		// linger timer, which the rotation stops. Reading the timers
		// first once saw the linger timer (250ms) and then the Put.
		var timers []time.Duration
		waitUntil(func() bool {
			if store.putCount() != i+1 {
				return false
			}
			timers = shortTimers(e.clock)
			return len(timers) == 1
		})
		d := timers[0]
		require.GreaterOrEqual(t, d, bounds[0], "retry %d", i+1)
		require.LessOrEqual(t, d, bounds[1], "retry %d", i+1)
		require.Equal(t, i+1, store.putCount(), "no retry before the wait is over")
		e.clock.Advance(d)
	}
	p := <-ch
	require.NoError(t, p.err)
	require.NoError(t, p.res[0].Err)
	require.Equal(t, 3, store.putCount())
	require.Equal(t, int64(2), w.Metrics().UploadRetries)

	// A permanent error is answered at once.
	store.fail[4] = fmt.Errorf("bad: %w", objstore.ErrInvalidArgument)
	res, err := w.Produce(e.ctx, []wal.ProduceRequest{{Partition: e.tp(0), Batches: batch(t, 1, "c")}})
	require.NoError(t, err)
	require.ErrorIs(t, res[0].Err, wal.ErrUploadFailed)
	require.ErrorIs(t, res[0].Err, objstore.ErrInvalidArgument)
	require.Equal(t, 4, store.putCount())
	require.Equal(t, int64(2), w.Metrics().UploadRetries)
}

// TestWriterUploadBackoffBounds: every draw lies in the upper half of the
// nominal wait (UploadBackoff doubled per attempt, capped), and draws
// differ (there is jitter).
func TestWriterUploadBackoffBounds(t *testing.T) {
	e := newEnv(t, 1)
	w := e.writer(wal.WriterOptions{UploadBackoff: 10 * time.Millisecond, UploadMaxBackoff: time.Second})
	for attempt := range 70 {
		nominal := min(time.Second, 10*time.Millisecond<<min(attempt, 30))
		seen := map[time.Duration]bool{}
		for range 50 {
			d := w.UploadBackoffForTesting(attempt)
			require.GreaterOrEqual(t, d, nominal/2, "attempt %d", attempt)
			require.LessOrEqual(t, d, nominal, "attempt %d", attempt)
			seen[d] = true
		}
		require.Greater(t, len(seen), 1, "attempt %d: no jitter", attempt)
	}
}

// requireTimedOut checks one request's answer at the deadline.
func requireTimedOut(t *testing.T, r wal.ProduceResult, stage error) {
	t.Helper()
	require.ErrorIs(t, r.Err, stage)
	require.ErrorIs(t, r.Err, wal.ErrObjectTimeout)
	require.True(t, wal.IsRetriable(r.Err))
	var se *wal.StorageError
	require.ErrorAs(t, r.Err, &se)
}

// TestWriterUploadDeadline: a Put that stalls does not hang Produce or
// Close. At ObjectTimeout the request fails (ErrUploadFailed,
// ErrObjectTimeout), no commit is ever sent for the object, and what the
// stalled Put stores in the end is deleted.
func TestWriterUploadDeadline(t *testing.T) {
	for _, honour := range []bool{true, false} {
		t.Run(fmt.Sprintf("put-honours-context=%v", honour), func(t *testing.T) {
			e := newEnv(t, 1)
			store := newStallStore(e.store)
			store.honourContext = honour
			store.gates[1] = make(chan struct{})
			cp := &faultCP{ControlPlane: e.cp}
			w := e.writer(wal.WriterOptions{Store: store, ControlPlane: cp, MaxBytes: 1, ObjectTimeout: 10 * time.Second})
			ch := produceAsync(e.ctx, w, wal.ProduceRequest{Partition: e.tp(0), Batches: batch(t, 1, "stall")})
			waitUntil(func() bool { return store.putCount() == 1 })
			e.clock.Advance(10 * time.Second)
			p := <-ch
			require.NoError(t, p.err)
			requireTimedOut(t, p.res[0], wal.ErrUploadFailed)
			require.Equal(t, int64(1), w.Metrics().ObjectsTimedOut)

			// The writer goes on: the next object commits at offset 0.
			res, err := w.Produce(e.ctx, []wal.ProduceRequest{{Partition: e.tp(0), Batches: batch(t, 1, "next")}})
			require.NoError(t, err)
			require.NoError(t, res[0].Err)
			require.Equal(t, int64(0), res[0].Batches[0].BaseOffset)
			require.NoError(t, w.Close(), "Close does not wait for the stalled Put")

			close(store.gates[1])
			if !honour {
				// The Put stores the object after all; it is deleted.
				waitUntil(func() bool { return w.Metrics().ObjectsDeletedUncommitted == 1 })
			}
			require.Len(t, e.store.Keys(), 1, "only the next object is left")
			require.Len(t, cp.commitKeys(), 1, "no commit of the timed-out object")
		})
	}
}

// TestWriterCommitDeadline: a CommitFile that stalls (ignoring its
// context) does not hang Produce or Close: at ObjectTimeout the request
// fails (ErrCommitFailed, ErrObjectTimeout) and the committer goes on.
// When the stalled call returns at last, a failed commit leads to the
// proven-not-registered cleanup (the object is deleted), a commit that
// happened after all keeps its object.
func TestWriterCommitDeadline(t *testing.T) {
	for _, lands := range []bool{false, true} {
		t.Run(fmt.Sprintf("commit-lands-late=%v", lands), func(t *testing.T) {
			e := newEnv(t, 1)
			cp := &faultCP{ControlPlane: e.cp}
			gate, started, returned := make(chan struct{}), make(chan string, 1), make(chan struct{})
			var first sync.Once
			cp.commit = func(ctx context.Context, req wal.CommitFileRequest) (wal.CommitFileResult, error) {
				stall := false
				first.Do(func() { stall = true })
				if !stall {
					return e.cp.CommitFile(ctx, req)
				}
				defer close(returned)
				started <- req.ObjectKey
				<-gate
				if lands {
					return e.cp.CommitFile(context.Background(), req)
				}
				return wal.CommitFileResult{}, errors.New("connection reset")
			}
			w := e.writer(wal.WriterOptions{ControlPlane: cp, MaxBytes: 1, ObjectTimeout: 10 * time.Second})
			ch := produceAsync(e.ctx, w, wal.ProduceRequest{Partition: e.tp(0), Batches: batch(t, 2, "stall")})
			stalledKey := <-started
			e.clock.Advance(10 * time.Second)
			p := <-ch
			require.NoError(t, p.err)
			requireTimedOut(t, p.res[0], wal.ErrCommitFailed)

			res, err := w.Produce(e.ctx, []wal.ProduceRequest{{Partition: e.tp(0), Batches: batch(t, 1, "next")}})
			require.NoError(t, err)
			require.NoError(t, res[0].Err, "the committer went on")
			require.Equal(t, int64(0), res[0].Batches[0].BaseOffset, "the stalled object has no offsets yet")
			require.NoError(t, w.Close(), "Close does not wait for the stalled commit")

			close(gate)
			<-returned
			safe := func() bool {
				s, err := e.cp.IsSafeToDeleteObject(e.ctx, stalledKey)
				require.NoError(t, err)
				return s
			}
			if lands {
				require.False(t, safe())
				// Registered after all: kept, its batch readable at [1, 2].
				info, err := e.cp.LogInfo(e.ctx, e.tp(0))
				require.NoError(t, err)
				require.Equal(t, int64(3), info.HighWatermark)
				require.Contains(t, e.store.Keys(), stalledKey)
			} else {
				waitUntil(func() bool { return w.Metrics().ObjectsDeletedUncommitted == 1 })
				require.True(t, safe())
				require.NotContains(t, e.store.Keys(), stalledKey)
				require.Len(t, e.store.Keys(), 1)
			}
		})
	}
}

// keepStore records the bytes of every Put by key, and stores them
// whatever the Put's context: an abandoned upload's context has ended,
// and these tests look at what it would have stored.
type keepStore struct {
	objstore.Store
	mu   sync.Mutex
	kept map[string][]byte
}

func newKeepStore(s objstore.Store) *keepStore {
	return &keepStore{Store: s, kept: map[string][]byte{}}
}

func (s *keepStore) Put(_ context.Context, key string, r io.Reader, size int64, opts objstore.PutOptions) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.kept[key] = data
	s.mu.Unlock()
	return s.Store.Put(context.Background(), key, bytes.NewReader(data), size, opts)
}

func (s *keepStore) bytes(key string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.kept[key]
}

// reserveAnywayCP reserves keys whatever the call's context, so that an
// upload abandoned at its deadline still builds and stores its object.
type reserveAnywayCP struct{ wal.ControlPlane }

func (c reserveAnywayCP) ReserveObject(_ context.Context, key string) error {
	return c.ControlPlane.ReserveObject(context.Background(), key)
}

// timedOutKey checks that a request failed at its deadline before its
// upload answered, and returns the object's key.
func timedOutKey(t *testing.T, p produced) string {
	t.Helper()
	require.NoError(t, p.err)
	requireTimedOut(t, p.res[0], wal.ErrUploadFailed)
	var se *wal.StorageError
	require.ErrorAs(t, p.res[0].Err, &se)
	return se.ObjectKey
}

// TestWriterAbandonedBeforeBuild: an object whose deadline passes after
// its upload goroutine took a slot but before it built the object is
// answered then, and its caller may reuse the buffer at once. The late
// build must read private copies taken before the answer: the object
// holds the bytes as Produce was given them, never the caller's new ones.
func TestWriterAbandonedBeforeBuild(t *testing.T) {
	e := newEnv(t, 1)
	store := newKeepStore(e.store)
	w := e.writer(wal.WriterOptions{Store: store, ControlPlane: reserveAnywayCP{e.cp}, MaxBytes: 1, ObjectTimeout: 10 * time.Second})
	reached, release := make(chan struct{}), make(chan struct{})
	w.SetBeforeBuildForTesting(func(string) {
		close(reached)
		<-release
	})
	buf := batch(t, 2, "kept")
	want := slices.Clone(buf)
	ch := produceAsync(e.ctx, w, wal.ProduceRequest{Partition: e.tp(0), Batches: buf})
	<-reached
	e.clock.Advance(10 * time.Second)
	key := timedOutKey(t, <-ch)
	// The caller reuses its buffer (a batch of the same size, which
	// frames as the old one did).
	copy(buf, batch(t, 2, "gone"))
	close(release)

	// The late upload stores its object; it is deleted, never committed.
	waitUntil(func() bool { return w.Metrics().ObjectsDeletedUncommitted == 1 })
	data := store.bytes(key)
	parsed, err := wal.ParseObject(data)
	require.NoError(t, err)
	require.Len(t, parsed, 1)
	b := parsed[0]
	require.Equal(t, want, data[b.ByteOffset:b.ByteOffset+b.Size], "the object holds the bytes Produce was given")
	require.NotContains(t, e.store.Keys(), key)
}

// TestWriterAbandonedBufferNotRecycled: an object answered at its
// deadline while its Put still runs keeps its buffer; later objects are
// not built into it, so the stalled Put stores the object's own bytes.
func TestWriterAbandonedBufferNotRecycled(t *testing.T) {
	e := newEnv(t, 1)
	kept := newKeepStore(e.store)
	store := newStallStore(kept) // ignores the context: stores after the gate
	store.gates[1] = make(chan struct{})
	w := e.writer(wal.WriterOptions{Store: store, MaxBytes: 1, ObjectTimeout: 10 * time.Second})
	ch := produceAsync(e.ctx, w, wal.ProduceRequest{Partition: e.tp(0), Batches: batch(t, 1, "abandoned")})
	waitUntil(func() bool { return store.putCount() == 1 }) // built; its Put stalls
	e.clock.Advance(10 * time.Second)
	key := timedOutKey(t, <-ch)

	// Later objects are built into recycled buffers, if any.
	for i := range 4 {
		res, err := w.Produce(e.ctx, []wal.ProduceRequest{{Partition: e.tp(0), Batches: batch(t, 1, fmt.Sprintf("later%d", i))}})
		require.NoError(t, err)
		require.NoError(t, res[0].Err)
	}
	close(store.gates[1])
	waitUntil(func() bool { return w.Metrics().ObjectsDeletedUncommitted == 1 })
	require.Equal(t, "abandoned-0", objectValue(t, kept.bytes(key)))
}

// TestWriterUploadBackoffLarge: a long UploadBackoff doubled many times
// stays at the cap (the doubling must not overflow into a negative wait).
func TestWriterUploadBackoffLarge(t *testing.T) {
	e := newEnv(t, 1)
	w := e.writer(wal.WriterOptions{UploadBackoff: 100 * time.Second, UploadMaxBackoff: time.Hour})
	for attempt := range 70 {
		nominal := time.Hour
		if attempt < 6 {
			nominal = min(time.Hour, 100*time.Second<<attempt)
		}
		d := w.UploadBackoffForTesting(attempt)
		require.GreaterOrEqual(t, d, nominal/2, "attempt %d", attempt)
		require.LessOrEqual(t, d, nominal, "attempt %d", attempt)
	}
}

// TestWriterUploadedPastDeadline: an object stored in time but reached by
// the committer only after its deadline (the committer was held up by an
// earlier object's listener) is answered as timed out without a commit:
// a CommitFile under the ended context could not succeed. The object is
// deleted, and no commit error is counted.
func TestWriterUploadedPastDeadline(t *testing.T) {
	e := newEnv(t, 1)
	cp := &faultCP{ControlPlane: e.cp}
	reached, release := make(chan struct{}), make(chan struct{})
	var first sync.Once
	w := e.writer(wal.WriterOptions{ControlPlane: cp, MaxBytes: 1, MaxBytesInFlight: 1 << 20, ObjectTimeout: 10 * time.Second,
		Listener: wal.WriterListener{ObjectCommitted: func(wal.ObjectInfo) {
			first.Do(func() {
				close(reached)
				<-release
			})
		}}})
	a := produceAsync(e.ctx, w, wal.ProduceRequest{Partition: e.tp(0), Batches: batch(t, 1, "a")})
	<-reached // the committer is held in a's listener
	b := produceAsync(e.ctx, w, wal.ProduceRequest{Partition: e.tp(0), Batches: batch(t, 1, "b")})
	waitUntil(func() bool { return len(e.store.Keys()) == 2 }) // b is stored
	e.clock.Advance(10 * time.Second)
	close(release)

	pa := <-a
	require.NoError(t, pa.err)
	require.NoError(t, pa.res[0].Err)
	key := timedOutKey(t, <-b)
	waitUntil(func() bool { return w.Metrics().ObjectsDeletedUncommitted == 1 })
	require.NotContains(t, e.store.Keys(), key)
	require.Len(t, cp.commitKeys(), 1, "no commit of b")
	m := w.Metrics()
	require.Equal(t, int64(1), m.ObjectsTimedOut)
	require.Equal(t, int64(0), m.CommitErrors)
}
