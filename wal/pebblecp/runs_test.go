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
)

// batchValues returns the kinds of the batch rows in key order.
func batchValues(t *testing.T, db pebble.Reader) (kinds []byte) {
	t.Helper()
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{tagBatch}, UpperBound: []byte{tagBatch + 1}})
	require.NoError(t, err)
	for ok := it.First(); ok; ok = it.Next() {
		kinds = append(kinds, it.Value()[1])
	}
	require.NoError(t, it.Close())
	return kinds
}

// TestUpgradeToRuns: a database of format version 2 (a row per batch,
// each with its binding) upgrades to version 3 at Open; its rows and the
// runs a new commit writes are served together, batch by batch. A commit
// of 100 contiguous batches of one partition writes two rows (runs of
// at most wal.MaxRunBatches). Run bytes that disagree with their row
// are corruption.
func TestUpgradeToRuns(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	quiet := pebbleLogger{zap.NewNop().Sugar()}
	now := func() time.Time { return time.UnixMilli(5000) }
	tp := wal.TopicIDPartition{TopicID: wal.TopicID{0x52}, Partition: 0}
	request := func(key string, n int64) wal.CommitFileRequest {
		req := wal.CommitFileRequest{ObjectKey: key}
		for i := range n {
			req.Batches = append(req.Batches, wal.CommitBatch{Partition: tp, ByteOffset: 7 * i, Size: 7, LastOffset: i % 2,
				RecordCount: 1, MaxTimestamp: 60 + i, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, CRC: uint32(i + 1)})
			req.ObjectSize += 7
		}
		return req
	}
	cp, err := Open(fs, "cp", Options{Now: now})
	require.NoError(t, err)
	require.NoError(t, cp.CreatePartitions(ctx, []wal.CreatePartitionsRequest{{TopicID: tp.TopicID, Topic: "t", NumPartitions: 1}}))
	var want []wal.BatchInfo
	commit := func(req wal.CommitFileRequest) {
		res, err := cp.CommitFile(ctx, req)
		require.NoError(t, err)
		for i, b := range req.Batches {
			require.NoError(t, res.Batches[i].Err)
			want = append(want, wal.BatchInfo{ObjectKey: req.ObjectKey, ByteOffset: b.ByteOffset, Size: b.Size,
				BaseOffset: res.Batches[i].BaseOffset, LastOffset: res.Batches[i].BaseOffset + b.OffsetCount() - 1,
				MaxTimestamp: b.MaxTimestamp, LogAppendTime: 5000, Binding: b.Binding()})
		}
	}
	commit(request("wal/v2", 3))
	require.Equal(t, []byte{kindRunBatch}, batchValues(t, cp.mu.db))
	require.NoError(t, cp.Close())

	// Store the run as version 2 did: a row per batch, the object
	// counting three live rows.
	db, err := pebble.Open("cp", &pebble.Options{FS: fs, Logger: quiet})
	require.NoError(t, err)
	b := db.NewBatch()
	for _, bi := range want {
		require.NoError(t, b.Set(batchKey(tp, bi.LastOffset), encodeBatch(&batchRow{BaseOffset: bi.BaseOffset, ObjectKey: bi.ObjectKey,
			ByteOffset: bi.ByteOffset, Size: bi.Size, MaxTimestamp: bi.MaxTimestamp, LogAppendTime: bi.LogAppendTime, Binding: bi.Binding}), nil))
	}
	f, found, err := readFile(db, "wal/v2")
	require.NoError(t, err)
	require.True(t, found)
	f.LiveBatches = 3
	require.NoError(t, b.Set(fileKey("wal/v2"), encodeFile(&f), nil))
	require.NoError(t, b.Set([]byte(keyVersion), binary.BigEndian.AppendUint32(nil, formatVersionBindings), nil))
	require.NoError(t, b.Commit(pebble.Sync))
	require.Equal(t, []byte{kindBoundBatch, kindBoundBatch, kindBoundBatch}, batchValues(t, db))
	require.NoError(t, db.Close())

	cp, err = Open(fs, "cp", Options{Now: now})
	require.NoError(t, err)
	defer func() { _ = cp.Close() }()
	v, closer, err := cp.mu.db.Get([]byte(keyVersion))
	require.NoError(t, err)
	require.Equal(t, uint32(formatVersion), binary.BigEndian.Uint32(v))
	require.NoError(t, closer.Close())
	commit(request("wal/v3", 100))
	require.Equal(t, []byte{kindBoundBatch, kindBoundBatch, kindBoundBatch, kindRunBatch, kindRunBatch}, batchValues(t, cp.mu.db))

	find := func(offset int64) ([]wal.BatchInfo, error) {
		out, err := cp.FindBatches(ctx, wal.FindBatchesRequest{MaxBytes: 1 << 20,
			Partitions: []wal.FindPartition{{Partition: tp, Offset: offset, MaxPartitionBytes: 1 << 20}}})
		if err != nil {
			return nil, err
		}
		return out[0].Batches, out[0].Err
	}
	got, err := find(0)
	require.NoError(t, err)
	require.Equal(t, want, got)

	// The old rows go one by one, the runs are cut: the objects count
	// their live rows right, so the first is marked when its last row
	// goes and the second only when all of it is gone.
	res, err := cp.DeleteRecords(ctx, []wal.DeleteRecordsRequest{{Partition: tp, Offset: want[10].BaseOffset + 1}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	marked, err := cp.FilesToDelete(ctx, time.UnixMilli(6000), 0)
	require.NoError(t, err)
	require.Len(t, marked, 1)
	require.Equal(t, "wal/v2", marked[0].ObjectKey)
	got, err = find(want[10].BaseOffset + 1)
	require.NoError(t, err)
	require.Equal(t, want[10:], got)
	res, err = cp.DeleteRecords(ctx, []wal.DeleteRecordsRequest{{Partition: tp, Offset: -1}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	marked, err = cp.FilesToDelete(ctx, time.UnixMilli(6000), 0)
	require.NoError(t, err)
	require.Len(t, marked, 2)

	// Run bytes cut short under a good frame: corruption.
	commit(request("wal/v4", 5))
	require.NoError(t, cp.Close())
	db, err = pebble.Open("cp", &pebble.Options{FS: fs, Logger: quiet})
	require.NoError(t, err)
	last := want[len(want)-1].LastOffset
	v, closer, err = db.Get(batchKey(tp, last))
	require.NoError(t, err)
	row, err := decodeBatch(nil, v)
	require.NoError(t, closer.Close())
	require.NoError(t, err)
	row.Run = row.Run[:len(row.Run)-1]
	require.NoError(t, db.Set(batchKey(tp, last), encodeBatch(&row), pebble.Sync))
	require.NoError(t, db.Close())
	cp, err = Open(fs, "cp", Options{Now: now})
	require.NoError(t, err)
	_, err = find(want[len(want)-5].BaseOffset)
	require.ErrorIs(t, err, wal.ErrCorruption)
	var re *wal.RunCorruptionError
	require.ErrorAs(t, err, &re)
	require.Equal(t, [2]int64{want[len(want)-5].BaseOffset, last}, [2]int64{re.BaseOffset, re.LastOffset})
}
