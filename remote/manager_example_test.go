package remote_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/remote/objstore/mem"
)

// A leader tiers its log: the remote-log manager copies rolled segments
// to object storage, local retention deletes them from disk, and reads
// below the local log start are served from the remote tier. The task
// runs by hand (TaskInterval -1, RunCopy) so the example is deterministic.
func ExampleManager() {
	ctx := context.Background()
	fs := vfs.NewMem()
	now := time.UnixMilli(1_700_000_000_000)
	clock := func() time.Time { return now }
	tp := remote.TopicIDPartition{TopicID: remote.UUID{1}, Topic: "orders", Partition: 0}

	meta, _ := remote.Open(fs, "remote-metadata", remote.MetadataOptions{})
	defer meta.Close()
	storage, _ := remote.NewStorageManager(mem.New(mem.Options{}), remote.StorageOptions{})
	mgr, _ := remote.NewManager(meta, storage, remote.ManagerOptions{BrokerID: 1, TaskInterval: -1, Now: clock})
	defer mgr.Close()

	// A log with tiny segments whose local copies may go once tiered.
	_ = fs.MkdirAll("orders-0", 0o755)
	l, _ := log.Open("orders-0", log.Options{FS: fs, RemoteStorageEnabled: true,
		SegmentBytes: 1 << 10, LocalRetentionMs: 1, Now: clock})
	defer l.Close()
	for i := range 30 {
		b := record.NewBuilder(record.DefaultBuilderOptions())
		b.Add(now.UnixMilli(), nil, fmt.Appendf(nil, "order %03d with some padding to fill segments", i))
		batch, _ := b.Build()
		_, _ = l.AppendAsLeader(batch, 0, log.OriginClient)
	}
	l.UpdateHighWatermark(l.LogEndOffset())
	_ = l.Roll()

	// Become leader of the partition and run its copy task once.
	_ = mgr.OnLeadershipChange([]remote.Partition{{TopicIDPartition: tp, Log: l}}, nil)
	run, err := mgr.RunCopy(ctx, tp)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("copy run: %d segments copied, stopped: %s\n", len(run.Copied), run.Stop)
	segs, _ := meta.ListSegments(tp)
	fmt.Printf("copied %d segments, highest remote offset %d\n", len(segs), l.HighestOffsetInRemoteStorage())
	for _, s := range segs {
		fmt.Printf("  [%d, %d] %s\n", s.StartOffset, s.EndOffset, s.State)
	}

	// Local retention deletes what is tiered.
	now = now.Add(time.Second)
	deleted, _ := l.DeleteOldSegments()
	fmt.Printf("deleted %d local segments: log start %d, local log start %d\n",
		deleted, l.LogStartOffset(), l.LocalLogStartOffset())

	// Offset 0 is no longer on disk; the manager reads it remotely.
	_, err = l.Read(nil, 0, 1<<20, log.IsolationHighWatermark, true)
	fmt.Println("local read at 0 moved to tiered storage:", errors.Is(err, log.ErrOffsetMovedToTieredStorage))
	res, _ := mgr.Read(ctx, tp, 0, 1<<20, log.IsolationHighWatermark, true)
	b, _ := record.ReadBatch(res.Records)
	fmt.Printf("remote read at 0: first batch [%d, %d)\n", b.BaseOffset(), b.NextOffset())
	// Output:
	// copy run: 4 segments copied, stopped: caught-up
	// copied 4 segments, highest remote offset 29
	//   [0, 8] COPY_SEGMENT_FINISHED
	//   [9, 17] COPY_SEGMENT_FINISHED
	//   [18, 26] COPY_SEGMENT_FINISHED
	//   [27, 29] COPY_SEGMENT_FINISHED
	// deleted 4 local segments: log start 0, local log start 30
	// local read at 0 moved to tiered storage: true
	// remote read at 0: first batch [0, 1)
}

// Each run of a task says what it did: here the copy run uploads the
// rolled segments, and after retention.ms the expiration run deletes them
// and says why, moving the log start past them first.
func ExampleManager_RunExpiration() {
	ctx := context.Background()
	fs := vfs.NewMem()
	now := time.UnixMilli(1_700_000_000_000)
	clock := func() time.Time { return now }
	tp := remote.TopicIDPartition{TopicID: remote.UUID{1}, Topic: "orders", Partition: 0}

	meta, _ := remote.Open(fs, "remote-metadata", remote.MetadataOptions{})
	defer meta.Close()
	storage, _ := remote.NewStorageManager(mem.New(mem.Options{}), remote.StorageOptions{})
	mgr, _ := remote.NewManager(meta, storage, remote.ManagerOptions{BrokerID: 1, TaskInterval: -1, Now: clock})
	defer mgr.Close()

	_ = fs.MkdirAll("orders-0", 0o755)
	l, _ := log.Open("orders-0", log.Options{FS: fs, RemoteStorageEnabled: true,
		SegmentBytes: 1 << 10, RetentionMs: 60_000, Now: clock})
	defer l.Close()
	for i := range 20 {
		b := record.NewBuilder(record.DefaultBuilderOptions())
		b.Add(now.UnixMilli(), nil, fmt.Appendf(nil, "order %03d with some padding to fill segments", i))
		batch, _ := b.Build()
		_, _ = l.AppendAsLeader(batch, 0, log.OriginClient)
	}
	l.UpdateHighWatermark(l.LogEndOffset())
	_ = l.Roll()
	_ = mgr.OnLeadershipChange([]remote.Partition{{TopicIDPartition: tp, Log: l}}, nil)

	copied, _ := mgr.RunCopy(ctx, tp)
	fmt.Println(copied)

	now = now.Add(2 * time.Minute) // past retention.ms
	expired, err := mgr.RunExpiration(ctx, tp)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("expiration: new log start %d\n", expired.NewLogStart)
	for _, d := range expired.Deleted {
		fmt.Printf("  deleted [%d, %d]: %s\n", d.Segment.StartOffset, d.Segment.EndOffset, d.Reason)
	}
	fmt.Println("log start", l.LogStartOffset())
	// Output:
	// reported log start 0
	// copied [0, 8] 0@0
	// copied [9, 17] 0@9
	// copied [18, 19] 0@18
	// stop: caught-up (copied offset 19, last stable offset 20)
	// expiration: new log start 20
	//   deleted [0, 8]: retention-time
	//   deleted [9, 17]: retention-time
	//   deleted [18, 19]: retention-time
	// log start 20
}
