package tierstate

import (
	"context"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/remote/objstore/mem"
)

func openReplicaLog(t *testing.T, fs vfs.FS, dir string) *log.UnifiedLog {
	t.Helper()
	l, err := log.Open(dir, log.Options{FS: fs, RemoteStorageEnabled: true, SegmentIndexBytes: 4096,
		Now: func() time.Time { return time.UnixMilli(testNowMs) }})
	require.NoError(t, err)
	return l
}

func appendLeader(t *testing.T, l *log.UnifiedLog, epoch int32, n int) {
	t.Helper()
	_, err := l.AppendAsLeader(producerBatch(t, n, base.NoProducerID, 0), epoch, log.OriginClient)
	require.NoError(t, err)
}

func appendFollower(t *testing.T, l *log.UnifiedLog, epoch int32, n int) {
	t.Helper()
	_, err := l.AppendAsFollower(testBatch(t, n, l.LogEndOffset(), epoch), epoch)
	require.NoError(t, err)
}

// TestHasConsolidatedDisklessSuffixFromSeal: Inkless's
// ReplicaManager.hasConsolidatedDisklessSuffixFromSeal rule on a real log.
func TestHasConsolidatedDisklessSuffixFromSeal(t *testing.T) {
	s := phaseTwoState(t, 100, 2, 4) // E_d = 5
	l := openReplicaLog(t, vfs.NewMem(), "p0")
	defer l.Close()
	appendLeader(t, l, 0, 80)
	appendLeader(t, l, 2, 20)
	require.False(t, HasConsolidatedDisklessSuffixFromSeal(s, l), "nothing past the seal")
	appendFollower(t, l, 5, 30)
	require.True(t, HasConsolidatedDisklessSuffixFromSeal(s, l))
	require.False(t, HasConsolidatedDisklessSuffixFromSeal(s.WithConsolidating(false), l), "not consolidating")

	// makeLeader's entry at the log end has no record: it does not count.
	require.NoError(t, l.AssignEpochStartOffset(7, l.LogEndOffset()))
	require.Equal(t, "0@0 2@80 5@100 7@130", epochcache.FormatEntries(l.EpochEntries()))
	require.True(t, HasConsolidatedDisklessSuffixFromSeal(s, l))
	// A record in another epoch past the seal fails it.
	appendFollower(t, l, 7, 1)
	require.False(t, HasConsolidatedDisklessSuffixFromSeal(s, l))
	require.NoError(t, l.TruncateFullyAndStartAt(0, -1))

	// A known limitation (https://github.com/aiven/inkless/pull/857,
	// "Limitations"): consolidation appending E_d batches after
	// makeLeader's later entry replaces both that entry and E_d's own start
	// (the cache's assign rule), mapping the consolidated records to the
	// classic epoch. The check then recreates the replica on the next
	// leader epoch, which costs a rebuild.
	appendLeader(t, l, 0, 80)
	appendLeader(t, l, 2, 20)
	appendFollower(t, l, 5, 30)
	require.NoError(t, l.AssignEpochStartOffset(7, l.LogEndOffset()))
	appendFollower(t, l, 5, 10)
	require.Equal(t, "0@0 2@80 5@130", epochcache.FormatEntries(l.EpochEntries()))
	require.False(t, HasConsolidatedDisklessSuffixFromSeal(s, l))
	require.Equal(t, "recreate: suffix-past-seal (log end 140 past the seal 100: record at 100 in epoch 2, not the diskless epoch 5)",
		CheckReplica(s, l, nil).String())

	// A local log that starts past the seal is checked from its start.
	l2 := openReplicaLog(t, vfs.NewMem(), "p1")
	defer l2.Close()
	require.NoError(t, l2.TruncateFullyAndStartAt(120, 0))
	appendFollower(t, l2, 5, 10)
	require.Equal(t, int64(120), l2.LocalLogStartOffset())
	require.True(t, HasConsolidatedDisklessSuffixFromSeal(s, l2))

	// No diskless epoch (a phase-1 partition): never.
	p1, err := State{}.WithConsolidating(true).ArmSwitch()
	require.NoError(t, err)
	p1, err = p1.CommitSeal(100, nil)
	require.NoError(t, err)
	require.False(t, HasConsolidatedDisklessSuffixFromSeal(p1, l2))
	require.Equal(t, "not checked: phase-1, not phase 2", CheckReplica(p1, l2, nil).String())
}

// TestCheckReplicaBelowSeal: a log ending below the seal compares the epoch
// of its last record (a matching replica may be recreated; it costs a
// rebuild only, a limitation https://github.com/aiven/inkless/pull/857
// accepts).
func TestCheckReplicaBelowSeal(t *testing.T) {
	s := phaseTwoState(t, 100, 2, 4)
	l := openReplicaLog(t, vfs.NewMem(), "p0")
	defer l.Close()
	appendLeader(t, l, 0, 80)
	appendLeader(t, l, 2, 10)
	require.Equal(t, "keep", CheckReplica(s, l, nil).String(), "last record 89 in epoch 2")
	require.NoError(t, l.TruncateFullyAndStartAt(0, -1))
	appendLeader(t, l, 0, 70)
	require.Equal(t, "recreate: epoch-at-seal (epoch at 69 is 0, recorded epoch 2)", CheckReplica(s, l, nil).String())
}

// TestCheckReplicaEmptyPrefix: without a recorded epoch the classic
// prefix [X, S) is empty (DeleteRecords moved the log start X to the
// seal), so a replica holding any record below the seal holds records
// the partition deleted or never committed (one that crashed with an
// uncommitted tail before the deletion): it is recreated. A replica that
// took the log start, and one whose log starts at the seal, are kept.
func TestCheckReplicaEmptyPrefix(t *testing.T) {
	s := phaseTwoState(t, 10, base.UndefinedEpoch, 2)
	stale := openReplicaLog(t, vfs.NewMem(), "stale")
	defer stale.Close()
	appendLeader(t, stale, 0, 4)
	require.Equal(t, "recreate: epoch-at-seal (epoch at 3 is 0, and the classic prefix is empty (no recorded epoch))",
		CheckReplica(s, stale, nil).String())

	deleted := openReplicaLog(t, vfs.NewMem(), "deleted")
	defer deleted.Close()
	appendLeader(t, deleted, 1, 10)
	require.Equal(t, "recreate: epoch-at-seal (epoch at 9 is 1, and the classic prefix is empty (no recorded epoch))",
		CheckReplica(s, deleted, nil).String())
	deleted.UpdateHighWatermark(10)
	_, err := deleted.MaybeIncrementLogStartOffset(10)
	require.NoError(t, err)
	require.Equal(t, "keep", CheckReplica(s, deleted, nil).String(), "log start raised to the seal")

	empty := openReplicaLog(t, vfs.NewMem(), "empty")
	defer empty.Close()
	require.Equal(t, "keep", CheckReplica(s, empty, nil).String())
}

// TestRecreateWithTheRemoteManager: the real remote.Manager cancels the
// partition's tasks and keeps it registered, so the rebuild can read its
// metadata; both logs are deleted; a partition the manager does not know
// has no task to cancel.
func TestRecreateWithTheRemoteManager(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	meta, err := remote.Open(fs, "meta", remote.MetadataOptions{})
	require.NoError(t, err)
	defer meta.Close()
	storage, err := remote.NewStorageManager(mem.New(mem.Options{}), remote.StorageOptions{})
	require.NoError(t, err)
	mgr, err := remote.NewManager(meta, storage, remote.ManagerOptions{TaskInterval: -1})
	require.NoError(t, err)
	defer mgr.Close()

	current, future := openReplicaLog(t, fs, "current"), openReplicaLog(t, fs, "future")
	appendLeader(t, current, 1, 100)
	require.NoError(t, mgr.OnLeadershipChange([]remote.Partition{{TopicIDPartition: testTP, Log: current}}, nil))
	require.True(t, mgr.IsPartitionReady(testTP))

	var seen []RecreateResult
	deps := RecreateDeps{Partition: testTP, Fetchers: &fakeFetchers{}, RemoteTasks: mgr,
		DeleteCurrentLog: current.Delete, DeleteFutureLog: future.Delete,
		OnRecreate: func(r RecreateResult) { seen = append(seen, r) }}
	dec, res := CheckAndRecreate(ctx, phaseTwoState(t, 100, 2, 4), current, future, deps)
	require.True(t, dec.Recreate)
	require.Equal(t, Recreated, res.Outcome, "%v", res)
	require.NoError(t, res.Err)
	require.True(t, mgr.IsPartitionReady(testTP), "the remote metadata is kept")
	for _, dir := range []string{"current", "future"} {
		_, err := fs.Stat(dir)
		require.Error(t, err, "%s deleted", dir)
	}
	require.Equal(t, []RecreateResult{res}, seen)

	// Recreate without the check, for a partition the manager does not
	// know: nothing to cancel, still recreated.
	other := remote.TopicIDPartition{TopicID: remote.UUID{2}, Topic: "u", Partition: 3}
	l := openReplicaLog(t, fs, "other")
	res = Recreate(ctx, RecreateDeps{Partition: other, Fetchers: &fakeFetchers{}, RemoteTasks: mgr, DeleteCurrentLog: l.Delete})
	require.Equal(t, Recreated, res.Outcome, "%v", res)
	require.True(t, res.TasksCancelled)

	// Missing dependencies are a caller bug: offline, nothing touched.
	res = Recreate(ctx, RecreateDeps{Partition: other})
	require.Equal(t, RecreateOffline, res.Outcome)
	require.ErrorIs(t, res.Err, ErrInvalidArgument)
}

// TestShouldCheckReplica: when applyDelta runs the check.
func TestShouldCheckReplica(t *testing.T) {
	p2 := phaseTwoState(t, 100, 2, 4)
	for _, tc := range []struct {
		s    State
		d    ReplicaDelta
		want bool
	}{
		{p2, ReplicaDelta{NewToBroker: true}, true},
		{p2, ReplicaDelta{PreviousLeaderEpoch: 4, LeaderEpoch: 5}, true},
		{p2, ReplicaDelta{PreviousLeaderEpoch: 5, LeaderEpoch: 5}, false}, // ISR-only change
		{p2, ReplicaDelta{NewToBroker: true, Offline: true}, false},
		{p2.WithConsolidating(false), ReplicaDelta{NewToBroker: true}, false},
		{phaseTwoState(t, 100, base.UndefinedEpoch, 4), ReplicaDelta{NewToBroker: true}, true}, // an empty prefix
		{State{}.WithConsolidating(true), ReplicaDelta{NewToBroker: true}, false},
	} {
		got, why := ShouldCheckReplica(tc.s, tc.d)
		require.Equal(t, tc.want, got, "%s %+v: %s", tc.s, tc.d, why)
	}
}

// TestCheckReplicaNilFutureLog: a nil *log.UnifiedLog passed as the future
// log (a typed nil inside the interface) means no future log, as a nil
// interface does, instead of panicking on its first method call.
func TestCheckReplicaNilFutureLog(t *testing.T) {
	s := phaseTwoState(t, 100, 2, 4)
	l := openReplicaLog(t, vfs.NewMem(), "p0")
	defer l.Close()
	appendLeader(t, l, 0, 80)
	appendLeader(t, l, 2, 10)
	var future *log.UnifiedLog
	require.Equal(t, "keep", CheckReplica(s, l, future).String())
	require.Equal(t, CheckReplica(s, l, nil), CheckReplica(s, l, future))
}

// TestCheckAndRecreateNilFutureLog: the same through CheckAndRecreate,
// which stops the fetchers and then keeps the log.
func TestCheckAndRecreateNilFutureLog(t *testing.T) {
	s := phaseTwoState(t, 100, 2, 4)
	l := openReplicaLog(t, vfs.NewMem(), "p0")
	defer l.Close()
	appendLeader(t, l, 0, 80)
	appendLeader(t, l, 2, 10)
	var future *log.UnifiedLog
	deps := RecreateDeps{Partition: testTP, Fetchers: &fakeFetchers{}, RemoteTasks: &fakeTasks{},
		DeleteCurrentLog: l.Delete}
	dec, res := CheckAndRecreate(context.Background(), s, l, future, deps)
	require.Equal(t, "keep", dec.String())
	require.Equal(t, RecreateNotRun, res.Outcome, "%v", res)
	require.True(t, res.FetchersStopped)
}
