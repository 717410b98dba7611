package remote

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
)

// DeleteRecords into the middle of a rolled segment (Kafka Streams purges
// its repartition topics this way after every commit) truncates the
// epoch cache from the start at the new log start, inside the segment.
// The copy task still tiers the segment, its first leader epoch starting
// above the segment start as in Kafka (the copy refused it once, and no
// later segment was ever copied), local retention then deletes the local
// copy, and remote storage serves every offset from the log start on.
func TestCopyAfterDeleteRecordsInsideSegment(t *testing.T) {
	e := newMgrEnv(t, nil)
	ctx := context.Background()
	tp := testPartition(0)
	l := e.openLog("p0", log.Options{LocalRetentionMs: 1})
	appendSegments(t, l, 0, 3, 5) // [0, 5) [5, 10) [10, 15), one record a batch
	_, err := l.MaybeIncrementLogStartOffset(7)
	require.NoError(t, err)
	require.NoError(t, e.mgr.OnLeadershipChange([]Partition{{TopicIDPartition: tp, Log: l}}, nil))
	require.NoError(t, runErr(e.mgr.RunCopy(ctx, tp)))
	require.Equal(t, "[5,9]0@7 [10,14]0@10 ", spans(finished(t, e.meta, tp)))
	require.EqualValues(t, 14, l.HighestOffsetInRemoteStorage())

	e.nowMs.Add(10)
	_, err = l.DeleteOldSegments()
	require.NoError(t, err)
	require.EqualValues(t, 15, l.LocalLogStartOffset())
	for off := int64(7); off < 15; off++ {
		res, err := e.mgr.Read(ctx, tp, off, 1, log.IsolationLogEnd, true)
		require.NoError(t, err, "offset %d", off)
		b, err := record.ReadBatch(res.Records)
		require.NoError(t, err)
		require.Equal(t, off, b.BaseOffset())
	}
}
