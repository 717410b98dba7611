package pebblecp

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/tierlog/tierlog/wal"
	"github.com/tierlog/tierlog/wal/controlplanetest"
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

// TestUpgradeFromBeforeBindings: a database written before batch rows
// carried their binding (format version 1, batch values of kindBatch, the
// object's digest in the first encoding) opens read-only as it is, and
// read-write upgrades to format version 2, answers the old rows with
// an unknown binding, answers a retry of the old commit as before, and
// binds the rows committed after it. A version this code does not know
// is refused.
func TestUpgradeFromBeforeBindings(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	pb := controlplanetest.PreBindingCommit()
	quiet := pebbleLogger{zap.NewNop().Sugar()}
	now := func() time.Time { return time.UnixMilli(pb.CommittedAtMs) }
	cp, err := Open(fs, "cp", Options{Now: now})
	require.NoError(t, err)
	require.NoError(t, cp.CreatePartitions(ctx, pb.Topics))
	res, err := cp.CommitFile(ctx, pb.Request)
	require.NoError(t, err)
	require.Equal(t, wal.CommitAnswer(&pb.Request, pb.Results), res)
	require.NoError(t, cp.Close())

	// Rewrite what the commit stored as the previous code stored it.
	db, err := pebble.Open("cp", &pebble.Options{FS: fs, Logger: quiet})
	require.NoError(t, err)
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{tagBatch}, UpperBound: []byte{tagBatch + 1}})
	require.NoError(t, err)
	rows := 0
	for ok := it.First(); ok; ok = it.Next() {
		row, err := decodeBatch(it.Key(), it.Value())
		require.NoError(t, err)
		require.True(t, row.Binding.Known)
		row.Binding = wal.BatchBinding{}
		v := encodeBatch(&row)
		require.Equal(t, byte(kindBatch), v[1])
		require.NoError(t, db.Set(append([]byte(nil), it.Key()...), v, pebble.Sync))
		rows++
	}
	require.NoError(t, it.Close())
	require.Equal(t, 2, rows)
	v, closer, err := db.Get(fileKey(pb.Request.ObjectKey))
	require.NoError(t, err)
	f, err := decodeFile(fileKey(pb.Request.ObjectKey), v)
	require.NoError(t, closer.Close())
	require.NoError(t, err)
	require.NotEqual(t, pb.Digest, f.Digest, "the current code stores the digest with the bindings")
	f.Digest = pb.Digest
	require.NoError(t, db.Set(fileKey(pb.Request.ObjectKey), encodeFile(&f), pebble.Sync))
	setVersion := func(v uint32) {
		require.NoError(t, db.Set([]byte(keyVersion), binary.BigEndian.AppendUint32(nil, v), pebble.Sync))
	}
	setVersion(formatVersionBefore)
	require.NoError(t, db.Close())
	version := func(cp *ControlPlane) uint32 {
		v, closer, err := cp.mu.db.Get([]byte(keyVersion))
		require.NoError(t, err)
		defer closer.Close()
		return binary.BigEndian.Uint32(v)
	}

	ro, err := Open(fs, "cp", Options{ReadOnly: true})
	require.NoError(t, err)
	found, err := ro.FindBatches(ctx, wal.FindBatchesRequest{MaxBytes: 1 << 20,
		Partitions: []wal.FindPartition{{Partition: pb.Request.Batches[0].Partition, MaxPartitionBytes: 1 << 20}}})
	require.NoError(t, err)
	require.Len(t, found[0].Batches, 1)
	require.False(t, found[0].Batches[0].Binding.Known)
	require.Equal(t, uint32(formatVersionBefore), version(ro), "a read-only open writes nothing")
	require.NoError(t, ro.Close())

	cp, err = Open(fs, "cp", Options{Now: now})
	require.NoError(t, err)
	require.Equal(t, uint32(formatVersion), version(cp))
	controlplanetest.CheckPreBinding(t, cp)
	require.NoError(t, cp.Close())

	db, err = pebble.Open("cp", &pebble.Options{FS: fs, Logger: quiet})
	require.NoError(t, err)
	setVersion(formatVersion + 1)
	require.NoError(t, db.Close())
	_, err = Open(fs, "cp", Options{Now: now})
	require.ErrorIs(t, err, wal.ErrCorruption)
}
