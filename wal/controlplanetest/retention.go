package controlplanetest

import (
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/wal"
)

// retentionSetup commits one object with three batches to each of parts:
// 10, 20 and 30 records, 123, 456 and 789 bytes, timestamps T, T+10,
// T+30 with T a minute before now.
func (e *env) retentionSetup(parts ...wal.TopicIDPartition) (wal.CommitFileRequest, int64) {
	t := e.nowMs() - 60_000
	var bs []wal.CommitBatch
	for _, tp := range parts {
		for _, spec := range []struct{ n, size, ts int64 }{{10, 123, t}, {20, 456, t + 10}, {30, 789, t + 30}} {
			b := batch(tp, spec.n)
			b.Size, b.MaxTimestamp = spec.size, spec.ts
			bs = append(bs, b)
		}
	}
	req, _ := e.commit(bs...)
	return req, t
}

func (e *env) retain(tp wal.TopicIDPartition, bytes, ms int64, maxBatches int) wal.RetentionResult {
	e.t.Helper()
	res, err := e.cp.EnforceRetention(e.ctx, []wal.RetentionRequest{{Partition: tp, RetentionBytes: bytes, RetentionMs: ms}}, maxBatches)
	require.NoError(e.t, err)
	require.Len(e.t, res, 1)
	require.NoError(e.t, res[0].Err)
	return res[0]
}

func (e *env) requireRetained(r wal.RetentionResult, batches int, bytes, w int64) {
	e.t.Helper()
	require.Equal(e.t, [3]int64{int64(batches), bytes, w}, [3]int64{int64(r.DeletedBatches), r.DeletedBytes, r.LogStartOffset})
}

func testRetentionBySize(e *env) {
	res, err := e.cp.EnforceRetention(e.ctx, []wal.RetentionRequest{{Partition: t1p9, RetentionBytes: 0, RetentionMs: -1}}, 0)
	require.NoError(e.t, err)
	require.ErrorIs(e.t, res[0].Err, wal.ErrUnknownTopicOrPartition)
	e.requireRetained(e.retain(t1p1, 0, -1, 0), 0, 0, 0) // empty partition

	req, _ := e.retentionSetup(t1p0)
	e.requireRetained(e.retain(t1p0, 1368, -1, 0), 0, 0, 0)
	e.requireRetained(e.retain(t1p0, -1, -1, 0), 0, 0, 0)
	// Limit 0, one batch per call: W 10, 30, 60 (= HW); the object is
	// marked only when its last batch goes.
	e.requireRetained(e.retain(t1p0, 0, -1, 1), 1, 123, 10)
	require.Empty(e.t, e.marked())
	e.requireRetained(e.retain(t1p0, 0, -1, 1), 1, 456, 30)
	require.Empty(e.t, e.marked())
	e.requireRetained(e.retain(t1p0, 0, -1, 1), 1, 789, 60)
	require.Equal(e.t, []string{req.ObjectKey}, e.marked())
	e.requireLog(t1p0, 60, 60, 0, 0)
	off, _ := e.listOffset(t1p0, wal.EarliestTimestamp)
	require.Equal(e.t, int64(60), off)
	off, _ = e.listOffset(t1p0, wal.LatestTimestamp)
	require.Equal(e.t, int64(60), off)
}

func testRetentionBySizeLimits(e *env) {
	// The same data on two partitions behaves identically.
	e.retentionSetup(t1p0, t1p1)
	e.requireRetained(e.retain(t1p0, 1000, -1, 0), 2, 579, 30) // mid-batch
	e.requireRetained(e.retain(t1p1, 789, -1, 0), 2, 579, 30)  // at a boundary
	e.requireLog(t1p0, 30, 60, 0, 789)
	e.requireLog(t1p1, 30, 60, 0, 789)
	// A cap of one with a limit of B2 + B3 deletes exactly batch 1.
	e.retentionSetup(t2p0)
	e.requireRetained(e.retain(t2p0, 1245, -1, 1), 1, 123, 10)
	e.requireRetained(e.retain(t2p0, 0, -1, 0), 2, 1245, 60)
}

func testRetentionKeepsDeleteRecordsStart(e *env) {
	e.retentionSetup(t1p0)
	e.deleteRecords(t1p0, 5, 5)
	e.requireRetained(e.retain(t1p0, 1368, -1, 0), 0, 0, 5)
	e.requireRetained(e.retain(t1p0, 1300, -1, 0), 1, 123, 10)
}

func testRetentionByTime(e *env) {
	_, t := e.retentionSetup(t1p0, t1p1)
	now := e.nowMs()
	// Older than now - ms: T goes with a deadline of T + 5, T and T+10
	// with T + 15.
	e.requireRetained(e.retain(t1p0, -1, now-t-5, 0), 1, 123, 10)
	e.requireRetained(e.retain(t1p0, -1, now-t-15, 0), 1, 456, 30)
	// Both policies: the union (size deletes two, time one).
	e.requireRetained(e.retain(t1p1, 789, now-t-5, 0), 2, 579, 30)

	// A batch that is not old stops the scan; future timestamps never go.
	c, d, f := batch(t2p0, 1), batch(t2p0, 1), batch(t2p0, 1)
	c.MaxTimestamp, d.MaxTimestamp, f.MaxTimestamp = now-10_000, now+60_000, now-20_000
	e.commit(c, d, f)
	e.requireRetained(e.retain(t2p0, -1, 0, 0), 1, 1, 1)
	e.clock.Advance(time.Minute)
	e.requireRetained(e.retain(t2p0, -1, 0, 0), 0, 0, 1)
}

// LOG_APPEND_TIME batches age by their commit time, not the producer's.
func testRetentionLogAppendTime(e *env) {
	la, ct := batch(t1p0, 1), batch(t1p1, 1)
	la.MaxTimestamp, ct.MaxTimestamp = 0, 0
	la.TimestampType = wal.LogAppendTime
	e.commit(la, ct)
	e.clock.Advance(time.Second)
	e.requireRetained(e.retain(t1p0, -1, 60_000, 0), 0, 0, 0)
	e.requireRetained(e.retain(t1p1, -1, 60_000, 0), 1, 1, 1)
	e.clock.Advance(time.Minute)
	e.requireRetained(e.retain(t1p0, -1, 60_000, 0), 1, 1, 1)
}
