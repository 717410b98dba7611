package controlplanetest

import (
	"math"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/wal"
)

func (e *env) deleteRecords(tp wal.TopicIDPartition, offset, wantW int64) {
	e.t.Helper()
	res, err := e.cp.DeleteRecords(e.ctx, []wal.DeleteRecordsRequest{{Partition: tp, Offset: offset}})
	require.NoError(e.t, err)
	require.NoError(e.t, res[0].Err)
	require.Equal(e.t, wantW, res[0].LogStartOffset)
}

func testCreatePartitions(e *env) {
	id := wal.TopicID{0x44}
	e.create(id, "new", 1)
	p0 := wal.TopicIDPartition{TopicID: id, Partition: 0}
	e.requireLog(p0, 0, 0, 0, 0)
	require.Equal(e.t, "new", e.info(p0).Topic)
	e.commit(batch(p0, 1))
	before := e.find1(p0, 0)
	e.create(id, "new", 3)
	e.create(id, "new", 3) // a repeat is a no-op
	e.requireLog(p0, 0, 1, 0, 1)
	require.Equal(e.t, before, e.find1(p0, 0))
	for p := int32(1); p < 3; p++ {
		e.requireLog(wal.TopicIDPartition{TopicID: id, Partition: p}, 0, 0, 0, 0)
	}
	err := e.cp.CreatePartitions(e.ctx, []wal.CreatePartitionsRequest{{Topic: "zero", NumPartitions: 1}})
	require.ErrorIs(e.t, err, wal.ErrInvalidArgument)
}

func testDeleteTopics(e *env) {
	reqA, _ := e.commit(batch(t1p0, 3), batch(t1p1, 3))
	reqB, _ := e.commit(batch(t1p0, 3), batch(t2p0, 3))
	findT2 := e.find1(t2p0, 0)
	e.clock.Advance(7 * time.Second)
	deletedAt := e.clock.Now()
	require.NoError(e.t, e.cp.DeleteTopics(e.ctx, []wal.TopicID{topic1, {0x77}}))
	require.Equal(e.t, []string{reqA.ObjectKey}, e.marked())
	files, err := e.cp.FilesToDelete(e.ctx, deletedAt.Add(time.Millisecond), 0)
	require.NoError(e.t, err)
	require.Len(e.t, files, 1)
	require.Equal(e.t, deletedAt.UnixMilli(), files[0].MarkedAt.UnixMilli())
	require.Equal(e.t, findT2, e.find1(t2p0, 0))
	for _, tp := range []wal.TopicIDPartition{t1p0, t1p1} {
		_, err := e.cp.LogInfo(e.ctx, tp)
		require.ErrorIs(e.t, err, wal.ErrUnknownTopicOrPartition)
		require.ErrorIs(e.t, e.find1(tp, 0).Err, wal.ErrUnknownTopicOrPartition)
	}
	e.clock.Advance(time.Second)
	require.NoError(e.t, e.cp.DeleteTopics(e.ctx, []wal.TopicID{topic1}))
	files2, err := e.cp.FilesToDelete(e.ctx, e.clock.Now().Add(time.Second), 0)
	require.NoError(e.t, err)
	require.Equal(e.t, files, files2, "a repeat keeps the first mark")
	// B lives on through topic-2; deleting it frees B.
	require.NoError(e.t, e.cp.DeleteTopics(e.ctx, []wal.TopicID{topic2}))
	require.Equal(e.t, []string{reqA.ObjectKey, reqB.ObjectKey}, e.marked())
}

func testDeleteRecordsInside(e *env) {
	e.commit(batch(t1p0, 10))
	res, err := e.cp.DeleteRecords(e.ctx, []wal.DeleteRecordsRequest{{Partition: t1p0, Offset: 3}, {Partition: t1p9, Offset: 1}})
	require.NoError(e.t, err)
	require.NoError(e.t, res[0].Err)
	require.Equal(e.t, int64(3), res[0].LogStartOffset)
	require.ErrorIs(e.t, res[1].Err, wal.ErrUnknownTopicOrPartition)
	got := e.find1(t1p0, 0)
	require.ErrorIs(e.t, got.Err, wal.ErrOffsetOutOfRange)
	require.Equal(e.t, [2]int64{3, 10}, [2]int64{got.LogStartOffset, got.HighWatermark})
	require.Equal(e.t, "[0,9]", ranges(e.find1(t1p0, 3).Batches))
	require.Empty(e.t, e.marked())
	e.requireLog(t1p0, 3, 10, 0, 10)
	// Forward only: a lower offset changes nothing.
	e.deleteRecords(t1p0, 1, 3)
	e.requireLog(t1p0, 3, 10, 0, 10)
}

func testDeleteRecordsAcrossFiles(e *env) {
	r1, _ := e.commit(batch(t1p0, 10))
	e.commit(batch(t1p0, 10))
	e.commit(batch(t1p0, 10))
	e.deleteRecords(t1p0, 19, 19)
	require.Equal(e.t, "[10,19] [20,29]", ranges(e.find1(t1p0, 19).Batches))
	require.Equal(e.t, []string{r1.ObjectKey}, e.marked())
	e.requireLog(t1p0, 19, 30, 0, 20)
}

func testDeleteRecordsBounds(e *env) {
	// At the log start, also on an empty partition: nothing changes.
	e.deleteRecords(t1p1, 0, 0)
	e.requireLog(t1p1, 0, 0, 0, 0)
	r, _ := e.commit(batch(t1p0, 10))
	e.deleteRecords(t1p0, 0, 0)
	for _, off := range []int64{-2, 11, math.MinInt64} {
		res, err := e.cp.DeleteRecords(e.ctx, []wal.DeleteRecordsRequest{{Partition: t1p0, Offset: off}})
		require.NoError(e.t, err)
		require.ErrorIs(e.t, res[0].Err, wal.ErrOffsetOutOfRange, "offset %d", off)
	}
	e.requireLog(t1p0, 0, 10, 0, 10)
	// -1 is the high watermark: everything goes.
	e.deleteRecords(t1p0, -1, 10)
	got := e.find1(t1p0, 0)
	require.ErrorIs(e.t, got.Err, wal.ErrOffsetOutOfRange)
	require.Equal(e.t, [2]int64{10, 10}, [2]int64{got.LogStartOffset, got.HighWatermark})
	got = e.find1(t1p0, 10)
	require.NoError(e.t, got.Err)
	require.Empty(e.t, got.Batches)
	require.Equal(e.t, []string{r.ObjectKey}, e.marked())
	e.requireLog(t1p0, 10, 10, 0, 0)
}

func testDeleteRecordsSharedFile(e *env) {
	r, _ := e.commit(batch(t1p0, 5), batch(t1p1, 5))
	e.deleteRecords(t1p0, 5, 5)
	require.Empty(e.t, e.marked(), "t1p1's batch still lives in the object")
	e.deleteRecords(t1p1, 5, 5)
	require.Equal(e.t, []string{r.ObjectKey}, e.marked())
}

func (e *env) listOffset(tp wal.TopicIDPartition, ts int64) (int64, int64) {
	e.t.Helper()
	res, err := e.cp.ListOffsets(e.ctx, []wal.ListOffsetsRequest{{Partition: tp, Timestamp: ts}})
	require.NoError(e.t, err)
	require.NoError(e.t, res[0].Err)
	return res[0].Offset, res[0].Timestamp
}

func testListOffsetsEmpty(e *env) {
	for _, ts := range []int64{wal.LatestTimestamp, wal.EarliestTimestamp, wal.EarliestLocalTimestamp} {
		off, _ := e.listOffset(t1p0, ts)
		require.Equal(e.t, int64(0), off, "timestamp %d", ts)
	}
	for _, ts := range []int64{wal.MaxTimestamp, wal.LatestTieredTimestamp, 0, 111, math.MaxInt64} {
		off, got := e.listOffset(t1p0, ts)
		require.Equal(e.t, [2]int64{-1, -1}, [2]int64{off, got}, "timestamp %d", ts)
	}
	res, err := e.cp.ListOffsets(e.ctx, []wal.ListOffsetsRequest{{Partition: t1p0, Timestamp: -6}, {Partition: t1p9, Timestamp: -1}})
	require.NoError(e.t, err)
	require.ErrorIs(e.t, res[0].Err, wal.ErrUnsupportedTimestamp)
	require.ErrorIs(e.t, res[1].Err, wal.ErrUnknownTopicOrPartition)
}

// One CREATE_TIME partition (t1p0) and one LOG_APPEND_TIME partition
// (t1p1) with three batches each.
func testListOffsetsTimestamps(e *env) {
	var appendTimes []int64
	for i, ts := range []int64{100, 300, 200} {
		c, l := batch(t1p0, 5), batch(t1p1, 5)
		c.MaxTimestamp, l.MaxTimestamp, l.TimestampType = ts, ts, wal.LogAppendTime
		e.commit(c, l)
		appendTimes = append(appendTimes, e.nowMs())
		if i < 2 {
			e.clock.Advance(time.Duration(10*(i+1)) * time.Millisecond)
		}
	}
	for _, tp := range []wal.TopicIDPartition{t1p0, t1p1} {
		off, _ := e.listOffset(tp, wal.LatestTimestamp)
		require.Equal(e.t, int64(15), off)
	}
	e.deleteRecords(t1p0, 1, 1)
	off, _ := e.listOffset(t1p0, wal.EarliestTimestamp)
	require.Equal(e.t, int64(1), off)
	off, _ = e.listOffset(t1p1, wal.EarliestTimestamp)
	require.Equal(e.t, int64(0), off)
	// MAX_TIMESTAMP answers the last offset of the batch holding it.
	off, ts := e.listOffset(t1p0, wal.MaxTimestamp)
	require.Equal(e.t, [2]int64{9, 300}, [2]int64{off, ts})
	off, ts = e.listOffset(t1p1, wal.MaxTimestamp)
	require.Equal(e.t, [2]int64{14, appendTimes[2]}, [2]int64{off, ts})
	// By timestamp: the first batch at or after it, its base raised to W.
	cases := []struct{ ts, off, got int64 }{
		{0, 1, 100}, {100, 1, 100}, {101, 5, 300}, {200, 5, 300}, {300, 5, 300}, {301, -1, -1},
	}
	for _, c := range cases {
		off, ts := e.listOffset(t1p0, c.ts)
		require.Equal(e.t, [2]int64{c.off, c.got}, [2]int64{off, ts}, "timestamp %d", c.ts)
	}
	off, ts = e.listOffset(t1p1, appendTimes[1])
	require.Equal(e.t, [2]int64{5, appendTimes[1]}, [2]int64{off, ts})
	off, ts = e.listOffset(t1p1, appendTimes[2])
	require.Equal(e.t, [2]int64{10, appendTimes[2]}, [2]int64{off, ts})
	off, ts = e.listOffset(t1p1, appendTimes[2]+1)
	require.Equal(e.t, [2]int64{-1, -1}, [2]int64{off, ts})
}

func testCrossTierLogStart(e *env) {
	advance := func(reqs ...wal.AdvanceCrossTierLogStartRequest) []wal.AdvanceCrossTierLogStartResult {
		res, err := e.cp.AdvanceCrossTierLogStart(e.ctx, reqs)
		require.NoError(e.t, err)
		return res
	}
	res := advance(wal.AdvanceCrossTierLogStartRequest{Partition: t1p9, CrossTierLogStart: 5})
	require.ErrorIs(e.t, res[0].Err, wal.ErrUnknownTopicOrPartition)
	// Never reported: EARLIEST falls back to W.
	require.Equal(e.t, int64(-1), e.info(t1p0).CrossTierLogStartOffset)
	off, _ := e.listOffset(t1p0, wal.EarliestTimestamp)
	require.Equal(e.t, int64(0), off)
	for _, c := range []struct{ in, want int64 }{{50, 50}, {30, 50}, {70, 70}} {
		res := advance(wal.AdvanceCrossTierLogStartRequest{Partition: t1p0, CrossTierLogStart: c.in})
		require.NoError(e.t, res[0].Err)
		require.Equal(e.t, c.want, res[0].CrossTierLogStart)
	}
	off, _ = e.listOffset(t1p0, wal.EarliestTimestamp)
	require.Equal(e.t, int64(70), off)
	off, _ = e.listOffset(t1p0, wal.EarliestLocalTimestamp)
	require.Equal(e.t, int64(0), off)
	res = advance(wal.AdvanceCrossTierLogStartRequest{Partition: t1p1, CrossTierLogStart: 4},
		wal.AdvanceCrossTierLogStartRequest{Partition: t2p0, CrossTierLogStart: 8},
		wal.AdvanceCrossTierLogStartRequest{Partition: noTopic, CrossTierLogStart: 9})
	require.Equal(e.t, int64(4), res[0].CrossTierLogStart)
	require.Equal(e.t, int64(8), res[1].CrossTierLogStart)
	require.ErrorIs(e.t, res[2].Err, wal.ErrUnknownTopicOrPartition)
}
