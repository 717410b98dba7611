package pebblecp

import (
	"context"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/wal"
)

// TestReopen commits, closes and reopens: the state is on disk.
func TestReopen(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	now := func() time.Time { return time.UnixMilli(1000) }
	cp, err := Open(fs, "cp", Options{Now: now})
	require.NoError(t, err)
	tp := wal.TopicIDPartition{TopicID: wal.TopicID{1}, Partition: 0}
	require.NoError(t, cp.CreatePartitions(ctx, []wal.CreatePartitionsRequest{{TopicID: tp.TopicID, Topic: "t", NumPartitions: 1}}))
	res, err := cp.CommitFile(ctx, wal.CommitFileRequest{ObjectKey: "a", ObjectSize: 10, Batches: []wal.CommitBatch{
		{Partition: tp, Size: 10, LastOffset: 4, RecordCount: 5, ProducerID: -1}}})
	require.NoError(t, err)
	require.NoError(t, res.Batches[0].Err)
	require.NoError(t, cp.Close())
	require.ErrorIs(t, cp.Close(), wal.ErrClosed)
	_, err = cp.LogInfo(ctx, tp)
	require.ErrorIs(t, err, wal.ErrClosed)

	cp, err = Open(fs, "cp", Options{Now: now})
	require.NoError(t, err)
	defer cp.Close()
	info, err := cp.LogInfo(ctx, tp)
	require.NoError(t, err)
	require.Equal(t, wal.LogInfo{Topic: "t", HighWatermark: 5, CrossTierLogStartOffset: -1, ByteSize: 10}, info)
}

// TestOpenReadOnly: a read-only open reads what a writer committed,
// refuses commits, leaves the files as they were, and refuses a directory
// without a database instead of creating one.
func TestOpenReadOnly(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	now := func() time.Time { return time.UnixMilli(1000) }
	cp, err := Open(fs, "cp", Options{Now: now})
	require.NoError(t, err)
	tp := wal.TopicIDPartition{TopicID: wal.TopicID{1}, Partition: 0}
	require.NoError(t, cp.CreatePartitions(ctx, []wal.CreatePartitionsRequest{{TopicID: tp.TopicID, Topic: "t", NumPartitions: 1}}))
	require.NoError(t, cp.Close())
	listing := func() map[string]int64 {
		names, err := fs.List("cp")
		require.NoError(t, err)
		out := map[string]int64{}
		for _, n := range names {
			st, err := fs.Stat(fs.PathJoin("cp", n))
			require.NoError(t, err)
			out[n] = st.Size()
		}
		return out
	}
	before := listing()

	ro, err := Open(fs, "cp", Options{Now: now, ReadOnly: true})
	require.NoError(t, err)
	info, err := ro.LogInfo(ctx, tp)
	require.NoError(t, err)
	require.Equal(t, "t", info.Topic)
	_, err = ro.CommitFile(ctx, wal.CommitFileRequest{ObjectKey: "a", ObjectSize: 10, Batches: []wal.CommitBatch{
		{Partition: tp, Size: 10, LastOffset: 4, RecordCount: 5, ProducerID: -1}}})
	require.Error(t, err)
	require.NoError(t, ro.Close())
	require.Equal(t, before, listing())

	_, err = Open(fs, "missing", Options{ReadOnly: true})
	require.ErrorIs(t, err, wal.ErrInvalidArgument)
}

// TestReapedKeys: a reaped orphan's tombstone is counted once DeleteFiles
// forgot its row, and stays counted (and the key refused) after a reopen.
func TestReapedKeys(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	now := time.UnixMilli(1000)
	opts := Options{Now: func() time.Time { return now }}
	cp, err := Open(fs, "cp", opts)
	require.NoError(t, err)
	count := func() int64 {
		t.Helper()
		n, err := cp.ReapedKeys(ctx)
		require.NoError(t, err)
		return n
	}
	for _, k := range []string{"orphan-a", "orphan-b", "committed"} {
		require.NoError(t, cp.ReserveObject(ctx, k))
	}
	res, err := cp.CommitFile(ctx, wal.CommitFileRequest{ObjectKey: "committed", ObjectSize: 10})
	require.NoError(t, err)
	require.True(t, res.MarkedForDeletion, "no batches: marked at once")
	now = now.Add(time.Hour)
	reaped, err := cp.ExpireReservations(ctx, now, 0)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"orphan-a", "orphan-b"}, reaped)
	require.Equal(t, int64(0), count(), "rows still there: no tombstone yet")

	files, err := cp.FilesToDelete(ctx, now.Add(time.Millisecond), 0)
	require.NoError(t, err)
	var keys []string
	for _, f := range files {
		keys = append(keys, f.ObjectKey)
	}
	require.ElementsMatch(t, []string{"orphan-a", "orphan-b", "committed"}, keys)
	require.NoError(t, cp.DeleteFiles(ctx, keys))
	require.Equal(t, int64(2), count(), "the committed object leaves no tombstone")

	require.NoError(t, cp.Close())
	cp, err = Open(fs, "cp", opts)
	require.NoError(t, err)
	defer cp.Close()
	require.Equal(t, int64(2), count())
	require.ErrorIs(t, cp.ReserveObject(ctx, "orphan-a"), wal.ErrObjectKeyReused)
}
