package pgcp

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tierlog/tierlog/internal/groupcommit"
	"github.com/tierlog/tierlog/internal/mutation"
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

// CommitFile implements wal.ControlPlane. Calls that arrive while a
// group is being written wait in the commit queue and are written
// together as the next group: one transaction that registers the
// objects, locks the union of their partitions' rows in (topic_id,
// partition) order, decides every call in arrival order and every batch
// in list order (wal.CheckSequence for idempotent ones), inserts the
// accepted batches and writes each partition's high watermark back once
// (see commitGroupTx).
func (cp *ControlPlane) CommitFile(ctx context.Context, req wal.CommitFileRequest) (wal.CommitFileResult, error) {
	if err := cp.begin(ctx); err != nil {
		return wal.CommitFileResult{}, err
	}
	if err := req.Validate(); err != nil {
		return wal.CommitFileResult{}, err
	}
	start := time.Now()
	c := &commitCall{ctx: ctx, req: &req, digest: req.Digest()}
	cp.commits.Do([]*commitCall{c}, maxCommitGroup, cp.commitGroup)
	cp.metrics.commitNanos.Add(int64(time.Since(start)))
	if c.err != nil {
		cp.metrics.commitErrors.Add(1)
		return wal.CommitFileResult{}, c.err
	}
	cp.metrics.commits.Add(1)
	return wal.CommitAnswer(&req, c.results), nil
}

// CommitFiles implements wal.ControlPlane: the valid requests go into the
// commit queue as one entry, so that they are calls of one group
// transaction, decided one after the other in list order (an invalid one
// gets its error at once).
func (cp *ControlPlane) CommitFiles(ctx context.Context, reqs []wal.CommitFileRequest) ([]wal.CommitFilesResult, error) {
	if err := cp.begin(ctx); err != nil {
		return nil, err
	}
	out := make([]wal.CommitFilesResult, len(reqs))
	calls := make([]*commitCall, 0, len(reqs))
	for i := range reqs {
		if err := reqs[i].Validate(); err != nil {
			out[i].Err = err
			continue
		}
		calls = append(calls, &commitCall{ctx: ctx, req: &reqs[i], digest: reqs[i].Digest(), index: i})
	}
	if len(calls) == 0 {
		return out, nil
	}
	start := time.Now()
	cp.commits.Do(calls, maxCommitGroup, cp.commitGroup)
	took := time.Since(start)
	for _, c := range calls {
		cp.metrics.commitNanos.Add(int64(took))
		if c.err != nil {
			cp.metrics.commitErrors.Add(1)
			out[c.index].Err = c.err
			continue
		}
		cp.metrics.commits.Add(1)
		out[c.index].CommitFileResult = wal.CommitAnswer(c.req, c.results)
	}
	return out, nil
}

// maxCommitGroup caps the entries of the commit queue in one group (a
// CommitFile is one entry, a CommitFiles one entry of all its requests),
// so that a group's statements and its lock time stay bounded.
const maxCommitGroup = 64

// commitCall is one commit in the commit queue; results and err are its
// answer, set by the leader that writes it.
type commitCall struct {
	ctx     context.Context
	req     *wal.CommitFileRequest
	digest  [32]byte
	index   int // in its CommitFiles list
	results []storedResult
	err     error
}

// commitGroup writes a group of the commit queue: the calls whose context
// is still live, as transactions of calls with distinct keys (a key
// repeated in the group, a retry racing its commit, starts the next
// transaction, which answers it from the stored row). Every call is
// answered when it returns.
func (cp *ControlPlane) commitGroup(group [][]*commitCall) {
	live := groupcommit.Live(group, func(c *commitCall) bool {
		c.err = cp.begin(c.ctx)
		return c.err != nil
	})
	for len(live) > 0 {
		n := distinctKeys(live)
		cp.commitCalls(live[:n])
		live = live[n:]
	}
	cp.metrics.commitGroups.Add(1)
}

// distinctKeys is the length of the longest prefix of calls whose keys
// are all different.
func distinctKeys(calls []*commitCall) int {
	seen := make(map[string]bool, len(calls))
	for i, c := range calls {
		if seen[c.req.ObjectKey] {
			return i
		}
		seen[c.req.ObjectKey] = true
	}
	return len(calls)
}

// commitCalls runs the group transaction of calls (distinct keys), with
// the retries of cp.retry; if it fails, every call gets its error.
func (cp *ControlPlane) commitCalls(calls []*commitCall) {
	// The group is the callers', not only the leader's: it runs to its end
	// (bounded by the retries) whoever of them gives up waiting.
	ctx := context.WithoutCancel(calls[0].ctx)
	err := cp.retry(ctx, true, func() error {
		for _, c := range calls {
			c.results, c.err = nil, nil
		}
		return cp.commitOnce(ctx, calls)
	})
	if err != nil {
		for _, c := range calls {
			c.results, c.err = nil, err
		}
	}
}

// commitOnce is one attempt of a group transaction on one pooled
// connection. A connection left inside the transaction (a failed
// statement, a decision error) is rolled back before it returns to the
// pool, or closed.
func (cp *ControlPlane) commitOnce(ctx context.Context, calls []*commitCall) error {
	start := time.Now()
	c, err := cp.pool.Acquire(ctx)
	cp.metrics.stageAttempts.Add(1)
	cp.metrics.acquireNanos.Add(int64(time.Since(start)))
	if err != nil {
		return &stageError{err: err, began: false}
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
	return commitGroupTx(ctx, c.Conn(), calls, cp.now().UnixMilli(), &cp.metrics)
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

// commitGroupTx commits calls (distinct keys) in one transaction of two
// round trips, more only for keys already registered:
//
//  1. BEGIN, the reservations' removal (their rows stay locked to the
//     COMMIT, which IsSafeToDeleteObject waits for), the objects'
//     registration (in key order), the lock of every partition of the
//     group (in (topic_id, partition) order, held to the COMMIT), the
//     producers' states.
//  2. For a key already registered or reaped: its stored answer or its
//     error (existingCommit), one round trip each.
//  3. The decisions, in Go, call after call in arrival order, each on the
//     rows as the calls before it left them. A call that fails (an
//     offset overflow) gets its error and its changes are undone.
//  4. The batches, the high watermarks, the producers, each object's
//     stored answer, the failed calls' objects removed and reservations
//     put back, and COMMIT, in one pipeline: the group's commit point.
//     A statement's error makes the server skip the rest of the
//     pipeline, COMMIT included, and fails the whole group.
func commitGroupTx(ctx context.Context, conn *pgx.Conn, calls []*commitCall, nowMs int64, m *counters) error {
	stage := time.Now()
	lap := func(sum *atomic.Int64) {
		now := time.Now()
		sum.Add(int64(now.Sub(stage)))
		stage = now
	}
	keys := make([]string, len(calls))
	brokers := make([]int32, len(calls))
	epochs, sizes := make([]int64, len(calls)), make([]int64, len(calls))
	digests := make([][]byte, len(calls))
	var parts []wal.TopicIDPartition
	seenPart := map[wal.TopicIDPartition]bool{}
	var pTopics [][16]byte
	var pParts []int32
	var pIDs []int64
	seen := map[producerKey]bool{}
	for i, c := range calls {
		keys[i], brokers[i], epochs[i], sizes[i], digests[i] = c.req.ObjectKey, c.req.BrokerID, c.req.BrokerEpoch, c.req.ObjectSize, c.digest[:]
		for _, tp := range partitionsOf(c.req) {
			if !seenPart[tp] {
				seenPart[tp] = true
				parts = append(parts, tp)
			}
		}
		for _, b := range c.req.Batches {
			k := producerKey{b.Partition, b.ProducerID}
			if b.Idempotent() && b.Partition.Partition >= 0 && !seen[k] {
				seen[k] = true
				pTopics, pParts, pIDs = append(pTopics, b.Partition.TopicID), append(pParts, b.Partition.Partition), append(pIDs, b.ProducerID)
			}
		}
	}
	lt, lp := partitionArrays(parts)
	var batch pgx.Batch
	batch.Queue(`BEGIN ISOLATION LEVEL READ COMMITTED`)
	batch.Queue(`DELETE FROM reservations WHERE object_key = ANY($1::text[]) RETURNING object_key, reserved_at`, keys)
	batch.Queue(`INSERT INTO files (object_key, reason, state, uploader_broker_id, broker_epoch, size, committed_at, digest)
		SELECT k, $2, $3, b, e, s, $7, d FROM unnest($1::text[], $4::int4[], $5::int8[], $6::int8[], $8::bytea[]) AS v(k, b, e, s, d)
		WHERE NOT EXISTS (SELECT 1 FROM reaped_keys r WHERE r.object_key = v.k)
		ORDER BY k
		ON CONFLICT (object_key) DO NOTHING RETURNING object_key, file_id`,
		keys, reasonProduce, stateLive, brokers, epochs, sizes, nowMs, digests)
	batch.Queue(lockLogsSQL, lt, lp)
	// Under the lock: READ COMMITTED gives this statement a snapshot
	// taken after the lock was granted, so it sees the producer state of
	// every commit that held these partitions before.
	batch.Queue(`SELECT topic_id, partition, producer_id, producer_epoch, base_sequences, last_sequences, assigned_offsets, timestamps
		FROM producer_state WHERE (topic_id, partition, producer_id) IN (SELECT * FROM unnest($1::uuid[], $2::int4[], $3::int8[]))`,
		pTopics, pParts, pIDs)
	reserved, fileIDs, logs, producers, err := readPipeline(conn.SendBatch(ctx, &batch))
	lap(&m.readNanos)
	if err != nil {
		// No COMMIT was sent: the server rolls the transaction back
		// whatever became of the connection.
		return &stageError{err: err, began: false}
	}

	// Keys registered before (retries) or reaped: answered from the
	// stored row, or refused, each alone.
	for _, c := range calls {
		if _, ok := fileIDs[c.req.ObjectKey]; ok {
			continue
		}
		c.results, c.err = existingCommit(ctx, conn, c.req)
		if c.err != nil && !errors.Is(c.err, wal.ErrObjectKeyReused) && !errors.Is(c.err, wal.ErrCorruption) {
			return &stageError{err: c.err, began: true}
		}
	}

	// Decide every new call in arrival order.
	dirtyProducers := map[producerKey]bool{}
	var rows batchRows
	var okIDs []int64
	var okResults [][]storedResult
	var failedIDs []int64
	var putBackKeys []string
	var putBackAt []int64
	for _, c := range calls {
		fileID, ok := fileIDs[c.req.ObjectKey]
		if !ok {
			continue
		}
		c.results, c.err = decideCommit(c.req, fileID, logs, producers, dirtyProducers, &rows, nowMs)
		if c.err != nil {
			failedIDs = append(failedIDs, fileID)
			if at, ok := reserved[c.req.ObjectKey]; ok {
				putBackKeys, putBackAt = append(putBackKeys, c.req.ObjectKey), append(putBackAt, at)
			}
			continue
		}
		okIDs, okResults = append(okIDs, fileID), append(okResults, c.results)
	}

	var wb pgx.Batch
	queueBatchInsert(&wb, &rows)
	queueLogWrites(&wb, logs)
	for k := range dirtyProducers {
		queueProducerWrite(&wb, k.tp, producers[k])
	}
	queueStoredAnswers(&wb, okIDs, okResults, nowMs)
	if len(failedIDs) > 0 {
		wb.Queue(`DELETE FROM files WHERE file_id = ANY($1::int8[])`, failedIDs)
	}
	if len(putBackKeys) > 0 {
		wb.Queue(`INSERT INTO reservations (object_key, reserved_at) SELECT * FROM unnest($1::text[], $2::int8[])`, putBackKeys, putBackAt)
	}
	wb.Queue(`COMMIT`)
	if testHookBeforeCommit != nil {
		testHookBeforeCommit()
	}
	lap(&m.decideNanos)
	err = conn.SendBatch(ctx, &wb).Close()
	lap(&m.writeNanos)
	if err != nil {
		return &stageError{err: err, began: true}
	}
	return nil
}

// queueBatchInsert inserts rows (none: no statement).
func queueBatchInsert(wb *pgx.Batch, rows *batchRows) {
	if len(rows.last) > 0 {
		wb.Queue(`INSERT INTO batches (topic_id, partition, last_offset, base_offset, file_id, byte_offset, byte_size,
				timestamp_type, batch_max_timestamp, log_append_timestamp,
				crc, partition_leader_epoch, producer_id, producer_epoch, base_sequence, run)
			SELECT t, p, l, b, f, bo, bs, tt, mt, at, crc, ple, pid, pe, seq, run
			FROM unnest($1::uuid[], $2::int4[], $3::int8[], $4::int8[], $5::int8[], $6::int8[], $7::int8[], $8::int2[], $9::int8[], $10::int8[],
					$11::int8[], $12::int4[], $13::int8[], $14::int2[], $15::int4[], $16::bytea[])
				AS v(t, p, l, b, f, bo, bs, tt, mt, at, crc, ple, pid, pe, seq, run)`,
			rows.topic, rows.part, rows.last, rows.base, rows.file, rows.byteOffset, rows.size, rows.tsType, rows.maxTs, rows.appendTs,
			rows.crc, rows.leaderEpoch, rows.producerID, rows.producerEpoch, rows.baseSequence, rows.run)
	}
}

// decideCommit decides the batches of one new object, in list order, on
// the group's rows, and adds its accepted batches to rows, contiguous
// batches of one partition coalesced into runs (wal.RunBuilder). On an
// error (an offset overflow) it leaves logs, producers, dirtyProducers
// and rows as it found them.
func decideCommit(req *wal.CommitFileRequest, fileID int64, logs map[wal.TopicIDPartition]*logState,
	producers map[producerKey]*wal.ProducerState, dirtyProducers map[producerKey]bool, rows *batchRows, nowMs int64) ([]storedResult, error) {
	type producerWas struct {
		st    *wal.ProducerState
		dirty bool
	}
	savedLogs := map[wal.TopicIDPartition]logState{}
	savedProducers := map[producerKey]producerWas{}
	savedRows := rows.len()
	undo := func() {
		for tp, l := range savedLogs {
			*logs[tp] = l
		}
		for k, p := range savedProducers {
			producers[k], dirtyProducers[k] = p.st, p.dirty
			if !p.dirty {
				delete(dirtyProducers, k)
			}
		}
		rows.truncate(savedRows)
	}
	var runs wal.RunBuilder[wal.TopicIDPartition]
	runs.Grow(len(req.Batches))
	results := make([]storedResult, len(req.Batches))
	for i := range req.Batches {
		b := &req.Batches[i]
		l := logs[b.Partition]
		if l == nil || b.Partition.TopicID.IsZero() {
			results[i] = wal.UnknownPartitionResult()
			continue
		}
		if _, ok := savedLogs[b.Partition]; !ok {
			savedLogs[b.Partition] = *l
		}
		assigned := l.hw
		if assigned > math.MaxInt64-b.OffsetCount() {
			if !mutation.Disabled(mutation.GroupCommitStepUndo) {
				undo()
			}
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
			if _, ok := savedProducers[k]; !ok {
				savedProducers[k] = producerWas{st, dirtyProducers[k]}
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
		runs.Add(b.Partition, wal.BatchInfo{ObjectKey: req.ObjectKey, ByteOffset: b.ByteOffset, Size: b.Size,
			BaseOffset: assigned, LastOffset: l.hw - 1, MaxTimestamp: b.MaxTimestamp, TimestampType: b.TimestampType,
			LogAppendTime: nowMs, Binding: b.Binding()})
		results[i] = storedResult{Status: wal.BatchAccepted, BaseOffset: assigned, LogAppendTime: nowMs, LogStartOffset: l.w}
	}
	if err := runs.Rows(func(tp wal.TopicIDPartition, head wal.BatchInfo, run []byte, _ int) {
		rows.add(tp, fileID, head, run)
	}); err != nil {
		undo()
		return nil, err
	}
	return results, nil
}

// queueStoredAnswers stores each committed object's answer in its files
// row (and marks an object with no accepted batch for deletion): one
// statement for the group, each row's arrays a slice of the group's.
func queueStoredAnswers(b *pgx.Batch, ids []int64, results [][]storedResult, nowMs int64) {
	if len(ids) == 0 {
		return
	}
	var all []storedResult
	from, to := make([]int32, len(ids)), make([]int32, len(ids))
	states := make([]int16, len(ids))
	for i, rs := range results {
		from[i] = int32(len(all)) + 1 // PostgreSQL arrays count from 1
		all = append(all, rs...)
		to[i] = int32(len(all))
		states[i] = stateLive
		if !anyAccepted(rs) {
			states[i] = stateDeleting
		}
	}
	st, base, at, ls, detail := resultArrays(all)
	b.Queue(`UPDATE files f SET result_status = ($2::int2[])[v.s:v.e], result_base_offset = ($3::int8[])[v.s:v.e],
			result_append_time = ($4::int8[])[v.s:v.e], result_log_start = ($5::int8[])[v.s:v.e],
			result_detail = COALESCE(($6::text[])[v.s:v.e], '{}'), state = v.state,
			marked_for_deletion_at = CASE WHEN v.state = $10 THEN $11::int8 END
		FROM unnest($1::int8[], $7::int4[], $8::int4[], $9::int2[]) AS v(id, s, e, state)
		WHERE f.file_id = v.id`,
		ids, st, base, at, ls, detail, from, to, states, stateDeleting, nowMs)
}

// anyAccepted reports whether an object keeps a live batch.
func anyAccepted(rs []storedResult) bool {
	for _, r := range rs {
		if r.Status == wal.BatchAccepted {
			return true
		}
	}
	return false
}

// readPipeline reads the first pipeline's answers: BEGIN, the removed
// reservations (key to reserved_at), the new files' ids by key (a key
// missing is taken or reaped), the locked partitions, the producers.
func readPipeline(br pgx.BatchResults) (reserved map[string]int64, fileIDs map[string]int64, logs map[wal.TopicIDPartition]*logState,
	producers map[producerKey]*wal.ProducerState, err error) {
	defer func() {
		if cerr := br.Close(); err == nil {
			err = cerr
		}
	}()
	if _, err = br.Exec(); err != nil {
		return
	}
	if reserved, err = scanKeyInts(br); err != nil {
		return
	}
	if fileIDs, err = scanKeyInts(br); err != nil {
		return
	}
	if logs, err = scanLogStates(br); err != nil {
		return
	}
	producers, err = scanProducers(br)
	return
}

// scanKeyInts reads (text, int8) rows into a map.
func scanKeyInts(br pgx.BatchResults) (map[string]int64, error) {
	r, err := br.Query()
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for r.Next() {
		var k string
		var v int64
		if err := r.Scan(&k, &v); err != nil {
			r.Close()
			return nil, err
		}
		out[k] = v
	}
	r.Close()
	return out, r.Err()
}

// testHookBeforeCommit, if set (tests only), runs when a group
// transaction's decisions are made and its last pipeline (the writes and
// COMMIT) is not sent.
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

// batchRows collects the rows of the accepted batches (runs or single
// batches) as column arrays.
type batchRows struct {
	topic                                               [][16]byte
	part                                                []int32
	last, base, file, byteOffset, size, maxTs, appendTs []int64
	tsType                                              []int16
	// The binding (wal.BatchBinding) of the row's first batch; crc is the
	// unsigned CRC in an int8.
	crc, producerID           []int64
	leaderEpoch, baseSequence []int32
	producerEpoch             []int16
	// run is the run bytes (wal.JoinRun), nil for a single batch.
	run [][]byte
}

func (r *batchRows) add(tp wal.TopicIDPartition, fileID int64, head wal.BatchInfo, run []byte) {
	r.topic, r.part = append(r.topic, tp.TopicID), append(r.part, tp.Partition)
	r.last, r.base, r.file = append(r.last, head.LastOffset), append(r.base, head.BaseOffset), append(r.file, fileID)
	r.byteOffset, r.size = append(r.byteOffset, head.ByteOffset), append(r.size, head.Size)
	r.tsType, r.maxTs, r.appendTs = append(r.tsType, int16(head.TimestampType)), append(r.maxTs, head.MaxTimestamp), append(r.appendTs, head.LogAppendTime)
	bb := head.Binding
	r.crc, r.leaderEpoch = append(r.crc, int64(bb.CRC)), append(r.leaderEpoch, bb.PartitionLeaderEpoch)
	r.producerID, r.producerEpoch, r.baseSequence = append(r.producerID, bb.ProducerID), append(r.producerEpoch, bb.ProducerEpoch),
		append(r.baseSequence, bb.BaseSequence)
	r.run = append(r.run, run)
}

func (r *batchRows) len() int { return len(r.last) }

// truncate drops the rows added after the first n.
func (r *batchRows) truncate(n int) {
	r.topic, r.part, r.last, r.base, r.file = r.topic[:n], r.part[:n], r.last[:n], r.base[:n], r.file[:n]
	r.byteOffset, r.size, r.maxTs, r.appendTs, r.tsType = r.byteOffset[:n], r.size[:n], r.maxTs[:n], r.appendTs[:n], r.tsType[:n]
	r.crc, r.producerID, r.leaderEpoch, r.baseSequence, r.producerEpoch = r.crc[:n], r.producerID[:n], r.leaderEpoch[:n], r.baseSequence[:n], r.producerEpoch[:n]
	r.run = r.run[:n]
}
