package controlplanetest

import (
	"fmt"
	"math"
	"sync"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/wal"
)

func testCommitEmpty(e *env) {
	_, res := e.commit()
	require.Empty(e.t, res.Batches)
	// An object with no accepted batch holds only dead bytes.
	require.True(e.t, res.MarkedForDeletion)
	for _, tp := range []wal.TopicIDPartition{t1p0, t1p1, t2p0} {
		e.requireLog(tp, 0, 0, 0, 0)
	}
}

func testCommitUnknownPartitions(e *env) {
	_, res := e.commit(batch(t1p0, 10), batch(t1p9, 5), batch(noTopic, 5))
	e.requireAccepted(res.Batches[0], 0)
	require.Equal(e.t, e.nowMs(), res.Batches[0].LogAppendTime)
	require.Equal(e.t, int64(0), res.Batches[0].LogStartOffset)
	for _, r := range res.Batches[1:] {
		e.requireRejected(r, wal.ErrUnknownTopicOrPartition)
		require.Equal(e.t, [3]int64{-1, -1, -1}, [3]int64{r.BaseOffset, r.LogAppendTime, r.LogStartOffset})
	}
	require.False(e.t, res.MarkedForDeletion)
	e.requireLog(t1p0, 0, 10, 0, 10)
	_, err := e.cp.LogInfo(e.ctx, t1p9)
	require.ErrorIs(e.t, err, wal.ErrUnknownTopicOrPartition)
}

func testCommitContinues(e *env) {
	e.commit(batch(t1p0, 10))
	e.clock.Advance(5000)
	second := batch(t1p0, 10)
	second.MaxTimestamp = 4242
	req, res := e.commit(batch(t2p0, 3), second)
	e.requireAccepted(res.Batches[1], 10)
	e.requireLog(t1p0, 0, 20, 0, 20)
	got := e.find1(t1p0, 11)
	require.NoError(e.t, got.Err)
	require.Equal(e.t, []wal.BatchInfo{{ObjectKey: req.ObjectKey, ByteOffset: 3, Size: 10, BaseOffset: 10, LastOffset: 19,
		MaxTimestamp: 4242, TimestampType: wal.CreateTime, LogAppendTime: e.nowMs(), Binding: req.Batches[1].Binding()}}, got.Batches)
}

func testCommitSizeZero(e *env) {
	req := e.request(batch(t1p0, 10), batch(t1p1, 5))
	req.Batches[1].Size = 0
	_, err := e.cp.CommitFile(e.ctx, req)
	require.ErrorIs(e.t, err, wal.ErrInvalidArgument)
	e.requireLog(t1p0, 0, 0, 0, 0)
	// Nothing of it was registered: the same key commits afterwards.
	req.Batches[1].Size = 5
	res := e.commitReq(req)
	e.requireAccepted(res.Batches[0], 0)
}

func testCommitInvalid(e *env) {
	cases := map[string]func(r *wal.CommitFileRequest){
		"empty key":            func(r *wal.CommitFileRequest) { r.ObjectKey = "" },
		"overlap":              func(r *wal.CommitFileRequest) { r.Batches[1].ByteOffset = 5 },
		"beyond object":        func(r *wal.CommitFileRequest) { r.ObjectSize = 15 },
		"records over offsets": func(r *wal.CommitFileRequest) { r.Batches[0].RecordCount = 11 },
		"last before base":     func(r *wal.CommitFileRequest) { r.Batches[0].LastOffset = -1 },
		"timestamp type":       func(r *wal.CommitFileRequest) { r.Batches[0].TimestampType = 7 },
		"negative sequence": func(r *wal.CommitFileRequest) {
			r.Batches[0].ProducerID, r.Batches[0].ProducerEpoch, r.Batches[0].BaseSequence = 1, 0, -1
		},
	}
	for name, damage := range cases {
		req := e.request(batch(t1p0, 10), batch(t1p0, 10))
		damage(&req)
		_, err := e.cp.CommitFile(e.ctx, req)
		require.ErrorIs(e.t, err, wal.ErrInvalidArgument, name)
	}
	e.requireLog(t1p0, 0, 0, 0, 0)
}

// Offsets near the int64 limit: a commit that would overflow the high
// watermark fails whole and assigns nothing.
func testCommitOffsetOverflow(e *env) {
	e.init(initReq(switched0, 0, math.MaxInt64-5))
	req := e.request(batch(t1p0, 2), batch(switched0, 10))
	_, err := e.cp.CommitFile(e.ctx, req)
	require.ErrorIs(e.t, err, wal.ErrInvalidArgument)
	e.requireLog(t1p0, 0, 0, 0, 0)
	e.requireLog(switched0, 0, math.MaxInt64-5, math.MaxInt64-5, 0)
	_, res := e.commit(batch(switched0, 5))
	e.requireAccepted(res.Batches[0], math.MaxInt64-5)
}

func testCommitRetry(e *env) {
	req, first := e.commit(batch(t1p0, 10), batch(t1p9, 2), idem(t1p1, 4, 7, 0, 0))
	e.clock.Advance(1000)
	// The writer did not see the answer and commits again: same result,
	// nothing assigned twice.
	again := e.commitReq(req)
	require.Equal(e.t, first, again)
	e.requireLog(t1p0, 0, 10, 0, 10)
	e.requireLog(t1p1, 0, 4, 0, 4)
	// The same key with another content is not a retry.
	other := req
	other.Batches = append([]wal.CommitBatch(nil), req.Batches...)
	other.Batches[0].MaxTimestamp++
	_, err := e.cp.CommitFile(e.ctx, other)
	require.ErrorIs(e.t, err, wal.ErrObjectKeyReused)
	e.requireLog(t1p0, 0, 10, 0, 10)
}

// The binding is part of the content: the same key and coordinates with
// another CRC or leader epoch are other bytes, not a retry, and the rows
// keep the first commit's binding.
func testCommitRetryOtherBinding(e *env) {
	req, _ := e.commit(batch(t1p0, 10), idem(t1p1, 4, 7, 0, 0))
	want := e.find1(t1p0, 0)
	for name, damage := range map[string]func(b *wal.CommitBatch){
		"crc":          func(b *wal.CommitBatch) { b.CRC++ },
		"leader epoch": func(b *wal.CommitBatch) { b.PartitionLeaderEpoch++ },
	} {
		for i := range req.Batches {
			other := req
			other.Batches = append([]wal.CommitBatch(nil), req.Batches...)
			damage(&other.Batches[i])
			_, err := e.cp.CommitFile(e.ctx, other)
			require.ErrorIs(e.t, err, wal.ErrObjectKeyReused, "%s of batch %d", name, i)
		}
	}
	require.Equal(e.t, want, e.find1(t1p0, 0))
	e.requireLog(t1p0, 0, 10, 0, 10)
	e.requireLog(t1p1, 0, 4, 0, 4)
}

func testCommitZeroTopicID(e *env) {
	zero := wal.TopicIDPartition{Partition: 0}
	_, res := e.commit(batch(zero, 3), batch(t1p0, 4))
	e.requireRejected(res.Batches[0], wal.ErrUnknownTopicOrPartition)
	e.requireAccepted(res.Batches[1], 0)
}

// Offsets follow the list order per partition, across interleaved
// partitions of one object.
func testCommitListOrder(e *env) {
	_, res := e.commit(batch(t1p0, 2), batch(t1p1, 3), batch(t1p0, 4), batch(t2p0, 1), batch(t1p1, 5), batch(t1p0, 1))
	want := []int64{0, 0, 2, 0, 3, 6}
	for i, r := range res.Batches {
		e.requireAccepted(r, want[i])
	}
	e.requireLog(t1p0, 0, 7, 0, 7)
	e.requireLog(t1p1, 0, 8, 0, 8)
	e.requireLog(t2p0, 0, 1, 0, 1)
}

// Concurrent commits to the same partitions: every offset is assigned
// exactly once and each object's batches of one partition are contiguous.
func testCommitConcurrent(e *env) {
	const writers, commits = 4, 15
	type got struct {
		base, count int64
		tp          wal.TopicIDPartition
	}
	var mu sync.Mutex
	var all []got
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := 0; c < commits; c++ {
				n := int64(1 + (w+c)%4)
				req := wal.CommitFileRequest{ObjectKey: fmt.Sprintf("conc/%d/%d", w, c), ObjectSize: 2 * n}
				b0, b1 := batch(t1p0, n), batch(t1p1, n)
				b1.ByteOffset = n
				req.Batches = []wal.CommitBatch{b0, b1}
				res, err := e.cp.CommitFile(e.ctx, req)
				if err == nil && (res.Batches[0].Err != nil || res.Batches[1].Err != nil) {
					err = fmt.Errorf("rejected: %v %v", res.Batches[0].Err, res.Batches[1].Err)
				}
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				all = append(all, got{res.Batches[0].BaseOffset, n, t1p0}, got{res.Batches[1].BaseOffset, n, t1p1})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(e.t, err)
	}
	for _, tp := range []wal.TopicIDPartition{t1p0, t1p1} {
		owner := map[int64]bool{}
		var total int64
		for _, g := range all {
			if g.tp != tp {
				continue
			}
			total += g.count
			for o := g.base; o < g.base+g.count; o++ {
				require.False(e.t, owner[o], "%s: offset %d assigned twice", tp, o)
				owner[o] = true
			}
		}
		require.Len(e.t, owner, int(total))
		require.Equal(e.t, total, e.info(tp).HighWatermark)
	}
}
