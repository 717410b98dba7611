package remote

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
)

// appendBatch appends one batch of n records "value-<offset>" to l as
// leader in epoch.
func appendBatch(t *testing.T, l *log.UnifiedLog, epoch int32, n int) {
	t.Helper()
	b := record.NewBuilder(record.DefaultBuilderOptions())
	for i := range n {
		b.Add(1_000_000, nil, []byte(fmt.Sprintf("value-%d", l.LogEndOffset()+int64(i))))
	}
	batch, err := b.Build()
	require.NoError(t, err)
	_, err = l.AppendAsLeader(batch, epoch, log.OriginClient)
	require.NoError(t, err)
}

// batchRanges lists the [base, last] of every batch in buf.
func batchRanges(t *testing.T, buf []byte) []string {
	t.Helper()
	var out []string
	s := record.NewScanner(buf, record.ScannerOptions{})
	for s.Next() {
		out = append(out, fmt.Sprintf("[%d, %d]", s.Batch().BaseOffset(), s.Batch().LastOffset()))
	}
	require.NoError(t, s.Err())
	return out
}

// copiedLog is a leader log with the batches of sizes (each in the epoch
// beside it), rolled and copied to remote storage as one segment.
func copiedLog(t *testing.T, e *mgrEnv, tp TopicIDPartition, dir string, batches ...[2]int) *log.UnifiedLog {
	t.Helper()
	l := e.openLog(dir, log.Options{})
	for _, b := range batches {
		appendBatch(t, l, int32(b[0]), b[1])
	}
	require.NoError(t, l.Roll())
	l.UpdateHighWatermark(l.LogEndOffset())
	require.NoError(t, e.mgr.OnLeadershipChange([]Partition{{TopicIDPartition: tp, Log: l}}, nil))
	require.NoError(t, runErr(e.mgr.RunCopy(context.Background(), tp)))
	require.Equal(t, l.LogEndOffset()-1, l.HighestOffsetInRemoteStorage())
	return l
}

// github.com/aiven/inkless/pull/857, "Remote segment that crosses the
// seal": X led epoch 3 alone, appended [100, 120) and uploaded a segment
// [50, 119] with epochs 2@50 3@100; an unclean election made Y leader,
// whose log ends at 100, and Y sealed there. [100, 120) is not the
// partition's. A consumer reading the remote tier from below 100 gets the
// records below 100 only: the batch [100, 119] is dropped from the
// answer; a read whose first batch reaches the seal is refused.
func TestRemoteReadStopsAtTheSeal(t *testing.T) {
	e := newMgrEnv(t, nil)
	ctx := context.Background()
	tp := testPartition(0)
	l := copiedLog(t, e, tp, "x", [2]int{0, 50}, [2]int{2, 50}, [2]int{3, 20})
	segs := finished(t, e.meta, tp)
	require.Len(t, segs, 1)
	require.Equal(t, int64(119), segs[0].EndOffset)

	// Registered without the seal: the read runs into the discarded tail.
	res, err := e.mgr.Read(ctx, tp, 60, 1<<20, log.IsolationLogEnd, true)
	require.NoError(t, err)
	require.Equal(t, []string{"[50, 99]", "[100, 119]"}, batchRanges(t, res.Records))

	// The driver registers the partition again with the committed seal
	// (same log and role: only the cap changes).
	sealed := Partition{TopicIDPartition: tp, Log: l, SealCommitted: true, Seal: 100}
	require.NoError(t, e.mgr.OnLeadershipChange([]Partition{sealed}, nil))
	for _, off := range []int64{0, 50, 60, 99} {
		res, err = e.mgr.Read(ctx, tp, off, 1<<20, log.IsolationLogEnd, true)
		require.NoError(t, err, "offset %d", off)
		var last int64 = -1
		s := record.NewScanner(res.Records, record.ScannerOptions{})
		for s.Next() {
			last = s.Batch().LastOffset()
		}
		require.Less(t, last, int64(100), "a read at %d served %v past the seal", off, batchRanges(t, res.Records))
		require.GreaterOrEqual(t, last, off)
	}
	res, err = e.mgr.Read(ctx, tp, 60, 1<<20, log.IsolationLogEnd, true)
	require.NoError(t, err)
	require.Equal(t, []string{"[50, 99]"}, batchRanges(t, res.Records))

	// A read at or past the seal is not capped (consolidated records are
	// tiered in E_d, which a read from the seal on finds by its epoch).
	res, err = e.mgr.Read(ctx, tp, 100, 1<<20, log.IsolationLogEnd, true)
	require.NoError(t, err)
	require.Equal(t, []string{"[100, 119]"}, batchRanges(t, res.Records))

	// A batch that crosses the seal is from the discarded tail (a sealed
	// classic log ends with a batch at S-1): a read whose first batch it
	// is gets no record.
	tp2 := testPartition(1)
	l2 := copiedLog(t, e, tp2, "crossing", [2]int{0, 90}, [2]int{3, 20})
	require.NoError(t, e.mgr.OnLeadershipChange([]Partition{{TopicIDPartition: tp2, Log: l2, SealCommitted: true, Seal: 100}}, nil))
	res, err = e.mgr.Read(ctx, tp2, 95, 1<<20, log.IsolationLogEnd, true)
	require.ErrorIs(t, err, ErrReadPastSeal)
	var capErr *SealCapError
	require.ErrorAs(t, err, &capErr)
	require.Equal(t, SealCapError{TopicIDPartition: tp2, Offset: 95, Seal: 100, Segment: capErr.Segment,
		BatchBaseOffset: 90, BatchLastOffset: 109}, *capErr)
	require.Empty(t, res.Records)
	res, err = e.mgr.Read(ctx, tp2, 10, 1<<20, log.IsolationLogEnd, true)
	require.NoError(t, err)
	require.Equal(t, []string{"[0, 89]"}, batchRanges(t, res.Records))
}

// A segment copied before an unclean election holds, in its epoch, records
// past that epoch's end in the leader's lineage: X led epoch 2, wrote
// [0, 100) in two batches and copied them as one segment; the unclean
// election's leader had only [0, 50), so X truncated to 50 and follows in
// epoch 4. A read from remote storage below 50 ends at 49: the batch
// [50, 99] carries epoch 2, and X's cache gives epoch 4 at 50 (no switch,
// no seal: the lineage alone decides).
func TestRemoteReadStopsAtTheLineage(t *testing.T) {
	e := newMgrEnv(t, nil)
	ctx := context.Background()
	tp := testPartition(0)
	l := copiedLog(t, e, tp, "x", [2]int{2, 50}, [2]int{2, 50})
	_, err := l.TruncateTo(50)
	require.NoError(t, err)
	appendBatch(t, l, 4, 20)
	require.Equal(t, int64(99), finished(t, e.meta, tp)[0].EndOffset)

	for _, off := range []int64{0, 10, 49} {
		res, err := e.mgr.Read(ctx, tp, off, 1<<20, log.IsolationLogEnd, true)
		require.NoError(t, err, "offset %d", off)
		require.Equal(t, []string{"[0, 49]"}, batchRanges(t, res.Records), "offset %d", off)
	}
	// At 50 the cache gives epoch 4, which no remote segment holds.
	_, err = e.mgr.Read(ctx, tp, 50, 1<<20, log.IsolationLogEnd, true)
	require.ErrorIs(t, err, ErrOffsetOutOfRange)
}

// A log start raised inside a batch (DeleteRecords to 25 inside [0, 49])
// truncates the epoch cache from the start to the new log start (2@25),
// so the cache has no epoch at the batch's base offset 0. The batch is
// still the leader's lineage: a read from the log start returns it (the
// lineage is checked at the first of its offsets the cache covers).
func TestRemoteReadBatchStraddlingTheLogStart(t *testing.T) {
	e := newMgrEnv(t, nil)
	ctx := context.Background()
	tp := testPartition(0)
	l := copiedLog(t, e, tp, "x", [2]int{2, 50}, [2]int{2, 50})
	_, err := l.MaybeIncrementLogStartOffset(25)
	require.NoError(t, err)
	_, ok := l.EpochForOffset(0)
	require.False(t, ok, "the cache starts at the log start")
	for _, off := range []int64{25, 49} {
		res, err := e.mgr.Read(ctx, tp, off, 1<<20, log.IsolationLogEnd, true)
		require.NoError(t, err, "offset %d", off)
		require.Equal(t, []string{"[0, 49]", "[50, 99]"}, batchRanges(t, res.Records), "offset %d", off)
	}
}

// A truncation below the local log start cuts the lineage inside a
// tiered batch: X wrote [0, 100) in epoch 2 as one batch, copied it and
// deleted it locally; an unclean election's leader had only [0, 60), so X
// truncated to 60 (its log start stays 0: remote storage holds the
// prefix). The batch's records [60, 99] are not X's lineage, and a batch
// is served whole: a read inside it gets no record (a consumer would take
// 60..99 for the records the lineage writes there).
func TestRemoteReadRefusesBatchPastTheLineageEnd(t *testing.T) {
	e := newMgrEnv(t, nil)
	ctx := context.Background()
	tp := testPartition(0)
	l := e.openLog("x", log.Options{RetentionMs: log.RetentionInfinite, LocalRetentionMs: 1})
	appendBatch(t, l, 2, 100)
	require.NoError(t, l.Roll())
	l.UpdateHighWatermark(100)
	require.NoError(t, e.mgr.OnLeadershipChange([]Partition{{TopicIDPartition: tp, Log: l}}, nil))
	require.NoError(t, runErr(e.mgr.RunCopy(ctx, tp)))
	e.nowMs.Add(1000)
	n, err := l.DeleteOldSegments()
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.EqualValues(t, 100, l.LocalLogStartOffset())
	_, err = l.TruncateTo(60)
	require.NoError(t, err)
	require.EqualValues(t, 60, l.LogEndOffset())
	res, err := e.mgr.Read(ctx, tp, 10, 1<<20, log.IsolationLogEnd, true)
	require.ErrorIs(t, err, ErrNotInLineage)
	var linErr *LineageError
	require.ErrorAs(t, err, &linErr)
	require.Equal(t, int64(99), linErr.BatchLastOffset)
	require.Empty(t, res.Records)
}
