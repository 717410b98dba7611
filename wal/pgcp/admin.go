package pgcp

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/tierlog/tierlog/wal"
)

func unknown(tp wal.TopicIDPartition) error {
	return &wal.PartitionError{Partition: tp, Err: wal.ErrUnknownTopicOrPartition}
}

func outOfRange(tp wal.TopicIDPartition, offset int64, l *logState) error {
	return &wal.PartitionError{Partition: tp, Err: wal.ErrOffsetOutOfRange,
		Detail: fmt.Sprintf("offset %d outside [%d, %d]", offset, l.w, l.hw)}
}

// lockLogs locks the rows of tps (those that exist) in (topic_id,
// partition) order and returns them.
func lockLogs(ctx context.Context, tx pgx.Tx, tps []wal.TopicIDPartition) (map[wal.TopicIDPartition]*logState, error) {
	var valid []wal.TopicIDPartition
	seen := map[wal.TopicIDPartition]bool{}
	for _, tp := range tps {
		if tp.Partition >= 0 && !tp.TopicID.IsZero() && !seen[tp] {
			seen[tp] = true
			valid = append(valid, tp)
		}
	}
	if len(valid) == 0 {
		return map[wal.TopicIDPartition]*logState{}, nil
	}
	ts, ps := partitionArrays(valid)
	var b pgx.Batch
	b.Queue(lockLogsSQL, ts, ps)
	br := tx.SendBatch(ctx, &b)
	logs, err := scanLogStates(br)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return logs, err
}

// locked is one update transaction of a per-partition admin call, with
// the rows of the call's partitions locked (in order) before any answer:
// what each request's answer reads and changes.
type locked struct {
	ctx   context.Context
	tx    pgx.Tx
	nowMs int64
	logs  map[wal.TopicIDPartition]*logState
	files fileSet // objects the answers deleted batches of
}

// updateLocked answers reqs one at a time inside one update transaction,
// after locking the rows of their partitions (part names a request's
// partition). After the answers it writes the log rows they changed and
// marks the objects they emptied, so a call's answers commit together;
// an error from answer (not a per-request answer, which it returns in
// its result) aborts them all.
func updateLocked[Q, R any](ctx context.Context, cp *ControlPlane, reqs []Q, part func(*Q) wal.TopicIDPartition,
	answer func(l *locked, q *Q) (R, error)) ([]R, error) {
	tps := make([]wal.TopicIDPartition, len(reqs))
	for i := range reqs {
		tps[i] = part(&reqs[i])
	}
	out := make([]R, len(reqs))
	err := cp.update(ctx, func(tx pgx.Tx, nowMs int64) error {
		logs, err := lockLogs(ctx, tx, tps)
		if err != nil {
			return err
		}
		l := &locked{ctx: ctx, tx: tx, nowMs: nowMs, logs: logs, files: fileSet{}}
		for i := range reqs {
			if out[i], err = answer(l, &reqs[i]); err != nil {
				return err
			}
		}
		if err := writeLogs(ctx, tx, logs); err != nil {
			return err
		}
		return markEmptied(ctx, tx, l.files, nowMs)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// fileSet collects the objects a call deleted batches of.
type fileSet map[int64]bool

func (s fileSet) addRows(rows pgx.Rows) (freed int64, err error) {
	for rows.Next() {
		var id, size int64
		if err := rows.Scan(&id, &size); err != nil {
			rows.Close()
			return 0, err
		}
		s[id] = true
		freed += size
	}
	rows.Close()
	return freed, rows.Err()
}

// markEmptied marks for deletion the objects of s left with no batch. It
// locks their rows first (in file_id order), so that of two transactions
// emptying one object from two partitions the second waits and then sees
// the first's deletions: without the lock, each could see the other's
// batch still there and neither would mark the object
// (github.com/aiven/inkless/pull/782).
func markEmptied(ctx context.Context, tx pgx.Tx, s fileSet, nowMs int64) error {
	if len(s) == 0 {
		return nil
	}
	ids := make([]int64, 0, len(s))
	for id := range s {
		ids = append(ids, id)
	}
	if _, err := tx.Exec(ctx, `SELECT file_id FROM files WHERE file_id = ANY($1) ORDER BY file_id FOR NO KEY UPDATE`, ids); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `UPDATE files SET state = $2, marked_for_deletion_at = $3
		WHERE file_id = ANY($1) AND state = $4 AND NOT EXISTS (SELECT 1 FROM batches b WHERE b.file_id = files.file_id)`,
		ids, stateDeleting, nowMs, stateLive)
	if err == nil && testHookAfterEmptinessCheck != nil {
		testHookAfterEmptinessCheck()
	}
	return err
}

// testHookAfterEmptinessCheck, if set (tests only), runs between the
// emptiness check and the commit.
var testHookAfterEmptinessCheck func()

// CreatePartitions implements wal.ControlPlane.
func (cp *ControlPlane) CreatePartitions(ctx context.Context, topics []wal.CreatePartitionsRequest) error {
	for _, t := range topics {
		if t.TopicID.IsZero() || t.NumPartitions < 0 || len(t.Topic) > 0xffff {
			return fmt.Errorf("%w: pgcp: create topic %q (%s) with %d partitions",
				wal.ErrInvalidArgument, t.Topic, t.TopicID, t.NumPartitions)
		}
	}
	var ts [][16]byte
	var ns []string
	var counts []int32
	for _, t := range topics {
		ts, ns, counts = append(ts, t.TopicID), append(ns, t.Topic), append(counts, t.NumPartitions)
	}
	return cp.update(ctx, func(tx pgx.Tx, _ int64) error {
		_, err := tx.Exec(ctx, `INSERT INTO logs (topic_id, partition, topic_name, log_start_offset, high_watermark, diskless_start_offset)
			SELECT t, p, n, 0, 0, 0 FROM unnest($1::uuid[], $2::text[], $3::int4[]) AS v(t, n, c), generate_series(0, c - 1) AS p
			ORDER BY t, p ON CONFLICT DO NOTHING`, ts, ns, counts)
		return err
	})
}

// DeleteTopics implements wal.ControlPlane.
func (cp *ControlPlane) DeleteTopics(ctx context.Context, topicIDs []wal.TopicID) error {
	ids := make([][16]byte, 0, len(topicIDs))
	for _, id := range topicIDs {
		ids = append(ids, id)
	}
	return cp.update(ctx, func(tx pgx.Tx, nowMs int64) error {
		if _, err := tx.Exec(ctx, `SELECT 1 FROM logs WHERE topic_id = ANY($1) ORDER BY topic_id, partition FOR UPDATE`, ids); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `DELETE FROM batches WHERE topic_id = ANY($1) RETURNING file_id, byte_size`, ids)
		if err != nil {
			return err
		}
		files := fileSet{}
		if _, err := files.addRows(rows); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM producer_state WHERE topic_id = ANY($1)`, ids); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM logs WHERE topic_id = ANY($1)`, ids); err != nil {
			return err
		}
		return markEmptied(ctx, tx, files, nowMs)
	})
}

// DeleteRecords implements wal.ControlPlane.
func (cp *ControlPlane) DeleteRecords(ctx context.Context, reqs []wal.DeleteRecordsRequest) ([]wal.DeleteRecordsResult, error) {
	return updateLocked(ctx, cp, reqs, func(q *wal.DeleteRecordsRequest) wal.TopicIDPartition { return q.Partition },
		func(lk *locked, q *wal.DeleteRecordsRequest) (wal.DeleteRecordsResult, error) {
			l := lk.logs[q.Partition]
			if l == nil {
				return wal.DeleteRecordsResult{Err: unknown(q.Partition), LogStartOffset: -1}, nil
			}
			offset := q.Offset
			if offset == -1 {
				offset = l.hw
			}
			if offset < 0 || offset > l.hw {
				return wal.DeleteRecordsResult{Err: outOfRange(q.Partition, q.Offset, l), LogStartOffset: -1}, nil
			}
			if offset <= l.w {
				return wal.DeleteRecordsResult{LogStartOffset: l.w}, nil
			}
			if err := cutRunAt(lk.ctx, lk.tx, q.Partition, offset); err != nil {
				return wal.DeleteRecordsResult{}, err
			}
			rows, err := lk.tx.Query(lk.ctx, `DELETE FROM batches WHERE topic_id = $1 AND partition = $2 AND last_offset < $3
				RETURNING file_id, byte_size`, [16]byte(q.Partition.TopicID), q.Partition.Partition, offset)
			if err != nil {
				return wal.DeleteRecordsResult{}, err
			}
			freed, err := lk.files.addRows(rows)
			if err != nil {
				return wal.DeleteRecordsResult{}, err
			}
			l.w, l.byteSize, l.dirty = offset, l.byteSize-freed, true
			return wal.DeleteRecordsResult{LogStartOffset: offset}, nil
		})
}

func writeLogs(ctx context.Context, tx pgx.Tx, logs map[wal.TopicIDPartition]*logState) error {
	var b pgx.Batch
	queueLogWrites(&b, logs)
	if b.Len() == 0 {
		return nil
	}
	return tx.SendBatch(ctx, &b).Close()
}

// pruneSQL deletes the batches of one partition whose last offset is at
// or below h (capped at HW) and moves W in the same statement, as
// wal.PrunedLogStart says: with batches left, max(W, min(first base,
// h+1)) (the cap keeps W at most one past what remote storage holds);
// with none, min(HW, max(h+1, W)). The row is locked by the caller.
const pruneSQL = `WITH
	h AS (SELECT LEAST($3::int8, high_watermark) AS h FROM logs WHERE topic_id = $1 AND partition = $2),
	del AS (DELETE FROM batches b USING h WHERE b.topic_id = $1 AND b.partition = $2 AND b.last_offset <= h.h
		RETURNING b.file_id, b.byte_size),
	rest AS (SELECT min(b.base_offset) AS min_base FROM batches b, h WHERE b.topic_id = $1 AND b.partition = $2 AND b.last_offset > h.h)
UPDATE logs SET
	log_start_offset = CASE WHEN rest.min_base IS NOT NULL
		THEN GREATEST(logs.log_start_offset, LEAST(rest.min_base, h.h + 1))
		ELSE LEAST(logs.high_watermark, GREATEST(h.h + 1, logs.log_start_offset)) END,
	byte_size = logs.byte_size - (SELECT coalesce(sum(byte_size), 0) FROM del)::int8
FROM h, rest WHERE logs.topic_id = $1 AND logs.partition = $2
RETURNING logs.log_start_offset, logs.byte_size, ARRAY(SELECT DISTINCT file_id FROM del)`

// PruneDisklessLogs implements wal.ControlPlane.
func (cp *ControlPlane) PruneDisklessLogs(ctx context.Context, reqs []wal.PruneRequest) ([]wal.PruneResult, error) {
	return updateLocked(ctx, cp, reqs, func(q *wal.PruneRequest) wal.TopicIDPartition { return q.Partition },
		func(lk *locked, q *wal.PruneRequest) (wal.PruneResult, error) {
			l := lk.logs[q.Partition]
			switch {
			case l == nil:
				return wal.PruneResult{Err: unknown(q.Partition), LogStartOffset: -1}, nil
			case q.HighestOffsetInRemoteStorage < -1:
				return wal.PruneResult{LogStartOffset: -1, Err: &wal.PartitionError{Partition: q.Partition,
					Err: wal.ErrInvalidArgument, Detail: fmt.Sprintf("highest offset in remote storage %d", q.HighestOffsetInRemoteStorage)}}, nil
			}
			// The batches kept start at the one holding h+1: a run
			// holding it is cut there first.
			if err := cutRunAt(lk.ctx, lk.tx, q.Partition, min(q.HighestOffsetInRemoteStorage, l.hw)+1); err != nil {
				return wal.PruneResult{}, err
			}
			// pruneSQL writes the row itself; l is updated (not
			// dirtied) so later requests of the call see the new W.
			var ids []int64
			if err := lk.tx.QueryRow(lk.ctx, pruneSQL, [16]byte(q.Partition.TopicID), q.Partition.Partition,
				q.HighestOffsetInRemoteStorage).Scan(&l.w, &l.byteSize, &ids); err != nil {
				return wal.PruneResult{}, err
			}
			for _, id := range ids {
				lk.files[id] = true
			}
			return wal.PruneResult{LogStartOffset: l.w}, nil
		})
}

// InitDisklessLog implements wal.ControlPlane.
func (cp *ControlPlane) InitDisklessLog(ctx context.Context, reqs []wal.InitDisklessLogRequest) ([]wal.InitDisklessLogResult, error) {
	return updateLocked(ctx, cp, reqs, func(q *wal.InitDisklessLogRequest) wal.TopicIDPartition { return q.Partition }, initLog)
}

// initLog answers one InitDisklessLog request.
func initLog(lk *locked, q *wal.InitDisklessLogRequest) (wal.InitDisklessLogResult, error) {
	ctx, tx := lk.ctx, lk.tx
	if err := q.Validate(); err != nil {
		return wal.InitDisklessLogResult{Err: err}, nil
	}
	id, part := [16]byte(q.Partition.TopicID), q.Partition.Partition
	if l := lk.logs[q.Partition]; l != nil {
		var s int64
		if err := tx.QueryRow(ctx, `SELECT diskless_start_offset FROM logs WHERE topic_id = $1 AND partition = $2`, id, part).Scan(&s); err != nil {
			return wal.InitDisklessLogResult{}, err
		}
		// An empty placeholder (created while the switch was under
		// way) must not answer LATEST = 0 for a sealed partition: a
		// seal > 0 overwrites it.
		placeholder := l.hw == 0 && s == 0 && l.byteSize == 0
		if !placeholder || q.DisklessStartOffset == 0 {
			return wal.InitDisklessLogResult{AlreadyInitialised: true}, nil
		}
		if _, err := tx.Exec(ctx, `DELETE FROM producer_state WHERE topic_id = $1 AND partition = $2`, id, part); err != nil {
			return wal.InitDisklessLogResult{}, err
		}
		if _, err := tx.Exec(ctx, `UPDATE logs SET topic_name = CASE WHEN $3 = '' THEN topic_name ELSE $3 END,
				log_start_offset = $4, high_watermark = $5, diskless_start_offset = $5, cross_tier_log_start_offset = $6, byte_size = 0
			WHERE topic_id = $1 AND partition = $2`, id, part, q.Topic, q.LogStartOffset, q.DisklessStartOffset, q.InitialCrossTierLogStart()); err != nil {
			return wal.InitDisklessLogResult{}, err
		}
	} else {
		tag, err := tx.Exec(ctx, `INSERT INTO logs (topic_id, partition, topic_name, log_start_offset, high_watermark, diskless_start_offset,
				cross_tier_log_start_offset)
			VALUES ($1, $2, $3, $4, $5, $5, $6) ON CONFLICT DO NOTHING`, id, part, q.Topic, q.LogStartOffset, q.DisklessStartOffset,
			q.InitialCrossTierLogStart())
		if err != nil {
			return wal.InitDisklessLogResult{}, err
		}
		if tag.RowsAffected() == 0 {
			return wal.InitDisklessLogResult{}, errRetry // created meanwhile: lock it and decide again
		}
	}
	lk.logs[q.Partition] = &logState{w: q.LogStartOffset, hw: q.DisklessStartOffset}
	var b pgx.Batch
	for j := range q.ProducerStates {
		queueProducerWrite(&b, q.Partition, &q.ProducerStates[j])
	}
	if b.Len() > 0 {
		if err := tx.SendBatch(ctx, &b).Close(); err != nil {
			return wal.InitDisklessLogResult{}, err
		}
	}
	return wal.InitDisklessLogResult{}, nil
}

// RepairDisklessLog implements wal.ControlPlane.
func (cp *ControlPlane) RepairDisklessLog(ctx context.Context, reqs []wal.RepairDisklessLogRequest) ([]wal.RepairDisklessLogResult, error) {
	for _, q := range reqs {
		if q.DisklessStartOffset < 0 {
			return nil, fmt.Errorf("%w: pgcp: repair %s with diskless start %d", wal.ErrInvalidArgument, q.Partition, q.DisklessStartOffset)
		}
	}
	return updateLocked(ctx, cp, reqs, func(q *wal.RepairDisklessLogRequest) wal.TopicIDPartition { return q.Partition },
		func(lk *locked, q *wal.RepairDisklessLogRequest) (wal.RepairDisklessLogResult, error) {
			if lk.logs[q.Partition] == nil {
				return wal.RepairDisklessLogResult{}, nil
			}
			if _, err := lk.tx.Exec(lk.ctx, `UPDATE logs SET diskless_start_offset = $3 WHERE topic_id = $1 AND partition = $2`,
				[16]byte(q.Partition.TopicID), q.Partition.Partition, q.DisklessStartOffset); err != nil {
				return wal.RepairDisklessLogResult{}, err
			}
			return wal.RepairDisklessLogResult{Found: true}, nil
		})
}

// AdvanceCrossTierLogStart implements wal.ControlPlane.
func (cp *ControlPlane) AdvanceCrossTierLogStart(ctx context.Context, reqs []wal.AdvanceCrossTierLogStartRequest) ([]wal.AdvanceCrossTierLogStartResult, error) {
	return updateLocked(ctx, cp, reqs, func(q *wal.AdvanceCrossTierLogStartRequest) wal.TopicIDPartition { return q.Partition },
		func(lk *locked, q *wal.AdvanceCrossTierLogStartRequest) (wal.AdvanceCrossTierLogStartResult, error) {
			switch {
			case lk.logs[q.Partition] == nil:
				return wal.AdvanceCrossTierLogStartResult{Err: unknown(q.Partition), CrossTierLogStart: -1}, nil
			case q.CrossTierLogStart < 0:
				return wal.AdvanceCrossTierLogStartResult{CrossTierLogStart: -1, Err: &wal.PartitionError{
					Partition: q.Partition, Err: wal.ErrInvalidArgument, Detail: fmt.Sprintf("cross-tier log start %d", q.CrossTierLogStart)}}, nil
			}
			var x int64
			err := lk.tx.QueryRow(lk.ctx, `UPDATE logs SET cross_tier_log_start_offset = GREATEST(cross_tier_log_start_offset, $3)
				WHERE topic_id = $1 AND partition = $2 RETURNING cross_tier_log_start_offset`,
				[16]byte(q.Partition.TopicID), q.Partition.Partition, q.CrossTierLogStart).Scan(&x)
			return wal.AdvanceCrossTierLogStartResult{CrossTierLogStart: x}, err
		})
}

// retentionPage is how many batches EnforceRetention reads at a time.
const retentionPage = 512

// EnforceRetention implements wal.ControlPlane: wal.RetentionScan decides
// over the partition's batches in offset order, read a page at a time
// under the partition's lock.
func (cp *ControlPlane) EnforceRetention(ctx context.Context, reqs []wal.RetentionRequest, maxBatches int) ([]wal.RetentionResult, error) {
	return updateLocked(ctx, cp, reqs, func(q *wal.RetentionRequest) wal.TopicIDPartition { return q.Partition },
		func(lk *locked, q *wal.RetentionRequest) (wal.RetentionResult, error) {
			l := lk.logs[q.Partition]
			if l == nil {
				return wal.RetentionResult{Err: unknown(q.Partition), LogStartOffset: -1}, nil
			}
			return retain(lk.ctx, lk.tx, *q, l, maxBatches, lk.nowMs, lk.files)
		})
}

func retain(ctx context.Context, tx pgx.Tx, q wal.RetentionRequest, l *logState, maxBatches int, nowMs int64, files fileSet) (wal.RetentionResult, error) {
	id, part := [16]byte(q.Partition.TopicID), q.Partition.Partition
	scan := wal.NewRetentionScan(l.byteSize, q.RetentionBytes, q.RetentionMs, nowMs, maxBatches)
	res := wal.RetentionResult{LogStartOffset: l.w}
	lastVictim, nextBase, remain := int64(-1), int64(0), false
	after := int64(-1)
scan:
	for {
		rows, err := tx.Query(ctx, `SELECT `+batchColumns+` FROM batches b JOIN files f ON f.file_id = b.file_id
			WHERE b.topic_id = $1 AND b.partition = $2 AND b.last_offset > $3 ORDER BY b.last_offset LIMIT $4`,
			id, part, after, retentionPage)
		if err != nil {
			return res, err
		}
		n := 0
		stop := false
		for rows.Next() {
			n++
			if stop {
				continue
			}
			batches, err := scanBatches(rows)
			if err != nil {
				rows.Close()
				return res, err
			}
			for _, b := range batches {
				after = b.LastOffset
				if !scan.Delete(b.Size, b.EffectiveTimestamp()) {
					nextBase, remain, stop = b.BaseOffset, true, true
					break
				}
				lastVictim = b.LastOffset
				res.DeletedBatches++
				res.DeletedBytes += b.Size
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return res, err
		}
		if stop || n < retentionPage {
			break scan
		}
	}
	if res.DeletedBatches == 0 {
		return res, nil
	}
	if remain {
		// The first batch kept may be inside a run of victims.
		if err := cutRunAt(ctx, tx, q.Partition, nextBase); err != nil {
			return res, err
		}
	}
	rows, err := tx.Query(ctx, `DELETE FROM batches WHERE topic_id = $1 AND partition = $2 AND last_offset <= $3
		RETURNING file_id, byte_size`, id, part, lastVictim)
	if err != nil {
		return res, err
	}
	freed, err := files.addRows(rows)
	if err != nil {
		return res, err
	}
	if freed != res.DeletedBytes {
		return res, fmt.Errorf("%w: pgcp: retention of %s deleted %d bytes, scanned %d", wal.ErrCorruption, q.Partition, freed, res.DeletedBytes)
	}
	w := l.hw
	if remain {
		w = nextBase
	}
	l.w = max(l.w, w)
	l.byteSize -= res.DeletedBytes
	l.dirty = true
	res.LogStartOffset = l.w
	return res, nil
}
