package producer

import (
	"encoding/binary"
	"fmt"
	"sync"
)

// Aborted-transaction index entry (Kafka's .txnindex, AbortedTxn), 34
// bytes, big-endian:
//
//	+-------------+-----------------+------------------+-----------------+-----------------------+
//	| version i16 | producer id i64 | first offset i64 | last offset i64 | last stable offset i64 |
//	+-------------+-----------------+------------------+-----------------+-----------------------+
//	0             2                 10                 18                26                      34
const (
	// AbortedTxnSize is the size of one encoded AbortedTxn.
	AbortedTxnSize = 34
	// abortedTxnVersion is the only entry version Kafka defines.
	abortedTxnVersion = 0
)

// AbortedTxn is one entry of a segment's aborted-transaction index: a
// transaction whose ABORT marker is in the segment. Kafka: AbortedTxn.
type AbortedTxn struct {
	ProducerID int64
	// FirstOffset is the transaction's first offset (it may lie in an
	// earlier segment); LastOffset the ABORT marker's offset. Inclusive.
	FirstOffset int64
	LastOffset  int64
	// LastStableOffset is the last stable offset right after the marker
	// was written. A search can stop at the first entry whose
	// LastStableOffset reaches its upper bound: no later transaction
	// starts below it.
	LastStableOffset int64
}

// AppendAbortedTxn appends the 34-byte encoding of t to dst.
func AppendAbortedTxn(dst []byte, t AbortedTxn) []byte {
	dst = binary.BigEndian.AppendUint16(dst, abortedTxnVersion)
	dst = binary.BigEndian.AppendUint64(dst, uint64(t.ProducerID))
	dst = binary.BigEndian.AppendUint64(dst, uint64(t.FirstOffset))
	dst = binary.BigEndian.AppendUint64(dst, uint64(t.LastOffset))
	return binary.BigEndian.AppendUint64(dst, uint64(t.LastStableOffset))
}

// DecodeAbortedTxn decodes the entry at the start of b (at least
// AbortedTxnSize bytes). A version other than 0 is corruption.
func DecodeAbortedTxn(b []byte) (AbortedTxn, error) {
	if len(b) < AbortedTxnSize {
		return AbortedTxn{}, corruptionf("txn index", "entry of %d bytes, want %d", len(b), AbortedTxnSize)
	}
	if v := int16(binary.BigEndian.Uint16(b)); v != abortedTxnVersion {
		return AbortedTxn{}, corruptionf("txn index", "entry version %d, want %d", v, abortedTxnVersion)
	}
	return AbortedTxn{
		ProducerID:       int64(binary.BigEndian.Uint64(b[2:])),
		FirstOffset:      int64(binary.BigEndian.Uint64(b[10:])),
		LastOffset:       int64(binary.BigEndian.Uint64(b[18:])),
		LastStableOffset: int64(binary.BigEndian.Uint64(b[26:])),
	}, nil
}

// TxnIndex is the aborted-transaction index of one segment, in memory:
// entries by increasing LastOffset. Kafka: TransactionIndex.
//
// The index does no file I/O: the log (or segment) writes the bytes of
// AppendEncoded to <base>.txnindex and reads them back with
// ParseTxnIndex, as it does its other indexes. A TxnIndex is safe for
// concurrent use: one writer (Append, TruncateTo) and any number of
// readers (CollectAborted); its mutex is held for in-memory work only and
// is a leaf in the lock order.
type TxnIndex struct {
	mu      sync.RWMutex
	entries []AbortedTxn
}

// ParseTxnIndex reads an index file's bytes. segmentBase is the base
// offset of the segment the file belongs to. The bytes must be whole
// 34-byte entries of version 0 with FirstOffset <= LastOffset, LastOffset
// at or above segmentBase (Kafka's sanity check) and strictly increasing;
// anything else is an error wrapping ErrCorruption (the log then rebuilds
// the index by recovering the segment).
func ParseTxnIndex(data []byte, segmentBase int64) (*TxnIndex, error) {
	if len(data)%AbortedTxnSize != 0 {
		return nil, corruptionf("txn index", "%d bytes is not a multiple of %d", len(data), AbortedTxnSize)
	}
	ti := &TxnIndex{entries: make([]AbortedTxn, 0, len(data)/AbortedTxnSize)}
	for pos := 0; pos < len(data); pos += AbortedTxnSize {
		t, err := DecodeAbortedTxn(data[pos:])
		if err != nil {
			return nil, fmt.Errorf("%w (at byte %d)", err, pos)
		}
		switch {
		case t.FirstOffset > t.LastOffset:
			return nil, corruptionf("txn index", "entry at byte %d: first offset %d above last offset %d", pos, t.FirstOffset, t.LastOffset)
		case t.LastOffset < segmentBase:
			return nil, corruptionf("txn index", "entry at byte %d: last offset %d below segment base %d", pos, t.LastOffset, segmentBase)
		case len(ti.entries) > 0 && t.LastOffset <= ti.entries[len(ti.entries)-1].LastOffset:
			return nil, corruptionf("txn index", "entry at byte %d: last offset %d not above %d", pos, t.LastOffset, ti.entries[len(ti.entries)-1].LastOffset)
		}
		ti.entries = append(ti.entries, t)
	}
	return ti, nil
}

// Append adds t. Its LastOffset must be above every entry's (markers are
// appended in offset order) and not below its FirstOffset; otherwise the
// error wraps ErrInvalidArgument and nothing changes.
func (ti *TxnIndex) Append(t AbortedTxn) error {
	ti.mu.Lock()
	defer ti.mu.Unlock()
	if t.FirstOffset > t.LastOffset {
		return fmt.Errorf("producer: aborted transaction [%d, %d] ends before it starts: %w", t.FirstOffset, t.LastOffset, ErrInvalidArgument)
	}
	if n := len(ti.entries); n > 0 && t.LastOffset <= ti.entries[n-1].LastOffset {
		return fmt.Errorf("producer: aborted transaction ending at %d appended after one ending at %d: %w",
			t.LastOffset, ti.entries[n-1].LastOffset, ErrInvalidArgument)
	}
	ti.entries = append(ti.entries, t)
	return nil
}

// Len returns the number of entries.
func (ti *TxnIndex) Len() int {
	ti.mu.RLock()
	defer ti.mu.RUnlock()
	return len(ti.entries)
}

// Entries returns a copy of the entries.
func (ti *TxnIndex) Entries() []AbortedTxn {
	ti.mu.RLock()
	defer ti.mu.RUnlock()
	return append([]AbortedTxn(nil), ti.entries...)
}

// CollectAborted appends to dst the aborted transactions that overlap
// [fetchOffset, upperBound): LastOffset >= fetchOffset and FirstOffset <
// upperBound. complete is true when an entry's LastStableOffset reached
// upperBound, so no later segment's index can add to the result; when it
// is false the caller goes on with the next segment's index. Kafka:
// TransactionIndex.collectAbortedTxns.
func (ti *TxnIndex) CollectAborted(dst []AbortedTxn, fetchOffset, upperBound int64) (_ []AbortedTxn, complete bool) {
	ti.mu.RLock()
	defer ti.mu.RUnlock()
	for _, t := range ti.entries {
		if t.LastOffset >= fetchOffset && t.FirstOffset < upperBound {
			dst = append(dst, t)
		}
		if t.LastStableOffset >= upperBound {
			return dst, true
		}
	}
	return dst, false
}

// TruncateTo removes the entries whose marker is at or above offset (a
// log truncation to offset) and returns how many it removed. The caller
// rewrites the file from AppendEncoded. Kafka: TransactionIndex.truncateTo.
func (ti *TxnIndex) TruncateTo(offset int64) int {
	ti.mu.Lock()
	defer ti.mu.Unlock()
	n := len(ti.entries)
	for n > 0 && ti.entries[n-1].LastOffset >= offset {
		n--
	}
	removed := len(ti.entries) - n
	ti.entries = ti.entries[:n]
	return removed
}

// EncodedSize returns the size of the index file: Len() * AbortedTxnSize.
func (ti *TxnIndex) EncodedSize() int { return ti.Len() * AbortedTxnSize }

// AppendEncoded appends the encoding of the entries from index from on
// (0 for the whole file; the number of entries already written for an
// incremental write) to dst.
func (ti *TxnIndex) AppendEncoded(dst []byte, from int) []byte {
	ti.mu.RLock()
	defer ti.mu.RUnlock()
	for _, t := range ti.entries[min(max(from, 0), len(ti.entries)):] {
		dst = AppendAbortedTxn(dst, t)
	}
	return dst
}
