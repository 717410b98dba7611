package replica

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/logmanager"
)

// TestManagedLogs: the driver's LogManager over a logmanager.Manager
// creates the partition's log in a log directory, deletes it through the
// manager (renamed for deletion, forgotten) and deletes a future log.
func TestManagedLogs(t *testing.T) {
	fs := vfs.NewMem()
	m, err := logmanager.Open(t.Context(), logmanager.Options{Dirs: []string{"/a", "/b"}, FS: fs, NoBackgroundTasks: true})
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Close()) }()
	logs := ManagedLogs(m)
	l, err := logs.CreateLog(t.Context(), testTP)
	require.NoError(t, err)
	require.Equal(t, int64(0), l.LogEndOffset())
	got, err := m.Get(testTP)
	require.NoError(t, err)
	require.Equal(t, l, Log(got))
	_, err = m.CreateFuture(testTP, "/b")
	require.NoError(t, err)
	require.NoError(t, logs.DeleteFutureLog(t.Context(), testTP))
	_, err = m.GetFuture(testTP)
	require.ErrorIs(t, err, logmanager.ErrNotFound)
	require.NoError(t, logs.DeleteLog(t.Context(), testTP, l))
	_, err = m.Get(testTP)
	require.ErrorIs(t, err, logmanager.ErrNotFound)
	require.Empty(t, m.Partitions())
}

// TestManagedLogsPromotion: ReplaceCurrentWithFutureLog keeps the future
// log's value as the current log (the driver goes on using it), refuses
// logs that are not the manager's, and the promoted log is found in its
// new directory after the manager reopens.
func TestManagedLogsPromotion(t *testing.T) {
	fs := vfs.NewMem()
	o := logmanager.Options{Dirs: []string{"/a", "/b"}, FS: fs, NoBackgroundTasks: true}
	m, err := logmanager.Open(t.Context(), o)
	require.NoError(t, err)
	logs := ManagedLogs(m)
	cur, err := logs.CreateLog(t.Context(), testTP)
	require.NoError(t, err)
	_, err = cur.(*log.UnifiedLog).AppendAsLeader(batch(t, 3), 0, log.OriginClient)
	require.NoError(t, err)
	require.Equal(t, int64(2), cur.(*log.UnifiedLog).UpdateHighWatermark(2))
	fut, err := m.CreateFuture(testTP, "/b")
	require.NoError(t, err)
	fd, err := cur.(*log.UnifiedLog).Read(nil, 0, 1<<20, log.IsolationLogEnd, true)
	require.NoError(t, err)
	_, err = fut.AppendAsFollower(fd.Records, 0)
	require.NoError(t, err)

	require.ErrorIs(t, logs.ReplaceCurrentWithFutureLog(t.Context(), testTP, fut, cur), ErrInvalidArgument)
	require.NoError(t, logs.ReplaceCurrentWithFutureLog(t.Context(), testTP, cur, fut))
	got, err := m.Get(testTP)
	require.NoError(t, err)
	require.Same(t, fut, got)
	require.Equal(t, int64(2), fut.HighWatermark())
	_, err = fut.AppendAsLeader(batch(t, 1), 1, log.OriginClient)
	require.NoError(t, err)
	require.ErrorIs(t, logs.ReplaceCurrentWithFutureLog(t.Context(), testTP, fut, fut), logmanager.ErrNotFound)
	require.NoError(t, m.Close())

	m, err = logmanager.Open(t.Context(), o)
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Close()) }()
	l, err := m.Get(testTP)
	require.NoError(t, err)
	require.Equal(t, "/b/t-0", l.Dir())
	require.Equal(t, int64(4), l.LogEndOffset())
}

// TestManagedLogsOfflineFuture: a future log whose directory failed is
// not deleted by DeleteFutureLog (the driver forgot it; its files stay
// with the directory), while the current log is deleted as usual.
func TestManagedLogsOfflineFuture(t *testing.T) {
	fs := vfs.NewMem()
	m, err := logmanager.Open(t.Context(), logmanager.Options{Dirs: []string{"/a", "/b", "/c"}, FS: fs, NoBackgroundTasks: true})
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Close()) }()
	logs := ManagedLogs(m)
	cur, err := logs.CreateLog(t.Context(), testTP)
	require.NoError(t, err)
	fut, err := m.CreateFuture(testTP, "/b")
	require.NoError(t, err)
	require.True(t, m.ReportError(fut, fmt.Errorf("disk: %w", log.ErrIO)))
	_, err = m.GetFuture(testTP)
	require.ErrorIs(t, err, logmanager.ErrLogDirOffline)
	require.NoError(t, logs.DeleteFutureLog(t.Context(), testTP))
	_, err = fs.Stat(fut.Dir())
	require.NoError(t, err, "the offline directory's files are left alone")
	require.NoError(t, logs.DeleteLog(t.Context(), testTP, cur))
	_, err = m.Get(testTP)
	require.ErrorIs(t, err, logmanager.ErrNotFound)
}
