package wal_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/internal/harness/testseed"
	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/wal"
)

// fetchAll fetches every partition from offset 0 with no byte limit.
func fetchAll(t *testing.T, e *env, r *wal.Reader, partitions int32) []wal.FetchResult {
	t.Helper()
	req := wal.FindBatchesRequest{MaxBytes: 1 << 30}
	for p := range partitions {
		req.Partitions = append(req.Partitions, wal.FindPartition{Partition: e.tp(p), MaxPartitionBytes: 1 << 30})
	}
	res, err := r.Fetch(e.ctx, req)
	require.NoError(t, err)
	return res
}

// produceRandom produces random requests over partitions in several
// calls (objects of MaxBytes 1: one object per call) and returns what each
// partition must read back, as "offset:value".
func produceRandom(t *testing.T, e *env, w *wal.Writer, partitions int32, calls int) map[int32][]string {
	t.Helper()
	rng := rand.New(rand.NewPCG(testseed.Seed(t, 13), 0))
	want := map[int32][]string{}
	for c := range calls {
		var reqs []wal.ProduceRequest
		for i := range 1 + rng.IntN(6) {
			p := rng.Int32N(partitions)
			n := 1 + rng.IntN(4)
			prefix := fmt.Sprintf("c%d-r%d", c, i)
			reqs = append(reqs, wal.ProduceRequest{Partition: e.tp(p), Batches: batch(t, n, prefix)})
		}
		res, err := w.Produce(e.ctx, reqs)
		require.NoError(t, err)
		for i, r := range res {
			require.NoError(t, r.Err)
			require.NoError(t, r.Batches[0].Err)
			p := reqs[i].Partition.Partition
			base := r.Batches[0].BaseOffset
			require.Equal(t, int64(len(want[p])), base, "offsets are the cumulative record counts")
			for _, v := range values(t, reqs[i].Batches) {
				var off int64
				var val string
				_, err := fmt.Sscanf(v, "%d:%s", &off, &val)
				require.NoError(t, err)
				want[p] = append(want[p], fmt.Sprintf("%d:%s", base+off, val))
			}
		}
	}
	return want
}

// TestReaderReadBack: many partitions over many objects read back with
// exact offsets, from the store (one GET per object: the partitions'
// ranges are coalesced) and from the cache (no GET).
func TestReaderReadBack(t *testing.T) {
	for _, cached := range []bool{false, true} {
		t.Run(fmt.Sprintf("cache=%v", cached), func(t *testing.T) {
			e := newEnv(t, 5)
			var cache *wal.ObjectCache
			if cached {
				cache = wal.NewObjectCache(1 << 20)
			}
			w := e.writer(wal.WriterOptions{MaxBytes: 1, Cache: cache})
			want := produceRandom(t, e, w, 5, 12)
			r, err := wal.NewReader(wal.ReaderOptions{Store: e.store, ControlPlane: e.cp, Cache: cache})
			require.NoError(t, err)
			res := fetchAll(t, e, r, 5)
			for p, fr := range res {
				require.NoError(t, fr.Err)
				require.Equal(t, want[int32(p)], values(t, fr.Records), "partition %d", p)
				require.Equal(t, int64(len(want[int32(p)])), fr.HighWatermark)
			}
			objects := int64(len(e.store.Keys()))
			m := r.Metrics()
			if cached {
				require.Zero(t, m.Gets)
				require.Equal(t, objects, m.CacheHits)
			} else {
				require.Equal(t, objects, m.Gets, "one GET per object")
			}
		})
	}
}

// TestReaderFromMiddle: a fetch from inside a batch gets that batch whole
// and the later ones.
func TestReaderFromMiddle(t *testing.T) {
	e := newEnv(t, 1)
	w := e.writer(wal.WriterOptions{MaxBytes: 1})
	for i := range 3 {
		_, err := w.Produce(e.ctx, []wal.ProduceRequest{{Partition: e.tp(0), Batches: batch(t, 3, fmt.Sprint("m", i))}})
		require.NoError(t, err)
	}
	r, err := wal.NewReader(wal.ReaderOptions{Store: e.store, ControlPlane: e.cp})
	require.NoError(t, err)
	res, err := r.Fetch(e.ctx, wal.FindBatchesRequest{MaxBytes: 1 << 20,
		Partitions: []wal.FindPartition{{Partition: e.tp(0), Offset: 4, MaxPartitionBytes: 1 << 20}}})
	require.NoError(t, err)
	require.Equal(t, []string{"3:m1-0", "4:m1-1", "5:m1-2", "6:m2-0", "7:m2-1", "8:m2-2"}, values(t, res[0].Records))
}

// TestReaderEmptyFetchRecordsNotNil: a fetch at the high watermark
// serves nothing, as an empty record set (never nil: an encoder would
// write a null one, size -1, which consumers refuse).
func TestReaderEmptyFetchRecordsNotNil(t *testing.T) {
	e := newEnv(t, 1)
	w := e.writer(wal.WriterOptions{MaxBytes: 1})
	_, err := w.Produce(e.ctx, []wal.ProduceRequest{{Partition: e.tp(0), Batches: batch(t, 3, "m")}})
	require.NoError(t, err)
	r, err := wal.NewReader(wal.ReaderOptions{Store: e.store, ControlPlane: e.cp})
	require.NoError(t, err)
	res, err := r.Fetch(e.ctx, wal.FindBatchesRequest{MaxBytes: 1 << 20,
		Partitions: []wal.FindPartition{{Partition: e.tp(0), Offset: 3, MaxPartitionBytes: 1 << 20}}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	require.Equal(t, int64(3), res[0].HighWatermark)
	require.NotNil(t, res[0].Records)
	require.Empty(t, res[0].Records)
}

// rewrite replaces an object's bytes in the store by f(bytes).
func rewrite(t *testing.T, e *env, key string, f func([]byte) []byte) {
	t.Helper()
	data, err := objstore.ReadAll(e.ctx, e.store, key)
	require.NoError(t, err)
	data = f(data)
	require.NoError(t, e.store.Put(e.ctx, key, bytes.NewReader(data), int64(len(data)), objstore.PutOptions{}))
}

// TestReaderHostileObject: damaged objects give the good prefix or a
// typed error, never a panic or wrong records.
func TestReaderHostileObject(t *testing.T) {
	setup := func(t *testing.T) (*env, *wal.Reader, string, []byte) {
		e := newEnv(t, 2)
		w := e.writer(wal.WriterOptions{MaxBytes: 1})
		b := batch(t, 2, "h")
		// One object: partition 0 gets two batches, partition 1 one.
		_, err := w.Produce(e.ctx, []wal.ProduceRequest{{Partition: e.tp(0), Batches: append(append([]byte(nil), b...), b...)},
			{Partition: e.tp(1), Batches: b}})
		require.NoError(t, err)
		r, err := wal.NewReader(wal.ReaderOptions{Store: e.store, ControlPlane: e.cp})
		require.NoError(t, err)
		return e, r, e.store.Keys()[0], b
	}
	t.Run("second-batch-corrupt", func(t *testing.T) {
		e, r, key, b := setup(t)
		rewrite(t, e, key, func(d []byte) []byte { d[len(b)+30]++; return d })
		res := fetchAll(t, e, r, 2)
		require.NoError(t, res[0].Err)
		require.Equal(t, []string{"0:h-0", "1:h-1"}, values(t, res[0].Records), "the good prefix")
		require.Equal(t, []string{"0:h-0", "1:h-1"}, values(t, res[1].Records), "the other partition is unaffected")
		require.Equal(t, int64(1), r.Metrics().TruncatedPartitions)
	})
	t.Run("first-batch-corrupt", func(t *testing.T) {
		e, r, key, _ := setup(t)
		rewrite(t, e, key, func(d []byte) []byte { d[30]++; return d })
		res := fetchAll(t, e, r, 2)
		var be *wal.BatchReadError
		require.ErrorAs(t, res[0].Err, &be)
		require.ErrorIs(t, res[0].Err, wal.ErrCorruption)
		require.Equal(t, key, be.ObjectKey)
		require.NotNil(t, res[0].Records, "an empty record set, not a null one")
		require.Empty(t, res[0].Records, "nothing served")
		require.NoError(t, res[1].Err)
	})
	t.Run("short", func(t *testing.T) {
		// An object shorter than its committed bytes is corruption of
		// the batches past its end, not a retriable read.
		e, r, key, _ := setup(t)
		rewrite(t, e, key, func(d []byte) []byte { return d[:20] })
		res := fetchAll(t, e, r, 2)
		for _, fr := range res {
			var be *wal.BatchReadError
			require.ErrorAs(t, fr.Err, &be)
			require.ErrorIs(t, fr.Err, wal.ErrCorruption)
			require.Equal(t, key, be.ObjectKey)
			require.False(t, wal.IsRetriable(fr.Err))
		}
		require.Equal(t, int64(2), r.Metrics().CorruptBatches)
	})
	t.Run("garbage", func(t *testing.T) {
		e, r, key, _ := setup(t)
		rewrite(t, e, key, func(d []byte) []byte { return bytes.Repeat([]byte{0xff}, len(d)) })
		for _, fr := range fetchAll(t, e, r, 2) {
			require.ErrorIs(t, fr.Err, wal.ErrCorruption)
		}
	})
	t.Run("missing", func(t *testing.T) {
		e, r, key, _ := setup(t)
		require.NoError(t, e.store.Delete(e.ctx, key))
		for _, fr := range fetchAll(t, e, r, 2) {
			require.ErrorIs(t, fr.Err, objstore.ErrNotExist)
		}
	})
}

// lyingCP shifts the coordinates FindBatches answers.
type lyingCP struct {
	wal.ControlPlane
	lie func(*wal.BatchInfo)
}

func (l lyingCP) FindBatches(ctx context.Context, req wal.FindBatchesRequest) ([]wal.FindBatchesResult, error) {
	res, err := l.ControlPlane.FindBatches(ctx, req)
	for i := range res {
		for j := range res[i].Batches {
			l.lie(&res[i].Batches[j])
		}
	}
	return res, err
}

// TestReaderLyingCoordinates: coordinates that do not match the bytes are
// typed errors.
func TestReaderLyingCoordinates(t *testing.T) {
	for name, tc := range map[string]struct {
		lie  func(*wal.BatchInfo)
		want error
	}{
		"size+1":         {func(b *wal.BatchInfo) { b.Size++ }, wal.ErrCorruption},
		"shifted":        {func(b *wal.BatchInfo) { b.ByteOffset++ }, wal.ErrCorruption},
		"offsets":        {func(b *wal.BatchInfo) { b.LastOffset += 3 }, wal.ErrCorruption},
		"negative":       {func(b *wal.BatchInfo) { b.ByteOffset = -5 }, wal.ErrInconsistentAnswer},
		"beyond":         {func(b *wal.BatchInfo) { b.ByteOffset = 1 << 40 }, wal.ErrInconsistentAnswer},
		"backwards":      {func(b *wal.BatchInfo) { b.LastOffset = b.BaseOffset - 1 }, wal.ErrInconsistentAnswer},
		"past-the-end":   {func(b *wal.BatchInfo) { b.Size = 1 << 20 }, wal.ErrCorruption},
		"unknown-object": {func(b *wal.BatchInfo) { b.ObjectKey = "nope" }, wal.ErrObjectRead},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, 1)
			w := e.writer(wal.WriterOptions{MaxBytes: 1})
			_, err := w.Produce(e.ctx, []wal.ProduceRequest{{Partition: e.tp(0), Batches: batch(t, 2, "l")}})
			require.NoError(t, err)
			r, err := wal.NewReader(wal.ReaderOptions{Store: e.store, ControlPlane: lyingCP{e.cp, tc.lie}})
			require.NoError(t, err)
			res := fetchAll(t, e, r, 1)
			require.ErrorIs(t, res[0].Err, tc.want)
		})
	}
}
