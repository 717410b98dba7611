package pgcp_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/wal"
	"github.com/tierlog/tierlog/wal/pgcp"
)

func countRows(t *testing.T, url, query string) int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgconn.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	res := conn.ExecParams(ctx, query, nil, nil, nil, nil).Read()
	require.NoError(t, res.Err)
	var n int
	_, err = fmt.Sscan(string(res.Rows[0][0]), &n)
	require.NoError(t, err)
	return n
}

// TestMigrationBatchRuns: a schema at version 2 holding rows of one
// batch each (with their bindings) migrates to runs at Open; the old
// rows and the runs a new commit writes are served together, batch by
// batch. A commit of 100 contiguous batches of one partition writes two
// rows (runs of at most wal.MaxRunBatches), not 100. Run bytes that do
// not agree with their row are corruption, and a run without a binding
// is refused by the schema.
func TestMigrationBatchRuns(t *testing.T) {
	ctx := context.Background()
	url := databaseURL(t)
	schema := fmt.Sprintf("t%d", schemaSeq.Add(1))
	topic := wal.TopicID{0x52, 0x55, 0x4e}
	p := wal.TopicIDPartition{TopicID: topic, Partition: 0}
	old, err := pgcp.OpenAtSchemaVersionForTesting(ctx, pgcp.Options{ConnString: url, Schema: schema}, 2)
	require.NoError(t, err)
	require.NoError(t, old.CreatePartitions(ctx, []wal.CreatePartitionsRequest{{TopicID: topic, Topic: "runs", NumPartitions: 1}}))
	require.NoError(t, old.Close())
	require.Equal(t, "2", schemaVersion(t, url, schema))

	// Three batches of 2 offsets and 10 bytes as version 2 stored them.
	var want []wal.BatchInfo
	execSQL(t, url, fmt.Sprintf(`INSERT INTO %s.files (object_key, reason, state, size, committed_at) VALUES ('wal/v2', 1, 1, 30, 7)`, schema))
	for i := range int64(3) {
		bb := wal.BatchBinding{Known: true, CRC: uint32(100 + i), PartitionLeaderEpoch: 3, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
		execSQL(t, url, fmt.Sprintf(`INSERT INTO %[1]s.batches (topic_id, partition, last_offset, base_offset, file_id, byte_offset,
				byte_size, timestamp_type, batch_max_timestamp, log_append_timestamp, crc, partition_leader_epoch, producer_id,
				producer_epoch, base_sequence)
			SELECT '%[2]s', 0, %[3]d, %[4]d, file_id, %[5]d, 10, 0, 50, 7, %[6]d, 3, -1, -1, -1 FROM %[1]s.files WHERE object_key = 'wal/v2'`,
			schema, uuidOf(topic), 2*i+1, 2*i, 10*i, bb.CRC))
		want = append(want, wal.BatchInfo{ObjectKey: "wal/v2", ByteOffset: 10 * i, Size: 10, BaseOffset: 2 * i, LastOffset: 2*i + 1,
			MaxTimestamp: 50, LogAppendTime: 7, Binding: bb})
	}
	execSQL(t, url, fmt.Sprintf(`UPDATE %s.logs SET high_watermark = 6, byte_size = 30`, schema))

	cp, err := pgcp.Open(ctx, pgcp.Options{ConnString: url, Schema: schema})
	require.NoError(t, err)
	defer cp.Close()
	require.Equal(t, fmt.Sprint(pgcp.SchemaVersion()), schemaVersion(t, url, schema))

	req := wal.CommitFileRequest{ObjectKey: "wal/v3", BrokerID: 1}
	for i := range int64(100) {
		req.Batches = append(req.Batches, wal.CommitBatch{Partition: p, ByteOffset: 7 * i, Size: 7, LastOffset: i % 2, RecordCount: 1,
			MaxTimestamp: 60 + i, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, CRC: uint32(i), PartitionLeaderEpoch: 4})
		req.ObjectSize += 7
	}
	res, err := cp.CommitFile(ctx, req)
	require.NoError(t, err)
	base := int64(6)
	for i, b := range req.Batches {
		require.NoError(t, res.Batches[i].Err)
		want = append(want, wal.BatchInfo{ObjectKey: "wal/v3", ByteOffset: b.ByteOffset, Size: 7, BaseOffset: base,
			LastOffset: base + b.LastOffset, MaxTimestamp: b.MaxTimestamp, LogAppendTime: res.Batches[i].LogAppendTime, Binding: b.Binding()})
		base += b.OffsetCount()
	}
	require.Equal(t, 3+2, countRows(t, url, fmt.Sprintf("SELECT count(*) FROM %s.batches", schema)), "three old rows and two runs")
	require.Equal(t, 2, countRows(t, url, fmt.Sprintf("SELECT count(*) FROM %s.batches WHERE run IS NOT NULL", schema)))

	find := func(offset int64) ([]wal.BatchInfo, error) {
		out, err := cp.FindBatches(ctx, wal.FindBatchesRequest{MaxBytes: 1 << 20,
			Partitions: []wal.FindPartition{{Partition: p, Offset: offset, MaxPartitionBytes: 1 << 20}}})
		if err != nil {
			return nil, err
		}
		return out[0].Batches, out[0].Err
	}
	got, err := find(0)
	require.NoError(t, err)
	require.Equal(t, want, got)
	got, err = find(base - 1)
	require.NoError(t, err)
	require.Equal(t, want[len(want)-1:], got)

	conn, err := pgconn.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	// A run keeps its binding.
	var pgErr *pgconn.PgError
	err = conn.Exec(ctx, fmt.Sprintf(`UPDATE %s.batches SET crc = NULL, partition_leader_epoch = NULL, producer_id = NULL,
		producer_epoch = NULL, base_sequence = NULL WHERE run IS NOT NULL`, schema)).Close()
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, [2]string{"23514", "batches_run"}, [2]string{pgErr.Code, pgErr.ConstraintName})
	// Run bytes cut short: the row is corruption, not a shorter run.
	require.NoError(t, conn.Exec(ctx, fmt.Sprintf(`UPDATE %s.batches SET run = substring(run from 1 for length(run) - 1)
		WHERE run IS NOT NULL AND base_offset = 6`, schema)).Close())
	_, err = find(0)
	require.ErrorIs(t, err, wal.ErrCorruption)
	var re *wal.RunCorruptionError
	require.ErrorAs(t, err, &re)
	require.Equal(t, [2]int64{6, 6 + 64*3/2 - 1}, [2]int64{re.BaseOffset, re.LastOffset})
}

// TestFindBeyondFirstPage: a find that needs more rows of a partition
// than the one-round-trip pipeline reads (rows of one batch each, as
// batches of two partitions interleaved in objects are) is answered
// whole, as the paged find answers it, for every budget.
func TestFindBeyondFirstPage(t *testing.T) {
	ctx := context.Background()
	cp := openFresh(t, time.Now)
	topic := wal.TopicID{0x46, 0x50}
	require.NoError(t, cp.CreatePartitions(ctx, []wal.CreatePartitionsRequest{{TopicID: topic, Topic: "pages", NumPartitions: 2}}))
	for k := range 3 {
		req := wal.CommitFileRequest{ObjectKey: fmt.Sprintf("wal/p-%d", k)}
		for i := range int64(100) {
			req.Batches = append(req.Batches, wal.CommitBatch{Partition: wal.TopicIDPartition{TopicID: topic, Partition: int32(i % 2)},
				ByteOffset: 10 * i, Size: 10, LastOffset: 0, RecordCount: 1, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, CRC: uint32(i)})
			req.ObjectSize += 10
		}
		_, err := cp.CommitFile(ctx, req)
		require.NoError(t, err)
	}
	p0, p1 := wal.TopicIDPartition{TopicID: topic}, wal.TopicIDPartition{TopicID: topic, Partition: 1}
	for _, tc := range []struct {
		maxBytes, partBytes int64
		maxBatches          int
		want0, want1        int
	}{
		{1 << 20, 1 << 20, 0, 150, 150},
		{1 << 20, 1 << 20, 70, 70, 70},
		{1 << 20, 700, 0, 70, 70},
		{1000, 1 << 20, 0, 100, 0},
		{1200, 1 << 20, 0, 120, 0},
		{1 << 20, 640, 0, 64, 64},
	} {
		req := wal.FindBatchesRequest{MaxBytes: tc.maxBytes, MaxBatchesPerPartition: tc.maxBatches, Partitions: []wal.FindPartition{
			{Partition: p0, MaxPartitionBytes: tc.partBytes}, {Partition: p1, Offset: 0, MaxPartitionBytes: tc.partBytes}}}
		got, err := cp.FindBatches(ctx, req)
		require.NoError(t, err)
		paged, err := cp.FindPagedForTesting(ctx, req)
		require.NoError(t, err)
		require.Equal(t, paged, got, "%+v", tc)
		require.Equal(t, [2]int{tc.want0, tc.want1}, [2]int{len(got[0].Batches), len(got[1].Batches)}, "%+v", tc)
		for i, b := range got[0].Batches {
			require.Equal(t, int64(i), b.BaseOffset)
		}
	}

	// Runs: from the last batch of a run, a budget that ends in the next
	// run; from inside the first, one that spans three runs.
	p2 := wal.TopicIDPartition{TopicID: topic, Partition: 2}
	require.NoError(t, cp.CreatePartitions(ctx, []wal.CreatePartitionsRequest{{TopicID: topic, Topic: "pages", NumPartitions: 3}}))
	req := wal.CommitFileRequest{ObjectKey: "wal/runs"}
	for i := range int64(200) {
		req.Batches = append(req.Batches, wal.CommitBatch{Partition: p2, ByteOffset: 10 * i, Size: 10, LastOffset: 0, RecordCount: 1,
			ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, CRC: uint32(i)})
		req.ObjectSize += 10
	}
	_, err := cp.CommitFile(ctx, req)
	require.NoError(t, err)
	for _, tc := range []struct{ offset, partBytes, want int64 }{
		{wal.MaxRunBatches - 1, 50, 5}, {wal.MaxRunBatches - 1, 10, 1}, {wal.MaxRunBatches - 1, 11, 2}, {3, 1500, 150}, {3, 1 << 20, 197},
	} {
		req := wal.FindBatchesRequest{MaxBytes: 1 << 20, Partitions: []wal.FindPartition{{Partition: p2, Offset: tc.offset, MaxPartitionBytes: tc.partBytes}}}
		got, err := cp.FindBatches(ctx, req)
		require.NoError(t, err)
		paged, err := cp.FindPagedForTesting(ctx, req)
		require.NoError(t, err)
		require.Equal(t, paged, got, "%+v", tc)
		require.Len(t, got[0].Batches, int(tc.want), "%+v", tc)
		require.Equal(t, tc.offset, got[0].Batches[0].BaseOffset)
	}
}
