package controlplanetest

import (
	"math"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/wal"
)

// five commits one file of five batches (pid 1, epoch 3, sequences 0-9 ...
// 40-49) at offsets 0, 10, ..., 40.
func (e *env) five() wal.CommitFileResult {
	var bs []wal.CommitBatch
	for i := int32(0); i < 5; i++ {
		bs = append(bs, idem(t1p0, 10, 1, 3, 10*i))
	}
	_, res := e.commit(bs...)
	for i, r := range res.Batches {
		e.requireAccepted(r, int64(10*i))
	}
	e.requireLog(t1p0, 0, 50, 0, 50)
	return res
}

func testProducerSequences(e *env) {
	first := e.five()
	before := e.find1(t1p0, 0)
	e.clock.Advance(1000)
	req, res := e.commit(idem(t1p0, 10, 1, 3, 0))
	e.requireRejected(res.Batches[0], wal.ErrDuplicateSequence)
	require.Equal(e.t, int64(0), res.Batches[0].BaseOffset, "a duplicate answers the first offset")
	require.Equal(e.t, int64(1000), res.Batches[0].LogAppendTime, "and the first batch's timestamp")
	require.Equal(e.t, first.Batches[0].LogStartOffset, res.Batches[0].LogStartOffset)
	require.True(e.t, res.MarkedForDeletion)
	require.Equal(e.t, []string{req.ObjectKey}, e.marked())
	e.requireLog(t1p0, 0, 50, 0, 50)
	require.Equal(e.t, before, e.find1(t1p0, 0))
}

func testProducerWindow(e *env) {
	e.five()
	_, res := e.commit(idem(t1p0, 10, 1, 3, 50))
	e.requireAccepted(res.Batches[0], 50)
	req, res := e.commit(idem(t1p0, 10, 1, 3, 0))
	e.requireRejected(res.Batches[0], wal.ErrOutOfOrderSequence)
	require.Equal(e.t, []string{req.ObjectKey}, e.marked())
	states, err := e.cp.ProducerStates(e.ctx, t1p0)
	require.NoError(e.t, err)
	require.Len(e.t, states, 1)
	require.Len(e.t, states[0].Batches, wal.MaxProducerBatches)
	require.Equal(e.t, int32(10), states[0].Batches[0].BaseSequence)
}

func testProducerFirstNotZero(e *env) {
	req, res := e.commit(idem(t1p0, 10, 1, 3, 1))
	e.requireRejected(res.Batches[0], wal.ErrOutOfOrderSequence)
	require.Equal(e.t, int64(-1), res.Batches[0].BaseOffset)
	require.Equal(e.t, []string{req.ObjectKey}, e.marked())
	e.requireLog(t1p0, 0, 0, 0, 0)
}

// The first batch ends at lastSeq; the second starts at nextSeq. The
// producer's earlier batches come from a switch's snapshot so that the
// first batch can end at MaxInt32.
func testProducerOutOfOrder(e *env) {
	cases := []struct{ last, next int32 }{{14, 13}, {14, 14}, {14, 16}, {math.MaxInt32, 1}}
	for i, c := range cases {
		st := wal.ProducerState{ProducerID: 1, ProducerEpoch: 0, Batches: []wal.ProducerBatch{
			{BaseSequence: c.last - 9, LastSequence: c.last - 5, AssignedOffset: 5, Timestamp: 1}}}
		// Same call.
		tp := wal.TopicIDPartition{TopicID: wal.TopicID{0x50, byte(i)}, Partition: 0}
		e.init(initReq(tp, 0, 10, st))
		_, res := e.commit(idem(tp, 5, 1, 0, c.last-4), idem(tp, 3, 1, 0, c.next))
		e.requireAccepted(res.Batches[0], 10)
		e.requireRejected(res.Batches[1], wal.ErrOutOfOrderSequence)
		require.Equal(e.t, int64(15), e.info(tp).HighWatermark, "last %d next %d", c.last, c.next)
		// Across calls: the second object holds only dead bytes.
		tq := wal.TopicIDPartition{TopicID: wal.TopicID{0x51, byte(i)}, Partition: 0}
		e.init(initReq(tq, 0, 10, st))
		e.commit(idem(tq, 5, 1, 0, c.last-4))
		req, res := e.commit(idem(tq, 3, 1, 0, c.next))
		e.requireRejected(res.Batches[0], wal.ErrOutOfOrderSequence)
		require.True(e.t, res.MarkedForDeletion)
		require.Contains(e.t, e.marked(), req.ObjectKey)
		require.Equal(e.t, int64(15), e.info(tq).HighWatermark)
	}
}

func testProducerFencedEpoch(e *env) {
	_, res := e.commit(idem(t1p0, 10, 1, 3, 0), idem(t1p0, 5, 1, 2, 10))
	e.requireAccepted(res.Batches[0], 0)
	e.requireRejected(res.Batches[1], wal.ErrInvalidProducerEpoch)
	e.requireLog(t1p0, 0, 10, 0, 10)
	_, res = e.commit(idem(t1p0, 5, 1, 3, 10))
	e.requireAccepted(res.Batches[0], 10)
	req, res := e.commit(idem(t1p0, 5, 1, 2, 15))
	e.requireRejected(res.Batches[0], wal.ErrInvalidProducerEpoch)
	require.Equal(e.t, []string{req.ObjectKey}, e.marked())
	e.requireLog(t1p0, 0, 15, 0, 15)
}

// A producer that bumps its epoch (Kafka: InitProducerId after a timeout)
// restarts at sequence 0 although the older epoch left state.
func testProducerEpochBump(e *env) {
	e.commit(idem(t1p0, 10, 1, 3, 0), idem(t1p0, 10, 1, 3, 10))
	_, res := e.commit(idem(t1p0, 5, 1, 4, 20))
	e.requireRejected(res.Batches[0], wal.ErrOutOfOrderSequence)
	_, res = e.commit(idem(t1p0, 5, 1, 4, 0), idem(t1p0, 5, 1, 3, 20))
	e.requireAccepted(res.Batches[0], 20)
	e.requireRejected(res.Batches[1], wal.ErrInvalidProducerEpoch)
	states, err := e.cp.ProducerStates(e.ctx, t1p0)
	require.NoError(e.t, err)
	require.Equal(e.t, []wal.ProducerState{{ProducerID: 1, ProducerEpoch: 4, Batches: []wal.ProducerBatch{
		{BaseSequence: 0, LastSequence: 4, AssignedOffset: 20, Timestamp: 1000}}}}, states)
	// The old epoch's sequences are not duplicates in the new epoch.
	_, res = e.commit(idem(t1p0, 5, 1, 4, 5))
	e.requireAccepted(res.Batches[0], 25)
}

// Kafka lets the sequence wrap from MaxInt32 to 0; so does the plane.
func testProducerWrap(e *env) {
	st := wal.ProducerState{ProducerID: 9, ProducerEpoch: 0, Batches: []wal.ProducerBatch{
		{BaseSequence: math.MaxInt32 - 9, LastSequence: math.MaxInt32, AssignedOffset: 90, Timestamp: 5}}}
	res, err := e.cp.InitDisklessLog(e.ctx, []wal.InitDisklessLogRequest{{Partition: t1p9, Topic: "topic-1",
		LogStartOffset: 0, DisklessStartOffset: 100, ProducerStates: []wal.ProducerState{st}}})
	require.NoError(e.t, err)
	require.NoError(e.t, res[0].Err)
	_, cres := e.commit(idem(t1p9, 5, 9, 0, 0))
	e.requireAccepted(cres.Batches[0], 100)
	// A batch that itself crosses the wrap: MaxInt32-1 .. 2.
	e.commit(idem(t1p9, math.MaxInt32-6, 9, 0, 5))
	_, cres = e.commit(idem(t1p9, 5, 9, 0, math.MaxInt32-1))
	e.requireAccepted(cres.Batches[0], 105+math.MaxInt32-6)
	_, cres = e.commit(idem(t1p9, 5, 9, 0, math.MaxInt32-1))
	e.requireRejected(cres.Batches[0], wal.ErrDuplicateSequence)
	_, cres = e.commit(idem(t1p9, 1, 9, 0, 3))
	e.requireAccepted(cres.Batches[0], 110+math.MaxInt32-6)
}

// A duplicate inside one object: the earlier copy in the same commit
// counts.
func testProducerDuplicateSameObject(e *env) {
	_, res := e.commit(idem(t1p0, 4, 2, 0, 0), batch(t1p1, 2), idem(t1p0, 4, 2, 0, 0), idem(t1p0, 4, 2, 0, 4))
	e.requireAccepted(res.Batches[0], 0)
	e.requireAccepted(res.Batches[1], 0)
	e.requireRejected(res.Batches[2], wal.ErrDuplicateSequence)
	require.Equal(e.t, int64(0), res.Batches[2].BaseOffset)
	e.requireAccepted(res.Batches[3], 4)
	e.requireLog(t1p0, 0, 8, 0, 8)
	require.Equal(e.t, "[0,3] [4,7]", ranges(e.find1(t1p0, 0).Batches))
}

func testProducerNonIdempotent(e *env) {
	e.commit(batch(t1p0, 3), batch(t1p0, 3))
	states, err := e.cp.ProducerStates(e.ctx, t1p0)
	require.NoError(e.t, err)
	require.Empty(e.t, states)
	_, err = e.cp.ProducerStates(e.ctx, t1p9)
	require.ErrorIs(e.t, err, wal.ErrUnknownTopicOrPartition)
	// Two producers, two partitions.
	e.commit(idem(t1p0, 2, 5, 0, 0), idem(t1p0, 2, 6, 1, 0), idem(t1p1, 2, 5, 0, 0))
	states, err = e.cp.ProducerStates(e.ctx, t1p0)
	require.NoError(e.t, err)
	require.Len(e.t, states, 2)
	require.Equal(e.t, [2]int64{6, 8}, [2]int64{states[0].Batches[0].AssignedOffset, states[1].Batches[0].AssignedOffset})
	states, err = e.cp.ProducerStates(e.ctx, t1p1)
	require.NoError(e.t, err)
	require.Len(e.t, states, 1)
}
