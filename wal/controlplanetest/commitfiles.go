package controlplanetest

import (
	"fmt"
	"math"
	"sync"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/wal"
)

// commitFiles calls CommitFiles and checks the answer's length.
func (e *env) commitFiles(reqs ...wal.CommitFileRequest) []wal.CommitFilesResult {
	e.t.Helper()
	res, err := e.cp.CommitFiles(e.ctx, reqs)
	require.NoError(e.t, err)
	require.Len(e.t, res, len(reqs))
	return res
}

// CommitFiles assigns offsets request after request in list order, each
// request's batches in their own order, as CommitFile calls one after the
// other would; the same list again answers as the first time.
func testCommitFilesListOrder(e *env) {
	pre, _ := e.commit(batch(t1p0, 2))
	a := e.request(batch(t1p0, 3), batch(t1p1, 1))
	b := e.request(batch(t1p0, 1), batch(t2p0, 2))
	c := e.request(batch(t1p1, 4), batch(t1p0, 5))
	res := e.commitFiles(a, b, c)
	want := [][]int64{{2, 0}, {5, 0}, {1, 6}}
	for i, r := range res {
		require.NoError(e.t, r.Err, "request %d", i)
		require.Len(e.t, r.Batches, 2)
		for j, br := range r.Batches {
			e.requireAccepted(br, want[i][j])
		}
		require.False(e.t, r.MarkedForDeletion)
	}
	e.requireLog(t1p0, 0, 11, 0, 11)
	e.requireLog(t1p1, 0, 5, 0, 5)
	e.requireLog(t2p0, 0, 2, 0, 2)
	var keys []string
	for _, bi := range e.find1(t1p0, 0).Batches {
		keys = append(keys, bi.ObjectKey)
	}
	require.Equal(e.t, []string{pre.ObjectKey, a.ObjectKey, b.ObjectKey, c.ObjectKey}, keys)

	// A retry of the whole list, and of one of its requests alone.
	again := e.commitFiles(a, b, c)
	for i := range res {
		require.NoError(e.t, again[i].Err)
		require.Equal(e.t, res[i].CommitFileResult, again[i].CommitFileResult, "request %d", i)
	}
	one := e.commitReq(b)
	require.Equal(e.t, res[1].CommitFileResult, one)
	e.requireLog(t1p0, 0, 11, 0, 11)

	none, err := e.cp.CommitFiles(e.ctx, nil)
	require.NoError(e.t, err)
	require.Empty(e.t, none)
}

// A request of a CommitFiles that fails (invalid, a key registered with
// other content, an offset overflow after one of its batches was
// accepted) fails alone and leaves nothing: the later requests are
// decided as if it had not been in the list.
func testCommitFilesItemFailsAlone(e *env) {
	full := wal.TopicIDPartition{TopicID: wal.TopicID{0x33, 3}, Partition: 0}
	_, err := e.cp.InitDisklessLog(e.ctx, []wal.InitDisklessLogRequest{{Partition: full, Topic: "full",
		LogStartOffset: 0, DisklessStartOffset: math.MaxInt64 - 5}})
	require.NoError(e.t, err)
	taken, _ := e.commit(batch(t1p1, 1))

	first := e.request(batch(t1p0, 2))
	invalid := e.request(batch(t1p0, 3))
	invalid.Batches[0].Size = 0
	reused := e.request(batch(t1p0, 4))
	reused.ObjectKey = taken.ObjectKey
	overflow := e.request(batch(t1p0, 5), batch(full, 10))
	require.NoError(e.t, e.cp.ReserveObject(e.ctx, overflow.ObjectKey))
	last := e.request(batch(t1p0, 1), batch(full, 2))
	res := e.commitFiles(first, invalid, reused, overflow, last)

	require.NoError(e.t, res[0].Err)
	e.requireAccepted(res[0].Batches[0], 0)
	require.ErrorIs(e.t, res[1].Err, wal.ErrInvalidArgument)
	require.ErrorIs(e.t, res[2].Err, wal.ErrObjectKeyReused)
	require.ErrorIs(e.t, res[3].Err, wal.ErrInvalidArgument)
	require.NoError(e.t, res[4].Err)
	e.requireAccepted(res[4].Batches[0], 2)
	e.requireAccepted(res[4].Batches[1], math.MaxInt64-5)
	e.requireLog(t1p0, 0, 3, 0, 3)
	for _, req := range []wal.CommitFileRequest{invalid, overflow} {
		safe, err := e.cp.IsSafeToDeleteObject(e.ctx, req.ObjectKey)
		require.NoError(e.t, err)
		require.True(e.t, safe, "%s is not registered", req.ObjectKey)
	}
	// The overflowing request's reservation stays, as after a CommitFile
	// that failed.
	require.ErrorIs(e.t, e.cp.ReserveObject(e.ctx, overflow.ObjectKey), wal.ErrObjectKeyReused)
	require.Equal(e.t, []string{first.ObjectKey, last.ObjectKey}, keysOf(e.find1(t1p0, 0).Batches))
}

func keysOf(bs []wal.BatchInfo) []string {
	keys := []string{}
	for _, b := range bs {
		keys = append(keys, b.ObjectKey)
	}
	return keys
}

// CommitFiles calls racing each other and CommitFile calls on the same
// partitions: every offset is assigned exactly once, and within each
// list a later request's batch of a partition is always above an earlier
// one's.
func testCommitFilesConcurrent(e *env) {
	const lists, calls, perList, singles = 3, 4, 4, 8
	type span struct{ base, count int64 }
	var mu sync.Mutex
	spans := map[wal.TopicIDPartition][]span{}
	record := func(tp wal.TopicIDPartition, r wal.BatchResult, n int64) {
		mu.Lock()
		defer mu.Unlock()
		spans[tp] = append(spans[tp], span{r.BaseOffset, n})
	}
	errs := make(chan error, lists+1)
	var wg sync.WaitGroup
	for l := 0; l < lists; l++ {
		wg.Go(func() {
			for c := 0; c < calls; c++ {
				reqs := make([]wal.CommitFileRequest, perList)
				for i := range reqs {
					n := int64(1 + (l+c+i)%3)
					b0, b1 := batch(t1p0, n), batch(t1p1, n+1)
					b1.ByteOffset = n
					reqs[i] = wal.CommitFileRequest{ObjectKey: fmt.Sprintf("files/%d/%d/%d", l, c, i), ObjectSize: 2*n + 1,
						BrokerID: brokerID, Batches: []wal.CommitBatch{b0, b1}}
				}
				res, err := e.cp.CommitFiles(e.ctx, reqs)
				if err == nil && len(res) != len(reqs) {
					err = fmt.Errorf("%d answers for %d requests", len(res), len(reqs))
				}
				if err != nil {
					errs <- err
					return
				}
				prev := []int64{-1, -1}
				for i, r := range res {
					if r.Err == nil && (r.Batches[0].Err != nil || r.Batches[1].Err != nil) {
						r.Err = fmt.Errorf("rejected: %v %v", r.Batches[0].Err, r.Batches[1].Err)
					}
					if r.Err != nil {
						errs <- fmt.Errorf("list %d/%d request %d: %w", l, c, i, r.Err)
						return
					}
					for j, br := range r.Batches {
						if br.BaseOffset <= prev[j] {
							errs <- fmt.Errorf("list %d/%d: request %d got offset %d in partition %d, not above request %d's %d",
								l, c, i, br.BaseOffset, j, i-1, prev[j])
							return
						}
						prev[j] = br.BaseOffset
						record(reqs[i].Batches[j].Partition, br, reqs[i].Batches[j].OffsetCount())
					}
				}
			}
		})
	}
	wg.Go(func() {
		for s := 0; s < singles; s++ {
			req := e.requestNamed(fmt.Sprintf("single/%d", s), batch(t1p0, 2), batch(t1p1, 1))
			res, err := e.cp.CommitFile(e.ctx, req)
			if err != nil {
				errs <- err
				return
			}
			for j, br := range res.Batches {
				record(req.Batches[j].Partition, br, req.Batches[j].OffsetCount())
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(e.t, err)
	}
	for _, tp := range []wal.TopicIDPartition{t1p0, t1p1} {
		covered := map[int64]bool{}
		total := int64(0)
		for _, s := range spans[tp] {
			for o := s.base; o < s.base+s.count; o++ {
				require.False(e.t, covered[o], "%s: offset %d assigned twice", tp, o)
				covered[o] = true
			}
			total += s.count
		}
		require.Equal(e.t, total, e.info(tp).HighWatermark, "%s", tp)
	}
}

// requestNamed is request under a key of the caller's.
func (e *env) requestNamed(key string, batches ...wal.CommitBatch) wal.CommitFileRequest {
	req := e.request(batches...)
	req.ObjectKey = key
	return req
}

// CommitFiles on a closed plane fails as a whole.
func testCommitFilesClosed(e *env) {
	require.NoError(e.t, e.cp.Close())
	_, err := e.cp.CommitFiles(e.ctx, []wal.CommitFileRequest{e.request(batch(t1p0, 1))})
	require.ErrorIs(e.t, err, wal.ErrClosed)
}
