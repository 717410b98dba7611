package pgcp_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/wal"
	"github.com/tierlog/tierlog/wal/controlplanetest"
	"github.com/tierlog/tierlog/wal/pgcp"
)

// uuidOf is a topic id as PostgreSQL's uuid text.
func uuidOf(id wal.TopicID) string {
	h := hex.EncodeToString(id[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// insertBatchV1 inserts a batch row as schema version 1's CommitFile did:
// without the binding columns.
func insertBatchV1(t *testing.T, url, schema string, b wal.CommitBatch, base, appendMs int64, objectKey string) {
	t.Helper()
	execSQL(t, url, fmt.Sprintf(`INSERT INTO %[1]s.batches (topic_id, partition, last_offset, base_offset, file_id, byte_offset,
			byte_size, timestamp_type, batch_max_timestamp, log_append_timestamp)
		SELECT '%[2]s', %[3]d, %[4]d, %[5]d, file_id, %[6]d, %[7]d, %[8]d, %[9]d, %[10]d FROM %[1]s.files WHERE object_key = '%[11]s'`,
		schema, uuidOf(b.Partition.TopicID), b.Partition.Partition, base+b.OffsetCount()-1, base, b.ByteOffset, b.Size,
		b.TimestampType, b.MaxTimestamp, appendMs, objectKey))
}

func schemaVersion(t *testing.T, url, schema string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgconn.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	res := conn.ExecParams(ctx, "SELECT max(version) FROM "+schema+".schema_migrations", nil, nil, nil, nil).Read()
	require.NoError(t, res.Err)
	return string(res.Rows[0][0])
}

// TestMigrationBatchBinding: a schema at version 1 holding a commit as
// version 1's code stored it (batch rows without binding columns, the
// digest of that time) migrates at Open; the old rows read back with an
// unknown binding, a retry of the old commit gets its stored answer, new
// commits store their bindings, and a row inserted without the binding
// columns after the migration (a broker still running the old code during
// a rolling upgrade) reads back unknown too. A row with a partial binding
// is refused by the schema, and read as corruption if one got past it.
func TestMigrationBatchBinding(t *testing.T) {
	ctx := context.Background()
	url := databaseURL(t)
	schema := fmt.Sprintf("t%d", schemaSeq.Add(1))
	pb := controlplanetest.PreBindingCommit()
	now := func() time.Time { return time.UnixMilli(pb.CommittedAtMs) }
	old, err := pgcp.OpenAtSchemaVersionForTesting(ctx, pgcp.Options{ConnString: url, Schema: schema, Now: now}, 1)
	require.NoError(t, err)
	require.NoError(t, old.CreatePartitions(ctx, pb.Topics))
	require.NoError(t, old.Close())
	require.Equal(t, "1", schemaVersion(t, url, schema))

	req := pb.Request
	status, base, at, ls, detail := "", "", "", "", ""
	for i, r := range pb.Results {
		sep := ","
		if i == 0 {
			sep = ""
		}
		status += fmt.Sprintf("%s%d", sep, r.Status)
		base += fmt.Sprintf("%s%d", sep, r.BaseOffset)
		at += fmt.Sprintf("%s%d", sep, r.LogAppendTime)
		ls += fmt.Sprintf("%s%d", sep, r.LogStartOffset)
		detail += sep + `""`
	}
	execSQL(t, url, fmt.Sprintf(`INSERT INTO %s.files (object_key, reason, state, uploader_broker_id, broker_epoch, size, committed_at,
			digest, result_status, result_base_offset, result_append_time, result_log_start, result_detail)
		VALUES ('%s', 1, 1, %d, %d, %d, %d, '\x%x', '{%s}', '{%s}', '{%s}', '{%s}', '{%s}')`,
		schema, req.ObjectKey, req.BrokerID, req.BrokerEpoch, req.ObjectSize, pb.CommittedAtMs, pb.Digest[:],
		status, base, at, ls, detail))
	for _, b := range req.Batches {
		insertBatchV1(t, url, schema, b, 0, pb.CommittedAtMs, req.ObjectKey)
		execSQL(t, url, fmt.Sprintf(`UPDATE %s.logs SET high_watermark = %d, byte_size = %d WHERE topic_id = '%s' AND partition = %d`,
			schema, b.OffsetCount(), b.Size, uuidOf(b.Partition.TopicID), b.Partition.Partition))
	}
	st := pb.ProducerState
	p := req.Batches[0].Partition
	execSQL(t, url, fmt.Sprintf(`INSERT INTO %s.producer_state VALUES ('%s', %d, %d, %d, '{%d}', '{%d}', '{%d}', '{%d}')`,
		schema, uuidOf(p.TopicID), p.Partition, st.ProducerID, st.ProducerEpoch, st.Batches[0].BaseSequence,
		st.Batches[0].LastSequence, st.Batches[0].AssignedOffset, st.Batches[0].Timestamp))

	cp, err := pgcp.Open(ctx, pgcp.Options{ConnString: url, Schema: schema, Now: now})
	require.NoError(t, err)
	defer cp.Close()
	require.Equal(t, fmt.Sprint(pgcp.SchemaVersion()), schemaVersion(t, url, schema))
	controlplanetest.CheckPreBinding(t, cp)

	// An old broker's insert after the migration: unknown binding.
	late := wal.CommitBatch{Partition: p, ByteOffset: 0, Size: 7, LastOffset: 2, RecordCount: 3, MaxTimestamp: 5,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	info, err := cp.LogInfo(ctx, p)
	require.NoError(t, err)
	insertBatchV1(t, url, schema, late, info.HighWatermark, pb.CommittedAtMs, req.ObjectKey)
	execSQL(t, url, fmt.Sprintf(`UPDATE %s.logs SET high_watermark = %d WHERE topic_id = '%s' AND partition = %d`,
		schema, info.HighWatermark+3, uuidOf(p.TopicID), p.Partition))
	res, err := cp.FindBatches(ctx, wal.FindBatchesRequest{MaxBytes: 1 << 20,
		Partitions: []wal.FindPartition{{Partition: p, Offset: info.HighWatermark, MaxPartitionBytes: 1 << 20}}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	require.Equal(t, []wal.BatchInfo{{ObjectKey: req.ObjectKey, Size: 7, BaseOffset: info.HighWatermark,
		LastOffset: info.HighWatermark + 2, MaxTimestamp: 5, LogAppendTime: pb.CommittedAtMs}}, res[0].Batches)

	// All five binding columns or none.
	conn, err := pgconn.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	refused := func(err error) {
		t.Helper()
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr)
		require.Equal(t, [2]string{"23514", "batches_binding"}, [2]string{pgErr.Code, pgErr.ConstraintName}) // check_violation
	}
	refused(conn.Exec(ctx, fmt.Sprintf(`UPDATE %s.batches SET crc = 1 WHERE topic_id = '%s' AND partition = %d AND base_offset = %d`,
		schema, uuidOf(p.TopicID), p.Partition, info.HighWatermark)).Close())
	refused(conn.Exec(ctx, fmt.Sprintf(`UPDATE %s.batches SET crc = 4294967296, partition_leader_epoch = 0, producer_id = 0,
			producer_epoch = 0, base_sequence = 0 WHERE topic_id = '%s' AND partition = %d AND base_offset = %d`,
		schema, uuidOf(p.TopicID), p.Partition, info.HighWatermark)).Close())
	// Past the check (dropped), a partial binding is corruption, never
	// an unknown binding.
	require.NoError(t, conn.Exec(ctx, fmt.Sprintf(`ALTER TABLE %[1]s.batches DROP CONSTRAINT batches_binding;
		UPDATE %[1]s.batches SET crc = 1 WHERE topic_id = '%[2]s' AND partition = %[3]d AND base_offset = %[4]d`,
		schema, uuidOf(p.TopicID), p.Partition, info.HighWatermark)).Close())
	_, err = cp.FindBatches(ctx, wal.FindBatchesRequest{MaxBytes: 1 << 20,
		Partitions: []wal.FindPartition{{Partition: p, Offset: info.HighWatermark, MaxPartitionBytes: 1 << 20}}})
	require.ErrorIs(t, err, wal.ErrCorruption)
}
