package wal_test

import (
	"context"
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
