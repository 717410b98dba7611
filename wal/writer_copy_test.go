package wal_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/wal"
)

// TestWriterCallerLeavesBeforeBuild: the writer reads a request's bytes
// when it builds and stores the object, not when Produce is called. A
// caller whose context ends before that must get its buffer back: the
// writer takes a private copy as Produce returns, so that the caller
// overwriting its buffer at once does not change what is stored.
func TestWriterCallerLeavesBeforeBuild(t *testing.T) {
	e := newEnv(t, 1)
	gs := newGatedStore(e.store, 1)
	first := batch(t, 1, "first")
	// One upload slot and one object per call: the second object is
	// sealed at once but built only when the first Put returns.
	w := e.writer(wal.WriterOptions{Store: gs, MaxBytes: 1, UploadConcurrency: 1, MaxBytesInFlight: 1 << 20})
	r1 := produceAsync(e.ctx, w, wal.ProduceRequest{Partition: e.tp(0), Batches: first})
	waitUntil(func() bool { return gs.putsStarted() == 1 })

	buf := batch(t, 2, "second")
	want := append([]byte(nil), buf...)
	ctx, cancel := context.WithCancel(e.ctx)
	r2 := produceAsync(ctx, w, wal.ProduceRequest{Partition: e.tp(0), Batches: buf})
	waitUntil(func() bool { return w.Metrics().ObjectsInFlight == 2 })
	cancel()
	require.ErrorIs(t, (<-r2).err, context.Canceled)
	clear(buf) // the caller reuses its buffer

	gs.open(1)
	require.NoError(t, (<-r1).err)
	require.NoError(t, w.Close())
	require.Equal(t, int64(2), w.Metrics().ObjectsCommitted)
	// Both objects parse (their CRCs hold) and the second holds the bytes
	// as they were when Produce was called.
	var found bool
	for _, k := range e.store.Keys() {
		data, err := objstore.ReadAll(e.ctx, e.store, k)
		require.NoError(t, err)
		parsed, err := wal.ParseObject(data)
		require.NoError(t, err)
		require.NotEmpty(t, parsed, "object %s holds no batch", k)
		b := parsed[0]
		if got := data[b.ByteOffset : b.ByteOffset+b.Size]; b.RecordCount == 2 {
			require.Equal(t, want, got)
			found = true
		}
	}
	require.True(t, found, "the second object is stored")
}

// TestWriterBufferReuse: without a Cache the writer stores each object
// from its requests' bytes, with a Cache it copies them into the object
// the cache keeps. Every object, in the store and in the cache, holds its
// own batches.
func TestWriterBufferReuse(t *testing.T) {
	for _, cached := range []bool{false, true} {
		t.Run(fmt.Sprintf("cache=%v", cached), func(t *testing.T) {
			e := newEnv(t, 1)
			var cache *wal.ObjectCache
			if cached {
				cache = wal.NewObjectCache(1 << 20)
			}
			w := e.writer(wal.WriterOptions{MaxBytes: 1, Cache: cache})
			const objects = 8
			keys := map[string]string{} // object key -> the value it holds
			var committed []string
			for i := range objects {
				value := fmt.Sprintf("object-%d", i)
				res, err := w.Produce(e.ctx, []wal.ProduceRequest{{Partition: e.tp(0), Batches: batch(t, 1, value)}})
				require.NoError(t, err)
				require.NoError(t, res[0].Err)
				require.Equal(t, int64(i), res[0].Batches[0].BaseOffset)
				committed = append(committed, value+"-0")
			}
			require.NoError(t, w.Close())
			for _, k := range e.store.Keys() {
				data, err := objstore.ReadAll(e.ctx, e.store, k)
				require.NoError(t, err)
				keys[k] = objectValue(t, data)
				if cached {
					c, ok := cache.Get(k)
					require.True(t, ok, "object %s cached", k)
					require.Equal(t, data, c, "the cached copy of %s equals the stored one", k)
				}
			}
			var stored []string
			for _, v := range keys {
				stored = append(stored, v)
			}
			require.ElementsMatch(t, committed, stored)
		})
	}
}

// objectValue parses a one-batch, one-record object and returns the
// record's value.
func objectValue(t *testing.T, data []byte) string {
	t.Helper()
	parsed, err := wal.ParseObject(data)
	require.NoError(t, err)
	require.Len(t, parsed, 1)
	b := parsed[0]
	v := values(t, data[b.ByteOffset:b.ByteOffset+b.Size])
	require.Len(t, v, 1)
	_, value, _ := strings.Cut(v[0], ":")
	return value
}

// halfStore reads the first half of the first Put's body, then waits
// for its gate before reading the rest and storing the object.
type halfStore struct {
	objstore.Store
	once     sync.Once
	halfRead chan struct{}
	gate     chan struct{}
}

func (s *halfStore) Put(ctx context.Context, key string, r io.Reader, size int64, opts objstore.PutOptions) error {
	first := false
	s.once.Do(func() { first = true })
	if !first {
		return s.Store.Put(ctx, key, r, size, opts)
	}
	data := make([]byte, size)
	if _, err := io.ReadFull(r, data[:size/2]); err != nil {
		return err
	}
	close(s.halfRead)
	<-s.gate
	if _, err := io.ReadFull(r, data[size/2:]); err != nil {
		return err
	}
	return s.Store.Put(ctx, key, bytes.NewReader(data), size, opts)
}

// TestWriterCallerLeavesDuringPut: without a Cache the object is never
// copied, the store reads it from the callers' bytes. A caller whose
// context ends while the Put is half-way must still get its buffer back
// at once: the rest of the Put reads the private copy the writer took as
// Produce returned, so the object holds the bytes Produce was given.
func TestWriterCallerLeavesDuringPut(t *testing.T) {
	e := newEnv(t, 1)
	hs := &halfStore{Store: e.store, halfRead: make(chan struct{}), gate: make(chan struct{})}
	w := e.writer(wal.WriterOptions{Store: hs, MaxBytes: 1})
	buf := batch(t, 50, "caller")
	want := bytes.Clone(buf)
	ctx, cancel := context.WithCancel(e.ctx)
	ch := produceAsync(ctx, w, wal.ProduceRequest{Partition: e.tp(0), Batches: buf})
	<-hs.halfRead
	cancel()
	require.ErrorIs(t, (<-ch).err, context.Canceled)
	clear(buf) // the caller reuses its buffer
	close(hs.gate)
	require.NoError(t, w.Close())
	require.Equal(t, int64(1), w.Metrics().ObjectsCommitted)
	keys := e.store.Keys()
	require.Len(t, keys, 1)
	data, err := objstore.ReadAll(e.ctx, e.store, keys[0])
	require.NoError(t, err)
	parsed, err := wal.ParseObject(data)
	require.NoError(t, err, "the object's CRCs hold")
	require.Len(t, parsed, 1)
	require.Equal(t, want, data[parsed[0].ByteOffset:parsed[0].ByteOffset+parsed[0].Size])
}

// lingerStore fails the first Put after reading part of its body and
// keeps the reader, as an HTTP transport may go on reading a request's
// body after the call returned an error.
type lingerStore struct {
	objstore.Store
	mu   sync.Mutex
	kept io.Reader
}

var errLinger = errors.New("connection reset (test)")

func (s *lingerStore) Put(ctx context.Context, key string, r io.Reader, size int64, opts objstore.PutOptions) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.kept == nil {
		if _, err := io.ReadFull(r, make([]byte, 10)); err != nil {
			return err
		}
		s.kept = r
		return errLinger
	}
	return s.Store.Put(ctx, key, r, size, opts)
}

// TestWriterBodyEndsWithPut: a store must not read a Put's body after the
// Put returned, but a transport may. Once the object is answered its
// callers reuse their buffers, so the body of a failed attempt (read from
// those buffers) answers every later read with an error instead of their
// new bytes.
func TestWriterBodyEndsWithPut(t *testing.T) {
	e := newEnv(t, 1)
	e.clock.fireAtOnceBelow = time.Second // the retry's backoff
	ls := &lingerStore{Store: e.store}
	w := e.writer(wal.WriterOptions{Store: ls, MaxBytes: 1, UploadBackoff: time.Millisecond})
	buf := batch(t, 5, "reused")
	res, err := w.Produce(e.ctx, []wal.ProduceRequest{{Partition: e.tp(0), Batches: buf}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	require.Equal(t, int64(1), w.Metrics().UploadRetries)
	clear(buf)
	n, err := ls.kept.Read(make([]byte, 100))
	require.Error(t, err, "the failed attempt's body still reads %d bytes", n)
	require.Zero(t, n)
	require.NoError(t, w.Close())
}
