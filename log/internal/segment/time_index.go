package segment

import (
	"encoding/binary"
	"fmt"
)

// timeIndex is a segment's sparse time index (Kafka's TimeIndex): entry
// (T, O) says "the largest timestamp in the segment up to and including
// the batch ending at offset O is T". A search by timestamp starts its
// scan at O's batch.
//
// # File format (.timeindex)
//
// A sequence of 12-byte big-endian entries, nothing else:
//
//	 0                               8               12
//	+-------------------------------+---------------+
//	| timestamp i64 (ms)            | relOffset i32 |  entry 0 ...
//	+-------------------------------+---------------+
//
// Timestamps are strictly increasing; offsets never decrease. An append
// whose timestamp equals the last one is skipped (callers pass the
// running maximum, so it repeats often).
//
// Capacity is MaxIndexBytes / 12 entries, but the index reports full at
// capacity - 1: the last slot is kept for the entry written when the
// segment becomes inactive (skipFullCheck).
type timeIndex struct {
	index
	baseOffset int64
}

func timeKey(e []byte) int64 { return be64(e) }

// lookup returns the entry with the largest timestamp <= ts as
// (timestamp, offset), or (noTimestamp, baseOffset). REQUIRES: loaded.
func (x *timeIndex) lookup(ts int64) (timestamp, offset int64) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	i := searchEntries(x.mu.entries, timeEntrySize, ts, timeKey)
	if i == 0 {
		return noTimestamp, x.baseOffset
	}
	e := x.mu.entries[(i-1)*timeEntrySize:]
	return be64(e), x.baseOffset + be32(e[8:])
}

// lastEntry returns the last entry, or (noTimestamp, baseOffset).
// REQUIRES: loaded.
func (x *timeIndex) lastEntry() (timestamp, offset int64) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.lastEntryLocked()
}

// REQUIRES: x.mu held.
func (x *timeIndex) lastEntryLocked() (timestamp, offset int64) {
	n := len(x.mu.entries)
	if n == 0 {
		return noTimestamp, x.baseOffset
	}
	e := x.mu.entries[n-timeEntrySize:]
	return be64(e), x.baseOffset + be32(e[8:])
}

// isFull reports whether the index is full: capacity - 1 entries, the
// last slot being reserved. REQUIRES: loaded.
func (x *timeIndex) isFull() bool { return x.entriesCount() >= x.capacity-1 }

// maybeAppend adds (ts, offset) if ts is above the last entry's
// timestamp. It returns ErrIndexFull when the index is full (capacity - 1
// entries, or capacity with skipFullCheck), ErrIndexOrder for an offset
// below the last entry's or a timestamp below the last entry's, and an
// *OffsetOverflowError for an offset that does not fit. REQUIRES: loaded;
// the segment's writer.
func (x *timeIndex) maybeAppend(ts, offset int64, skipFullCheck bool) error {
	rel := offset - x.baseOffset
	if rel < 0 || rel > maxRelativeOffset {
		return &OffsetOverflowError{Path: x.path, BaseOffset: x.baseOffset, Offset: offset}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	n := len(x.mu.entries) / timeEntrySize
	if n >= x.capacity || (!skipFullCheck && n >= x.capacity-1) {
		return ErrIndexFull
	}
	lastTs, lastOffset := x.lastEntryLocked()
	if n > 0 && offset < lastOffset {
		return errIndexOrderf(x.path, "offset %d below the last entry's %d", offset, lastOffset)
	}
	if n > 0 && ts < lastTs {
		return errIndexOrderf(x.path, "timestamp %d below the last entry's %d", ts, lastTs)
	}
	if ts <= lastTs {
		return nil // nothing new; also skips noTimestamp on an empty index
	}
	x.mu.entries = binary.BigEndian.AppendUint64(x.mu.entries, uint64(ts))
	x.mu.entries = binary.BigEndian.AppendUint32(x.mu.entries, uint32(rel))
	return nil
}

// entriesBelow returns a copy of the entries whose offset is < offset.
// Offsets never decrease, so they form a prefix. REQUIRES: loaded.
func (x *timeIndex) entriesBelow(offset int64) []byte {
	x.mu.RLock()
	defer x.mu.RUnlock()
	i := 0
	for ; i+timeEntrySize <= len(x.mu.entries); i += timeEntrySize {
		if x.baseOffset+be32(x.mu.entries[i+8:]) >= offset {
			break
		}
	}
	return append([]byte(nil), x.mu.entries[:i]...)
}

// validateTimeEntries checks entries read from a file: relative offsets
// within [0, MaxInt32] and non-decreasing, timestamps non-decreasing.
// (Equal neighbours are never written but are harmless to lookups, so a
// file holding them is accepted.)
func validateTimeEntries(entries []byte) bool {
	lastTs, lastRel := noTimestamp, int64(0)
	for i := 0; i+timeEntrySize <= len(entries); i += timeEntrySize {
		ts, rel := be64(entries[i:]), be32(entries[i+8:])
		if rel < lastRel || ts < lastTs {
			return false
		}
		lastTs, lastRel = ts, rel
	}
	return len(entries)%timeEntrySize == 0
}

func errIndexOrderf(path, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrIndexOrder, path, fmt.Sprintf(format, args...))
}
