package controlplanetest

import (
	"math"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/wal"
)

func testFindContaining(e *env) {
	e.commit(batch(t1p0, 3))
	e.commit(batch(t1p0, 2))
	for off := int64(0); off < 3; off++ {
		got := e.find1(t1p0, off)
		require.NoError(e.t, got.Err)
		require.Equal(e.t, "[0,2] [3,4]", ranges(got.Batches), "offset %d", off)
		require.Equal(e.t, [2]int64{0, 5}, [2]int64{got.LogStartOffset, got.HighWatermark})
	}
	for off := int64(3); off < 5; off++ {
		require.Equal(e.t, "[3,4]", ranges(e.find1(t1p0, off).Batches), "offset %d", off)
	}
}

func testFindHighWatermark(e *env) {
	// Before any commit: 11 is above HW 0.
	got := e.find1(t1p0, 11)
	require.ErrorIs(e.t, got.Err, wal.ErrOffsetOutOfRange)
	require.Nil(e.t, got.Batches)
	require.Equal(e.t, [2]int64{0, 0}, [2]int64{got.LogStartOffset, got.HighWatermark})

	e.commit(batch(t1p0, 5))
	got = e.find1(t1p0, 5)
	require.NoError(e.t, got.Err)
	require.NotNil(e.t, got.Batches)
	require.Empty(e.t, got.Batches)
	require.Equal(e.t, [2]int64{0, 5}, [2]int64{got.LogStartOffset, got.HighWatermark})

	got = e.find1(t1p0, 6)
	require.ErrorIs(e.t, got.Err, wal.ErrOffsetOutOfRange)
	require.Nil(e.t, got.Batches)
	require.Equal(e.t, [2]int64{0, 5}, [2]int64{got.LogStartOffset, got.HighWatermark})

	got = e.find1(t1p0, -1)
	require.ErrorIs(e.t, got.Err, wal.ErrOffsetOutOfRange)
}

func testFindAfterDeleteRecords(e *env) {
	e.commit(batch(t1p0, 10))
	e.deleteRecords(t1p0, 5, 5)
	got := e.find1(t1p0, 2)
	require.ErrorIs(e.t, got.Err, wal.ErrOffsetOutOfRange)
	require.Equal(e.t, [2]int64{5, 10}, [2]int64{got.LogStartOffset, got.HighWatermark})
	got = e.find1(t1p0, 5)
	require.NoError(e.t, got.Err)
	require.Equal(e.t, "[0,9]", ranges(got.Batches))
	require.Equal(e.t, int64(5), got.LogStartOffset)
}

func testFindRequestBudget(e *env) {
	e.commit(batch(t1p0, 100), batch(t1p1, 100))
	res, err := e.cp.FindBatches(e.ctx, wal.FindBatchesRequest{MaxBytes: 100, Partitions: []wal.FindPartition{
		{Partition: t1p0, MaxPartitionBytes: 1000}, {Partition: t1p1, MaxPartitionBytes: 1000}}})
	require.NoError(e.t, err)
	require.Len(e.t, res[0].Batches, 1)
	require.NoError(e.t, res[1].Err)
	require.Empty(e.t, res[1].Batches)
	require.Equal(e.t, int64(100), res[1].HighWatermark)

	// The first batch of a request is granted whatever its size.
	res, err = e.cp.FindBatches(e.ctx, wal.FindBatchesRequest{MaxBytes: 1, Partitions: []wal.FindPartition{
		{Partition: t1p1, MaxPartitionBytes: 1}}})
	require.NoError(e.t, err)
	require.Len(e.t, res[0].Batches, 1)
}

func testFindPartitionBudget(e *env) {
	for i := 0; i < 4; i++ {
		e.commit(batch(t1p0, 100))
	}
	find := func(maxPart int64, maxBatches int) string {
		res, err := e.cp.FindBatches(e.ctx, wal.FindBatchesRequest{MaxBytes: 1 << 20, MaxBatchesPerPartition: maxBatches,
			Partitions: []wal.FindPartition{{Partition: t1p0, Offset: 0, MaxPartitionBytes: maxPart}}})
		require.NoError(e.t, err)
		return ranges(res[0].Batches)
	}
	// The batch that crosses the budget is included.
	require.Equal(e.t, "[0,99] [100,199]", find(150, 0))
	require.Equal(e.t, "[0,99] [100,199]", find(200, 0))
	require.Equal(e.t, "[0,99] [100,199] [200,299]", find(201, 0))
	require.Equal(e.t, "[0,99]", find(1<<20, 1))
	// A request budget crossing in a later partition.
	e.commit(batch(t1p1, 100), batch(t1p1, 100))
	res, err := e.cp.FindBatches(e.ctx, wal.FindBatchesRequest{MaxBytes: 250, Partitions: []wal.FindPartition{
		{Partition: t1p0, MaxPartitionBytes: 150}, {Partition: t1p1, MaxPartitionBytes: 1000}}})
	require.NoError(e.t, err)
	require.Equal(e.t, "[0,99] [100,199]", ranges(res[0].Batches))
	require.Equal(e.t, "[0,99]", ranges(res[1].Batches))
}

func testFindUnknown(e *env) {
	e.commit(batch(t1p0, 3))
	res, err := e.cp.FindBatches(e.ctx, wal.FindBatchesRequest{MaxBytes: 1 << 20, Partitions: []wal.FindPartition{
		{Partition: t1p9, MaxPartitionBytes: 100}, {Partition: t1p0, MaxPartitionBytes: 100},
		{Partition: noTopic, MaxPartitionBytes: 100}}})
	require.NoError(e.t, err)
	require.Len(e.t, res, 3)
	for _, i := range []int{0, 2} {
		require.ErrorIs(e.t, res[i].Err, wal.ErrUnknownTopicOrPartition)
		require.Nil(e.t, res[i].Batches)
		require.Equal(e.t, [2]int64{-1, -1}, [2]int64{res[i].LogStartOffset, res[i].HighWatermark})
	}
	require.Equal(e.t, "[0,2]", ranges(res[1].Batches))
}

// The plane spends the budget in the caller's order; a caller that moves
// served partitions to the back is fair: ten partitions, five served per
// round, ten rounds, five batches each.
func testFindFairness(e *env) {
	const parts = 10
	id := wal.TopicID{0x33}
	e.create(id, "fair", parts)
	var order []wal.TopicIDPartition
	var bs []wal.CommitBatch
	for p := int32(0); p < parts; p++ {
		tp := wal.TopicIDPartition{TopicID: id, Partition: p}
		order = append(order, tp)
		for i := 0; i < 6; i++ {
			bs = append(bs, batch(tp, 100))
		}
	}
	e.commit(bs...)
	next := map[wal.TopicIDPartition]int64{}
	served := map[wal.TopicIDPartition]int{}
	for round := 0; round < 10; round++ {
		req := wal.FindBatchesRequest{MaxBytes: 500}
		for _, tp := range order {
			req.Partitions = append(req.Partitions, wal.FindPartition{Partition: tp, Offset: next[tp], MaxPartitionBytes: 100})
		}
		res, err := e.cp.FindBatches(e.ctx, req)
		require.NoError(e.t, err)
		var back, keep []wal.TopicIDPartition
		for i, r := range res {
			require.NoError(e.t, r.Err)
			tp := order[i]
			if len(r.Batches) == 0 {
				keep = append(keep, tp)
				continue
			}
			next[tp] = r.Batches[len(r.Batches)-1].LastOffset + 1
			served[tp] += len(r.Batches)
			back = append(back, tp)
		}
		require.Len(e.t, back, 5, "round %d", round)
		order = append(keep, back...)
	}
	for _, tp := range order {
		require.Equal(e.t, 5, served[tp], "%s", tp)
	}
}

// FindBatches answers each row with the binding of the batch committed
// for it (CommitBatch.Binding): idempotent and not, extreme field values,
// an all-zero CRC and leader epoch (still a known binding), across
// objects and after DeleteRecords moved W inside a batch. A rejected
// batch has no row, so its binding is never answered.
func testFindBinding(e *env) {
	a := idem(t1p0, 3, math.MaxInt64, math.MaxInt16, 0)
	a.CRC, a.PartitionLeaderEpoch = math.MaxUint32, -1
	b := batch(t1p0, 2)
	b.CRC, b.PartitionLeaderEpoch = 0x80000000, math.MaxInt32
	c := idem(t1p1, 4, 0, 0, 0)
	dup := idem(t1p0, 3, math.MaxInt64, math.MaxInt16, 0)
	dup.CRC, dup.PartitionLeaderEpoch = 0x1234, 77
	req := e.request(a, b, c, dup, batch(t1p9, 1))
	req.Batches[1].CRC, req.Batches[1].PartitionLeaderEpoch = 0, 0 // set after request(), which fills a zero CRC
	res := e.commitReq(req)
	e.requireAccepted(res.Batches[0], 0)
	e.requireAccepted(res.Batches[1], 3)
	e.requireAccepted(res.Batches[2], 0)
	e.requireRejected(res.Batches[3], wal.ErrDuplicateSequence)
	e.requireRejected(res.Batches[4], wal.ErrUnknownTopicOrPartition)
	req2, _ := e.commit(idem(t1p0, 1, math.MaxInt64, math.MaxInt16, 3), idem(t1p1, 2, 0, 0, 4))

	bindings := func(bs []wal.BatchInfo) []wal.BatchBinding {
		out := []wal.BatchBinding{}
		for _, bi := range bs {
			out = append(out, bi.Binding)
		}
		return out
	}
	want0 := []wal.BatchBinding{req.Batches[0].Binding(), req.Batches[1].Binding(), req2.Batches[0].Binding()}
	want1 := []wal.BatchBinding{req.Batches[2].Binding(), req2.Batches[1].Binding()}
	require.Equal(e.t, wal.BatchBinding{Known: true, CRC: math.MaxUint32, PartitionLeaderEpoch: -1,
		ProducerID: math.MaxInt64, ProducerEpoch: math.MaxInt16}, want0[0])
	require.Equal(e.t, wal.BatchBinding{Known: true, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, want0[1])
	got0, got1 := e.find1(t1p0, 0), e.find1(t1p1, 0)
	require.Equal(e.t, "[0,2] [3,4] [5,5]", ranges(got0.Batches))
	require.Equal(e.t, want0, bindings(got0.Batches))
	require.Equal(e.t, want1, bindings(got1.Batches))
	// One request over both partitions, from inside a batch, after W
	// moved inside the first one.
	e.deleteRecords(t1p0, 1, 1)
	all, err := e.cp.FindBatches(e.ctx, wal.FindBatchesRequest{MaxBytes: 1 << 20, Partitions: []wal.FindPartition{
		{Partition: t1p1, Offset: 5, MaxPartitionBytes: 1 << 20}, {Partition: t1p0, Offset: 4, MaxPartitionBytes: 1 << 20}}})
	require.NoError(e.t, err)
	require.Equal(e.t, want1[1:], bindings(all[0].Batches))
	require.Equal(e.t, want0[1:], bindings(all[1].Batches))
	require.Equal(e.t, want0, bindings(e.find1(t1p0, 1).Batches))
}
