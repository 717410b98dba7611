package log

import (
	"encoding/binary"
	"fmt"

	"github.com/tierlog/tierlog/log/record"
)

// Isolation bounds what a read may return. Kafka: FetchIsolation.
type Isolation int8

const (
	// IsolationLogEnd reads up to the log end offset (follower fetches).
	IsolationLogEnd Isolation = iota
	// IsolationHighWatermark reads committed records only (consumers with
	// read_uncommitted).
	IsolationHighWatermark
	// IsolationCommitted reads decided records only: below the last
	// stable offset (consumers with read_committed).
	IsolationCommitted
)

func (i Isolation) String() string {
	switch i {
	case IsolationLogEnd:
		return "log-end"
	case IsolationHighWatermark:
		return "high-watermark"
	case IsolationCommitted:
		return "committed"
	}
	return fmt.Sprintf("Isolation(%d)", int8(i))
}

// FetchDataInfo is the result of a Read.
type FetchDataInfo struct {
	// Records holds whole batches, appended to the caller's buffer. The
	// first batch may start below the requested offset (it contains it);
	// consumers skip the records before it, as Kafka's do. Never nil:
	// empty (len 0, not nil) when there is nothing to read at the offset
	// under the isolation bound, and on an error, so an encoder that
	// writes a nil slice as a null record set (size -1, which consumers
	// such as librdkafka refuse: "invalid MessageSetSize -1") writes an
	// empty one instead.
	Records []byte
	// FetchOffset is the offset requested.
	FetchOffset int64
	// BatchBaseOffset, SegmentBaseOffset and Position locate the first
	// returned batch on disk: what a broker needs to send the bytes with
	// sendfile instead of copying them (Kafka: LogOffsetMetadata).
	BatchBaseOffset   int64
	SegmentBaseOffset int64
	Position          int64
	// AbortedTransactions are, for IsolationCommitted only, the aborted
	// transactions that overlap the returned records (marker at or above
	// FetchOffset, first offset below the end of the last returned
	// batch), in marker order: a broker sends them with the records so the
	// consumer drops their data. Nil when there are none.
	AbortedTransactions []AbortedTxn
	// The log's offsets at the instant the read loaded its state: the
	// records come from that state's view, and the four offsets held
	// together then (LogStartOffset <= LastStableOffset <= HighWatermark
	// <= LogEndOffset).
	HighWatermark    int64
	LastStableOffset int64
	LogStartOffset   int64
	LogEndOffset     int64
}

// Read returns whole batches starting with the one that holds offset, at
// most maxBytes of them (but at least one whole batch if minOneMessage),
// and only batches that end below the isolation bound (log end offset,
// high watermark or last stable offset). It appends them to dst, which
// may be nil; reusing dst avoids allocating.
//
// What a read checks: every returned batch's header (framing, magic,
// offsets increasing within the segment); the CRC-32C over the rest only
// with Options.VerifyReads. At damage it returns the batches before it,
// or, when the damage is at the first batch, a *CorruptionError.
//
// Errors: an *OffsetRangeError wrapping ErrOffsetOutOfRange for an offset
// below the log start offset or above the log end offset, and wrapping
// ErrOffsetMovedToTieredStorage for an offset in [LogStartOffset,
// LocalLogStartOffset) (read it from the remote tier). A read at the
// bound returns no records and no error.
//
// Read never takes the log mutex and never blocks the writer.
func (l *UnifiedLog) Read(dst []byte, offset int64, maxBytes int, isolation Isolation, minOneMessage bool) (FetchDataInfo, error) {
	// One load gives the view and the offsets that describe it: the
	// bound, the range checks and the offsets reported all come from the
	// same instant, and the view holds every record below that instant's
	// log end offset.
	st, err := l.acquireState()
	if err != nil {
		return FetchDataInfo{Records: NonNilRecords(dst[:0]), FetchOffset: offset}, err
	}
	v, o := st.view, st.offsets
	defer v.unref()
	return l.readPinned(v, o, dst, offset, maxBytes, isolation, minOneMessage)
}

// NonNilRecords returns records, or an empty non-nil slice when records
// is nil: a fetch response's record set must be empty, never null (Kafka's
// RECORDS type writes a nil one as size -1, a null record set, which
// consumers refuse). Every Read of this package already returns non-nil
// Records; a broker passes records from elsewhere through it before
// encoding. It never allocates.
func NonNilRecords(records []byte) []byte {
	if records == nil {
		return []byte{}
	}
	return records
}

// readPinned is Read on a pinned view v and the offsets o published with
// it.
func (l *UnifiedLog) readPinned(v *segmentView, o Offsets, dst []byte, offset int64, maxBytes int,
	isolation Isolation, minOneMessage bool) (FetchDataInfo, error) {
	info := FetchDataInfo{
		Records:          NonNilRecords(dst[:0]),
		FetchOffset:      offset,
		HighWatermark:    o.HighWatermark,
		LastStableOffset: o.LastStableOffset,
		LogStartOffset:   o.LogStartOffset,
		LogEndOffset:     o.LogEndOffset,
	}
	bound, i, err := readStart(v, o, offset, isolation)
	if err != nil || i < 0 {
		return info, err
	}
	for ; i < len(v.segments); i++ {
		s := v.segments[i]
		if s.BaseOffset() >= bound {
			break
		}
		res, err := s.Read(info.Records, offset, maxBytes, -1, minOneMessage)
		if err != nil {
			return info, l.readFailed(s, offset, err)
		}
		if !res.Found {
			continue // a gap (follower appends may leave one): next segment
		}
		data := trimToBound(res.Data, bound)
		// The segment's header checks ended the read at damage: the
		// batches before it are returned, a read there fails.
		cut := res.DamageCut
		if l.opts.VerifyReads {
			good, bad := verifyBatches(data)
			if bad != nil && good == 0 {
				return info, l.damagedRead(s, offset, res.Position, bad)
			}
			if bad != nil {
				data, cut = data[:good], true
			}
		}
		if cut {
			l.counters.readsCutAtDamage.Add(1)
		}
		info.Records = NonNilRecords(data)
		info.BatchBaseOffset = res.BatchBaseOffset
		info.SegmentBaseOffset = s.BaseOffset()
		info.Position = res.Position
		if isolation == IsolationCommitted && len(info.Records) > 0 {
			info.AbortedTransactions = collectAborted(v.segments[i:], offset, lastNextOffset(info.Records))
		}
		return info, nil
	}
	return info, nil
}

// verifyBatches returns the length of the prefix of data made of whole
// batches that pass record.Batch.Validate (framing, magic, the CRC-32C,
// header fields no writer produces) and the failure of the batch after
// it, nil when every whole batch passed. A batch cut by the end of data
// (a size limit) is not checked: it is not a whole batch a reader uses.
func verifyBatches(data []byte) (int, error) {
	n := 0
	for len(data)-n >= record.LogOverhead {
		rest := data[n:]
		if int64(binary.BigEndian.Uint32(rest[8:12]))+record.LogOverhead > int64(len(rest)) {
			break // cut by the size limit
		}
		b, err := record.ReadBatch(rest)
		if err == nil {
			err = b.Validate()
		}
		if err != nil {
			return n, err
		}
		n += b.Size()
	}
	return n, nil
}

// readStart checks offset against the offsets o of a read under
// isolation, and returns the isolation bound and the index in v of the
// segment holding offset, or -1 when there is nothing to read (offset at
// or above the bound, or an error).
func readStart(v *segmentView, o Offsets, offset int64, isolation Isolation) (bound int64, first int, err error) {
	bound = o.LogEndOffset
	switch isolation {
	case IsolationHighWatermark:
		bound = o.HighWatermark
	case IsolationCommitted:
		bound = o.LastStableOffset
	}
	if offset < o.LogStartOffset || offset > o.LogEndOffset {
		return bound, -1, rangeError(o, offset, ErrOffsetOutOfRange)
	}
	if offset < o.LocalLogStartOffset {
		return bound, -1, rangeError(o, offset, ErrOffsetMovedToTieredStorage)
	}
	if offset >= bound {
		return bound, -1, nil
	}
	first = v.floor(offset)
	if first < 0 {
		// Below every local segment but not below the local log start:
		// the writer publishes the local log start with the segments, so
		// this means a bug, reported as out of range rather than a panic.
		return bound, -1, rangeError(o, offset, ErrOffsetOutOfRange)
	}
	return bound, first, nil
}

// trimToBound keeps the batches that end below bound. The segment may
// hold batches appended after the bound was read, and a high watermark
// inside a batch excludes that batch (Kafka positions the bound at the
// start of the batch that holds it).
func trimToBound(data []byte, bound int64) []byte {
	n := 0
	for n < len(data) {
		rest := data[n:]
		// A read cut by maxBytes ends inside a batch: stop there without
		// asking ReadBatch, whose torn-tail error would allocate.
		if len(rest) < record.LogOverhead ||
			int64(binary.BigEndian.Uint32(rest[8:12]))+record.LogOverhead > int64(len(rest)) {
			break
		}
		b, err := record.ReadBatch(rest)
		if err != nil || b.LastOffset() >= bound {
			break
		}
		n += b.Size()
	}
	return data[:n]
}

// collectAborted gathers the aborted transactions overlapping
// [fetchOffset, upper) from the transaction indexes of segs, the segment
// holding fetchOffset first: an index holds the transactions whose marker
// is in its segment, so a transaction overlapping the range may be listed
// by a later segment; the search stops once an entry's last stable offset
// reaches upper (Kafka: collectAbortedTransactions).
func collectAborted(segs []*segmentRef, fetchOffset, upper int64) []AbortedTxn {
	var out []AbortedTxn
	for _, s := range segs {
		var complete bool
		out, complete = s.txn.CollectAborted(out, fetchOffset, upper)
		if complete {
			break
		}
	}
	return out
}

// lastNextOffset returns the offset after the last whole batch of data
// (trimToBound left only whole batches).
func lastNextOffset(data []byte) int64 {
	next := int64(-1)
	for len(data) >= record.LogOverhead {
		b, err := record.ReadBatch(data)
		if err != nil {
			break
		}
		next = b.NextOffset()
		data = data[b.Size():]
	}
	return next
}

// rangeError reports offset against the offsets o of the read.
func rangeError(o Offsets, offset int64, err error) error {
	return &OffsetRangeError{
		Offset:              offset,
		LogStartOffset:      o.LogStartOffset,
		LocalLogStartOffset: o.LocalLogStartOffset,
		LogEndOffset:        o.LogEndOffset,
		HighWatermark:       o.HighWatermark,
		err:                 err,
	}
}
