package replica

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/remote/objstore/mem"
	"github.com/tierlog/tierlog/tierstate"
)

// newRemoteEnv is an env whose remote log manager is a real
// *remote.Manager (tasks run by hand) on the env's mem FS.
func newRemoteEnv(t *testing.T, withLog bool) (*env, *remote.Manager) {
	e := newEnv(t, withLog)
	meta, err := remote.Open(e.fs, "remote-metadata", remote.MetadataOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = meta.Close() })
	storage, err := remote.NewStorageManager(mem.New(mem.Options{}), remote.StorageOptions{})
	require.NoError(t, err)
	mgr, err := remote.NewManager(meta, storage, remote.ManagerOptions{BrokerID: 1, TaskInterval: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = mgr.Close() })
	e.r.opts.Remote = mgr
	return e, mgr
}

// The fenced phase-1 leader of github.com/aiven/inkless/pull/855 is
// registered with a real remote log manager as a follower: it is known
// (the describe RPC can read its remote coverage) and runs no copy task.
func TestFencedLeaderRegistersAsFollower(t *testing.T) {
	e, mgr := newRemoteEnv(t, false)
	s, err := tierstate.FromPartitionRecord(tierstate.Tags{ClassicToDisklessStartOffset: tierstate.Some[int64](1000),
		DisklessLeaderEpoch: tierstate.Some[int32](3)})
	require.NoError(t, err)
	_, err = e.r.Apply(context.Background(), Delta{Leader: true, LeaderEpoch: 4, InIsr: true, State: s.WithConsolidating(true)})
	require.NoError(t, err)
	require.True(t, e.r.Prior().Fenced)
	require.True(t, mgr.IsPartitionReady(testTP))
	_, err = mgr.RunCopy(context.Background(), testTP)
	require.Error(t, err, "a fenced leader runs no copy task")
}

// The recreate of github.com/aiven/inkless/pull/857 against a real remote
// log manager: the tasks are stopped with the metadata kept, and the new
// empty log is registered as leader.
func TestRecreateWithRemoteManager(t *testing.T) {
	e, mgr := newRemoteEnv(t, true)
	bLog(t, e)
	old := e.r.Log()
	_, err := e.r.Apply(context.Background(), Delta{Leader: true, LeaderEpoch: 5, InIsr: true, State: phaseTwoState(t)})
	require.NoError(t, err)
	require.NotSame(t, old, e.r.Log())
	require.Equal(t, int64(0), e.r.Log().LogEndOffset())
	require.True(t, mgr.IsPartitionReady(testTP))
	_, err = mgr.RunCopy(context.Background(), testTP)
	require.NoError(t, err)
}
