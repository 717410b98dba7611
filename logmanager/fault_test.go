package logmanager

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/log"
)

// failingDir fails every mutating operation under one directory while
// armed.
type failingDir struct {
	prefix string
	armed  atomic.Bool
}

func (f *failingDir) inject(op errorfs.Op) error {
	if f.armed.Load() && op.Kind.ReadOrWrite() == errorfs.OpIsWrite && strings.HasPrefix(op.Path, f.prefix) {
		return errorfs.ErrInjected
	}
	return nil
}

// TestDirFailureIsolation: an I/O error in one log directory takes it
// offline with its partitions (closed, reported once, ErrLogDirOffline on
// Get and GetOrCreate, never recreated elsewhere); the other directory
// goes on, and Close writes its checkpoints (Kafka: LogDirFailureChannel,
// ReplicaManager.handleLogDirFailure).
func TestDirFailureIsolation(t *testing.T) {
	for _, how := range []string{"reported", "task"} {
		t.Run(how, func(t *testing.T) {
			mem := vfs.NewMem()
			fail := &failingDir{prefix: "/b/"}
			fs := errorfs.Wrap(mem, errorfs.InjectorFunc(fail.inject))
			var failures []DirFailure
			o := testOptions(fs, newClock(), "/a", "/b")
			o.OnDirOffline = func(f DirFailure) { failures = append(failures, f) }
			m := openT(t, o)
			l0 := getOrCreate(t, m, tpOf("t", 0), "/a")
			l1 := getOrCreate(t, m, tpOf("t", 1), "/b")
			appendN(t, l0, 2)
			appendN(t, l1, 3)
			require.NoError(t, l1.Flush())
			l1.UpdateHighWatermark(3)
			require.NoError(t, m.RunTask(TaskHighWatermarkCheckpoint))

			fail.armed.Store(true)
			switch how {
			case "reported":
				_, err := l1.AppendAsLeader(oneBatch(t), 0, log.OriginClient)
				require.ErrorIs(t, err, log.ErrIO)
				require.False(t, m.ReportError(l0, log.ErrClosed), "not an I/O error")
				require.True(t, m.ReportError(l1, err))
			case "task":
				err := m.RunTask(TaskHighWatermarkCheckpoint)
				require.ErrorIs(t, err, ErrLogDirOffline)
				require.EqualValues(t, 1, m.Metrics().Tasks[TaskHighWatermarkCheckpoint].Errors)
			}
			require.Len(t, failures, 1)
			require.Equal(t, "/b", failures[0].Dir)
			require.Equal(t, []PartitionInfo{{Partition: tpOf("t", 1), Dir: "/b", Path: "/b/t-1"}}, failures[0].Partitions)
			_, err := m.Get(tpOf("t", 1))
			require.ErrorIs(t, err, ErrLogDirOffline)
			_, err = m.GetOrCreate(tpOf("t", 1), "")
			require.ErrorIs(t, err, ErrLogDirOffline, "an offline partition is not recreated elsewhere")
			require.ErrorIs(t, l1.Flush(), log.ErrClosed, "closed by the failure")
			mt := m.Metrics()
			require.Equal(t, 1, mt.OfflineDirs)
			require.Equal(t, 1, mt.OfflinePartitions)
			require.EqualValues(t, 1, mt.DirsWentOffline)

			// The other directory goes on.
			appendN(t, l0, 1)
			l0.UpdateHighWatermark(3)
			l9 := getOrCreate(t, m, tpOf("t", 9), "")
			require.Equal(t, "/a/t-9", l9.Dir())
			require.NoError(t, m.RunTask(TaskHighWatermarkCheckpoint))
			require.NoError(t, m.RunTask(TaskFlush))
			require.NoError(t, m.Close())
			require.Equal(t, "0\n2\nt 0 3\nt 9 0\n", readString(t, mem, "/a/"+HighWatermarkCheckpointFile))
			require.Equal(t, "0\n1\nt 1 3\n", readString(t, mem, "/b/"+HighWatermarkCheckpointFile))

			// The disk comes back: everything acknowledged is there.
			m = openT(t, testOptions(mem, newClock(), "/a", "/b"))
			require.Equal(t, ""+
				"/a/t-0 future=false log-start=0 hw=3 leo=3\n"+
				"/b/t-1 future=false log-start=0 hw=3 leo=3\n"+
				"/a/t-9 future=false log-start=0 hw=0 leo=0\n", describe(m))
			require.NoError(t, m.Close())
		})
	}
}

// TestOpenLogFailure: a log that cannot be opened takes its directory
// offline at Open; the other directory opens.
func TestOpenLogFailure(t *testing.T) {
	mem := vfs.NewMem()
	makeLog(t, mem, "/a/t-0", 1)
	makeLog(t, mem, "/b/t-1", 1)
	makeLog(t, mem, "/b/t-2", 1)
	writeString(t, mem, "/b/t-2/"+PartitionMetadataFile, "version: 9\ntopic_id: x")
	var failures []DirFailure
	o := testOptions(mem, newClock(), "/a", "/b")
	o.RecoveryThreadsPerDir = 2
	o.OnDirOffline = func(f DirFailure) { failures = append(failures, f) }
	m := openT(t, o)
	require.Len(t, failures, 1)
	require.ErrorIs(t, failures[0].Cause, ErrCorruption)
	require.Equal(t, "/a/t-0 future=false log-start=0 hw=0 leo=1\n", describe(m))
	for _, p := range []int32{1, 2} {
		_, err := m.Get(tpOf("t", p))
		require.ErrorIs(t, err, ErrLogDirOffline)
	}
	require.NoError(t, m.Close())
}
