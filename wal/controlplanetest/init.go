package controlplanetest

import (
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/wal"
)

var (
	switched  = wal.TopicID{0x60}
	switched0 = wal.TopicIDPartition{TopicID: switched, Partition: 0}
	switched1 = wal.TopicIDPartition{TopicID: switched, Partition: 1}
)

func (e *env) init(reqs ...wal.InitDisklessLogRequest) []wal.InitDisklessLogResult {
	e.t.Helper()
	res, err := e.cp.InitDisklessLog(e.ctx, reqs)
	require.NoError(e.t, err)
	require.Len(e.t, res, len(reqs))
	return res
}

func initReq(tp wal.TopicIDPartition, logStart, seal int64, states ...wal.ProducerState) wal.InitDisklessLogRequest {
	return wal.InitDisklessLogRequest{Partition: tp, Topic: "switched", LogStartOffset: logStart,
		DisklessStartOffset: seal, ProducerStates: states}
}

func testInitNew(e *env) {
	res := e.init(initReq(switched0, 100, 100))
	require.NoError(e.t, res[0].Err)
	require.False(e.t, res[0].AlreadyInitialised)
	e.requireLog(switched0, 100, 100, 100, 0)
	states, err := e.cp.ProducerStates(e.ctx, switched0)
	require.NoError(e.t, err)
	require.Empty(e.t, states)
	off, _ := e.listOffset(switched0, wal.LatestTimestamp)
	require.Equal(e.t, int64(100), off)
	// Several partitions in one call; W is the classic log start.
	res = e.init(initReq(switched1, 50, 100), initReq(wal.TopicIDPartition{TopicID: switched, Partition: 2}, 0, 7))
	require.NoError(e.t, res[0].Err)
	require.NoError(e.t, res[1].Err)
	e.requireLog(switched1, 50, 100, 100, 0)
	e.requireLog(wal.TopicIDPartition{TopicID: switched, Partition: 2}, 0, 7, 7, 0)
	// X starts at W for a switched partition: EARLIEST answers the
	// classic log start whatever W becomes (the first prune moves it to
	// S), until the leader reports a higher X.
	require.Equal(e.t, int64(50), e.info(switched1).CrossTierLogStartOffset)
	off, _ = e.listOffset(switched1, wal.EarliestTimestamp)
	require.Equal(e.t, int64(50), off)
	// A born-diskless log (S = 0) has none reported yet.
	res = e.init(initReq(wal.TopicIDPartition{TopicID: switched, Partition: 3}, 0, 0))
	require.NoError(e.t, res[0].Err)
	require.Equal(e.t, int64(-1), e.info(wal.TopicIDPartition{TopicID: switched, Partition: 3}).CrossTierLogStartOffset)
}

func testInitAlready(e *env) {
	e.init(initReq(switched0, 100, 100))
	res := e.init(initReq(switched0, 0, 500))
	require.NoError(e.t, res[0].Err)
	require.True(e.t, res[0].AlreadyInitialised)
	e.requireLog(switched0, 100, 100, 100, 0)
	// A created row and a seal of 0: nothing to overwrite.
	res = e.init(initReq(t1p0, 0, 0))
	require.True(e.t, res[0].AlreadyInitialised)
	// A row carrying data is never overwritten.
	e.commit(batch(t1p1, 10))
	res = e.init(initReq(t1p1, 0, 999))
	require.True(e.t, res[0].AlreadyInitialised)
	e.requireLog(t1p1, 0, 10, 0, 10)
}

// A partition-count increase during the switch creates an empty row
// before the leader initialises it; LATEST = 0 there would let a
// consolidation fetcher truncate the classic prefix away, so a seal > 0
// overwrites the placeholder.
func testInitPlaceholder(e *env) {
	st := wal.ProducerState{ProducerID: 3, ProducerEpoch: 1, Batches: []wal.ProducerBatch{
		{BaseSequence: 5, LastSequence: 9, AssignedOffset: 95, Timestamp: 77}}}
	res := e.init(initReq(t1p1, 0, 100, st))
	require.NoError(e.t, res[0].Err)
	require.False(e.t, res[0].AlreadyInitialised)
	e.requireLog(t1p1, 0, 100, 100, 0)
	off, _ := e.listOffset(t1p1, wal.LatestTimestamp)
	require.Equal(e.t, int64(100), off)
	states, err := e.cp.ProducerStates(e.ctx, t1p1)
	require.NoError(e.t, err)
	require.Equal(e.t, []wal.ProducerState{st}, states)
}

func testInitProducerStates(e *env) {
	st := wal.ProducerState{ProducerID: 4, ProducerEpoch: 2, Batches: []wal.ProducerBatch{
		{BaseSequence: 0, LastSequence: 4, AssignedOffset: 95, Timestamp: 10}}}
	e.init(initReq(switched0, 0, 100, st))
	_, res := e.commit(idem(switched0, 3, 4, 2, 5))
	e.requireAccepted(res.Batches[0], 100)
	// The carried-over batch is still a duplicate.
	_, res = e.commit(idem(switched0, 5, 4, 2, 0))
	e.requireRejected(res.Batches[0], wal.ErrDuplicateSequence)
	require.Equal(e.t, int64(95), res.Batches[0].BaseOffset)
	states, err := e.cp.ProducerStates(e.ctx, switched0)
	require.NoError(e.t, err)
	require.Len(e.t, states, 1)
	require.Len(e.t, states[0].Batches, 2)
}

func testInitInvalid(e *env) {
	res := e.init(initReq(switched0, 200, 100), initReq(switched1, 0, 10))
	require.ErrorIs(e.t, res[0].Err, wal.ErrInvalidArgument)
	require.NoError(e.t, res[1].Err)
	_, err := e.cp.LogInfo(e.ctx, switched0)
	require.ErrorIs(e.t, err, wal.ErrUnknownTopicOrPartition)
	bad := wal.ProducerState{ProducerID: -1}
	res = e.init(initReq(switched0, 0, 10, bad))
	require.ErrorIs(e.t, res[0].Err, wal.ErrInvalidArgument)
}

func testRepair(e *env) {
	res, err := e.cp.RepairDisklessLog(e.ctx, []wal.RepairDisklessLogRequest{{Partition: switched0, DisklessStartOffset: 80}})
	require.NoError(e.t, err)
	require.False(e.t, res[0].Found)
	_, err = e.cp.LogInfo(e.ctx, switched0)
	require.ErrorIs(e.t, err, wal.ErrUnknownTopicOrPartition, "repair creates no row")
	e.init(initReq(switched0, 50, 100))
	res, err = e.cp.RepairDisklessLog(e.ctx, []wal.RepairDisklessLogRequest{{Partition: switched0, DisklessStartOffset: 80}})
	require.NoError(e.t, err)
	require.True(e.t, res[0].Found)
	e.requireLog(switched0, 50, 100, 80, 0)
}
