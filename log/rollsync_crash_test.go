package log

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"
	"github.com/tierlog/tierlog/internal/atomicfile"
)

// TestRollSyncOrderCrash: under flush.messages unlimited (FlushMessages
// 0, no background flush) a producer's batches fill a segment, appends
// roll past it (once or twice), and then an operation that fsyncs the
// partition directory runs. Before every file operation of that
// operation the file system crashes keeping no unsynced data, and each
// crash image must reopen to a log without a hole: every offset from the
// log start to the log end readable, and the producer state that of a
// replay of the log (checkProducerState).
//
// The directory fsync makes the rolled-to segment's entry durable; unless
// the rolled segment's data was synced first (syncRolled, Flush's order)
// the image held the new segment beside an empty old one, and recovery
// ended the log at the new base with the offsets below it lost, and a
// producer snapshot there vouching for batches that were gone.
func TestRollSyncOrderCrash(t *testing.T) {
	ops := []struct {
		name      string
		do        func(l *UnifiedLog) error
		retention bool // RetentionBytes deletes the first segment
	}{
		{"roll", func(l *UnifiedLog) error { return l.Roll() }, false},
		{"flush", func(l *UnifiedLog) error { return l.Flush() }, false},
		{"epoch", func(l *UnifiedLog) error { return l.AssignEpochStartOffset(1, l.LogEndOffset()) }, false},
		{"retention", func(l *UnifiedLog) error {
			l.UpdateHighWatermark(l.LogEndOffset())
			_, err := l.DeleteOldSegments()
			return err
		}, true},
		{"log-start", func(l *UnifiedLog) error {
			l.UpdateHighWatermark(l.LogEndOffset())
			_, err := l.MaybeIncrementLogStartOffset(1)
			return err
		}, false},
		{"truncate", func(l *UnifiedLog) error { _, err := l.TruncateTo(l.LogEndOffset() - 1); return err }, false},
		{"close", func(l *UnifiedLog) error { return l.Close() }, false},
	}
	for _, op := range ops {
		for _, rolls := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s/rolls=%d", op.name, rolls), func(t *testing.T) {
				testRollSyncOrderCrash(t, rolls, op.retention, op.do)
			})
		}
	}
}

func testRollSyncOrderCrash(t *testing.T, rolls int, retention bool, op func(l *UnifiedLog) error) {
	mem := vfs.NewCrashableMem()
	require.NoError(t, mem.MkdirAll(testDir, 0o755))
	for _, d := range []string{"", testDir} {
		require.NoError(t, atomicfile.SyncDir(mem, d))
	}
	var clones []*vfs.MemFS
	armed := false
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(o errorfs.Op) error {
		if armed && o.Kind.ReadOrWrite() == errorfs.OpIsWrite {
			clones = append(clones, mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0}))
		}
		return nil
	}))
	// Five one-record batches of about 100 bytes fill a segment.
	opts := Options{SegmentBytes: 512, RecoveryPointIntervalBytes: -1}
	if retention {
		opts.RetentionBytes = 512 * int64(rolls)
	}
	l := openTestLog(t, fs, opts)
	// A flush before the workload: the epoch checkpoint and the first
	// segment durable, the recovery point at 0.
	require.NoError(t, l.Flush())
	const pid = 7
	seq := int32(0)
	for len(l.acquireViewForTest(t).segments) <= rolls {
		_, err := l.AppendAsLeader(idempotentBatch(t, pid, 0, seq, 1, restartNowMs), 0, OriginClient)
		require.NoError(t, err)
		seq++
	}
	// One more batch into the active segment, so that a truncation has a
	// batch to cut.
	_, err := l.AppendAsLeader(idempotentBatch(t, pid, 0, seq, 1, restartNowMs), 0, OriginClient)
	require.NoError(t, err)
	leo := l.LogEndOffset()

	armed = true
	require.NoError(t, op(l))
	armed = false
	// And after its last operation (a directory fsync, often).
	clones = append(clones, mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0}))
	_ = l.Close()

	for i, clone := range clones {
		o := opts
		o.FS = clone
		r := openTestLog(t, clone, o)
		s, err := readLogState(r)
		require.NoError(t, err, "crash point %d: %s", i, s)
		require.LessOrEqual(t, s.leo, leo)
		next := s.logStart
		for _, b := range s.batches {
			require.LessOrEqual(t, b.base, next, "crash point %d: offsets [%d, %d) lost below the log end %d: %s",
				i, next, b.base, s.leo, s)
			next = b.next
		}
		require.GreaterOrEqual(t, next, s.leo, "crash point %d: offsets [%d, %d) lost below the log end: %s", i, next, s.leo, s)
		require.NoError(t, checkProducerState(r, s), "crash point %d: %s", i, s)
		require.NoError(t, r.Close())
	}
}

// TestLogStartRaiseToLogEndCrash: under flush.messages unlimited a
// producer appends, and the log start rises to the log end
// (DeleteRecords), which is durable when the call returns. A crash
// keeping no unsynced data must not reopen a log that ends below that log
// start: Open would empty it there and forget the producer, whose state
// the raise keeps in memory, so a retry of its batch would be appended
// again. The records below the new log start are synced before its
// checkpoint (syncBelow), so the reopened log still knows the producer
// and answers the retry as a duplicate.
func TestLogStartRaiseToLogEndCrash(t *testing.T) {
	mem := vfs.NewCrashableMem()
	require.NoError(t, mem.MkdirAll(testDir, 0o755))
	for _, d := range []string{"", testDir} {
		require.NoError(t, atomicfile.SyncDir(mem, d))
	}
	opts := Options{SegmentBytes: 1 << 20, RecoveryPointIntervalBytes: -1}
	l := openTestLog(t, mem, opts)
	require.NoError(t, l.Flush())
	const pid = 7
	for seq := int32(0); seq < 8; seq += 2 {
		_, err := l.AppendAsLeader(idempotentBatch(t, pid, 0, seq, 2, restartNowMs), 0, OriginClient)
		require.NoError(t, err)
	}
	leo := l.LogEndOffset()
	l.UpdateHighWatermark(leo)
	moved, err := l.MaybeIncrementLogStartOffset(leo)
	require.NoError(t, err)
	require.True(t, moved)
	require.Equal(t, map[int64]int32{pid: 7}, lastSeqs(l))

	clone := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	require.NoError(t, l.Close())
	r := openTestLog(t, clone, opts)
	defer r.Close()
	require.Equal(t, leo, r.LogStartOffset())
	require.Equal(t, leo, r.LogEndOffset())
	require.Equal(t, map[int64]int32{pid: 7}, lastSeqs(r), "the restart forgot the producer")
	info, err := r.AppendAsLeader(idempotentBatch(t, pid, 0, 6, 2, restartNowMs), 0, OriginClient)
	require.NoError(t, err)
	require.True(t, info.Duplicate, "retry appended at %d", info.FirstOffset)
}
