package wal_test

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/wal"
)

// bigBatch builds a batch of n records of valueBytes bytes of tag, with
// a binding as pbatch's.
func bigBatch(t testing.TB, n, valueBytes int, tag byte, pid int64, seq int32) []byte {
	t.Helper()
	opts := record.DefaultBuilderOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence, opts.PartitionLeaderEpoch = pid, 1, seq, 3
	b := record.NewBuilder(opts)
	for range n {
		b.Add(1000, nil, bytes.Repeat([]byte{tag}, valueBytes))
	}
	buf, err := b.Build()
	require.NoError(t, err)
	return buf
}

// withBase returns a copy of batch with base offset base written in, as
// the Reader serves it.
func withBase(t testing.TB, batch []byte, base int64) []byte {
	t.Helper()
	out := bytes.Clone(batch)
	b, err := record.ReadBatch(out)
	require.NoError(t, err)
	b.SetBaseOffset(base)
	return out
}

// TestReaderReadsInPlace: a fetch of partitions 0 and 2 of four objects
// that each hold three batches of partitions 0, 1 and 2 (the layout a
// writer's objects have) reads each object with one GET straight into
// the two answers: the bytes it allocates are the answers' (plus small
// bookkeeping), not a buffer per GET and a copy of each batch out of it
// (which was twice the answers, and the bytes of partition 1 in between
// on top). The answers are the committed batches, byte for byte, with
// their assigned offsets.
func TestReaderReadsInPlace(t *testing.T) {
	e, req, want := releaseEnv(t)
	r := e.reader(nil)
	answers := int64(len(want[0]) + len(want[1]))
	allocated := uint64(1 << 62)
	for range 10 { // the least of ten: other goroutines' allocations fall in some
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		res, err := r.Fetch(e.ctx, req)
		runtime.ReadMemStats(&after)
		require.NoError(t, err)
		require.NoError(t, res[0].Err)
		require.NoError(t, res[1].Err)
		require.True(t, bytes.Equal(want[0], res[0].Records), "partition 0 served the committed batches")
		require.True(t, bytes.Equal(want[1], res[1].Records), "partition 2 served the committed batches")
		allocated = min(allocated, after.TotalAlloc-before.TotalAlloc)
	}
	require.Equal(t, int64(10*layoutObjects), r.Metrics().Gets, "one GET per object and fetch")
	t.Logf("answers %d bytes, fetch allocated %d", answers, allocated)
	// The answers and bookkeeping; a read buffer per GET and a copy
	// out of it was 2.5 times the answers. Under the race detector the
	// pooled scratch buffers (the 256 KiB one for the gaps of coalesced
	// reads) are dropped at random and allocated again: the bound allows
	// one more.
	bound := uint64(answers + answers/2)
	if raceEnabled {
		bound += 256 << 10
	}
	require.Less(t, allocated, bound, "the fetch allocates the answers, not a read buffer and a copy")
}

// TestReaderCachedAnswerIsOwnCopy: an answer served from the writer's
// object cache is a copy: the consolidation fetcher writes its epoch
// into every batch it is served, and a later fetch of the same object
// (from the cache) must still serve the committed bytes, which the
// binding check would refuse otherwise.
func TestReaderCachedAnswerIsOwnCopy(t *testing.T) {
	e := newEnv(t, 2)
	cache := wal.NewObjectCache(1 << 20)
	w := e.writer(wal.WriterOptions{MaxBytes: 1, Cache: cache})
	want := produceRandom(t, e, w, 2, 6)
	r, err := wal.NewReader(wal.ReaderOptions{Store: e.store, ControlPlane: e.cp, Cache: cache})
	require.NoError(t, err)
	for round := range 2 {
		res := fetchAll(t, e, r, 2)
		for p, fr := range res {
			require.NoError(t, fr.Err, "round %d", round)
			require.Equal(t, want[int32(p)], values(t, fr.Records), "round %d partition %d", round, p)
			for pos := 0; pos < len(fr.Records); {
				b, err := record.ReadBatch(fr.Records[pos:])
				require.NoError(t, err)
				require.NotEqual(t, int32(77), b.PartitionLeaderEpoch(), "round %d: the last round's stamp is not in the cache", round)
				b.SetPartitionLeaderEpoch(77)
				pos += b.Size()
			}
		}
	}
	require.Zero(t, r.Metrics().Gets)
	require.Positive(t, r.Metrics().CacheHits)
}

// TestReaderReadsInPlaceShortObject: the second of four objects is cut
// inside partition 2's second batch. The coalesced GET of partitions 0
// and 2 fails part way, after partition 0's bytes were read and checked
// in place; the Reader falls back to reading the object to its end, and
// serves partition 0 whole and partition 2 the prefix before the cut
// batch, byte for byte.
func TestReaderReadsInPlaceShortObject(t *testing.T) {
	e := newBindEnv(t)
	const objects, perObject, records, valueBytes = 4, 3, 64, 256
	want := map[int32][][]byte{}
	var next [3]int64
	for o := range objects {
		var adds []add
		for p := range int32(3) {
			for k := range perObject {
				batch := bigBatch(t, records, valueBytes, byte('a'+p), 10+int64(p), int32(o*perObject+k)*records)
				adds = append(adds, add{p, batch})
				want[p] = append(want[p], withBase(t, batch, next[p]))
				next[p] += records
			}
		}
		key := fmt.Sprintf("wal/o%d", o)
		data, batches := e.commit(key, adds...)
		if o == 1 {
			var second wal.CommitBatch
			seen := 0
			for _, b := range batches {
				if b.Partition == bindTP(2) {
					if seen++; seen == 2 {
						second = b
					}
				}
			}
			require.Equal(t, 2, seen-1, "three batches of partition 2")
			e.put(key, data[:second.ByteOffset+10])
		}
	}
	r := e.reader(nil)
	req := wal.FindBatchesRequest{MaxBytes: 1 << 30}
	for _, p := range []int32{0, 2} {
		req.Partitions = append(req.Partitions, wal.FindPartition{Partition: bindTP(p), MaxPartitionBytes: 1 << 30})
	}
	res, err := r.Fetch(e.ctx, req)
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	require.NoError(t, res[1].Err, "a later batch failed: the good prefix is served")
	require.True(t, bytes.Equal(bytes.Join(want[0], nil), res[0].Records), "partition 0 whole")
	require.True(t, bytes.Equal(bytes.Join(want[2][:perObject+1], nil), res[1].Records), "partition 2 up to the cut batch")
	m := r.Metrics()
	require.Equal(t, int64(1), m.TruncatedPartitions)
	require.Equal(t, int64(1), m.CorruptBatches)
}
