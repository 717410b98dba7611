package logmanager

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/remote"
)

// makeLog writes a closed log of n records at path.
func makeLog(t *testing.T, fs vfs.FS, path string, n int) {
	t.Helper()
	l, err := log.Open(path, log.Options{FS: fs, SegmentIndexBytes: 4096})
	require.NoError(t, err)
	appendN(t, l, n)
	require.NoError(t, l.Close())
}

const id32 = "0123456789abcdef0123456789abcdef"

// TestOpenDiscovery: Open classifies every entry of every directory
// (Kafka's LogManager.loadLogs): logs, future logs, directories of
// deletions (both namings) removed after the delay, strays left alone,
// files skipped, a missing directory created.
func TestOpenDiscovery(t *testing.T) {
	fs := vfs.NewMem()
	makeLog(t, fs, "/a/orders-0", 3)
	makeLog(t, fs, "/a/orders-1."+id32+"-future", 1)
	makeLog(t, fs, "/a/x-0."+id32+"-delete", 2)
	makeLog(t, fs, "/a/p0.17-1.deleted", 2)
	require.NoError(t, fs.MkdirAll("/a/lost+found", 0o755))
	require.NoError(t, fs.MkdirAll("/a/orders-5."+id32+"-stray", 0o755))
	writeString(t, fs, "/a/notes-0", "a file, not a directory")
	makeLog(t, fs, "/b/orders-1", 4)
	makeLog(t, fs, "/b/audit.log-2", 0)
	c := newClock()
	m := openT(t, testOptions(fs, c, "/a", "/b", "/c"))
	require.Equal(t, ""+
		"/b/audit.log-2 future=false log-start=0 hw=0 leo=0\n"+
		"/a/orders-0 future=false log-start=0 hw=0 leo=3\n"+
		"/b/orders-1 future=false log-start=0 hw=0 leo=4\n"+
		"/a/orders-1."+id32+"-future future=true log-start=0 hw=0 leo=1\n", describe(m))
	require.True(t, exists(fs, "/c"), "a missing directory is created")
	mt := m.Metrics()
	require.Equal(t, 3, mt.Logs)
	require.Equal(t, 1, mt.FutureLogs)
	require.EqualValues(t, 2, mt.StrayDirs)
	require.Equal(t, 2, mt.PendingDeletes)

	require.NoError(t, m.RunTask(TaskDeleteLogs))
	require.True(t, exists(fs, "/a/x-0."+id32+"-delete"), "removed before FileDeleteDelay")
	c.Advance(DefaultFileDeleteDelay)
	require.NoError(t, m.RunTask(TaskDeleteLogs))
	require.False(t, exists(fs, "/a/x-0."+id32+"-delete"))
	require.False(t, exists(fs, "/a/p0.17-1.deleted"))
	require.True(t, exists(fs, "/a/lost+found"), "strays are left alone")
	require.True(t, exists(fs, "/a/orders-5."+id32+"-stray"))
	require.True(t, exists(fs, "/a/notes-0"))
	require.EqualValues(t, 2, m.Metrics().DeletedDirsRemoved)
	require.NoError(t, m.Close())
}

// TestOpenDuplicate: one partition in two directories fails Open (Kafka:
// "Duplicate log directories for ... are found in both ..."), for current
// and for future logs.
func TestOpenDuplicate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		paths  []string
		future bool
	}{
		{"current", []string{"/a/t-0", "/b/t-0"}, false},
		{"future", []string{"/a/t-0." + id32 + "-future", "/b/t-0.fedcba9876543210fedcba9876543210-future"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			for _, p := range tc.paths {
				makeLog(t, fs, p, 1)
			}
			makeLog(t, fs, "/a/other-0", 1)
			_, err := Open(t.Context(), testOptions(fs, newClock(), "/a", "/b"))
			require.ErrorIs(t, err, ErrDuplicateLog)
			var de *DuplicateLogError
			require.True(t, errors.As(err, &de))
			require.Equal(t, "t", de.Topic)
			require.Equal(t, tc.future, de.Future)
			require.Equal(t, tc.paths, de.Paths)
		})
	}
}

// TestHighWatermarkCleanRestart: Close writes the three checkpoints in
// Kafka's format (byte for byte) and Open restores each high watermark.
func TestHighWatermarkCleanRestart(t *testing.T) {
	fs, c := vfs.NewMem(), newClock()
	m := openT(t, testOptions(fs, c, "/a", "/b"))
	l0 := getOrCreate(t, m, tpOf("orders", 0), "/a")
	l1 := getOrCreate(t, m, tpOf("orders", 1), "/b")
	l2 := getOrCreate(t, m, tpOf("audit", 0), "/a")
	appendN(t, l0, 5)
	appendN(t, l1, 7)
	appendN(t, l2, 2)
	l0.UpdateHighWatermark(4)
	l1.UpdateHighWatermark(7)
	l2.UpdateHighWatermark(2)
	_, err := l2.MaybeIncrementLogStartOffset(1)
	require.NoError(t, err)
	require.NoError(t, m.Close())

	require.ErrorIs(t, m.RunTask(TaskHighWatermarkCheckpoint), ErrClosed)
	require.ErrorIs(t, m.RunTask(TaskOffsetCheckpoint), ErrClosed)
	require.Equal(t, "0\n2\naudit 0 2\norders 0 4\n", readString(t, fs, "/a/"+HighWatermarkCheckpointFile))
	require.Equal(t, "0\n2\naudit 0 2\norders 0 5\n", readString(t, fs, "/a/"+RecoveryPointCheckpointFile))
	require.Equal(t, "0\n2\naudit 0 1\norders 0 0\n", readString(t, fs, "/a/"+LogStartOffsetCheckpointFile))
	require.Equal(t, "0\n1\norders 1 7\n", readString(t, fs, "/b/"+HighWatermarkCheckpointFile))
	require.Equal(t, "0\n1\norders 1 7\n", readString(t, fs, "/b/"+RecoveryPointCheckpointFile))
	require.Equal(t, "0\n1\norders 1 0\n", readString(t, fs, "/b/"+LogStartOffsetCheckpointFile))

	m = openT(t, testOptions(fs, c, "/a", "/b"))
	require.Equal(t, ""+
		"/a/audit-0 future=false log-start=1 hw=2 leo=2\n"+
		"/a/orders-0 future=false log-start=0 hw=4 leo=5\n"+
		"/b/orders-1 future=false log-start=0 hw=7 leo=7\n", describe(m))
	require.NoError(t, m.Close())
}

// TestHighWatermarkClamped: a checkpointed high watermark above the log
// end (records lost) becomes the log end, one below the log start the log
// start (Kafka: updateHighWatermark's clamp).
func TestHighWatermarkClamped(t *testing.T) {
	fs := vfs.NewMem()
	makeLog(t, fs, "/a/t-0", 5)
	makeLog(t, fs, "/a/t-1", 5)
	makeLog(t, fs, "/a/t-2", 5)
	writeString(t, fs, "/a/"+HighWatermarkCheckpointFile, "0\n3\nt 0 9\nt 1 3\nt 2 0\n")
	m := openT(t, testOptions(fs, newClock(), "/a"))
	l, err := m.Get(tpOf("t", 2))
	require.NoError(t, err)
	l.UpdateHighWatermark(5)
	_, err = l.MaybeIncrementLogStartOffset(2)
	require.NoError(t, err)
	require.NoError(t, m.Close())
	writeString(t, fs, "/a/"+HighWatermarkCheckpointFile, "0\n3\nt 0 9\nt 1 3\nt 2 0\n")
	m = openT(t, testOptions(fs, newClock(), "/a"))
	require.Equal(t, ""+
		"/a/t-0 future=false log-start=0 hw=5 leo=5\n"+
		"/a/t-1 future=false log-start=0 hw=3 leo=5\n"+
		"/a/t-2 future=false log-start=2 hw=2 leo=5\n", describe(m))
	require.NoError(t, m.Close())
}

// TestHighWatermarkAfterCrash: after a power cut, each log's high
// watermark is the last checkpointed one, clamped to what recovery kept:
// a log whose unflushed records were lost gets its recovered log end.
func TestHighWatermarkAfterCrash(t *testing.T) {
	mem, c := vfs.NewCrashableMem(), newClock()
	m := openT(t, testOptions(mem, c, "/a", "/b"))
	l0 := getOrCreate(t, m, tpOf("t", 0), "/a")
	l1 := getOrCreate(t, m, tpOf("t", 1), "/b")
	// l0: its checkpointed high watermark 5 survives; the later 8 was
	// never checkpointed.
	appendN(t, l0, 6)
	require.NoError(t, l0.Flush())
	l0.UpdateHighWatermark(5)
	// l1: the checkpoint says 6, but only 4 records were flushed.
	appendN(t, l1, 4)
	require.NoError(t, l1.Flush())
	appendN(t, l1, 2)
	l1.UpdateHighWatermark(6)
	require.NoError(t, m.RunTask(TaskHighWatermarkCheckpoint))
	appendN(t, l0, 2)
	require.NoError(t, l0.Flush())
	l0.UpdateHighWatermark(8)
	crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	require.NoError(t, m.Close())

	m2 := openT(t, testOptions(crashed, c, "/a", "/b"))
	require.Equal(t, ""+
		"/a/t-0 future=false log-start=0 hw=5 leo=8\n"+
		"/b/t-1 future=false log-start=0 hw=4 leo=4\n", describe(m2))
	require.NoError(t, m2.Close())
}

// TestHighWatermarkCheckpointDamaged: a damaged
// replication-offset-checkpoint takes its directory offline (Kafka fails
// the directory); the other directory opens.
func TestHighWatermarkCheckpointDamaged(t *testing.T) {
	fs := vfs.NewMem()
	makeLog(t, fs, "/a/t-0", 2)
	makeLog(t, fs, "/b/t-1", 3)
	writeString(t, fs, "/a/"+HighWatermarkCheckpointFile, "0\n2\nt 0 1\n")
	var failures []DirFailure
	o := testOptions(fs, newClock(), "/a", "/b")
	o.OnDirOffline = func(f DirFailure) { failures = append(failures, f) }
	m := openT(t, o)
	require.Len(t, failures, 1)
	require.Equal(t, "/a", failures[0].Dir)
	require.ErrorIs(t, failures[0].Cause, ErrCorruption)
	_, err := m.GetOrCreate(tpOf("t", 2), "/a")
	require.ErrorIs(t, err, ErrLogDirOffline)
	_, err = m.GetOrCreate(tpOf("t", 0), "")
	require.ErrorIs(t, err, ErrLogDirOffline, "a partition of the offline directory is not created elsewhere")
	l, err := m.GetOrCreate(tpOf("t", 3), "")
	require.NoError(t, err)
	require.Equal(t, "/b/t-3", l.Dir())
	require.Equal(t, "/b/t-1 future=false log-start=0 hw=0 leo=3\n/b/t-3 future=false log-start=0 hw=0 leo=0\n", describe(m))
	require.Equal(t, 1, m.Metrics().OfflineDirs)
	require.NoError(t, m.Close())
	require.Equal(t, "0\n2\nt 0 1\n", readString(t, fs, "/a/"+HighWatermarkCheckpointFile), "an offline directory's files are left")

	// Every directory offline: Open fails.
	_, err = Open(t.Context(), testOptions(fs, newClock(), "/a"))
	require.ErrorIs(t, err, ErrLogDirOffline)
}

// TestOffsetCheckpointsDamaged: a damaged recovery-point or log-start
// checkpoint is logged, counted and rewritten (Kafka falls back to 0 and
// the first segment's base; the logs' own checkpoints hold the offsets).
func TestOffsetCheckpointsDamaged(t *testing.T) {
	fs := vfs.NewMem()
	makeLog(t, fs, "/a/t-0", 2)
	writeString(t, fs, "/a/"+RecoveryPointCheckpointFile, "0\n7\n")
	writeString(t, fs, "/a/"+LogStartOffsetCheckpointFile, "garbage")
	m := openT(t, testOptions(fs, newClock(), "/a"))
	require.EqualValues(t, 2, m.Metrics().CheckpointReadErrors)
	require.Equal(t, "0\n1\nt 0 2\n", readString(t, fs, "/a/"+RecoveryPointCheckpointFile))
	require.Equal(t, "0\n1\nt 0 0\n", readString(t, fs, "/a/"+LogStartOffsetCheckpointFile))
	require.Equal(t, "/a/t-0 future=false log-start=0 hw=0 leo=2\n", describe(m))
	require.NoError(t, m.Close())
}

// TestDelete: Delete renames the directory to "-delete" (Kafka's
// asyncDelete), rewrites the checkpoints without the partition, and the
// task removes it after FileDeleteDelay; a later log of the same name
// starts empty with its own high watermark, also after a restart that
// finds the renamed directory.
func TestDelete(t *testing.T) {
	fs, c := vfs.NewMem(), newClock()
	m := openT(t, testOptions(fs, c, "/a"))
	l := getOrCreate(t, m, tpOf("t", 0), "")
	keep := getOrCreate(t, m, tpOf("t", 1), "")
	appendN(t, l, 4)
	appendN(t, keep, 1)
	l.UpdateHighWatermark(4)
	keep.UpdateHighWatermark(1)
	require.NoError(t, m.RunTask(TaskHighWatermarkCheckpoint))
	require.Equal(t, "0\n2\nt 0 4\nt 1 1\n", readString(t, fs, "/a/"+HighWatermarkCheckpointFile))

	require.NoError(t, m.Delete(tpOf("t", 0)))
	_, err := m.Get(tpOf("t", 0))
	require.ErrorIs(t, err, ErrNotFound)
	require.ErrorIs(t, m.Delete(tpOf("t", 0)), ErrNotFound)
	_, err = l.LogEndOffset(), l.Flush()
	require.ErrorIs(t, err, log.ErrClosed)
	require.Equal(t, "0\n1\nt 1 1\n", readString(t, fs, "/a/"+HighWatermarkCheckpointFile))
	names := listDir(t, fs, "/a")
	i := slices.IndexFunc(names, func(n string) bool { return len(n) == len("t-0.")+32+len(DeleteDirSuffix) })
	require.GreaterOrEqual(t, i, 0, "%v", names)
	gone := "/a/" + names[i]
	require.False(t, exists(fs, "/a/t-0"))

	// A restart before the removal: the renamed directory is not a log.
	require.NoError(t, m.Close())
	m = openT(t, testOptions(fs, c, "/a"))
	require.Equal(t, "/a/t-1 future=false log-start=0 hw=1 leo=1\n", describe(m))
	again := getOrCreate(t, m, tpOf("t", 0), "/a")
	require.Equal(t, int64(0), again.LogEndOffset())
	require.Equal(t, int64(0), again.HighWatermark())

	c.Advance(DefaultFileDeleteDelay - time.Millisecond)
	require.NoError(t, m.RunTask(TaskDeleteLogs))
	require.True(t, exists(fs, gone))
	c.Advance(time.Millisecond)
	require.NoError(t, m.RunTask(TaskDeleteLogs))
	require.False(t, exists(fs, gone))
	require.NoError(t, m.Close())
}

// TestDeleteThenRecreateAfterCrash: a log deleted and created again
// under the same name, then a power cut before any periodic checkpoint:
// the new log's high watermark is its own (0), not the deleted log's.
func TestDeleteThenRecreateAfterCrash(t *testing.T) {
	mem, c := vfs.NewCrashableMem(), newClock()
	m := openT(t, testOptions(mem, c, "/a"))
	l := getOrCreate(t, m, tpOf("t", 0), "")
	appendN(t, l, 4)
	l.UpdateHighWatermark(4)
	require.NoError(t, m.RunTask(TaskHighWatermarkCheckpoint))
	require.NoError(t, m.Delete(tpOf("t", 0)))
	l = getOrCreate(t, m, tpOf("t", 0), "")
	appendN(t, l, 6)
	require.NoError(t, l.Flush()) // six records durable, none committed
	crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	require.NoError(t, m.Close())
	m = openT(t, testOptions(crashed, c, "/a"))
	require.Equal(t, "/a/t-0 future=false log-start=0 hw=0 leo=6\n", describe(m))
	require.NoError(t, m.Close())
}

// TestTruncateBelowHighWatermarkThenCrash: a truncation below the high
// watermark (an unclean leader change) rewrites the high-watermark
// checkpoint before it returns, so records appended afterwards at the
// truncated offsets, durable but not committed, are not covered by the
// old checkpointed high watermark after a crash. Both the partial and
// the full truncation (below the first segment) are checked; a listener
// the caller set is still called.
func TestTruncateBelowHighWatermarkThenCrash(t *testing.T) {
	for _, tc := range []struct {
		name     string
		truncate func(*log.UnifiedLog) error
		logStart int64
	}{
		{"partial", func(l *log.UnifiedLog) error { _, err := l.TruncateTo(4); return err }, 0},
		{"full", func(l *log.UnifiedLog) error { return l.TruncateFullyAndStartAt(4, 4) }, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem, c := vfs.NewCrashableMem(), newClock()
			opts := testOptions(mem, c, "/a")
			var lowered []int64
			opts.Log.Listener.HighWatermarkLowered = func(hw int64) { lowered = append(lowered, hw) }
			m := openT(t, opts)
			l := getOrCreate(t, m, tpOf("t", 0), "")
			appendN(t, l, 10)
			l.UpdateHighWatermark(10)
			require.NoError(t, m.RunTask(TaskHighWatermarkCheckpoint))
			require.NoError(t, tc.truncate(l))
			require.Equal(t, []int64{4}, lowered)
			appendN(t, l, 3)
			require.NoError(t, l.Flush()) // [4, 7) durable, not committed
			crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
			require.NoError(t, m.Close())
			m = openT(t, testOptions(crashed, c, "/a"))
			require.Equal(t, fmt.Sprintf("/a/t-0 future=false log-start=%d hw=4 leo=7\n", tc.logStart), describe(m))
			require.NoError(t, m.Close())
		})
	}
}

// TestTopicID: the topic id is stored in partition.metadata in Kafka's
// format, survives a restart, and a different one is refused.
func TestTopicID(t *testing.T) {
	fs, c := vfs.NewMem(), newClock()
	id, other := remote.UUID{7}, remote.UUID{8}
	tp := remote.TopicIDPartition{TopicID: id, Topic: "t", Partition: 0}
	m := openT(t, testOptions(fs, c, "/a"))
	getOrCreate(t, m, tp, "")
	require.Equal(t, "version: 0\ntopic_id: "+id.String(), readString(t, fs, "/a/t-0/"+PartitionMetadataFile))
	// No id yet: the first one given is stored.
	getOrCreate(t, m, tpOf("u", 0), "")
	require.False(t, exists(fs, "/a/u-0/"+PartitionMetadataFile))
	getOrCreate(t, m, remote.TopicIDPartition{TopicID: other, Topic: "u", Partition: 0}, "")
	require.Equal(t, "version: 0\ntopic_id: "+other.String(), readString(t, fs, "/a/u-0/"+PartitionMetadataFile))
	require.NoError(t, m.Close())

	m = openT(t, testOptions(fs, c, "/a"))
	_, err := m.Get(remote.TopicIDPartition{TopicID: other, Topic: "t", Partition: 0})
	require.ErrorIs(t, err, ErrInconsistentTopicID)
	_, err = m.GetOrCreate(remote.TopicIDPartition{TopicID: other, Topic: "t", Partition: 0}, "")
	require.ErrorIs(t, err, ErrInconsistentTopicID)
	_, err = m.Get(tp)
	require.NoError(t, err)
	_, err = m.Get(tpOf("t", 0)) // no id: any
	require.NoError(t, err)
	require.Equal(t, []PartitionInfo{{Partition: tp, Dir: "/a", Path: "/a/t-0"},
		{Partition: remote.TopicIDPartition{TopicID: other, Topic: "u"}, Dir: "/a", Path: "/a/u-0"}}, m.Partitions())
	_, err = m.GetOrCreate(tpOf("bad/name", 0), "")
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.NoError(t, m.Close())
}

// TestFutureLog: a directory move's future log is created in the other
// directory, promoted with the current log's high watermark (Kafka's
// replaceCurrentWithFutureLog), the old directory renamed for deletion,
// and the partition found in its new directory after a restart.
func TestFutureLog(t *testing.T) {
	fs, c := vfs.NewMem(), newClock()
	m := openT(t, testOptions(fs, c, "/a", "/b"))
	tp := remote.TopicIDPartition{TopicID: remote.UUID{3}, Topic: "t", Partition: 0}
	cur := getOrCreate(t, m, tp, "/a")
	appendN(t, cur, 3)
	cur.UpdateHighWatermark(2)
	_, err := m.CreateFuture(tp, "/a")
	require.ErrorIs(t, err, ErrInvalidArgument, "same directory")
	fut, err := m.CreateFuture(tp, "/b")
	require.NoError(t, err)
	again, err := m.CreateFuture(tp, "/b")
	require.NoError(t, err)
	require.Same(t, fut, again)
	require.Contains(t, fut.Dir(), FutureDirSuffix)
	require.Equal(t, "version: 0\ntopic_id: "+tp.TopicID.String(), readString(t, fs, fut.Dir()+"/"+PartitionMetadataFile))
	appendN(t, fut, 3) // the move fetcher's copy

	promoted, err := m.PromoteFuture(tp)
	require.NoError(t, err)
	require.Equal(t, "/b/t-0", promoted.Dir())
	require.Equal(t, int64(2), promoted.HighWatermark())
	require.Equal(t, int64(3), promoted.LogEndOffset())
	got, err := m.Get(tp)
	require.NoError(t, err)
	require.Same(t, promoted, got)
	_, err = m.GetFuture(tp)
	require.ErrorIs(t, err, ErrNotFound)
	require.False(t, exists(fs, "/a/t-0"))
	require.Equal(t, "0\n0\n", readString(t, fs, "/a/"+HighWatermarkCheckpointFile))
	require.Equal(t, "0\n1\nt 0 2\n", readString(t, fs, "/b/"+HighWatermarkCheckpointFile))
	require.Equal(t, 1, m.Metrics().PendingDeletes)

	// A cancelled move: DeleteFuture.
	_, err = m.CreateFuture(tp, "/a")
	require.NoError(t, err)
	require.NoError(t, m.DeleteFuture(tp))
	require.NoError(t, m.DeleteFuture(tp), "idempotent")
	require.NoError(t, m.Close())

	m = openT(t, testOptions(fs, c, "/a", "/b"))
	require.Equal(t, "/b/t-0 future=false log-start=0 hw=2 leo=3\n", describe(m))
	require.Equal(t, 2, m.Metrics().PendingDeletes)
	require.NoError(t, m.Close())
}

// TestDeleteWithFuture: Delete removes the future log too.
func TestDeleteWithFuture(t *testing.T) {
	fs, c := vfs.NewMem(), newClock()
	m := openT(t, testOptions(fs, c, "/a", "/b"))
	getOrCreate(t, m, tpOf("t", 0), "/a")
	_, err := m.CreateFuture(tpOf("t", 0), "/b")
	require.NoError(t, err)
	require.NoError(t, m.Delete(tpOf("t", 0)))
	require.Empty(t, m.Partitions())
	require.Equal(t, 2, m.Metrics().PendingDeletes)
	require.NoError(t, m.Close())
	m = openT(t, testOptions(fs, c, "/a", "/b"))
	require.Empty(t, m.Partitions())
	require.NoError(t, m.Close())
}

// TestGetOrCreateSpreadsLogs: without a directory, a new log goes to the
// online directory holding the fewest logs, future logs counted (Kafka's
// nextLogDirs); an existing log is returned wherever it is.
func TestGetOrCreateSpreadsLogs(t *testing.T) {
	fs, c := vfs.NewMem(), newClock()
	m := openT(t, testOptions(fs, c, "/a", "/b", "/c"))
	var dirs []string
	for p := range int32(5) {
		dirs = append(dirs, getOrCreate(t, m, tpOf("t", p), "").Dir())
	}
	require.Equal(t, []string{"/a/t-0", "/b/t-1", "/c/t-2", "/a/t-3", "/b/t-4"}, dirs)
	_, err := m.CreateFuture(tpOf("t", 0), "/c")
	require.NoError(t, err)
	require.Equal(t, "/a/t-5", getOrCreate(t, m, tpOf("t", 5), "").Dir())
	require.Equal(t, "/b/t-1", getOrCreate(t, m, tpOf("t", 1), "/c").Dir())
	_, err = m.GetOrCreate(tpOf("t", 6), "/elsewhere")
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.NoError(t, m.Close())
}

// TestSerialOperationOrder: with Options.Serial, Open and Close reach the
// file system in the same order in every run (the directories one after
// another, in Dirs order), so a harness that crashes at the N-th file
// operation cuts the same operation every time.
func TestSerialOperationOrder(t *testing.T) {
	run := func() []string {
		mem := vfs.NewMem()
		for _, d := range []string{"/a", "/b"} {
			for p := range 3 {
				makeLog(t, mem, fmt.Sprintf("%s/orders%s-%d", d, d[1:], p), 2)
			}
		}
		var mu sync.Mutex
		var ops []string
		fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
			mu.Lock()
			defer mu.Unlock()
			ops = append(ops, fmt.Sprintf("%v %s", op.Kind, op.Path))
			return nil
		}))
		o := testOptions(fs, newClock(), "/a", "/b", "/c")
		o.Serial = true
		m := openT(t, o)
		require.NoError(t, m.Close())
		mu.Lock()
		defer mu.Unlock()
		return ops
	}
	first := run()
	// The scan reaches /b only after /a, and /c (created) after /b.
	in := func(dir string) func(string) bool {
		return func(s string) bool { return strings.HasSuffix(s, " "+dir) || strings.Contains(s, " "+dir+"/") }
	}
	b, c := slices.IndexFunc(first, in("/b")), slices.IndexFunc(first, in("/c"))
	require.Positive(t, b)
	require.Greater(t, c, b)
	require.False(t, slices.ContainsFunc(first[b:c], in("/a")), "an operation of /a between /b's and /c's:\n%s",
		strings.Join(first, "\n"))
	for range 5 {
		require.Equal(t, first, run())
	}
}
