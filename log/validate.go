package log

import (
	"errors"
	"fmt"
	"sync"

	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/log/record"
)

// ErrInvalidTimestamp means a leader append carried a record timestamp the
// log's timestamp settings refuse: outside MessageTimestampBeforeMaxMs /
// AfterMaxMs of the broker's clock, or a batch a producer marked
// LogAppendTime. Returned inside a *RecordError. Kafka: INVALID_TIMESTAMP
// (32).
var ErrInvalidTimestamp = errors.New("log: invalid timestamp")

// RecordError says why record validation refused a batch of a leader
// append; an *AppendError carries it with the batch's index and base
// offset. It unwraps to its kind: ErrInvalidRecord (the records do not
// decode or contradict the header; Kafka: INVALID_RECORD),
// ErrInvalidTimestamp, ErrCorruption (a compressed section the codec
// rejects; Kafka: CORRUPT_MESSAGE) or ErrRecordTooLarge (the batch
// decompresses beyond MaxDecompressedBytes), and to the record package's
// error when there is one. Kafka: ProduceResponse.RecordError.
type RecordError struct {
	// Record is the index in its batch of the record at fault, or -1
	// when the batch as a whole is (its header, its compressed section).
	Record int
	Reason string
	Kind   error // ErrInvalidRecord, ErrInvalidTimestamp, ErrCorruption or ErrRecordTooLarge
	Err    error // the record package's error, or nil
}

func (e *RecordError) Error() string {
	where := "batch"
	if e.Record >= 0 {
		where = fmt.Sprintf("record %d", e.Record)
	}
	return fmt.Sprintf("%v: %s: %s", e.Kind, where, e.Reason)
}

// Unwrap returns the kind and, if set, the record package's error.
func (e *RecordError) Unwrap() []error {
	if e.Err != nil {
		return []error{e.Kind, e.Err}
	}
	return []error{e.Kind}
}

// appendScratch is the reusable state of one append's analysis: the
// batches as framed once (every later step of the append takes these
// views instead of framing the bytes again) and the record iterator that
// validates a leader's batches. Pooled, so a steady stream of appends
// allocates nothing for either.
type appendScratch struct {
	batches []record.Batch
	it      record.Iter
}

var scratchPool = sync.Pool{New: func() any { return new(appendScratch) }}

func getScratch(maxDecompressedBytes int) *appendScratch {
	s := scratchPool.Get().(*appendScratch)
	s.it.SetMaxDecompressedBytes(maxDecompressedBytes)
	return s
}

// putScratch returns s to the pool. It drops the batch views first: they
// alias the caller's buffer, which the pool must not keep alive.
func putScratch(s *appendScratch) {
	clear(s.batches)
	s.batches = s.batches[:0]
	s.it.Clear()
	scratchPool.Put(s)
}

// leaderChecks are the settings record validation of a leader append
// applies, read once per append.
type leaderChecks struct {
	origin        AppendOrigin
	nowMs         int64
	timestampType record.TimestampType
	beforeMaxMs   int64 // 0 = no bound
	afterMaxMs    int64 // 0 = no bound
}

func (l *UnifiedLog) leaderChecks(origin AppendOrigin) leaderChecks {
	return leaderChecks{
		origin:        origin,
		nowMs:         l.opts.nowMs(),
		timestampType: l.opts.MessageTimestampType,
		beforeMaxMs:   l.opts.MessageTimestampBeforeMaxMs,
		afterMaxMs:    l.opts.MessageTimestampAfterMaxMs,
	}
}

// validateLeaderBatch applies Kafka's LogValidator to one framed batch
// whose CRC and header fields have been checked (record.Batch.Validate):
// header rules, then every record decoded (uncompressed batches without
// allocating, compressed ones within the Iter's decompression limit).
// On success it stamps the batch's timestamp type and MaxTimestamp as the
// log keeps them (the log append time, or the largest record timestamp),
// rewriting the CRC only when either changes.
func (c *leaderChecks) validateLeaderBatch(it *record.Iter, b record.Batch) *RecordError {
	if err := c.checkHeader(b); err != nil {
		return err
	}
	maxTs := int64(-1) // Kafka: RecordBatch.NO_TIMESTAMP
	i := 0
	for it.Reset(b); it.Next(); i++ {
		r := it.Record()
		// The Iter keeps offset deltas strictly increasing within [0,
		// LastOffsetDelta], which still allows a gap before the record
		// that would not fit; the leader assigns offsets by position, so
		// each record's delta must be its index.
		if int(r.OffsetDelta) != i {
			return &RecordError{Record: i, Kind: ErrInvalidRecord,
				Reason: fmt.Sprintf("offset delta %d, want %d", r.OffsetDelta, i)}
		}
		if b.IsControl() {
			if reason := checkMarker(r, b.RecordsCount()); reason != "" {
				return &RecordError{Record: i, Kind: ErrInvalidRecord, Reason: reason}
			}
		}
		if err := c.checkTimestamp(r.Timestamp); err != "" {
			return &RecordError{Record: i, Kind: ErrInvalidTimestamp, Reason: err}
		}
		maxTs = max(maxTs, r.Timestamp)
	}
	if err := it.Err(); err != nil {
		return recordDecodeError(i, err)
	}
	if c.timestampType == record.LogAppendTime {
		b.SetMaxTimestamp(record.LogAppendTime, c.nowMs)
	} else {
		b.SetMaxTimestamp(record.CreateTime, maxTs)
	}
	return nil
}

// checkHeader applies LogValidator.validateBatch to the header.
func (c *leaderChecks) checkHeader(b record.Batch) *RecordError {
	invalid := func(format string, args ...any) *RecordError {
		return &RecordError{Record: -1, Kind: ErrInvalidRecord, Reason: fmt.Sprintf(format, args...)}
	}
	count, delta := b.RecordsCount(), b.LastOffsetDelta()
	pid, client := b.ProducerID(), c.origin == OriginClient
	switch {
	case int64(count) != int64(delta)+1:
		// Also refuses an empty batch (count 0, delta 0) and a delta of
		// MaxInt32, which no int32 count can match: the leader assigns
		// delta+1 offsets, so they must be the records'.
		return invalid("records count %d, last offset delta %d: a leader append needs count = delta + 1", count, delta)
	case client && pid > base.NoProducerID && b.BaseSequence() < 0:
		return invalid("producer id %d with base sequence %d", pid, b.BaseSequence())
	case pid > base.NoProducerID && b.ProducerEpoch() < 0:
		return invalid("producer id %d with producer epoch %d", pid, b.ProducerEpoch())
	case pid <= base.NoProducerID && (b.IsTransactional() || b.IsControl()):
		// Without a producer id nothing can end the transaction (or
		// match the marker to one).
		return invalid("transactional or control batch without a producer id (%d)", pid)
	case b.HasDeleteHorizon():
		// Only the log cleaner sets it (KIP-534); from anyone else it
		// would make BaseTimestamp mean something the producer did not.
		return invalid("delete horizon set by a producer")
	case b.TimestampType() == record.LogAppendTime:
		return &RecordError{Record: -1, Kind: ErrInvalidTimestamp,
			Reason: "a producer may not set the timestamp type to LogAppendTime"}
	}
	return nil
}

// checkMarker checks the record of a control batch: the producer state
// reads it as a transaction marker, so it must be one (Kafka's
// EndTransactionMarker.deserialize refuses anything else), alone in its
// batch. It returns a reason, or "".
func checkMarker(r *record.Record, count int32) string {
	if count != 1 {
		return fmt.Sprintf("control batch with %d records", count)
	}
	key, err := record.ParseControlKey(r.Key)
	if err != nil {
		return err.Error()
	}
	if key.Type != record.ControlAbort && key.Type != record.ControlCommit {
		return fmt.Sprintf("control type %s is not a transaction marker", key.Type)
	}
	if _, err := record.ParseEndTxnMarker(r.Value); err != nil {
		return err.Error()
	}
	return ""
}

// checkTimestamp applies LogValidator.validateTimestamp to a CreateTime
// record timestamp; it returns a reason, or "" (no allocation) when the
// timestamp passes. A record without a timestamp (-1) always passes.
func (c *leaderChecks) checkTimestamp(ts int64) string {
	if c.timestampType != record.CreateTime || ts == -1 {
		return ""
	}
	if c.beforeMaxMs > 0 && ts < c.nowMs && c.nowMs-ts > c.beforeMaxMs {
		return fmt.Sprintf("timestamp %d is more than %d ms before the log's clock %d", ts, c.beforeMaxMs, c.nowMs)
	}
	if c.afterMaxMs > 0 && ts > c.nowMs && ts-c.nowMs > c.afterMaxMs {
		return fmt.Sprintf("timestamp %d is more than %d ms after the log's clock %d", ts, c.afterMaxMs, c.nowMs)
	}
	return ""
}

// recordDecodeError maps an Iter error to what Kafka answers: records
// that do not decode are INVALID_RECORD (its DefaultRecord.readFrom
// throws InvalidRecordException), a compressed section the codec rejects
// is CORRUPT_MESSAGE, and one that expands beyond the limit is refused as
// too large. The record package's error stays reachable for errors.As.
func recordDecodeError(i int, err error) *RecordError {
	e := &RecordError{Record: i, Kind: ErrInvalidRecord, Reason: err.Error(), Err: err}
	var ce *record.CorruptBatchError
	switch {
	case errors.Is(err, record.ErrDecompressedTooLarge):
		e.Kind, e.Record = ErrRecordTooLarge, -1
	case errors.As(err, &ce):
		e.Reason = ce.Reason
		// A codec error means the compressed section itself is damaged.
		// Keep the record package's error out of the chain otherwise: it
		// wraps ErrCorruption, and errors.Is must tell the two apart.
		if ce.Err != nil {
			e.Kind, e.Record, e.Err = ErrCorruption, -1, ce.Err
		} else {
			e.Err = nil
		}
	}
	return e
}
