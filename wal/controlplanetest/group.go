package controlplanetest

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/wal"
)

// GroupCommitFailingStep: a commit of a group that fails after one of
// its batches was accepted (an offset overflow on its second partition)
// fails alone and leaves nothing: the next commit of the same group gets
// the offsets the failed one would have taken, and nothing refers to the
// failed object; its reservation stays, and its retry commits it.
//
// commitGroup writes its requests as one group commit of cp, in order
// (a plane's test hook), and returns each request's answer. cp must be
// empty.
func GroupCommitFailingStep(t *testing.T, cp wal.ControlPlane,
	commitGroup func(context.Context, []wal.CommitFileRequest) ([]wal.CommitFileResult, []error)) {
	ctx := context.Background()
	p0 := wal.TopicIDPartition{TopicID: wal.TopicID{1}, Partition: 0}
	full := wal.TopicIDPartition{TopicID: wal.TopicID{2}, Partition: 0}
	require.NoError(t, cp.CreatePartitions(ctx, []wal.CreatePartitionsRequest{{TopicID: p0.TopicID, Topic: "a", NumPartitions: 1}}))
	_, err := cp.InitDisklessLog(ctx, []wal.InitDisklessLogRequest{{Partition: full, Topic: "full",
		LogStartOffset: 0, DisklessStartOffset: math.MaxInt64 - 5}})
	require.NoError(t, err)
	require.NoError(t, cp.ReserveObject(ctx, "g/1"))

	res, errs := commitGroup(ctx, []wal.CommitFileRequest{
		GroupRequest("g/0", groupBatch(p0, 3)),
		GroupRequest("g/1", groupBatch(p0, 4), groupBatch(full, 10)), // overflows after p0's batch
		GroupRequest("g/2", groupBatch(p0, 2), groupBatch(full, 5)),
	})
	require.NoError(t, errs[0])
	require.ErrorIs(t, errs[1], wal.ErrInvalidArgument)
	require.NoError(t, errs[2])
	require.Equal(t, int64(0), res[0].Batches[0].BaseOffset)
	require.Equal(t, int64(3), res[2].Batches[0].BaseOffset, "the commit after the failed one")
	require.Equal(t, int64(math.MaxInt64-5), res[2].Batches[1].BaseOffset)
	info, err := cp.LogInfo(ctx, p0)
	require.NoError(t, err)
	require.Equal(t, int64(5), info.HighWatermark)
	found, err := cp.FindBatches(ctx, wal.FindBatchesRequest{MaxBytes: 1 << 20,
		Partitions: []wal.FindPartition{{Partition: p0, MaxPartitionBytes: 1 << 20}}})
	require.NoError(t, err)
	require.Len(t, found[0].Batches, 2)
	require.Equal(t, []string{"g/0", "g/2"}, []string{found[0].Batches[0].ObjectKey, found[0].Batches[1].ObjectKey})
	safe, err := cp.IsSafeToDeleteObject(ctx, "g/1")
	require.NoError(t, err)
	require.True(t, safe, "the failed commit registered its object")
	require.ErrorIs(t, cp.ReserveObject(ctx, "g/1"), wal.ErrObjectKeyReused, "the failed commit's reservation is gone")
	// Its retry, alone, commits it after the others.
	again, err := cp.CommitFile(ctx, GroupRequest("g/1", groupBatch(p0, 4)))
	require.NoError(t, err)
	require.Equal(t, int64(5), again.Batches[0].BaseOffset)
}

func groupBatch(tp wal.TopicIDPartition, n int64) wal.CommitBatch {
	return wal.CommitBatch{Partition: tp, Size: n, LastOffset: n - 1, RecordCount: int32(n),
		MaxTimestamp: 1, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
}

// GroupRequest is an object of batches, laid out one after the other.
func GroupRequest(key string, batches ...wal.CommitBatch) wal.CommitFileRequest {
	req := wal.CommitFileRequest{ObjectKey: key, BrokerID: 1}
	for _, b := range batches {
		b.ByteOffset = req.ObjectSize
		req.ObjectSize += b.Size
		req.Batches = append(req.Batches, b)
	}
	return req
}
