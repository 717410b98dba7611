package pgcp

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tierlog/tierlog/wal"
)

// files.reason and files.state.
const (
	reasonProduce = 1
	reasonOrphan  = 2

	stateLive     = 1
	stateDeleting = 2
)

// storedResult is one batch's answer as files.result_* keep it (the
// status as its wal.BatchStatus number).
type storedResult = wal.StoredBatchResult

// CommitFile implements wal.ControlPlane: one transaction that registers
// the object, locks the partitions' rows in (topic_id, partition) order,
// decides every batch in list order (wal.CheckSequence for idempotent
// ones), inserts the accepted batches and writes each partition's high
// watermark back once.
func (cp *ControlPlane) CommitFile(ctx context.Context, req wal.CommitFileRequest) (wal.CommitFileResult, error) {
	if err := cp.begin(ctx); err != nil {
		return wal.CommitFileResult{}, err
	}
	if err := req.Validate(); err != nil {
		return wal.CommitFileResult{}, err
	}
	digest := req.Digest()
	start := time.Now()
	var results []storedResult
	err := cp.retry(ctx, true, func() error {
		var err error
		results, err = cp.commitOnce(ctx, &req, digest[:])
		return err
	})
	cp.metrics.commitNanos.Add(int64(time.Since(start)))
	if err != nil {
		cp.metrics.commitErrors.Add(1)
		return wal.CommitFileResult{}, err
	}
	cp.metrics.commits.Add(1)
	return wal.CommitAnswer(&req, results), nil
}

// commitOnce is one attempt of a commit, in two round trips on one pooled
// connection: BEGIN, the partition locks and the reads, then the writes
// and COMMIT in one pipeline. The partition rows are locked from the end
// of the first pipeline to the COMMIT: one round trip and the decisions, where BEGIN, two pipelines and COMMIT each waited
// for their answer before. A connection left inside the transaction (a
// failed statement, a refused key, a decision error) is rolled back
// before it returns to the pool, or closed.
func (cp *ControlPlane) commitOnce(ctx context.Context, req *wal.CommitFileRequest, digest []byte) ([]storedResult, error) {
	c, err := cp.pool.Acquire(ctx)
	if err != nil {
		return nil, &stageError{err: err, began: false}
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
	return commitTx(ctx, c.Conn(), req, digest, cp.now().UnixMilli())
}

type logState struct {
	w, hw, byteSize int64
	dirty           bool
}

type producerKey struct {
	tp  wal.TopicIDPartition
	pid int64
}

const lockLogsSQL = `SELECT topic_id, partition, log_start_offset, high_watermark, byte_size FROM logs
WHERE (topic_id, partition) IN (SELECT * FROM unnest($1::uuid[], $2::int4[]))
ORDER BY topic_id, partition FOR UPDATE`

func commitTx(ctx context.Context, conn *pgx.Conn, req *wal.CommitFileRequest, digest []byte, nowMs int64) ([]storedResult, error) {
	// One round trip: begin, confirm the reservation, register the object,
	// lock the partitions (held from here to the COMMIT of the next round
	// trip), read the producers.
	parts := partitionsOf(req)
	var pTopics [][16]byte
	var pParts []int32
	var pIDs []int64
	seen := map[producerKey]bool{}
	for _, b := range req.Batches {
		k := producerKey{b.Partition, b.ProducerID}
		if b.Idempotent() && b.Partition.Partition >= 0 && !seen[k] {
			seen[k] = true
			pTopics, pParts, pIDs = append(pTopics, b.Partition.TopicID), append(pParts, b.Partition.Partition), append(pIDs, b.ProducerID)
		}
	}
	lt, lp := partitionArrays(parts)
	var batch pgx.Batch
	batch.Queue(`BEGIN ISOLATION LEVEL READ COMMITTED`)
	batch.Queue(`DELETE FROM reservations WHERE object_key = $1`, req.ObjectKey)
	batch.Queue(`INSERT INTO files (object_key, reason, state, uploader_broker_id, broker_epoch, size, committed_at, digest)
		SELECT $1, $2, $3, $4, $5, $6, $7, $8 WHERE NOT EXISTS (SELECT 1 FROM reaped_keys WHERE object_key = $1)
		ON CONFLICT (object_key) DO NOTHING RETURNING file_id`,
		req.ObjectKey, reasonProduce, stateLive, req.BrokerID, req.BrokerEpoch, req.ObjectSize, nowMs, digest)
	batch.Queue(lockLogsSQL, lt, lp)
	// Under the lock: READ COMMITTED gives this statement a snapshot
	// taken after the lock was granted, so it sees the producer state of
	// every commit that held these partitions before.
	batch.Queue(`SELECT topic_id, partition, producer_id, producer_epoch, base_sequences, last_sequences, assigned_offsets, timestamps
		FROM producer_state WHERE (topic_id, partition, producer_id) IN (SELECT * FROM unnest($1::uuid[], $2::int4[], $3::int8[]))`,
		pTopics, pParts, pIDs)
	fileID, logs, producers, err := readPipeline(conn.SendBatch(ctx, &batch))
	if errors.Is(err, pgx.ErrNoRows) {
		// The key is registered (or reaped): answer from the stored row
		// and commit the reservation's removal.
		results, err := existingCommit(ctx, conn, req)
		if err != nil {
			return nil, err
		}
		if _, err := conn.Exec(ctx, "COMMIT"); err != nil {
			return nil, &stageError{err: err, began: true}
		}
		return results, nil
	}
	if err != nil {
		// No COMMIT was sent: the server rolls the transaction back
		// whatever became of the connection.
		return nil, &stageError{err: err, began: false}
	}

	// Decide every batch in list order.
	results := make([]storedResult, len(req.Batches))
	dirtyProducers := map[producerKey]bool{}
	var rows batchRows
	accepted := false
	for i := range req.Batches {
		b := &req.Batches[i]
		l := logs[b.Partition]
		if l == nil || b.Partition.TopicID.IsZero() {
			results[i] = wal.UnknownPartitionResult()
			continue
		}
		assigned := l.hw
		if assigned > math.MaxInt64-b.OffsetCount() {
			return nil, fmt.Errorf("%w: pgcp: partition %s: %d offsets after the high watermark %d overflow",
				wal.ErrInvalidArgument, b.Partition, b.OffsetCount(), assigned)
		}
		if b.Idempotent() {
			k := producerKey{b.Partition, b.ProducerID}
			st := producers[k]
			c := wal.CheckSequence(st, b.ProducerEpoch, b.BaseSequence, b.LastSequence())
			if c.Err != nil {
				results[i] = wal.RejectedResult(c, l.w)
				continue
			}
			ts := b.MaxTimestamp
			if b.TimestampType == wal.LogAppendTime {
				ts = nowMs
			}
			next := wal.AcceptSequence(st, b.ProducerID, b.ProducerEpoch, wal.ProducerBatch{
				BaseSequence: b.BaseSequence, LastSequence: b.LastSequence(), AssignedOffset: assigned, Timestamp: ts})
			producers[k], dirtyProducers[k] = &next, true
		}
		l.hw += b.OffsetCount()
		l.byteSize += b.Size
		l.dirty = true
		rows.add(b, assigned, l.hw-1, nowMs)
		results[i] = storedResult{Status: wal.BatchAccepted, BaseOffset: assigned, LogAppendTime: nowMs, LogStartOffset: l.w}
		accepted = true
	}

	// One round trip: the batches, the high watermarks, the producers,
	// the stored answer, COMMIT. A statement's error makes the server skip
	// the rest of the pipeline, COMMIT included.
	var wb pgx.Batch
	if len(rows.last) > 0 {
		wb.Queue(`INSERT INTO batches (topic_id, partition, last_offset, base_offset, file_id, byte_offset, byte_size,
				timestamp_type, batch_max_timestamp, log_append_timestamp,
				crc, partition_leader_epoch, producer_id, producer_epoch, base_sequence)
			SELECT t, p, l, b, $5, bo, bs, tt, mt, at, crc, ple, pid, pe, seq
			FROM unnest($1::uuid[], $2::int4[], $3::int8[], $4::int8[], $6::int8[], $7::int8[], $8::int2[], $9::int8[], $10::int8[],
					$11::int8[], $12::int4[], $13::int8[], $14::int2[], $15::int4[])
				AS v(t, p, l, b, bo, bs, tt, mt, at, crc, ple, pid, pe, seq)`,
			rows.topic, rows.part, rows.last, rows.base, fileID, rows.byteOffset, rows.size, rows.tsType, rows.maxTs, rows.appendTs,
			rows.crc, rows.leaderEpoch, rows.producerID, rows.producerEpoch, rows.baseSequence)
	}
	queueLogWrites(&wb, logs)
	for k := range dirtyProducers {
		queueProducerWrite(&wb, k.tp, producers[k])
	}
	st, base, at, ls, detail := resultArrays(results)
	marked := any(nil)
	state := stateLive
	if !accepted {
		marked, state = nowMs, stateDeleting
	}
	wb.Queue(`UPDATE files SET result_status = $2, result_base_offset = $3, result_append_time = $4, result_log_start = $5,
			result_detail = $6, state = $7, marked_for_deletion_at = $8 WHERE file_id = $1`,
		fileID, st, base, at, ls, detail, state, marked)
	wb.Queue(`COMMIT`)
	if testHookBeforeCommit != nil {
		testHookBeforeCommit()
	}
	if err := conn.SendBatch(ctx, &wb).Close(); err != nil {
		return nil, &stageError{err: err, began: true}
	}
	return results, nil
}

// readPipeline reads the first pipeline's answers: BEGIN, the
// reservation's removal, the new file's id (pgx.ErrNoRows: the key is
// taken), the locked partitions, the producers.
func readPipeline(br pgx.BatchResults) (fileID int64, logs map[wal.TopicIDPartition]*logState, producers map[producerKey]*wal.ProducerState, err error) {
	defer func() {
		if cerr := br.Close(); err == nil {
			err = cerr
		}
	}()
	for range 2 {
		if _, err = br.Exec(); err != nil {
			return
		}
	}
	if err = br.QueryRow().Scan(&fileID); err != nil {
		return
	}
	if logs, err = scanLogStates(br); err != nil {
		return
	}
	producers, err = scanProducers(br)
	return
}

// testHookBeforeCommit, if set (tests only), runs when a commit's
// decisions are made and its last pipeline (the writes and COMMIT) is not
// sent.
var testHookBeforeCommit func()

// existingCommit answers a commit whose key is registered (or reaped): a
// retry of the same content (wal.CommitFileRequest.MatchesDigest, which
// also matches a digest stored before schema version 2) gets the first
// answer.
func existingCommit(ctx context.Context, tx interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, req *wal.CommitFileRequest) ([]storedResult, error) {
	var reason int16
	var stored []byte
	var st []int16
	var base, at, ls []int64
	var detail []string
	err := tx.QueryRow(ctx, `SELECT reason, digest, result_status, result_base_offset, result_append_time, result_log_start, result_detail
		FROM files WHERE object_key = $1`, req.ObjectKey).Scan(&reason, &stored, &st, &base, &at, &ls, &detail)
	// No row while the insert was refused: only the tombstone in
	// reaped_keys (the orphan's row is gone after DeleteFiles).
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && reason == reasonOrphan) {
		return nil, fmt.Errorf("%w (%w): %q: its reservation expired before the commit",
			wal.ErrObjectReaped, wal.ErrObjectKeyReused, req.ObjectKey)
	}
	if err != nil {
		return nil, err
	}
	if reason != reasonProduce || len(stored) != 32 || !req.MatchesDigest([32]byte(stored)) {
		return nil, fmt.Errorf("%w: %q is already registered with other content",
			wal.ErrObjectKeyReused, req.ObjectKey)
	}
	if len(st) != len(req.Batches) || len(base) != len(st) || len(at) != len(st) || len(ls) != len(st) || len(detail) != len(st) {
		return nil, fmt.Errorf("%w: pgcp: object %q stores %d results for %d batches", wal.ErrCorruption, req.ObjectKey, len(st), len(req.Batches))
	}
	out := make([]storedResult, len(st))
	for i := range st {
		if st[i] < 0 || st[i] > 255 || !wal.BatchStatus(st[i]).Valid() {
			return nil, fmt.Errorf("%w: pgcp: object %q: result status %d", wal.ErrCorruption, req.ObjectKey, st[i])
		}
		out[i] = storedResult{Status: wal.BatchStatus(st[i]), BaseOffset: base[i], LogAppendTime: at[i], LogStartOffset: ls[i], Detail: detail[i]}
	}
	return out, nil
}

func resultArrays(rs []storedResult) (st []int16, base, at, ls []int64, detail []string) {
	st, base, at, ls, detail = []int16{}, []int64{}, []int64{}, []int64{}, []string{}
	for _, r := range rs {
		st, base, at, ls, detail = append(st, int16(r.Status)), append(base, r.BaseOffset), append(at, r.LogAppendTime), append(ls, r.LogStartOffset), append(detail, r.Detail)
	}
	return
}

// partitionsOf returns the distinct partitions of a commit that can have
// a row.
func partitionsOf(req *wal.CommitFileRequest) []wal.TopicIDPartition {
	seen := map[wal.TopicIDPartition]bool{}
	var out []wal.TopicIDPartition
	for _, b := range req.Batches {
		if !seen[b.Partition] && b.Partition.Partition >= 0 && !b.Partition.TopicID.IsZero() {
			seen[b.Partition] = true
			out = append(out, b.Partition)
		}
	}
	return out
}

func partitionArrays(tps []wal.TopicIDPartition) ([][16]byte, []int32) {
	ts, ps := make([][16]byte, 0, len(tps)), make([]int32, 0, len(tps))
	for _, tp := range tps {
		ts, ps = append(ts, tp.TopicID), append(ps, tp.Partition)
	}
	return ts, ps
}

func scanLogStates(rows interface {
	Query() (pgx.Rows, error)
}) (map[wal.TopicIDPartition]*logState, error) {
	r, err := rows.Query()
	if err != nil {
		return nil, err
	}
	out := map[wal.TopicIDPartition]*logState{}
	for r.Next() {
		var tp wal.TopicIDPartition
		var id [16]byte
		l := &logState{}
		if err := r.Scan(&id, &tp.Partition, &l.w, &l.hw, &l.byteSize); err != nil {
			r.Close()
			return nil, err
		}
		tp.TopicID = id
		out[tp] = l
	}
	r.Close()
	return out, r.Err()
}

func scanProducers(br pgx.BatchResults) (map[producerKey]*wal.ProducerState, error) {
	r, err := br.Query()
	if err != nil {
		return nil, err
	}
	out := map[producerKey]*wal.ProducerState{}
	for r.Next() {
		var id [16]byte
		var part int32
		st, err := scanProducer(r, &id, &part)
		if err != nil {
			r.Close()
			return nil, err
		}
		out[producerKey{wal.TopicIDPartition{TopicID: id, Partition: part}, st.ProducerID}] = st
	}
	r.Close()
	return out, r.Err()
}

// scanProducer scans (topic_id, partition, producer_id, producer_epoch,
// base_sequences, last_sequences, assigned_offsets, timestamps).
func scanProducer(r pgx.Rows, id *[16]byte, part *int32) (*wal.ProducerState, error) {
	st := &wal.ProducerState{}
	var bs, ls []int32
	var ao, ts []int64
	if err := r.Scan(id, part, &st.ProducerID, &st.ProducerEpoch, &bs, &ls, &ao, &ts); err != nil {
		return nil, err
	}
	if len(ls) != len(bs) || len(ao) != len(bs) || len(ts) != len(bs) || len(bs) > wal.MaxProducerBatches {
		return nil, fmt.Errorf("%w: pgcp: producer %d: arrays of %d, %d, %d, %d entries", wal.ErrCorruption, st.ProducerID, len(bs), len(ls), len(ao), len(ts))
	}
	for i := range bs {
		st.Batches = append(st.Batches, wal.ProducerBatch{BaseSequence: bs[i], LastSequence: ls[i], AssignedOffset: ao[i], Timestamp: ts[i]})
	}
	return st, nil
}

func queueProducerWrite(b *pgx.Batch, tp wal.TopicIDPartition, st *wal.ProducerState) {
	bs, ls, ao, ts := []int32{}, []int32{}, []int64{}, []int64{}
	for _, e := range st.Batches {
		bs, ls, ao, ts = append(bs, e.BaseSequence), append(ls, e.LastSequence), append(ao, e.AssignedOffset), append(ts, e.Timestamp)
	}
	b.Queue(`INSERT INTO producer_state (topic_id, partition, producer_id, producer_epoch, base_sequences, last_sequences, assigned_offsets, timestamps)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (topic_id, partition, producer_id) DO UPDATE SET producer_epoch = EXCLUDED.producer_epoch,
			base_sequences = EXCLUDED.base_sequences, last_sequences = EXCLUDED.last_sequences,
			assigned_offsets = EXCLUDED.assigned_offsets, timestamps = EXCLUDED.timestamps`,
		[16]byte(tp.TopicID), tp.Partition, st.ProducerID, st.ProducerEpoch, bs, ls, ao, ts)
}

// queueLogWrites writes back the high watermark and byte size of the
// changed partitions: one statement, each row once.
func queueLogWrites(b *pgx.Batch, logs map[wal.TopicIDPartition]*logState) {
	var ts [][16]byte
	var ps []int32
	var ws, hws, sizes []int64
	for tp, l := range logs {
		if l.dirty {
			ts, ps = append(ts, tp.TopicID), append(ps, tp.Partition)
			ws, hws, sizes = append(ws, l.w), append(hws, l.hw), append(sizes, l.byteSize)
		}
	}
	if len(ts) == 0 {
		return
	}
	b.Queue(`UPDATE logs SET log_start_offset = v.w, high_watermark = v.hw, byte_size = v.bs
		FROM unnest($1::uuid[], $2::int4[], $3::int8[], $4::int8[], $5::int8[]) AS v(t, p, w, hw, bs)
		WHERE logs.topic_id = v.t AND logs.partition = v.p`, ts, ps, ws, hws, sizes)
}

// batchRows collects the accepted batches as column arrays.
type batchRows struct {
	topic                                         [][16]byte
	part                                          []int32
	last, base, byteOffset, size, maxTs, appendTs []int64
	tsType                                        []int16
	// The binding (wal.BatchBinding); crc is the unsigned CRC in an int8.
	crc, producerID           []int64
	leaderEpoch, baseSequence []int32
	producerEpoch             []int16
}

func (r *batchRows) add(b *wal.CommitBatch, base, last, nowMs int64) {
	r.topic, r.part = append(r.topic, b.Partition.TopicID), append(r.part, b.Partition.Partition)
	r.last, r.base = append(r.last, last), append(r.base, base)
	r.byteOffset, r.size = append(r.byteOffset, b.ByteOffset), append(r.size, b.Size)
	r.tsType, r.maxTs, r.appendTs = append(r.tsType, int16(b.TimestampType)), append(r.maxTs, b.MaxTimestamp), append(r.appendTs, nowMs)
	bb := b.Binding()
	r.crc, r.leaderEpoch = append(r.crc, int64(bb.CRC)), append(r.leaderEpoch, bb.PartitionLeaderEpoch)
	r.producerID, r.producerEpoch, r.baseSequence = append(r.producerID, bb.ProducerID), append(r.producerEpoch, bb.ProducerEpoch),
		append(r.baseSequence, bb.BaseSequence)
}
