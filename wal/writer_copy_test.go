package wal_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/wal"
)

// TestWriterCallerLeavesBeforeBuild: the writer copies a request's bytes
// once, when it builds the object, not when Produce is called. A caller
// whose context ends before that build must get its buffer back: the
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

// TestWriterBufferReuse: without a Cache the writer builds each object
// into the buffer of an earlier one that was stored; with a Cache it
// never does, since the cache keeps the objects it is given. Every
// object, in the store and in the cache, still holds its own batches.
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
