package logmanager

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/log"
)

// TestBackgroundTasks runs the tasks Open starts on synctest's clock:
// each at its Kafka default interval, stopped by Close.
func TestBackgroundTasks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := vfs.NewMem()
		m, err := Open(t.Context(), Options{Dirs: []string{"/a"}, FS: fs,
			Log: log.Options{SegmentIndexBytes: 4096, FlushMs: 1000}})
		require.NoError(t, err)
		l := getOrCreate(t, m, tpOf("t", 0), "")
		appendN(t, l, 3)
		l.UpdateHighWatermark(3)
		require.Equal(t, int64(0), l.Metrics().RecoveryPoint)

		time.Sleep(DefaultHighWatermarkCheckpointInterval + time.Millisecond)
		synctest.Wait()
		require.Equal(t, "0\n1\nt 0 3\n", readString(t, fs, "/a/"+HighWatermarkCheckpointFile))
		require.Equal(t, int64(3), l.Metrics().RecoveryPoint, "flushed by the flush task (FlushMs)")
		mt := m.Metrics()
		require.EqualValues(t, 1, mt.Tasks[TaskHighWatermarkCheckpoint].Runs)
		require.EqualValues(t, 5, mt.Tasks[TaskFlush].Runs)
		require.False(t, exists(fs, "/a/"+RecoveryPointCheckpointFile))

		require.NoError(t, m.Delete(tpOf("t", 0)))
		require.Equal(t, 1, m.Metrics().PendingDeletes)
		time.Sleep(DefaultFileDeleteDelay + time.Second)
		synctest.Wait()
		mt = m.Metrics()
		require.Equal(t, 0, mt.PendingDeletes)
		require.EqualValues(t, 1, mt.DeletedDirsRemoved)
		require.Equal(t, "0\n0\n", readString(t, fs, "/a/"+RecoveryPointCheckpointFile))

		time.Sleep(DefaultProducerIDExpirationCheckInterval - DefaultFileDeleteDelay - time.Second - DefaultHighWatermarkCheckpointInterval)
		synctest.Wait()
		mt = m.Metrics()
		require.EqualValues(t, 2, mt.Tasks[TaskRetention].Runs)
		require.EqualValues(t, 1, mt.Tasks[TaskProducerExpiration].Runs)
		require.EqualValues(t, 10, mt.Tasks[TaskOffsetCheckpoint].Runs)
		for task := range numTasks {
			require.Zero(t, mt.Tasks[task].Errors, "%s", task)
		}
		require.NoError(t, m.Close())
		runs := m.Metrics().Tasks
		time.Sleep(time.Hour)
		synctest.Wait()
		require.Equal(t, runs, m.Metrics().Tasks, "stopped by Close")
	})
}
