package pebblecp_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/wal"
	"github.com/tierlog/tierlog/wal/pebblecp"
)

// The binding FindBatches answers is the header of the bytes at the
// answered coordinates, for an object committed from ObjectBuilder.Build
// and for the same object rebuilt from its bytes (ParseObject, as a plane
// rebuilt from the store would commit it).
func TestBindingMatchesObjectBytes(t *testing.T) {
	ctx := context.Background()
	topic := wal.TopicID{9}
	parts := []wal.TopicIDPartition{{TopicID: topic, Partition: 0}, {TopicID: topic, Partition: 1}}
	var ob wal.ObjectBuilder
	nextSeq := map[int]int32{}
	for i := 0; i < 6; i++ {
		opts := record.DefaultBuilderOptions()
		opts.PartitionLeaderEpoch = int32(3 + i%2)
		records := 1 + i%3
		if i%3 != 0 {
			opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = 40+int64(i%2), 1, nextSeq[i%2]
			nextSeq[i%2] += int32(records)
		}
		b := record.NewBuilder(opts)
		for r := 0; r < records; r++ {
			b.Add(int64(1000+i), nil, []byte(fmt.Sprintf("record %d.%d", i, r)))
		}
		buf, err := b.Build()
		require.NoError(t, err)
		require.NoError(t, ob.Add(parts[i%2], buf))
	}
	data, built := ob.Build()
	parsed, err := wal.ParseObject(data)
	require.NoError(t, err)
	require.Equal(t, built, parsed, "ParseObject rebuilds the batches, bindings included")

	for name, batches := range map[string][]wal.CommitBatch{"built": built, "parsed": parsed} {
		cp, err := pebblecp.Open(vfs.NewMem(), "cp", pebblecp.Options{Now: func() time.Time { return time.UnixMilli(1) }})
		require.NoError(t, err)
		require.NoError(t, cp.CreatePartitions(ctx, []wal.CreatePartitionsRequest{{TopicID: topic, Topic: "t", NumPartitions: 2}}))
		res, err := cp.CommitFile(ctx, wal.CommitFileRequest{ObjectKey: "wal/o", ObjectSize: int64(len(data)), Batches: batches})
		require.NoError(t, err)
		for _, r := range res.Batches {
			require.NoError(t, r.Err)
		}
		found, err := cp.FindBatches(ctx, wal.FindBatchesRequest{MaxBytes: 1 << 20, Partitions: []wal.FindPartition{
			{Partition: parts[0], MaxPartitionBytes: 1 << 20}, {Partition: parts[1], MaxPartitionBytes: 1 << 20}}})
		require.NoError(t, err)
		n := 0
		for _, f := range found {
			require.NoError(t, f.Err)
			for _, bi := range f.Batches {
				rb, err := record.ReadBatch(data[bi.ByteOffset : bi.ByteOffset+bi.Size])
				require.NoError(t, err)
				require.Equal(t, wal.BatchBinding{Known: true, CRC: rb.CRC(), PartitionLeaderEpoch: rb.PartitionLeaderEpoch(),
					ProducerID: rb.ProducerID(), ProducerEpoch: rb.ProducerEpoch(), BaseSequence: rb.BaseSequence()},
					bi.Binding, "%s: batch at %d", name, bi.ByteOffset)
				n++
			}
		}
		require.Equal(t, 6, n, name)
		require.NoError(t, cp.Close())
	}
}
