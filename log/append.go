package log

import (
	"errors"
	"fmt"
	"math"

	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/internal/invariants"
	"github.com/tierlog/tierlog/log/internal/producer"
	"github.com/tierlog/tierlog/log/internal/segment"
	"github.com/tierlog/tierlog/log/record"
	"go.uber.org/zap"
)

// AppendOrigin says who produced a leader append. Kafka: AppendOrigin.
type AppendOrigin int8

const (
	// OriginClient is a producer's request: every v2 batch must carry
	// base offset 0 (the leader assigns offsets).
	OriginClient AppendOrigin = iota
	// OriginCoordinator is a write by the broker itself (group or
	// transaction coordinator, transaction markers): base offsets are not
	// checked.
	OriginCoordinator
)

// AppendInfo describes a successful append.
type AppendInfo struct {
	// FirstOffset and LastOffset bound the appended records (inclusive).
	// Both are -1 when the append was empty (nothing written).
	FirstOffset int64
	LastOffset  int64
	// MaxTimestamp is the largest batch MaxTimestamp appended.
	MaxTimestamp int64
	// Batches and Bytes count what was written; SkippedBatches counts the
	// batches of a follower append dropped because their leader epoch was
	// newer than the fetch's (KAFKA-18723).
	Batches        int
	Bytes          int
	SkippedBatches int
	// Records is the sum of the batches' offset spans (LastOffsetDelta+1).
	Records int64
	// Duplicate is true when a leader append from OriginClient repeated
	// a batch of an idempotent producer already in the log: nothing was
	// written, and FirstOffset, LastOffset and MaxTimestamp are the
	// original batch's (Batches, Bytes and Records are 0). Kafka:
	// LogAppendInfo of a duplicate.
	Duplicate bool
}

// appendAnalysis is the result of checking the batches of an append
// before the log mutex is taken. The later steps take its batches, framed
// once here, rather than framing the bytes again.
type appendAnalysis struct {
	info       AppendInfo
	validBytes int // the prefix of the input to write
	origin     producer.Origin
	// scratch holds the batches of buf[:validBytes], validated; the
	// append returns it to the pool when it is done.
	scratch *appendScratch
}

func (a *appendAnalysis) batches() []record.Batch { return a.scratch.batches }

// AppendAsLeader appends batches (one or more concatenated record batches
// v2) as the partition leader in leaderEpoch: it assigns offsets from the
// log end offset and stamps leaderEpoch into every batch, rewriting the
// batch headers in place in the caller's buffer (both fields are outside
// the CRC). It validates each batch before writing anything: framing,
// magic 2 and CRC (ErrCorruption), MaxMessageBytes (ErrRecordTooLarge), for
// OriginClient a base offset of 0, and then Kafka's LogValidator rules,
// decoding every record (a *RecordError inside the *AppendError: records
// count = LastOffsetDelta + 1, records that decode with offset deltas 0 to
// n-1, timestamps by MessageTimestampType, compressed batches within
// MaxDecompressedBytes, control batches only from OriginCoordinator and
// only as transaction markers, producer id, epoch and sequence
// consistent). A valid batch gets its timestamp type and MaxTimestamp
// stamped as the log keeps them (the log append time, or the largest
// record timestamp), with a new CRC when either changes.
//
// A leaderEpoch older than the latest epoch in the epoch cache is refused
// with ErrFencedEpoch: appending it would rewrite the epoch history.
//
// Batches of idempotent and transactional producers are checked against
// the producer state (package comment of log/internal/producer): a typed
// error (*OutOfOrderSequenceError, *InvalidProducerEpochError,
// *InvalidTxnStateError, *CoordinatorEpochError) refuses the whole append
// and writes nothing; a retry of a batch already in the log returns the
// original offsets with Duplicate set and writes nothing. In both cases
// the caller's buffer has already been stamped with offsets and the
// epoch. A client may not send control batches (ErrInvalidRecord).
//
// The bytes are written with one write call. The append is durable only
// after a flush (FlushMessages, FlushMs or an explicit Flush).
func (l *UnifiedLog) AppendAsLeader(batches []byte, leaderEpoch int32, origin AppendOrigin) (AppendInfo, error) {
	if leaderEpoch < 0 {
		return emptyAppend(), fmt.Errorf("log: append as leader in epoch %d: %w", leaderEpoch, ErrInvalidArgument)
	}
	a, err := l.analyze(batches, true, origin, leaderEpoch, false)
	defer putScratch(a.scratch)
	if err != nil || a.validBytes == 0 {
		return a.info, err
	}
	return l.appendLocked(batches[:a.validBytes], &a, true, leaderEpoch)
}

// AppendBuilderAsLeader appends the batch of bl, finished here
// (record.Builder.Finish), as AppendAsLeader does: a producer inside the
// broker's process (a coordinator, a test, an embedded client) that builds
// its records with the Builder pays one copy of each key and value (into
// the Builder's buffer, where the batch is finished and stamped in place)
// and one CRC pass (Finish's). The validation keeps everything that does
// not depend on the bytes having crossed a network: framing, magic and
// header checks, MaxMessageBytes, and Kafka's LogValidator rules with
// every record decoded (offset deltas, timestamps against the log's
// bounds, control and producer rules, producer state); it skips only the
// CRC comparison, since the CRC was computed by this call from these
// bytes. The batch stays in bl's memory and is overwritten by its next
// Add or Reset, which the log does not keep beyond the write.
func (l *UnifiedLog) AppendBuilderAsLeader(bl *record.Builder, leaderEpoch int32, origin AppendOrigin) (AppendInfo, error) {
	if leaderEpoch < 0 {
		return emptyAppend(), fmt.Errorf("log: append as leader in epoch %d: %w", leaderEpoch, ErrInvalidArgument)
	}
	batch, err := bl.Finish()
	if err != nil {
		return emptyAppend(), fmt.Errorf("log: append of a builder's batch: %w: %w", ErrInvalidRecord, err)
	}
	if invariants.Enabled {
		b, err := record.ReadBatch(batch)
		invariants.Assertf(err == nil && b.Validate() == nil, "finished batch invalid: %v", err)
	}
	a, err := l.analyze(batch, true, origin, leaderEpoch, true)
	defer putScratch(a.scratch)
	if err != nil || a.validBytes == 0 {
		return a.info, err
	}
	return l.appendLocked(batch[:a.validBytes], &a, true, leaderEpoch)
}

// AppendAsFollower appends batches fetched from the leader, keeping their
// offsets and leader epochs. Batches from a leader epoch newer than
// leaderEpoch (the epoch of the fetch) and all batches after them are
// skipped, not an error (a stale fetch response must not write a newer
// leader's records). The first batch must start at or after the log end
// offset (ErrUnexpectedAppendOffset; gaps are allowed), and each batch must
// start after the last offset of the one before (ErrOffsetsOutOfOrder).
// Batches are checked for framing, CRC and header fields (ErrCorruption)
// but their records are not decoded: the leader validated them and the CRC
// covers them, as on Kafka's follower path.
func (l *UnifiedLog) AppendAsFollower(batches []byte, leaderEpoch int32) (AppendInfo, error) {
	a, err := l.analyze(batches, false, OriginClient, leaderEpoch, false)
	defer putScratch(a.scratch)
	if err != nil || a.validBytes == 0 {
		return a.info, err
	}
	return l.appendLocked(batches[:a.validBytes], &a, false, leaderEpoch)
}

func emptyAppend() AppendInfo {
	return AppendInfo{FirstOffset: base.UndefinedOffset, LastOffset: base.UndefinedOffset,
		MaxTimestamp: base.UndefinedOffset}
}

// analyze validates the batches of an append without the log mutex: the
// framing, CRC and header fields of every batch (record.Batch.Validate,
// through the Scanner), and for a leader Kafka's LogValidator rules
// (validateLeaderBatch), which decode every record. A follower's batches
// were validated by their leader and are protected by their CRCs; like
// Kafka's follower path, analyze does not decode their records. It stops
// at the first batch a follower must skip. The returned analysis always
// carries a scratch for putScratch, also on error. trustCRC skips the CRC
// comparison (AppendBuilderAsLeader computed the CRCs itself).
func (l *UnifiedLog) analyze(buf []byte, leader bool, origin AppendOrigin, leaderEpoch int32, trustCRC bool) (appendAnalysis, error) {
	a := appendAnalysis{info: emptyAppend(), origin: producer.OriginReplication,
		scratch: getScratch(l.opts.MaxDecompressedBytes)}
	var checks leaderChecks
	if leader {
		a.origin = producer.OriginClient
		if origin == OriginCoordinator {
			a.origin = producer.OriginCoordinator
		}
		checks = l.leaderChecks(origin)
	}
	failed := func(err error) (appendAnalysis, error) {
		return appendAnalysis{info: emptyAppend(), scratch: a.scratch}, err
	}
	s := record.NewScanner(buf, record.ScannerOptions{MaxBatchBytes: record.MaxBatchSize, TrustCRC: trustCRC})
	lastOffset := int64(math.MinInt64)
	for i := 0; s.Next(); i++ {
		b := s.Batch()
		fail := func(err error) (appendAnalysis, error) {
			return failed(&AppendError{BatchIndex: i, BaseOffset: b.BaseOffset(), Err: err})
		}
		epoch := b.PartitionLeaderEpoch()
		if !leader && epoch > leaderEpoch && epoch != base.UndefinedEpoch {
			a.info.SkippedBatches = countBatches(buf[s.ValidBytes()-b.Size():])
			break
		}
		switch {
		case leader && origin == OriginClient && b.BaseOffset() != 0:
			return fail(fmt.Errorf("%w: base offset %d, a client batch must start at 0", ErrInvalidRecord, b.BaseOffset()))
		case !leader && epoch < 0:
			return fail(fmt.Errorf("%w: follower batch without a leader epoch", ErrInvalidRecord))
		case !leader && b.LastOffset() <= lastOffset:
			return fail(fmt.Errorf("%w: last offset %d after %d", ErrOffsetsOutOfOrder, b.LastOffset(), lastOffset))
		case !leader && b.BaseOffset() <= lastOffset:
			// Stricter than Kafka (which compares last offsets only): a
			// batch overlapping the one before would make reads return
			// an offset twice; no leader writes it, compacted or not.
			return fail(fmt.Errorf("%w: batch [%d, %d] overlaps last offset %d", ErrOffsetsOutOfOrder,
				b.BaseOffset(), b.LastOffset(), lastOffset))
		case leader && origin == OriginClient && b.IsControl():
			return fail(fmt.Errorf("%w: a client may not send control batches", ErrInvalidRecord))
		case leader && b.Size() > l.opts.MaxMessageBytes:
			return fail(fmt.Errorf("%w: %d bytes, max.message.bytes %d", ErrRecordTooLarge, b.Size(), l.opts.MaxMessageBytes))
		}
		if leader {
			// After the size check: a batch above max.message.bytes
			// is refused before anything decompresses it.
			if err := checks.validateLeaderBatch(&a.scratch.it, b); err != nil {
				return fail(err)
			}
		}
		if a.info.Batches == 0 {
			a.info.FirstOffset = b.BaseOffset()
		}
		lastOffset = b.LastOffset()
		a.info.LastOffset = lastOffset
		a.info.Batches++
		a.info.Records += int64(b.LastOffsetDelta()) + 1
		a.info.MaxTimestamp = max(a.info.MaxTimestamp, b.MaxTimestamp())
		a.validBytes += b.Size()
		a.scratch.batches = append(a.scratch.batches, b)
	}
	if err := s.Err(); err != nil && a.info.SkippedBatches == 0 {
		// A torn or corrupt batch in an append request is a corrupt
		// request either way. Kafka: CORRUPT_MESSAGE.
		if !errors.Is(err, ErrCorruption) {
			err = fmt.Errorf("%w: %w", ErrCorruption, err)
		}
		baseOffset := base.UndefinedOffset // a torn batch may not show it
		if ce := (*record.CorruptBatchError)(nil); errors.As(err, &ce) {
			baseOffset = ce.BaseOffset
		}
		return failed(&AppendError{BatchIndex: a.info.Batches, BaseOffset: baseOffset, Err: err})
	}
	a.info.Bytes = a.validBytes
	return a, nil
}

// countBatches counts the well-framed batches at the start of buf.
func countBatches(buf []byte) int {
	n := 0
	for {
		b, err := record.ReadBatch(buf)
		if err != nil {
			return n
		}
		n++
		buf = buf[b.Size():]
	}
}

// appendLocked takes the mutex and performs the write half of an append
// (Kafka: the part of UnifiedLog.append done under the log lock):
// offsets, epoch cache, roll, write.
// The epoch cache and the flush policy are served after the mutex is
// released, before returning.
func (l *UnifiedLog) appendLocked(buf []byte, a *appendAnalysis, leader bool, leaderEpoch int32) (AppendInfo, error) {
	info := a.info
	l.mu.Lock()
	ev, err := l.writeLocked(buf, a.batches(), &info, leader, leaderEpoch, a.origin)
	flushNow := err == nil && l.shouldFlushLocked(info.Records)
	background := err == nil && !flushNow && l.backgroundFlushDueLocked()
	l.mu.Unlock()
	if background {
		l.startBackgroundFlush()
	}
	l.fire(ev)
	if err != nil {
		return emptyAppend(), err
	}
	if info.Duplicate {
		return info, nil
	}
	// A roll queued a producer snapshot and a new epoch dirtied the epoch
	// cache; the next flush writes both (with mu released, first thing,
	// before the recovery point passes them). Not here: an append that
	// returns an error must not have written its batches, and an fsync
	// before data that is not durable itself buys nothing (recovery
	// re-assigns the epochs of every batch above the recovery point).
	if flushNow {
		if err := l.Flush(); err != nil {
			return emptyAppend(), err
		}
	}
	return info, nil
}

// writeLocked is the critical section of an append.
//
// REQUIRES: l.mu held.
func (l *UnifiedLog) writeLocked(buf []byte, batches []record.Batch, info *AppendInfo, leader bool, leaderEpoch int32, origin producer.Origin) (events, error) {
	var ev events
	if err := l.checkWritableLocked(); err != nil {
		return ev, err
	}
	leo := l.logEndOffset.Load()
	if leader {
		if latest, ok := l.epochs.Latest(); ok && leaderEpoch < latest.Epoch {
			return ev, fmt.Errorf("%w: append in epoch %d, latest epoch %d", ErrFencedEpoch, leaderEpoch, latest.Epoch)
		}
		if leo > math.MaxInt64-info.Records {
			return ev, fmt.Errorf("%w: %d offsets from log end offset %d overflow", ErrInvalidRecord, info.Records, leo)
		}
		// Assign offsets from the log end offset and stamp the epoch.
		next := leo
		for _, b := range batches {
			b.SetBaseOffset(next)
			b.SetPartitionLeaderEpoch(leaderEpoch)
			next = b.NextOffset()
		}
		info.FirstOffset, info.LastOffset = leo, next-1
	} else if info.FirstOffset < leo {
		return ev, fmt.Errorf("%w: first offset %d below log end offset %d", ErrUnexpectedAppendOffset, info.FirstOffset, leo)
	}
	if int64(len(buf)) > l.opts.SegmentBytes {
		return ev, fmt.Errorf("%w: %d bytes, segment.bytes %d", ErrBatchTooLarge, len(buf), l.opts.SegmentBytes)
	}
	// Producer state: validated with the final offsets before anything
	// is written, so a refused append changes nothing.
	pa, err := l.mu.producers.PrepareBatches(batches, origin)
	if err != nil {
		return ev, err
	}
	if dup, ok := pa.Duplicate(); ok {
		*info = AppendInfo{FirstOffset: dup.FirstOffset(), LastOffset: dup.LastOffset,
			MaxTimestamp: dup.Timestamp, Duplicate: true}
		return ev, nil
	}
	if err := l.maybeRollLocked(len(buf), info, &ev); err != nil {
		return ev, err
	}
	active := l.mu.segments[len(l.mu.segments)-1]
	if err := active.Append(info.LastOffset, buf); err != nil {
		return ev, l.failLocked(err)
	}
	completed, err := l.mu.producers.Apply(pa)
	invariants.Assertf(err == nil, "producer state apply after prepare: %v", err)
	for i := range completed {
		if completed[i].IsAborted {
			// In memory now; the .txnindex file is written by the flush
			// that moves the recovery point past this segment, or by
			// Close (recovery rebuilds it until then).
			err := active.txn.Append(completed[i].AbortedTxn())
			invariants.Assertf(err == nil, "txn index append: %v", err)
		}
	}
	l.refreshFirstUnstableOffsetLocked()
	// Epoch cache: in memory now, durable with the next flush, which
	// writes it before the recovery point passes these batches. Every
	// epoch here is >= 0 (checked by analyze or the leader's epoch), so
	// the assignment cannot fail.
	for _, b := range batches {
		_, err := l.epochs.AssignDeferred(b.PartitionLeaderEpoch(), b.BaseOffset())
		invariants.Assertf(err == nil, "epoch assignment failed after analysis: %v", err)
	}
	invariants.Assertf(info.LastOffset+1 > leo, "append end %d not above log end offset %d", info.LastOffset+1, leo)
	l.logEndOffset.Store(info.LastOffset + 1)
	l.publishOffsetsLocked() // readers see the records and the new end together
	if l.mu.unflushedRecords == 0 {
		l.mu.firstUnflushedMs = l.opts.nowMs()
	}
	l.mu.unflushedRecords += info.Records
	l.mu.unflushedBytes += int64(len(buf))
	l.counters.appendedBatches.Add(int64(info.Batches))
	l.counters.appendedBytes.Add(int64(len(buf)))
	return ev, nil
}

// maybeRollLocked rolls the active segment if the append does not fit it
// (Kafka: LogSegment.shouldRoll): size, age by record timestamps, full indexes, or an offset
// the segment cannot index relative to its base.
//
// REQUIRES: l.mu held.
func (l *UnifiedLog) maybeRollLocked(size int, info *AppendInfo, ev *events) error {
	active := l.mu.segments[len(l.mu.segments)-1]
	roll := active.ShouldRoll(segment.RollParams{
		MaxSegmentBytes:     l.opts.SegmentBytes,
		MaxSegmentMs:        l.opts.SegmentMs,
		MaxTimestampInBatch: info.MaxTimestamp,
		MaxOffsetInBatch:    info.LastOffset,
		IncomingBytes:       size,
		NowMs:               l.opts.nowMs(),
	})
	if !roll {
		return nil
	}
	return l.rollLocked(info.FirstOffset, ev)
}

// ErrFencedEpoch means an append carried a leader epoch older than the
// latest one in the epoch cache. Kafka: FENCED_LEADER_EPOCH (74).
var ErrFencedEpoch = base.ErrFencedEpoch

// backgroundFlushDueLocked reports whether an append should start a
// flush in the background: the log has no flush policy (a policy decides
// when its log flushes), RecoveryPointIntervalBytes are unflushed and no
// such flush runs. It marks one as running.
//
// REQUIRES: l.mu held.
func (l *UnifiedLog) backgroundFlushDueLocked() bool {
	iv := l.opts.RecoveryPointIntervalBytes
	if iv <= 0 || l.opts.FlushMessages > 0 || l.opts.FlushMs > 0 || l.mu.unflushedBytes < iv ||
		l.mu.backgroundFlush || l.mu.closing {
		return false
	}
	l.mu.backgroundFlush = true
	l.background.Add(1)
	return true
}

// startBackgroundFlush runs one Flush on its own goroutine, so the
// recovery point (and with it the bytes a crash recovery reads) keeps up
// with appends without a flush policy and without an fsync on the append
// path. Its failure is the log's sticky write error, which the next write
// returns; ErrClosed after a concurrent Close is expected. Close waits
// for it.
//
// REQUIRES: backgroundFlushDueLocked returned true (it counted the
// flush in l.background).
func (l *UnifiedLog) startBackgroundFlush() {
	go func() {
		defer l.background.Done()
		for {
			err := l.Flush()
			if err != nil && !errors.Is(err, ErrClosed) {
				l.logger.Warn("background flush failed", zap.Error(err))
			}
			// Appends that came during the fsync may have passed the
			// interval again: flush on rather than wait for the next
			// append, so the unflushed tail stays near one interval plus
			// what one flush's duration lets in.
			l.mu.Lock()
			again := err == nil && !l.mu.closing && l.mu.unflushedBytes >= l.opts.RecoveryPointIntervalBytes
			if !again {
				l.mu.backgroundFlush = false
			}
			l.mu.Unlock()
			if !again {
				return
			}
		}
	}()
}
