package pebblecp_test

import (
	"context"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tierlog/tierlog/wal"
	"github.com/tierlog/tierlog/wal/pebblecp"
)

// A broker commits one object holding batches of two partitions; the
// control plane assigns each partition's offsets, and a fetch finds the
// batch by offset.
func Example() {
	ctx := context.Background()
	now := func() time.Time { return time.UnixMilli(1_767_225_600_000) }
	cp, err := pebblecp.Open(vfs.NewMem(), "control-plane", pebblecp.Options{Now: now})
	if err != nil {
		panic(err)
	}
	defer cp.Close()
	topic := wal.TopicID{1}
	p0 := wal.TopicIDPartition{TopicID: topic, Partition: 0}
	p1 := wal.TopicIDPartition{TopicID: topic, Partition: 1}
	if err := cp.CreatePartitions(ctx, []wal.CreatePartitionsRequest{{TopicID: topic, Topic: "orders", NumPartitions: 2}}); err != nil {
		panic(err)
	}
	batch := func(tp wal.TopicIDPartition, at, records int64) wal.CommitBatch {
		return wal.CommitBatch{Partition: tp, ByteOffset: at, Size: 100, LastOffset: records - 1,
			RecordCount: int32(records), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	}
	for i, key := range []string{"wal/a", "wal/b"} {
		res, err := cp.CommitFile(ctx, wal.CommitFileRequest{ObjectKey: key, ObjectSize: 200,
			Batches: []wal.CommitBatch{batch(p0, 0, 10), batch(p1, 100, int64(3+i))}})
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s: p0 at %d, p1 at %d\n", key, res.Batches[0].BaseOffset, res.Batches[1].BaseOffset)
	}
	found, err := cp.FindBatches(ctx, wal.FindBatchesRequest{MaxBytes: 1 << 20,
		Partitions: []wal.FindPartition{{Partition: p1, Offset: 4, MaxPartitionBytes: 1 << 20}}})
	if err != nil {
		panic(err)
	}
	for _, b := range found[0].Batches {
		fmt.Printf("offset 4 of p1: [%d, %d] in %s bytes [%d, %d)\n", b.BaseOffset, b.LastOffset, b.ObjectKey,
			b.ByteOffset, b.ByteOffset+b.Size)
	}
	// Output:
	// wal/a: p0 at 0, p1 at 0
	// wal/b: p0 at 10, p1 at 3
	// offset 4 of p1: [3, 6] in wal/b bytes [100, 200)
}
