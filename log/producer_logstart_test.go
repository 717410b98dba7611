package log

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/log/internal/producer"
)

// The tests of this file keep the state of a producer whose batches lie
// only below the segment holding the log start through restarts: the
// snapshots hold it (the segments holding its batches are gone or below
// the log start), so every restart must find a snapshot that does.

// crashImage turns the closed log in p0 into the image of a crash that
// kept every file but the close's: no clean-shutdown marker, no snapshot
// at the log end leo, and an offsets checkpoint naming log start
// logStart and recovery point rp (flush.messages unlimited: nothing was
// flushed since rp).
func crashImage(t *testing.T, fs vfs.FS, leo, logStart, rp int64) {
	t.Helper()
	require.NoError(t, fs.Remove(fs.PathJoin("p0", CleanShutdownFileName)))
	for _, name := range []string{producer.SnapshotFileName(leo), producer.BatchesFileName(leo)} {
		require.NoError(t, fs.Remove(fs.PathJoin("p0", name)))
	}
	require.NoError(t, writeOffsetsCheckpoint(fs, "p0", offsetsCheckpoint{logStartOffset: logStart, recoveryPoint: rp}))
}

// TestRecoveryKeepsSnapshotAtRecoveryPoint: producer 1's batch [0, 1)
// is in segment 0, producer 2's in segments 1 and 2. DeleteRecords to 1
// and retention delete segment 0: producer 1's state is in the snapshot
// at 1 (its roll's) only. DeleteRecords to the log end 3 moves the log
// start into segment 2 while the recovery point stays 0. A crash recovery
// starts at segment 1 from the snapshot at 1; the reload that ends the
// open must keep that snapshot (the recovery point still names segment
// 1), or the next crash's recovery of segment 1 starts with no state and
// forgets producer 1.
func TestRecoveryKeepsSnapshotAtRecoveryPoint(t *testing.T) {
	fs := vfs.NewMem()
	opts := Options{SegmentBytes: 2048 * 5}
	l := openTestLog(t, fs, opts)
	appendBatch := func(l *UnifiedLog, pid int64, seq int32) {
		_, err := l.AppendAsLeader(idempotentBatch(t, pid, 0, seq, 1, restartNowMs), 0, OriginClient)
		require.NoError(t, err)
	}
	appendBatch(l, 1, 0)
	require.NoError(t, l.Roll())
	appendBatch(l, 2, 0)
	require.NoError(t, l.Roll())
	appendBatch(l, 2, 1)
	l.UpdateHighWatermark(3)
	_, err := l.MaybeIncrementLogStartOffset(1)
	require.NoError(t, err)
	n, err := l.DeleteOldSegments()
	require.NoError(t, err)
	require.Equal(t, 1, n)
	_, err = l.MaybeIncrementLogStartOffset(3)
	require.NoError(t, err)
	want := map[int64]int32{1: 0, 2: 1}
	require.Equal(t, want, lastSeqs(l))
	require.NoError(t, l.Close())
	require.Equal(t, []int64{1, 2, 3}, snapshotFiles(t, fs, producer.SnapshotSuffix))

	for i := range 2 {
		crashImage(t, fs, 3, 3, 0)
		l = openTestLog(t, fs, opts)
		require.Equal(t, int64(3), l.LogStartOffset())
		require.Equal(t, want, lastSeqs(l), "open %d after a crash", i+1)
		require.Contains(t, snapshotFiles(t, fs, producer.SnapshotSuffix), int64(1),
			"open %d deleted the snapshot the next crash recovery starts from", i+1)
		require.NoError(t, l.Close())
	}
}

// TestRecoverySnapshotsFirstSegmentBase: producer 1's batch [0, 1) is in
// segment 0, producer 2's in segment 1; the roll's snapshot at 1 is lost
// in a crash whose recovery starts at segment 1 (recovery point 1). The
// recovery rebuilds the state at 1 from segment 0 and writes the snapshot
// there, so that once DeleteRecords moves the log start into segment 1
// (to the log end 2) and retention deletes segment 0, the next crash
// still finds producer 1's state.
func TestRecoverySnapshotsFirstSegmentBase(t *testing.T) {
	fs := vfs.NewMem()
	opts := Options{SegmentBytes: 2048 * 5}
	l := openTestLog(t, fs, opts)
	_, err := l.AppendAsLeader(idempotentBatch(t, 1, 0, 0, 1, restartNowMs), 0, OriginClient)
	require.NoError(t, err)
	require.NoError(t, l.Roll())
	_, err = l.AppendAsLeader(idempotentBatch(t, 2, 0, 0, 1, restartNowMs), 0, OriginClient)
	require.NoError(t, err)
	require.NoError(t, l.Close())
	// The roll's snapshot is lost too.
	for _, name := range []string{producer.SnapshotFileName(1), producer.BatchesFileName(1)} {
		require.NoError(t, fs.Remove(fs.PathJoin("p0", name)))
	}
	crashImage(t, fs, 2, 0, 1)

	l = openTestLog(t, fs, opts)
	want := map[int64]int32{1: 0, 2: 0}
	require.Equal(t, want, lastSeqs(l))
	require.Contains(t, snapshotFiles(t, fs, producer.SnapshotSuffix), int64(1))
	l.UpdateHighWatermark(2)
	_, err = l.MaybeIncrementLogStartOffset(2)
	require.NoError(t, err)
	n, err := l.DeleteOldSegments()
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.NoError(t, l.Close())

	crashImage(t, fs, 2, 2, 1)
	l = openTestLog(t, fs, opts)
	defer l.Close()
	require.Equal(t, want, lastSeqs(l))
	info, err := l.AppendAsLeader(idempotentBatch(t, 1, 0, 0, 1, restartNowMs), 0, OriginClient)
	require.NoError(t, err)
	require.True(t, info.Duplicate, "retry of producer 1's batch appended at %d", info.FirstOffset)
}

// TestCleanOpenAfterDeleteRecordsToLogEnd: after DeleteRecords to the log
// end the epoch cache holds one entry, at the log start, above the active
// segment's last batch, and an open's truncation from the log end drops
// it (as Kafka's LogLoader does). Two clean opens find no damage: no
// rebuild of the epochs (which recovers every segment from the first and
// deletes the snapshots above it), and the producers below the log start
// are kept.
func TestCleanOpenAfterDeleteRecordsToLogEnd(t *testing.T) {
	fs := vfs.NewMem()
	opts := Options{SegmentBytes: 2048 * 5}
	l := openTestLog(t, fs, opts)
	for seq := int32(0); seq < 6; seq += 2 {
		_, err := l.AppendAsLeader(idempotentBatch(t, 1, 0, seq, 2, restartNowMs), 3, OriginClient)
		require.NoError(t, err)
	}
	l.UpdateHighWatermark(6)
	_, err := l.MaybeIncrementLogStartOffset(6)
	require.NoError(t, err)
	require.Equal(t, []epochcache.Entry{{Epoch: 3, StartOffset: 6}}, l.EpochEntries())
	require.NoError(t, l.Close())

	for i := range 2 {
		l = openTestLog(t, fs, opts)
		require.Zero(t, l.Metrics().CorruptionsFound, "open %d", i+1)
		_, err = fs.Stat(fs.PathJoin("p0", epochcache.CheckpointFileName+epochCheckpointDamagedSuffix))
		require.Error(t, err, "open %d moved the epoch checkpoint aside", i+1)
		require.Equal(t, map[int64]int32{1: 5}, lastSeqs(l))
		require.NoError(t, l.Close())
	}
}
