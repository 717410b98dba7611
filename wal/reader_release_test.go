package wal_test

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/wal"
)

// releaseEnv commits four objects of three batches of partitions 0, 1
// and 2 each (a writer's layout) and returns the env, the fetch of
// partitions 0 and 2, and their committed answers.
// layoutObjects is how many objects releaseEnv commits.
const layoutObjects = 4

func releaseEnv(t *testing.T) (*bindEnv, wal.FindBatchesRequest, [][]byte) {
	e := newBindEnv(t)
	const perObject, records, valueBytes = 3, 64, 256
	want := map[int32][]byte{}
	var next [3]int64
	for o := range layoutObjects {
		var adds []add
		for p := range int32(3) {
			for k := range perObject {
				seq := int32(o*perObject+k) * records
				batch := bigBatch(t, records, valueBytes, byte('a'+p), 10+int64(p), seq)
				adds = append(adds, add{p, batch})
				want[p] = append(want[p], withBase(t, batch, next[p])...)
				next[p] += records
			}
		}
		e.commit(fmt.Sprintf("wal/o%d", o), adds...)
	}
	req := wal.FindBatchesRequest{MaxBytes: 1 << 30}
	for _, p := range []int32{0, 2} {
		req.Partitions = append(req.Partitions, wal.FindPartition{Partition: bindTP(p), MaxPartitionBytes: 1 << 30})
	}
	return e, req, [][]byte{want[0], want[2]}
}

// TestReaderReleaseReusesAnswerBuffers: answers given back with Release
// are the buffers the next fetch reads its answers into: that fetch
// allocates no answer (a fresh buffer costs its zeroing and a page fault
// per page), serves the committed batches byte for byte, and a slice of
// a released answer kept by mistake reads poison (the test hook; on in
// invariants builds), never another fetch's batches passed off as its
// own.
func TestReaderReleaseReusesAnswerBuffers(t *testing.T) {
	defer wal.SetPoisonReleasedForTesting(true)()
	e, req, want := releaseEnv(t)
	r := e.reader(nil)
	first, err := r.Fetch(e.ctx, req)
	require.NoError(t, err)
	bufs := map[*byte]bool{}
	var kept [][]byte
	for i, fr := range first {
		require.NoError(t, fr.Err)
		require.True(t, bytes.Equal(want[i], fr.Records), "partition %d", i)
		bufs[&fr.Records[0]] = true
		kept = append(kept, fr.Records)
	}
	r.Release(first...)
	require.Equal(t, int64(cap(kept[0])+cap(kept[1])), r.AnswerPoolHeldForTesting())
	for i, k := range kept {
		require.Equal(t, bytes.Repeat([]byte{wal.PoisonByteForTesting}, len(k)), k, "answer %d poisoned once released", i)
	}

	answers := uint64(len(want[0]) + len(want[1]))
	allocated := uint64(1 << 62)
	for round := range 10 { // the least of ten: other goroutines' allocations fall in some
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		again, err := r.Fetch(e.ctx, req)
		runtime.ReadMemStats(&after)
		require.NoError(t, err)
		for i, fr := range again {
			require.NoError(t, fr.Err)
			require.True(t, bytes.Equal(want[i], fr.Records), "round %d: partition %d served the committed batches", round, i)
			require.True(t, bufs[&fr.Records[0]], "round %d: partition %d read into a released buffer", round, i)
		}
		require.Zero(t, r.AnswerPoolHeldForTesting(), "both buffers are in use again")
		r.Release(again...)
		allocated = min(allocated, after.TotalAlloc-before.TotalAlloc)
	}
	t.Logf("answers %d bytes, a fetch after Release allocated %d", answers, allocated)
	// Bookkeeping only. Under the race detector the 256 KiB scratch
	// buffer of coalesced reads' gaps (a sync.Pool) is dropped at random
	// and allocated again.
	bound := answers / 4
	if raceEnabled {
		bound += 256 << 10
	}
	require.Less(t, allocated, bound, "the answers came from the released buffers")
}

// TestReaderAnswerPoolBound: the Reader keeps at most AnswerPoolBytes of
// released buffers (the rest is left to the garbage collector), and none
// with a negative bound.
func TestReaderAnswerPoolBound(t *testing.T) {
	e, req, want := releaseEnv(t)
	for _, tc := range []struct {
		name     string
		poolSize int64
		held     func(a, b int) int64
	}{
		{"room for one", int64(len(want[0]) + len(want[1])/2), func(a, _ int) int64 { return int64(a) }},
		{"none", -1, func(int, int) int64 { return 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := wal.NewReader(wal.ReaderOptions{Store: e.store, ControlPlane: e.cp, AnswerPoolBytes: tc.poolSize})
			require.NoError(t, err)
			res, err := r.Fetch(e.ctx, req)
			require.NoError(t, err)
			a, b := cap(res[0].Records), cap(res[1].Records)
			r.Release(res...)
			require.Equal(t, tc.held(a, b), r.AnswerPoolHeldForTesting())
			again, err := r.Fetch(e.ctx, req)
			require.NoError(t, err)
			for i, fr := range again {
				require.True(t, bytes.Equal(want[i], fr.Records), "partition %d", i)
			}
		})
	}
}
