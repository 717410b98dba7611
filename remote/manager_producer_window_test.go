package remote

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
)

// TestCopyUploadsProducerWindow: the copy uploads the producer batches
// file (every producer's dedup window) beside Kafka's producer snapshot,
// and a log rebuilt from the two answers a retry of any batch of the
// window as a duplicate with its original offsets (Kafka's snapshot alone
// holds the last batch only: the older retries would be out of order).
func TestCopyUploadsProducerWindow(t *testing.T) {
	ctx := context.Background()
	e := newMgrEnv(t, nil)
	tp := testPartition(0)
	l := e.openLog("p0", log.Options{})
	const pid = 7
	var sent [][]byte
	var infos []log.AppendInfo
	for i := range 5 {
		opts := record.DefaultBuilderOptions()
		opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = pid, 0, int32(2*i)
		b := record.NewBuilder(opts)
		b.Add(1_000_000, []byte("k"), []byte("a"))
		b.Add(1_000_000, []byte("k"), []byte("b"))
		batch, err := b.Build()
		require.NoError(t, err)
		sent = append(sent, batch)
		info, err := l.AppendAsLeader(slices.Clone(batch), 0, log.OriginClient)
		require.NoError(t, err)
		infos = append(infos, info)
	}
	require.NoError(t, l.Roll())
	appendSegments(t, l, 0, 1, 2)
	require.NoError(t, e.mgr.OnLeadershipChange([]Partition{{TopicIDPartition: tp, Log: l}}, nil))
	require.NoError(t, runErr(e.mgr.RunCopy(ctx, tp)))
	segs := finished(t, e.meta, tp)
	require.NotEmpty(t, segs)
	seg := segs[0]
	require.EqualValues(t, 9, seg.EndOffset)

	snap, batches, err := l.ProducerSnapshotWithBatches(10)
	require.NoError(t, err)
	require.NotNil(t, batches)
	gotSnap, err := e.storage.FetchIndex(ctx, &seg, IndexProducerSnapshot)
	require.NoError(t, err)
	require.Equal(t, snap, gotSnap, "Kafka's snapshot, unchanged")
	gotBatches, err := e.storage.FetchIndex(ctx, &seg, IndexProducerBatches)
	require.NoError(t, err)
	require.Equal(t, batches, gotBatches)

	rebuilt := e.openLog("p1", log.Options{})
	require.NoError(t, rebuilt.TruncateFullyAndRestore(log.RemoteRestore{NextOffset: 10, LogStartOffset: 0,
		Epochs: l.EpochEntriesInRange(-1, 10), ProducerSnapshot: gotSnap, ProducerBatches: gotBatches}))
	for i := range sent {
		got, err := rebuilt.AppendAsLeader(slices.Clone(sent[i]), 0, log.OriginClient)
		require.NoError(t, err, "retry of batch %d", i)
		require.True(t, got.Duplicate, "retry of batch %d", i)
		require.Equal(t, [2]int64{infos[i].FirstOffset, infos[i].LastOffset}, [2]int64{got.FirstOffset, got.LastOffset})
	}
	require.EqualValues(t, 10, rebuilt.LogEndOffset())
}
