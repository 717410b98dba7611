package replica

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

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
