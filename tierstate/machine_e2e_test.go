package tierstate

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/remote/objstore/mem"
)

// The parts a broker wires in are the real ones.
var (
	_ RebuildLog            = (*log.UnifiedLog)(nil)
	_ ReplicaLog            = (*log.UnifiedLog)(nil)
	_ FutureReplicaLog      = (*log.UnifiedLog)(nil)
	_ ConsolidatedSuffixLog = (*log.UnifiedLog)(nil)
	_ RemoteMetadata        = (*remote.MetadataManager)(nil)
	_ RemoteData            = (*remote.StorageManager)(nil)
	_ RemoteTaskStopper     = (*remote.Manager)(nil)
)

// logEndpoint is a LeaderEndpoint answering from the leader's own log, as
// Kafka's leader does: ListOffsets EARLIEST_LOCAL (the local log start
// and the epoch there) and OffsetsForLeaderEpoch (its epoch cache).
type logEndpoint struct{ l *log.UnifiedLog }

func (e logEndpoint) FetchEarliestLocalOffset(context.Context, remote.TopicIDPartition, int32) (OffsetAndEpoch, error) {
	off := e.l.LocalLogStartOffset()
	epoch, ok := e.l.EpochForOffset(off)
	if !ok {
		epoch = base.UndefinedEpoch
	}
	return OffsetAndEpoch{Offset: off, Epoch: epoch}, nil
}

func (e logEndpoint) FetchEpochEndOffset(_ context.Context, _ remote.TopicIDPartition, _, epoch int32) (EpochEndOffset, error) {
	return e.l.EndOffsetForEpoch(epoch), nil
}

// TestRebuildEndToEnd tiers a leader's log with the real remote tier
// (remote.Manager's copy task, remote.StorageManager on objstore/mem,
// remote.MetadataManager), deletes the copied segments locally, then
// rebuilds a divergent follower from it through the upstream rebuild and
// lets the follower fetch the leader's local records. The follower ends
// with the leader's epochs, offsets, records and producer state.
func TestRebuildEndToEnd(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	var nowMs atomic.Int64
	nowMs.Store(testNowMs)
	now := func() time.Time { return time.UnixMilli(nowMs.Load()) }
	meta, err := remote.Open(fs, "meta", remote.MetadataOptions{})
	require.NoError(t, err)
	defer meta.Close()
	storage, err := remote.NewStorageManager(mem.New(mem.Options{}), remote.StorageOptions{ChunkSize: 512})
	require.NoError(t, err)
	mgr, err := remote.NewManager(meta, storage, remote.ManagerOptions{BrokerID: 1, TaskInterval: -1, Now: now})
	require.NoError(t, err)
	defer mgr.Close()

	opts := log.Options{FS: fs, RemoteStorageEnabled: true, RetentionMs: 3_600_000, LocalRetentionMs: 1,
		SegmentIndexBytes: 4096, IndexIntervalBytes: 64, Now: now}
	leader, err := log.Open("leader", opts)
	require.NoError(t, err)
	defer leader.Close()
	seq := map[int64]int32{}
	appendSegment := func(epoch int32, n int, pid int64) {
		for range n {
			_, err := leader.AppendAsLeader(producerBatch(t, 1, pid, seq[pid]), epoch, log.OriginClient)
			require.NoError(t, err)
			if pid != base.NoProducerID {
				seq[pid]++
			}
		}
		require.NoError(t, leader.Roll())
	}
	appendSegment(0, 8, base.NoProducerID)
	appendSegment(0, 8, 7)
	appendSegment(2, 8, 9)
	appendSegment(3, 8, 7)
	_, err = leader.AppendAsLeader(producerBatch(t, 3, 9, seq[9]), 3, log.OriginClient)
	require.NoError(t, err)
	leader.UpdateHighWatermark(leader.LogEndOffset())
	require.NoError(t, leader.Flush())

	require.NoError(t, mgr.OnLeadershipChange([]remote.Partition{{TopicIDPartition: testTP, Log: leader}}, nil))
	run, err := mgr.RunCopy(ctx, testTP)
	require.NoError(t, err)
	require.Equal(t, remote.CopyCaughtUp, run.Stop, "%s", run)
	nowMs.Add(10)
	_, err = leader.DeleteOldSegments()
	require.NoError(t, err)
	localStart := leader.LocalLogStartOffset()
	require.EqualValues(t, 32, localStart, "every rolled segment is copied and deleted locally")

	// The follower diverged: it holds epoch-1 records the leader never had.
	follower, err := log.Open("follower", opts)
	require.NoError(t, err)
	defer follower.Close()
	_, err = follower.AppendAsLeader(producerBatch(t, 5, base.NoProducerID, 0), 1, log.OriginClient)
	require.NoError(t, err)

	m, err := NewMachine(MachineOptions{Leader: logEndpoint{leader}, Metadata: meta, Data: storage,
		PartitionReady: mgr.IsPartitionReady})
	require.NoError(t, err)
	res, err := m.Rebuild(ctx, RebuildRequest{Partition: testTP, Log: follower, CurrentLeaderEpoch: 3,
		LeaderLogStartOffset: leader.LogStartOffset()})
	require.NoError(t, err)
	t.Log(res)
	require.Equal(t, localStart, res.NextOffset)
	require.Equal(t, OffsetAndEpoch{Offset: 31, Epoch: 3}, res.Target)
	require.EqualValues(t, 24, res.Segment.StartOffset)
	require.True(t, res.ProducerSnapshotRestored)
	require.Equal(t, leader.EpochEntriesInRange(-1, localStart), follower.EpochEntries())
	require.Equal(t, localStart, follower.LocalLogStartOffset())
	require.Equal(t, leader.LogStartOffset(), follower.LogStartOffset())

	// The follower fetches the leader's local records.
	for follower.LogEndOffset() < leader.LogEndOffset() {
		fd, err := leader.Read(nil, follower.LogEndOffset(), 1<<20, log.IsolationLogEnd, true)
		require.NoError(t, err)
		_, err = follower.AppendAsFollower(fd.Records, 3)
		require.NoError(t, err)
	}
	require.Equal(t, leader.EpochEntries(), follower.EpochEntries())
	require.Equal(t, producersString(leader), producersString(follower))
	require.Equal(t, leader.LogEndOffset(), follower.LogEndOffset())
	// Every offset below the local log start reads back from remote
	// storage as the leader wrote it.
	got, err := mgr.Read(ctx, testTP, 0, 1<<20, log.IsolationLogEnd, true)
	require.NoError(t, err)
	b, err := record.ReadBatch(got.Records)
	require.NoError(t, err)
	require.EqualValues(t, 0, b.BaseOffset())
}

func producersString(l *log.UnifiedLog) string {
	var s string
	for _, p := range l.ActiveProducers() {
		last := p.Batches[len(p.Batches)-1]
		s += fmt.Sprintf("%d:epoch=%d,last-seq=%d,last-offset=%d ", p.ProducerID, p.ProducerEpoch, last.LastSeq, last.LastOffset)
	}
	return s
}
