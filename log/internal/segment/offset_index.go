package segment

import (
	"encoding/binary"
	"math"
)

// offsetIndex is a segment's sparse offset index (Kafka's OffsetIndex):
// it maps some offsets of the segment to the .log position of the batch
// that ends at them, so a read can start its scan near its target.
//
// # File format (.index)
//
// A sequence of 8-byte big-endian entries, nothing else (no header, no
// padding, no trailing zeros: the file size is 8 x entries).
//
//	 0               4               8
//	+---------------+---------------+
//	| relOffset i32 | position i32  |  entry 0
//	+---------------+---------------+
//	| relOffset i32 | position i32  |  entry 1 ...
//
//	relOffset = lastOffset of a batch - segment base offset, in [0, MaxInt32]
//	position  = .log position of that batch's first byte
//
// Both fields are strictly increasing from entry to entry. Lookup(t)
// returns the entry with the largest offset <= t, or (base, 0): the batch
// holding t starts at or after that position.
//
// The index holds at most capacity = MaxIndexBytes / 8 entries.
type offsetIndex struct {
	index
	baseOffset int64
}

func offsetKey(e []byte) int64 { return be32(e) }

// lookup returns the floor entry of target as (offset, position), or
// (baseOffset, 0) if every entry is above target. REQUIRES: loaded.
func (x *offsetIndex) lookup(target int64) (offset, position int64) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	rel := target - x.baseOffset
	if rel < 0 {
		return x.baseOffset, 0
	}
	rel = min(rel, math.MaxInt32)
	i := searchEntries(x.mu.entries, offsetEntrySize, rel, offsetKey)
	if i == 0 {
		return x.baseOffset, 0
	}
	e := x.mu.entries[(i-1)*offsetEntrySize:]
	return x.baseOffset + be32(e), be32(e[4:])
}

// indexSpan is what the offset index says about where the batch holding
// a target offset starts (see offsetIndex.span).
type indexSpan struct {
	// ok is set when some entry's offset is >= the target; (offset, pos)
	// is the first such entry. Entries are keyed by a batch's last
	// offset, so that batch is the one holding the target unless its base
	// offset is above the target (an unindexed batch before it holds the
	// target, or no batch does).
	ok          bool
	offset, pos int64
	// nextPos is the position of the entry after (offset, pos), -1 if
	// there is none: the batch at pos ends at or before it, which sizes
	// the one read that returns it.
	nextPos int64
	// prevOffset and prevPos are the entry before (offset, pos), or
	// (base - 1, 0) if there is none: the batch holding the target starts
	// after the batch at prevPos (at 0 or later without an entry).
	prevOffset, prevPos int64
}

// span returns the index's answer for target: the first entry at or
// above it, its successor's position and its predecessor. REQUIRES:
// loaded.
func (x *offsetIndex) span(target int64) indexSpan {
	x.mu.RLock()
	defer x.mu.RUnlock()
	sp := indexSpan{nextPos: -1, prevOffset: x.baseOffset - 1}
	rel := target - x.baseOffset
	if rel < 0 || rel > math.MaxInt32 {
		return sp
	}
	// The number of entries below rel is the index of the first entry
	// >= rel.
	i := searchEntries(x.mu.entries, offsetEntrySize, rel-1, offsetKey)
	if i > 0 {
		e := x.mu.entries[(i-1)*offsetEntrySize:]
		sp.prevOffset, sp.prevPos = x.baseOffset+be32(e), be32(e[4:])
	}
	if (i+1)*offsetEntrySize > len(x.mu.entries) {
		return sp
	}
	e := x.mu.entries[i*offsetEntrySize:]
	sp.ok, sp.offset, sp.pos = true, x.baseOffset+be32(e), be32(e[4:])
	if len(e) >= 2*offsetEntrySize {
		sp.nextPos = be32(e[offsetEntrySize+4:])
	}
	return sp
}

// lastEntry returns the last entry, or (baseOffset, 0) if empty.
// REQUIRES: loaded.
func (x *offsetIndex) lastEntry() (offset, position int64) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	n := len(x.mu.entries)
	if n == 0 {
		return x.baseOffset, 0
	}
	e := x.mu.entries[n-offsetEntrySize:]
	return x.baseOffset + be32(e), be32(e[4:])
}

// isFull reports whether the index holds its capacity. REQUIRES: loaded.
func (x *offsetIndex) isFull() bool { return x.entriesCount() >= x.capacity }

// append adds the entry (offset, position). It returns ErrIndexFull when
// the index holds its capacity, ErrIndexOrder when offset or position is
// not above the last entry's, and an *OffsetOverflowError when offset does
// not fit. REQUIRES: loaded; the segment's writer.
func (x *offsetIndex) append(offset, position int64) error {
	rel := offset - x.baseOffset
	if rel < 0 || rel > maxRelativeOffset {
		return &OffsetOverflowError{Path: x.path, BaseOffset: x.baseOffset, Offset: offset}
	}
	if position < 0 || position > math.MaxInt32 {
		return invalidArgf("%s: position %d outside [0, %d]", x.path, position, int64(math.MaxInt32))
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	n := len(x.mu.entries)
	if n/offsetEntrySize >= x.capacity {
		return ErrIndexFull
	}
	if n > 0 {
		last := x.mu.entries[n-offsetEntrySize:]
		if rel <= be32(last) || position <= be32(last[4:]) {
			return errIndexOrderf(x.path, "entry (%d, %d) after (%d, %d)",
				offset, position, x.baseOffset+be32(last), be32(last[4:]))
		}
	}
	x.mu.entries = binary.BigEndian.AppendUint32(x.mu.entries, uint32(rel))
	x.mu.entries = binary.BigEndian.AppendUint32(x.mu.entries, uint32(position))
	return nil
}

// entriesBelow returns a copy of the entries whose offset is < offset:
// what truncating the index to offset keeps. REQUIRES: loaded.
func (x *offsetIndex) entriesBelow(offset int64) []byte {
	x.mu.RLock()
	defer x.mu.RUnlock()
	i := searchEntries(x.mu.entries, offsetEntrySize, offset-x.baseOffset-1, offsetKey)
	return append([]byte(nil), x.mu.entries[:i*offsetEntrySize]...)
}

// validateOffsetEntries checks entries read from a file: offsets within
// [0, MaxInt32] and strictly increasing, positions strictly increasing and
// below logSize (an entry at or past the end of the .log points at data
// that is not there).
func validateOffsetEntries(entries []byte, logSize int64) bool {
	lastRel, lastPos := int64(-1), int64(-1)
	for i := 0; i+offsetEntrySize <= len(entries); i += offsetEntrySize {
		rel, pos := be32(entries[i:]), be32(entries[i+4:])
		if rel <= lastRel || pos <= lastPos || pos >= logSize {
			return false
		}
		lastRel, lastPos = rel, pos
	}
	return len(entries)%offsetEntrySize == 0
}
