package controlplanetest

import (
	"context"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/wal"
)

// PreBinding is one commit as a control plane stored it before the planes
// stored batch bindings: its object row holds the digest in the encoding
// of that time (pinned here as that code computed it) and its batch rows
// hold no binding. A plane's upgrade test writes these rows in its
// previous format, opens the plane with the current code and calls
// CheckPreBinding.
type PreBinding struct {
	// Topics are created (CreatePartitions) before the rows are written.
	Topics []wal.CreatePartitionsRequest
	// Request is the commit. Its batches carry CRCs and leader epochs as
	// a writer running the current code rebuilds them from the same
	// object to retry the commit.
	Request wal.CommitFileRequest
	// Digest is what the previous code stored for Request.
	Digest [32]byte
	// CommittedAtMs is the commit's time: the log-append time of its
	// batches and the producer batch's timestamp (batch 0 is CreateTime,
	// so that is its max timestamp).
	CommittedAtMs int64
	// Results are the stored answer: both batches accepted at offset 0.
	// The rows are batch i at [0, Request.Batches[i].OffsetCount()), and
	// the partitions' high watermarks and byte sizes are those of their
	// one batch; producer 7 (epoch 1) on the first partition holds the
	// one batch ProducerState lists.
	Results []wal.StoredBatchResult
	// ProducerState is the first partition's producer after the commit.
	ProducerState wal.ProducerState
}

// preBindingDigest is CommitFileRequest.Digest of PreBinding's request as
// computed before the digest covered the bindings.
const preBindingDigest = "9b87e65c2c5e85cdb90b330f7ce2e31f8d5d8e0bccc0c5ca000d2e8b1bc77dfe"

// PreBindingCommit returns the commit CheckPreBinding expects.
func PreBindingCommit() PreBinding {
	const at = 1_767_225_600_000
	req := wal.CommitFileRequest{ObjectKey: "wal/before-bindings", ObjectSize: 300, BrokerID: brokerID, BrokerEpoch: 1,
		Batches: []wal.CommitBatch{
			{Partition: t1p0, ByteOffset: 0, Size: 100, BaseOffset: 0, LastOffset: 9, RecordCount: 10, MaxTimestamp: 1000,
				TimestampType: wal.CreateTime, ProducerID: 7, ProducerEpoch: 1, BaseSequence: 0,
				CRC: 0xdeadbeef, PartitionLeaderEpoch: 4},
			{Partition: t2p0, ByteOffset: 100, Size: 200, BaseOffset: 0, LastOffset: 4, RecordCount: 5, MaxTimestamp: 2000,
				TimestampType: wal.LogAppendTime, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
				CRC: 0x01020304, PartitionLeaderEpoch: 4},
		}}
	var d [32]byte
	if _, err := hex.Decode(d[:], []byte(preBindingDigest)); err != nil {
		panic(err)
	}
	return PreBinding{
		Topics: []wal.CreatePartitionsRequest{{TopicID: topic1, Topic: "topic-1", NumPartitions: 1},
			{TopicID: topic2, Topic: "topic-2", NumPartitions: 1}},
		Request: req, Digest: d, CommittedAtMs: at,
		Results: []wal.StoredBatchResult{{Status: wal.BatchAccepted, BaseOffset: 0, LogAppendTime: at},
			{Status: wal.BatchAccepted, BaseOffset: 0, LogAppendTime: at}},
		ProducerState: wal.ProducerState{ProducerID: 7, ProducerEpoch: 1,
			Batches: []wal.ProducerBatch{{BaseSequence: 0, LastSequence: 9, AssignedOffset: 0, Timestamp: 1000}}},
	}
}

// CheckPreBinding checks a plane, opened by the current code, that holds
// PreBindingCommit's rows as the previous code left them: FindBatches
// answers them with an unknown binding, a retry of the commit gets the
// stored answer and changes nothing, and commits after them store and
// answer their bindings.
func CheckPreBinding(t *testing.T, cp wal.ControlPlane) {
	ctx := context.Background()
	pb := PreBindingCommit()
	req := pb.Request
	find := func(tp wal.TopicIDPartition) []wal.BatchInfo {
		t.Helper()
		res, err := cp.FindBatches(ctx, wal.FindBatchesRequest{MaxBytes: 1 << 20,
			Partitions: []wal.FindPartition{{Partition: tp, MaxPartitionBytes: 1 << 20}}})
		require.NoError(t, err)
		require.NoError(t, res[0].Err)
		return res[0].Batches
	}
	old := make([]wal.BatchInfo, len(req.Batches))
	for i, b := range req.Batches {
		old[i] = wal.BatchInfo{ObjectKey: req.ObjectKey, ByteOffset: b.ByteOffset, Size: b.Size, BaseOffset: 0,
			LastOffset: b.OffsetCount() - 1, MaxTimestamp: b.MaxTimestamp, TimestampType: b.TimestampType,
			LogAppendTime: pb.CommittedAtMs}
		require.Equal(t, old[i:i+1], find(b.Partition), "batch %d: a row without a binding", i)
	}
	states, err := cp.ProducerStates(ctx, t1p0)
	require.NoError(t, err)
	require.Equal(t, []wal.ProducerState{pb.ProducerState}, states)

	// A retry from a writer running the current code.
	res, err := cp.CommitFile(ctx, req)
	require.NoError(t, err)
	require.Equal(t, wal.CommitAnswer(&req, pb.Results), res)
	// The old digest did not cover the bindings, so a request differing
	// only there matches it too; the rows stay unbound either way.
	other := req
	other.Batches = append([]wal.CommitBatch(nil), req.Batches...)
	other.Batches[0].CRC++
	res, err = cp.CommitFile(ctx, other)
	require.NoError(t, err)
	require.Equal(t, wal.CommitAnswer(&req, pb.Results), res)
	// What it did cover still tells a reuse.
	other.Batches[0].MaxTimestamp++
	_, err = cp.CommitFile(ctx, other)
	require.ErrorIs(t, err, wal.ErrObjectKeyReused)
	for i, b := range req.Batches {
		info, err := cp.LogInfo(ctx, b.Partition)
		require.NoError(t, err)
		require.Equal(t, [2]int64{b.OffsetCount(), b.Size}, [2]int64{info.HighWatermark, info.ByteSize}, "batch %d", i)
	}

	// A commit after the upgrade: the producer continues, the rows are
	// bound.
	next := wal.CommitFileRequest{ObjectKey: "wal/after-bindings", ObjectSize: 30, BrokerID: brokerID, BrokerEpoch: 2,
		Batches: []wal.CommitBatch{
			{Partition: t1p0, ByteOffset: 0, Size: 10, BaseOffset: 0, LastOffset: 1, RecordCount: 2, MaxTimestamp: 3000,
				ProducerID: 7, ProducerEpoch: 1, BaseSequence: 10, CRC: 0xcafef00d, PartitionLeaderEpoch: 5},
			{Partition: t2p0, ByteOffset: 10, Size: 20, BaseOffset: 0, LastOffset: 0, RecordCount: 1, MaxTimestamp: 3000,
				ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, CRC: 0x0badf00d, PartitionLeaderEpoch: 5},
		}}
	res, err = cp.CommitFile(ctx, next)
	require.NoError(t, err)
	for i, b := range next.Batches {
		require.NoError(t, res.Batches[i].Err)
		first := req.Batches[i].OffsetCount()
		require.Equal(t, first, res.Batches[i].BaseOffset)
		require.Equal(t, []wal.BatchInfo{old[i], {ObjectKey: next.ObjectKey, ByteOffset: b.ByteOffset, Size: b.Size,
			BaseOffset: first, LastOffset: first + b.OffsetCount() - 1, MaxTimestamp: b.MaxTimestamp,
			TimestampType: b.TimestampType, LogAppendTime: res.Batches[i].LogAppendTime, Binding: b.Binding()}},
			find(b.Partition), "batch %d", i)
	}
}
