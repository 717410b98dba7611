package controlplanetest

import (
	"math"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/wal"
)

func (e *env) prune(reqs ...wal.PruneRequest) []wal.PruneResult {
	e.t.Helper()
	res, err := e.cp.PruneDisklessLogs(e.ctx, reqs)
	require.NoError(e.t, err)
	require.Len(e.t, res, len(reqs))
	return res
}

func (e *env) prune1(tp wal.TopicIDPartition, h, wantW int64) {
	e.t.Helper()
	res := e.prune(wal.PruneRequest{Partition: tp, HighestOffsetInRemoteStorage: h})
	require.NoError(e.t, res[0].Err)
	require.Equal(e.t, wantW, res[0].LogStartOffset, "prune %s at %d", tp, h)
	require.Equal(e.t, wantW, e.info(tp).LogStartOffset)
}

func testPruneBasics(e *env) {
	require.Empty(e.t, e.prune())
	res := e.prune(wal.PruneRequest{Partition: t1p9, HighestOffsetInRemoteStorage: 5})
	require.ErrorIs(e.t, res[0].Err, wal.ErrUnknownTopicOrPartition)
	require.Equal(e.t, int64(-1), res[0].LogStartOffset)

	// h below the batch's last offset: nothing goes.
	e.commit(batch(t1p0, 11)) // [0,10]
	e.prune1(t1p0, 9, 0)
	e.requireLog(t1p0, 0, 11, 0, 11)
	require.Empty(e.t, e.marked())
	// h at its last offset: deleted, W = 11, the object marked.
	e.prune1(t1p0, 10, 11)
	e.requireLog(t1p0, 11, 11, 0, 0)
	require.Len(e.t, e.marked(), 1)
	// h at or past HW with no batches: W = HW.
	e.prune1(t1p0, 100, 11)
	e.prune1(t1p0, math.MaxInt64, 11)
	e.commit(batch(t1p0, 4)) // [11,14]
	e.prune1(t1p0, math.MaxInt64, 15)
	e.requireLog(t1p0, 15, 15, 0, 0)

	// Only fully tiered batches go; W = the base of the first left.
	e.commit(batch(t1p1, 11), batch(t1p1, 15)) // [0,10] [11,25]
	e.commit(batch(t1p1, 5))                   // [26,30]
	e.prune1(t1p1, 20, 11)
	e.requireLog(t1p1, 11, 31, 0, 20)
	require.Equal(e.t, "[11,25] [26,30]", ranges(e.find1(t1p1, 11).Batches))
	require.Len(e.t, e.marked(), 2, "only t1p0's two objects: the first of t1p1 still holds [11,25]")
}

func testPruneKeepsStart(e *env) {
	e.commit(batch(t1p0, 11), batch(t1p0, 15)) // [0,10] [11,25]
	e.deleteRecords(t1p0, 5, 5)
	e.prune1(t1p0, 9, 5)
	e.prune1(t1p0, 10, 11)
}

func testPruneSequential(e *env) {
	e.commit(batch(t1p0, 6), batch(t1p0, 5)) // [0,5] [6,10]
	e.commit(batch(t1p1, 3))
	res := e.prune(wal.PruneRequest{Partition: t1p0, HighestOffsetInRemoteStorage: 5},
		wal.PruneRequest{Partition: t1p1, HighestOffsetInRemoteStorage: 2},
		wal.PruneRequest{Partition: t1p0, HighestOffsetInRemoteStorage: 10})
	require.Equal(e.t, []int64{6, 3, 11}, []int64{res[0].LogStartOffset, res[1].LogStartOffset, res[2].LogStartOffset})
	e.requireLog(t1p0, 11, 11, 0, 0)
}

// The seal lowered from 1000 to 600 with remote storage holding [0, 599]:
// the WAL starts at the classic log start 0 and its first batch is at
// 1000. A prune at 599 moves W to 600, not to 1000 (which would leave
// [600, 1000) nowhere for a leader that lost its log to rebuild from).
func testPruneCap(e *env) {
	e.init(initReq(switched0, 0, 1000))
	e.commit(batch(switched0, 50)) // [1000,1049]
	res, err := e.cp.RepairDisklessLog(e.ctx, []wal.RepairDisklessLogRequest{{Partition: switched0, DisklessStartOffset: 600}})
	require.NoError(e.t, err)
	require.True(e.t, res[0].Found)
	e.prune1(switched0, 599, 600)
	e.requireLog(switched0, 600, 1050, 600, 50)
	require.Equal(e.t, "[1000,1049]", ranges(e.find1(switched0, 600).Batches))
	// Once remote storage holds the batch, the WAL empties to HW.
	e.prune1(switched0, 1049, 1050)
	e.requireLog(switched0, 1050, 1050, 600, 0)
}
