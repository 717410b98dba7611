package remote

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/log"
)

// failingDeleteLog is a log whose deletion fails.
type failingDeleteLog struct{ *log.UnifiedLog }

var errDeleteFailed = errors.New("directory gone")

func (failingDeleteLog) Delete() error { return errDeleteFailed }

// TestStopPartitionsCancelsTasksEvenWhenLocalDeleteFails (Kafka's
// RemoteLogManager.stopPartitions; KeepRemoteLogMetadata from
// https://github.com/aiven/inkless/pull/857): the tasks stop before
// anything is deleted, and stay stopped when the local deletion fails; with
// KeepRemoteLogMetadata the partition stays ready for remote reads.
func TestStopPartitionsCancelsTasksEvenWhenLocalDeleteFails(t *testing.T) {
	e := newMgrEnv(t, nil)
	ctx := context.Background()
	tp := testPartition(0)
	inner := e.openLog("p0", log.Options{})
	appendSegments(t, inner, 0, 2, 5)
	l := failingDeleteLog{inner}
	require.NoError(t, e.mgr.OnLeadershipChange([]Partition{{TopicIDPartition: tp, Log: l}}, nil))
	require.NoError(t, runErr(e.mgr.RunCopy(ctx, tp)))

	err := e.mgr.StopPartitions(ctx, []StopPartition{{TopicIDPartition: tp, DeleteLocalLog: true, KeepRemoteLogMetadata: true}})
	require.ErrorIs(t, err, errDeleteFailed)
	require.ErrorIs(t, runErr(e.mgr.RunCopy(ctx, tp)), ErrTaskCancelled, "the copy task is cancelled although the deletion failed")
	require.ErrorIs(t, runErr(e.mgr.RunExpiration(ctx, tp)), ErrTaskCancelled)
	require.True(t, e.mgr.IsPartitionReady(tp), "the metadata subscription is kept")
	seg, ok, err := e.mgr.FetchSegmentMetadata(tp, 0, 3)
	require.NoError(t, err)
	require.True(t, ok)
	require.EqualValues(t, 0, seg.StartOffset)

	// A leadership change with a new (recreated) log starts fresh tasks.
	fresh := e.openLog("p0-new", log.Options{})
	require.NoError(t, e.mgr.OnLeadershipChange([]Partition{{TopicIDPartition: tp, Log: fresh}}, nil))
	require.NoError(t, runErr(e.mgr.RunCopy(ctx, tp)))
	require.EqualValues(t, -1, fresh.HighestOffsetInRemoteStorage(), "an empty log has nothing in remote storage")

	// Without KeepRemoteLogMetadata the partition is forgotten.
	require.NoError(t, e.mgr.StopPartitions(ctx, []StopPartition{{TopicIDPartition: tp}}))
	require.False(t, e.mgr.IsPartitionReady(tp))
	_, err = e.mgr.Read(ctx, tp, 0, 100, log.IsolationLogEnd, true)
	require.ErrorIs(t, err, ErrPartitionNotReady)
}

// TestStopPartitionsDeletesRemoteLog: DeleteRemoteLog deletes every
// remote segment and its objects and records the partition deletion.
func TestStopPartitionsDeletesRemoteLog(t *testing.T) {
	e := newMgrEnv(t, nil)
	ctx := context.Background()
	tp := testPartition(0)
	l := e.openLog("p0", log.Options{})
	appendSegments(t, l, 0, 3, 5)
	require.NoError(t, e.mgr.OnLeadershipChange([]Partition{{TopicIDPartition: tp, Log: l}}, nil))
	require.NoError(t, runErr(e.mgr.RunCopy(ctx, tp)))
	require.Len(t, finished(t, e.meta, tp), 3)
	require.NoError(t, e.mgr.StopPartitions(ctx, []StopPartition{{TopicIDPartition: tp, DeleteRemoteLog: true, DeleteLocalLog: true}}))
	st, err := e.meta.PartitionDeleteState(tp)
	require.NoError(t, err)
	require.Equal(t, NoPartitionDeleteState, st, "DELETE_PARTITION_FINISHED forgets the partition")
	all, err := e.meta.ListSegments(tp)
	require.NoError(t, err)
	require.Empty(t, all)
	require.Empty(t, e.store.(interface{ Keys() []string }).Keys())
	require.EqualValues(t, 3, e.mgr.Metrics().SegmentsDeleted)
}

// TestLeadershipRoles: leaders have copy and expiration tasks, followers
// the follower task; a role change replaces the task state, and the
// follower task lets a follower delete what the leader tiered.
func TestLeadershipRoles(t *testing.T) {
	e := newMgrEnv(t, nil)
	ctx := context.Background()
	tp := testPartition(0)
	l := e.openLog("p0", log.Options{LocalRetentionMs: 1})
	appendSegments(t, l, 0, 3, 5)
	require.NoError(t, e.mgr.OnLeadershipChange(nil, []Partition{{TopicIDPartition: tp, Log: l}}))
	require.ErrorIs(t, runErr(e.mgr.RunCopy(ctx, tp)), ErrInvalidArgument, "a follower has no copy task")
	// The leader elsewhere tiered [0,9].
	e.addFinished(tp, 0, 4, []epochcache.Entry{{Epoch: 0, StartOffset: 0}})
	e.addFinished(tp, 5, 9, []epochcache.Entry{{Epoch: 0, StartOffset: 5}})
	require.NoError(t, runErr(e.mgr.RunFollower(ctx, tp)))
	require.EqualValues(t, 9, l.HighestOffsetInRemoteStorage())
	e.nowMs.Add(10)
	n, err := l.DeleteOldSegments()
	require.NoError(t, err)
	require.Equal(t, 2, n, "the follower deletes the two tiered segments")
	require.EqualValues(t, 10, l.LocalLogStartOffset())

	require.NoError(t, e.mgr.OnLeadershipChange([]Partition{{TopicIDPartition: tp, Log: l}}, nil))
	require.ErrorIs(t, runErr(e.mgr.RunFollower(ctx, tp)), ErrInvalidArgument)
	require.NoError(t, runErr(e.mgr.RunCopy(ctx, tp)))
	require.EqualValues(t, 14, l.HighestOffsetInRemoteStorage(), "the new leader resumes after 9")
	require.Len(t, finished(t, e.meta, tp), 3)
}

// TestBackgroundTasks: with a task interval the tasks run by themselves
// (the first run at once), and Close stops them.
func TestBackgroundTasks(t *testing.T) {
	e := newMgrEnv(t, nil)
	tp := testPartition(0)
	l := e.openLog("p0", log.Options{})
	appendSegments(t, l, 0, 2, 5)
	mgr, err := NewManager(e.meta, e.storage, ManagerOptions{TaskInterval: 5 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, mgr.OnLeadershipChange([]Partition{{TopicIDPartition: tp, Log: l}}, nil))
	require.Eventually(t, func() bool { return l.HighestOffsetInRemoteStorage() == 9 }, 10*time.Second, 5*time.Millisecond)
	appendSegments(t, l, 0, 1, 5)
	require.Eventually(t, func() bool { return l.HighestOffsetInRemoteStorage() == 14 }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, mgr.Close())
	require.NoError(t, mgr.Close(), "Close is idempotent")
	require.ErrorIs(t, mgr.OnLeadershipChange([]Partition{{TopicIDPartition: tp, Log: l}}, nil), ErrClosed)
}

// TestRecreatedLeaderKeepsRemotePrefix (after Inkless's
// testRecreatedLeaderKeepsRemotePrefixUntilRebuild in
// https://github.com/aiven/inkless/pull/857): a real empty
// log in epoch 7 leads a consolidating partition whose remote storage
// holds [0,39]{0}, [40,79]{0,2}, [80,99]{2,3} below seal 100 and
// [100,149]{5}; the cross-tier log start is 40. The expiration task, run
// at once on becoming leader, deletes only [0,39]. A classic partition
// would lose all four.
func TestRecreatedLeaderKeepsRemotePrefix(t *testing.T) {
	for _, consolidating := range []bool{true, false} {
		t.Run(map[bool]string{true: "consolidating", false: "classic"}[consolidating], func(t *testing.T) {
			e := newMgrEnv(t, nil)
			ctx := context.Background()
			tp := testPartition(0)
			e.mgr.opts.Consolidation = crossTierStart{tp: tp, consolidating: consolidating, start: 40}
			segs := []SegmentMetadata{
				e.addFinished(tp, 0, 39, []epochcache.Entry{{Epoch: 0, StartOffset: 0}}),
				e.addFinished(tp, 40, 79, []epochcache.Entry{{Epoch: 0, StartOffset: 40}, {Epoch: 2, StartOffset: 60}}),
				e.addFinished(tp, 80, 99, []epochcache.Entry{{Epoch: 2, StartOffset: 80}, {Epoch: 3, StartOffset: 90}}),
				e.addFinished(tp, 100, 149, []epochcache.Entry{{Epoch: 5, StartOffset: 100}}),
			}
			l := e.openLog("p0", log.Options{})
			require.NoError(t, l.AssignEpochStartOffset(7, 0))
			require.NoError(t, e.mgr.OnLeadershipChange([]Partition{{TopicIDPartition: tp, Log: l}}, nil))
			require.NoError(t, runErr(e.mgr.RunExpiration(ctx, tp)))
			left := finished(t, e.meta, tp)
			if consolidating {
				require.Equal(t, spans(segs[1:]), spans(left))
			} else {
				require.Empty(t, left, "upstream deletes every segment older than the cached epoch")
			}
		})
	}
}

// TestConsolidatingExpirationTakesCrossTierLogStart: the expiration task
// of a consolidating partition takes the cross-tier log start X as the
// log start, not the log's own, which a rebuild at the seal may have set
// to the seal. The leader's log starts at 100 in epoch 2 (a rebuild that
// took 100 as the leader's log start); remote storage holds [0,39]{0},
// [40,79]{0,2}, [80,99]{2} below seal 100 and [100,149]{5}. With X = 80
// the two segments below 80 go; with X unknown the log start is the first
// remote segment of the first cached epoch (Kafka's findLogStartOffset:
// [40,79], the first with epoch 2) and nothing goes ([0,39] is outside the
// lineage, and the epoch-cache cleanup waits for a known X). Taking the
// log's own start (100) would delete the whole classic prefix in both
// cases.
func TestConsolidatingExpirationTakesCrossTierLogStart(t *testing.T) {
	for _, known := range []bool{true, false} {
		t.Run(map[bool]string{true: "x=80", false: "x-unknown"}[known], func(t *testing.T) {
			e := newMgrEnv(t, nil)
			ctx := context.Background()
			tp := testPartition(0)
			e.mgr.opts.Consolidation = crossTierStart{tp: tp, consolidating: true, start: 80, unknown: !known}
			segs := []SegmentMetadata{
				e.addFinished(tp, 0, 39, []epochcache.Entry{{Epoch: 0, StartOffset: 0}}),
				e.addFinished(tp, 40, 79, []epochcache.Entry{{Epoch: 0, StartOffset: 40}, {Epoch: 2, StartOffset: 60}}),
				e.addFinished(tp, 80, 99, []epochcache.Entry{{Epoch: 2, StartOffset: 80}}),
				e.addFinished(tp, 100, 149, []epochcache.Entry{{Epoch: 5, StartOffset: 100}}),
			}
			l := e.openLog("p0", log.Options{RetentionMs: log.RetentionInfinite})
			require.NoError(t, l.TruncateFullyAndStartAt(100, 100))
			require.NoError(t, l.AssignEpochStartOffset(2, 100))
			require.NoError(t, e.mgr.OnLeadershipChange([]Partition{{TopicIDPartition: tp, Log: l}}, nil))
			res, err := e.mgr.RunExpiration(ctx, tp)
			require.NoError(t, err)
			if known {
				require.Equal(t, spans(segs[2:]), spans(finished(t, e.meta, tp)))
				require.EqualValues(t, 80, res.LogStart)
			} else {
				require.Equal(t, spans(segs), spans(finished(t, e.meta, tp)))
				require.EqualValues(t, 40, res.LogStart)
			}
		})
	}
}

type crossTierStart struct {
	tp            TopicIDPartition
	consolidating bool
	start         int64
	unknown       bool // the control plane has no cross-tier start yet
}

func (c crossTierStart) CrossTierLogStart(tp TopicIDPartition) (bool, int64, bool) {
	if tp != c.tp || !c.consolidating {
		return false, 0, false
	}
	return true, c.start, !c.unknown
}

// A consolidating leader whose epoch cache begins at the seal (epoch 5
// from 100, the classic prefix [0, 99] in remote storage in epochs 0 and
// 2) reports the first remote segment as its log start on its first copy
// run, not the first segment of its own lineage: the report becomes the
// cross-tier log start, which only advances, and 100 would let retention
// delete the whole classic prefix. A classic partition keeps Kafka's
// lineage rule.
func TestConsolidatingCopyReportsFirstRemoteSegment(t *testing.T) {
	for _, consolidating := range []bool{true, false} {
		t.Run(map[bool]string{true: "consolidating", false: "classic"}[consolidating], func(t *testing.T) {
			e := newMgrEnv(t, nil)
			tp := testPartition(0)
			e.mgr.opts.Consolidation = crossTierStart{tp: tp, consolidating: consolidating, start: 0}
			e.addFinished(tp, 0, 59, []epochcache.Entry{{Epoch: 0, StartOffset: 0}})
			e.addFinished(tp, 60, 99, []epochcache.Entry{{Epoch: 2, StartOffset: 60}})
			e.addFinished(tp, 100, 119, []epochcache.Entry{{Epoch: 5, StartOffset: 100}})
			l := e.openLog("p0", log.Options{RetentionMs: log.RetentionInfinite})
			require.NoError(t, l.TruncateFullyAndStartAt(100, 100))
			require.NoError(t, l.AssignEpochStartOffset(5, 100))
			require.NoError(t, e.mgr.OnLeadershipChange([]Partition{{TopicIDPartition: tp, Log: l}}, nil))
			res, err := e.mgr.RunCopy(context.Background(), tp)
			require.NoError(t, err)
			want := int64(100)
			if consolidating {
				want = 0
			}
			require.Equal(t, want, res.LogStartReported)
		})
	}
}
