package pgcp

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"

	"github.com/tierlog/tierlog/wal"
)

// validPartitions drops the partitions that cannot have a row.
func validPartitions(tps []wal.TopicIDPartition) []wal.TopicIDPartition {
	var valid []wal.TopicIDPartition
	for _, tp := range tps {
		if tp.Partition >= 0 && !tp.TopicID.IsZero() {
			valid = append(valid, tp)
		}
	}
	return valid
}

const logRowsSQL = `SELECT topic_id, partition, topic_name, log_start_offset, high_watermark, diskless_start_offset,
		cross_tier_log_start_offset, byte_size
	FROM logs WHERE (topic_id, partition) IN (SELECT * FROM unnest($1::uuid[], $2::int4[]))`

// logRows reads the rows of tps (unknown ones absent) in one query.
func logRows(ctx context.Context, tx pgx.Tx, tps []wal.TopicIDPartition) (map[wal.TopicIDPartition]*wal.LogInfo, error) {
	valid := validPartitions(tps)
	if len(valid) == 0 {
		return map[wal.TopicIDPartition]*wal.LogInfo{}, nil
	}
	ts, ps := partitionArrays(valid)
	rows, err := tx.Query(ctx, logRowsSQL, ts, ps)
	if err != nil {
		return nil, err
	}
	return scanLogInfos(rows)
}

// scanLogInfos reads the rows of logRowsSQL and closes rows.
func scanLogInfos(rows pgx.Rows) (map[wal.TopicIDPartition]*wal.LogInfo, error) {
	defer rows.Close()
	out := map[wal.TopicIDPartition]*wal.LogInfo{}
	for rows.Next() {
		var id [16]byte
		var part int32
		info := &wal.LogInfo{}
		if err := rows.Scan(&id, &part, &info.Topic, &info.LogStartOffset, &info.HighWatermark, &info.DisklessStartOffset,
			&info.CrossTierLogStartOffset, &info.ByteSize); err != nil {
			return nil, err
		}
		out[wal.TopicIDPartition{TopicID: id, Partition: part}] = info
	}
	return out, rows.Err()
}

// findPage is how many rows FindBatches reads at a time: findFirstPage
// first, in the one-round-trip pipeline (a row may be a run of up to
// wal.MaxRunBatches batches, and most finds want tens of batches), then
// findPage.
const (
	findFirstPage = 64
	findPage      = 256
)

const batchColumns = `b.base_offset, b.last_offset, f.object_key, b.byte_offset, b.byte_size, b.batch_max_timestamp,
	b.timestamp_type, b.log_append_timestamp, b.crc, b.partition_leader_epoch, b.producer_id, b.producer_epoch, b.base_sequence, b.run`

// scanBatch scans batchColumns (and into extra the columns after them):
// the row and its run bytes (nil for a row of one batch). A row whose
// binding columns are NULL (committed before schema version 2) has an
// unknown binding.
func scanBatch(row pgx.Row, extra ...any) (wal.BatchInfo, []byte, error) {
	var bi wal.BatchInfo
	var tt int16
	var crc, pid *int64
	var epoch, seq *int32
	var pe *int16
	var run []byte
	if err := row.Scan(append([]any{&bi.BaseOffset, &bi.LastOffset, &bi.ObjectKey, &bi.ByteOffset, &bi.Size, &bi.MaxTimestamp, &tt,
		&bi.LogAppendTime, &crc, &epoch, &pid, &pe, &seq, &run}, extra...)...); err != nil {
		return bi, nil, err
	}
	bi.TimestampType = wal.TimestampType(tt)
	switch {
	case crc == nil && epoch == nil && pid == nil && pe == nil && seq == nil && run == nil:
	case crc != nil && epoch != nil && pid != nil && pe != nil && seq != nil && *crc >= 0 && *crc <= math.MaxUint32:
		bi.Binding = wal.BatchBinding{Known: true, CRC: uint32(*crc), PartitionLeaderEpoch: *epoch,
			ProducerID: *pid, ProducerEpoch: *pe, BaseSequence: *seq}
	default:
		return bi, nil, fmt.Errorf("%w: pgcp: batch [%d, %d] in %q: binding columns partly NULL or CRC out of range",
			wal.ErrCorruption, bi.BaseOffset, bi.LastOffset, bi.ObjectKey)
	}
	return bi, run, nil
}

// scanBatches scans a row of batchColumns and splits it into its
// batches (wal.SplitRun).
func scanBatches(rows pgx.Row) ([]wal.BatchInfo, error) {
	head, run, err := scanBatch(rows)
	if err != nil {
		return nil, err
	}
	return wal.SplitRun(head, run)
}

// FindBatches implements wal.ControlPlane: one snapshot for the whole
// request, the partitions in the caller's order. Most finds take one
// round trip (findPipelined); one that needs more than a page of rows
// of a partition is answered again in a transaction of its own
// (findPaged).
func (cp *ControlPlane) FindBatches(ctx context.Context, req wal.FindBatchesRequest) ([]wal.FindBatchesResult, error) {
	var out []wal.FindBatchesResult
	complete := false
	err := cp.retry(ctx, false, func() error {
		var err error
		out, complete, err = cp.findPipelined(ctx, req)
		return err
	})
	if err != nil || complete {
		return out, err
	}
	return cp.findPaged(ctx, req)
}

const findPageSQL = `SELECT ` + batchColumns + ` FROM batches b JOIN files f ON f.file_id = b.file_id
	WHERE b.topic_id = $1 AND b.partition = $2 AND b.last_offset >= $3 ORDER BY b.last_offset LIMIT $4`

// findFirstPageSQL is findPageSQL bounded by the partition's byte budget
// ($5) too: the first row, then the rows while the bytes of the rows
// after the first and before this one stay below the budget. A find
// that reads rows past those would refuse their batches anyway (the
// first row's batches before the offset may be skipped, so its bytes do
// not count), and a run of many batches then does not bring 63 more
// runs it does not need.
const findFirstPageSQL = `SELECT base_offset, last_offset, object_key, byte_offset, byte_size, batch_max_timestamp,
		timestamp_type, log_append_timestamp, crc, partition_leader_epoch, producer_id, producer_epoch, base_sequence, run
	FROM (SELECT ` + batchColumns + `, row_number() OVER w AS row_number,
			sum(b.byte_size) OVER w - b.byte_size - first_value(b.byte_size) OVER w AS bytes_before
		FROM batches b JOIN files f ON f.file_id = b.file_id
		WHERE b.topic_id = $1 AND b.partition = $2 AND b.last_offset >= $3
		WINDOW w AS (ORDER BY b.last_offset) ORDER BY b.last_offset LIMIT $4) page
	WHERE row_number = 1 OR bytes_before < $5 ORDER BY last_offset`

// findPipelined sends the whole find as one pipeline: BEGIN (repeatable
// read, read only), the partitions' rows, each partition's first page
// of batch rows from its offset, COMMIT. complete is false when a
// partition needed more than its first page: the answer is then
// dropped, and findPaged answers.
func (cp *ControlPlane) findPipelined(ctx context.Context, req wal.FindBatchesRequest) (out []wal.FindBatchesResult, complete bool, err error) {
	c, err := cp.pool.Acquire(ctx)
	if err != nil {
		return nil, false, &stageError{err: err, began: false}
	}
	defer func() {
		conn := c.Conn()
		if !conn.IsClosed() && conn.PgConn().TxStatus() != 'I' {
			if _, err := conn.Exec(context.WithoutCancel(ctx), "ROLLBACK"); err != nil {
				_ = conn.Close(context.WithoutCancel(ctx))
			}
		}
		c.Release()
	}()
	tps := make([]wal.TopicIDPartition, len(req.Partitions))
	for i, p := range req.Partitions {
		tps[i] = p.Partition
	}
	ts, ps := partitionArrays(validPartitions(tps))
	page := firstPage(req.MaxBatchesPerPartition)
	var b pgx.Batch
	b.Queue(`BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY`)
	b.Queue(logRowsSQL, ts, ps)
	for _, p := range req.Partitions {
		b.Queue(findFirstPageSQL, [16]byte(p.Partition.TopicID), p.Partition.Partition, p.Offset, page, p.MaxPartitionBytes)
	}
	b.Queue(`COMMIT`)
	br := c.Conn().SendBatch(ctx, &b)
	out, complete, err = readFindPipeline(br, req, page)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, false, &stageError{err: err, began: true}
	}
	return out, complete, nil
}

// readFindPipeline reads findPipelined's answers up to its COMMIT.
func readFindPipeline(br pgx.BatchResults, req wal.FindBatchesRequest, page int) ([]wal.FindBatchesResult, bool, error) {
	if _, err := br.Exec(); err != nil {
		return nil, false, err
	}
	rows, err := br.Query()
	if err != nil {
		return nil, false, err
	}
	logs, err := scanLogInfos(rows)
	if err != nil {
		return nil, false, err
	}
	out := make([]wal.FindBatchesResult, len(req.Partitions))
	budget := wal.NewFindBudget(req.MaxBytes)
	complete := true
	for i, p := range req.Partitions {
		rows, err := br.Query()
		if err != nil {
			return nil, false, err
		}
		f := startFind(p, logs[p.Partition], budget)
		more := false
		if f.reading && complete {
			more, err = f.consume(rows, page, budget, req.MaxBatchesPerPartition)
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
		if err != nil {
			return nil, false, err
		}
		complete = complete && !more
		out[i] = f.res
	}
	return out, complete, nil
}

// findPaged answers a find page after page in one transaction.
func (cp *ControlPlane) findPaged(ctx context.Context, req wal.FindBatchesRequest) ([]wal.FindBatchesResult, error) {
	out := make([]wal.FindBatchesResult, len(req.Partitions))
	tps := make([]wal.TopicIDPartition, len(req.Partitions))
	for i, p := range req.Partitions {
		tps[i] = p.Partition
	}
	err := cp.view(ctx, func(tx pgx.Tx) error {
		logs, err := logRows(ctx, tx, tps)
		if err != nil {
			return err
		}
		budget := wal.NewFindBudget(req.MaxBytes)
		for i, p := range req.Partitions {
			f := startFind(p, logs[p.Partition], budget)
			for page := firstPage(req.MaxBatchesPerPartition); f.reading; page = findPage {
				rows, err := tx.Query(ctx, findPageSQL, [16]byte(p.Partition.TopicID), p.Partition.Partition, f.from, page)
				if err != nil {
					return err
				}
				more, err := f.consume(rows, page, budget, req.MaxBatchesPerPartition)
				rows.Close()
				if err == nil {
					err = rows.Err()
				}
				if err != nil {
					return err
				}
				f.reading = more
			}
			out[i] = f.res
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// firstPage is the rows of a partition's first page.
func firstPage(maxBatches int) int {
	if maxBatches > 0 {
		return min(findFirstPage, maxBatches)
	}
	return findFirstPage
}

// partitionFind is one partition's find across pages of rows.
type partitionFind struct {
	p         wal.FindPartition
	res       wal.FindBatchesResult
	from      int64 // the next offset wanted
	partBytes int64
	// reading is false when the answer is complete without rows: an
	// unknown partition, an offset out of range or at HW, the request's
	// budget spent.
	reading bool
}

func startFind(p wal.FindPartition, info *wal.LogInfo, budget *wal.FindBudget) *partitionFind {
	f := &partitionFind{p: p, from: p.Offset}
	if info == nil {
		f.res = wal.FindBatchesResult{Err: unknown(p.Partition), LogStartOffset: -1, HighWatermark: -1}
		return f
	}
	f.res = wal.FindBatchesResult{LogStartOffset: info.LogStartOffset, HighWatermark: info.HighWatermark}
	if p.Offset < info.LogStartOffset || p.Offset > info.HighWatermark {
		f.res.Err = &wal.PartitionError{Partition: p.Partition, Err: wal.ErrOffsetOutOfRange,
			Detail: fmt.Sprintf("offset %d outside [%d, %d]", p.Offset, info.LogStartOffset, info.HighWatermark)}
		return f
	}
	f.res.Batches = []wal.BatchInfo{}
	f.reading = p.Offset < info.HighWatermark && !budget.Spent()
	return f
}

// consume adds the batches of a page of rows (a run split into its
// batches, those before the wanted offset skipped) while the budgets
// admit them. more reports a full page whose batches were all admitted:
// the partition may have more from f.from.
func (f *partitionFind) consume(rows pgx.Rows, page int, budget *wal.FindBudget, maxBatches int) (more bool, err error) {
	n, done := 0, false
	for rows.Next() {
		n++
		if done {
			continue
		}
		batches, err := scanBatches(rows)
		if err != nil {
			return false, err
		}
		for _, bi := range batches {
			if bi.LastOffset < f.from {
				continue // a run's batches before the requested offset
			}
			if (maxBatches > 0 && len(f.res.Batches) >= maxBatches) || !budget.Admit(f.partBytes, f.p.MaxPartitionBytes, bi.Size) {
				done = true
				break
			}
			f.partBytes += bi.Size
			f.res.Batches = append(f.res.Batches, bi)
			f.from = bi.LastOffset + 1
		}
	}
	return !done && n == page, nil
}

// ListOffsets implements wal.ControlPlane.
func (cp *ControlPlane) ListOffsets(ctx context.Context, reqs []wal.ListOffsetsRequest) ([]wal.ListOffsetsResult, error) {
	out := make([]wal.ListOffsetsResult, len(reqs))
	tps := make([]wal.TopicIDPartition, len(reqs))
	for i, q := range reqs {
		tps[i] = q.Partition
	}
	err := cp.view(ctx, func(tx pgx.Tx) error {
		logs, err := logRows(ctx, tx, tps)
		if err != nil {
			return err
		}
		for i, q := range reqs {
			res, err := listOffset(ctx, tx, q, logs[q.Partition])
			if err != nil {
				return err
			}
			out[i] = res
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

var noOffset = wal.ListOffsetsResult{Offset: -1, Timestamp: -1}

const effectiveTimestamp = `CASE WHEN b.timestamp_type = 1 THEN b.log_append_timestamp ELSE b.batch_max_timestamp END`

func listOffset(ctx context.Context, tx pgx.Tx, q wal.ListOffsetsRequest, info *wal.LogInfo) (wal.ListOffsetsResult, error) {
	if info == nil {
		return wal.ListOffsetsResult{Err: unknown(q.Partition), Offset: -1, Timestamp: -1}, nil
	}
	id, part := [16]byte(q.Partition.TopicID), q.Partition.Partition
	if res, ok := wal.FixedListOffset(q, *info); ok {
		return res, nil
	}
	// The row found holds the batch that answers (a run's largest max
	// timestamp is the row's); the run is split to find it.
	var batches []wal.BatchInfo
	var err error
	if q.Timestamp == wal.MaxTimestamp {
		// The largest effective timestamp, and the last offset of the
		// first batch that has it.
		batches, err = scanBatches(tx.QueryRow(ctx, `SELECT `+batchColumns+` FROM batches b JOIN files f ON f.file_id = b.file_id
			WHERE b.topic_id = $1 AND b.partition = $2 ORDER BY `+effectiveTimestamp+` DESC, b.last_offset LIMIT 1`, id, part))
	} else {
		batches, err = scanBatches(tx.QueryRow(ctx, `SELECT `+batchColumns+` FROM batches b JOIN files f ON f.file_id = b.file_id
			WHERE b.topic_id = $1 AND b.partition = $2 AND `+effectiveTimestamp+` >= $3 ORDER BY b.last_offset LIMIT 1`,
			id, part, q.Timestamp))
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return noOffset, nil
	}
	if err != nil {
		return wal.ListOffsetsResult{}, err
	}
	return wal.ListOffsetInRow(q.Timestamp, batches, info.LogStartOffset)
}

// LogInfo implements wal.ControlPlane.
func (cp *ControlPlane) LogInfo(ctx context.Context, tp wal.TopicIDPartition) (wal.LogInfo, error) {
	var info wal.LogInfo
	err := cp.view(ctx, func(tx pgx.Tx) error {
		logs, err := logRows(ctx, tx, []wal.TopicIDPartition{tp})
		if err != nil {
			return err
		}
		if logs[tp] == nil {
			return unknown(tp)
		}
		info = *logs[tp]
		return nil
	})
	return info, err
}

// ProducerStates implements wal.ControlPlane.
func (cp *ControlPlane) ProducerStates(ctx context.Context, tp wal.TopicIDPartition) ([]wal.ProducerState, error) {
	var out []wal.ProducerState
	err := cp.view(ctx, func(tx pgx.Tx) error {
		out = nil
		logs, err := logRows(ctx, tx, []wal.TopicIDPartition{tp})
		if err != nil {
			return err
		}
		if logs[tp] == nil {
			return unknown(tp)
		}
		rows, err := tx.Query(ctx, `SELECT topic_id, partition, producer_id, producer_epoch, base_sequences, last_sequences,
				assigned_offsets, timestamps
			FROM producer_state WHERE topic_id = $1 AND partition = $2 ORDER BY producer_id`, [16]byte(tp.TopicID), tp.Partition)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id [16]byte
			var part int32
			st, err := scanProducer(rows, &id, &part)
			if err != nil {
				return err
			}
			out = append(out, *st)
		}
		return rows.Err()
	})
	return out, err
}
