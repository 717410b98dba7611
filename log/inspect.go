package log

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/tierlog/tierlog/log/internal/producer"
	"github.com/tierlog/tierlog/log/internal/segment"
)

// This file decodes the files of a log directory one by one, without
// opening the log: what an inspect tool (Kafka's DumpLogSegments) needs.
// Every function here is pure: it reads the bytes it is given and never
// touches a file, so inspecting a directory cannot change it (Open, in
// contrast, recovers segments and removes the clean-shutdown marker).

// Entry sizes of the two index file formats (Kafka's OffsetIndex and
// TimeIndex).
const (
	// OffsetIndexEntrySize is the size of one .index entry: relative
	// offset int32, position int32.
	OffsetIndexEntrySize = 8
	// TimeIndexEntrySize is the size of one .timeindex entry: timestamp
	// int64, relative offset int32.
	TimeIndexEntrySize = 12
)

// IndexEntry is one decoded entry of a segment's offset index: the batch
// whose last offset is Offset starts at byte Position of the .log.
type IndexEntry struct {
	// Offset is absolute (segment base offset + the stored relative one).
	Offset   int64
	Position int64
}

// TimeIndexEntry is one decoded entry of a segment's time index: the
// largest timestamp of the segment up to the batch ending at Offset is
// Timestamp, and that batch holds it.
type TimeIndexEntry struct {
	Timestamp int64
	// Offset is absolute (segment base offset + the stored relative one).
	Offset int64
}

// IndexError reports an index file whose bytes break the format: a torn
// trailing entry, or an entry out of order. errors.Is(err, ErrCorruption)
// reports true for it.
type IndexError struct {
	// Name is the file name given to the decoder.
	Name string
	// Entry is the number of the bad entry (0-based); Position its byte
	// position in the file.
	Entry    int
	Position int64
	Reason   string
}

func (e *IndexError) Error() string {
	return fmt.Sprintf("log: corrupt index %s entry %d (position %d): %s", e.Name, e.Entry, e.Position, e.Reason)
}

// Unwrap returns ErrCorruption.
func (e *IndexError) Unwrap() error { return ErrCorruption }

// DecodeOffsetIndex decodes the bytes of a .index file of the segment at
// baseOffset. Offsets and positions must be strictly increasing and the
// file a whole number of entries; on the first violation it returns the
// entries before it and an *IndexError. It does not compare positions
// with the .log (the caller has it; see the inspect tool).
func DecodeOffsetIndex(name string, baseOffset int64, data []byte) ([]IndexEntry, error) {
	n := len(data) / OffsetIndexEntrySize
	entries := make([]IndexEntry, 0, n)
	lastRel, lastPos := int64(-1), int64(-1)
	for i := range n {
		b := data[i*OffsetIndexEntrySize:]
		rel := int64(int32(binary.BigEndian.Uint32(b)))
		pos := int64(int32(binary.BigEndian.Uint32(b[4:])))
		bad := func(format string, args ...any) error {
			return &IndexError{Name: name, Entry: i, Position: int64(i * OffsetIndexEntrySize), Reason: fmt.Sprintf(format, args...)}
		}
		switch {
		case rel < 0 || baseOffset > math.MaxInt64-rel:
			return entries, bad("relative offset %d out of range", rel)
		case rel <= lastRel:
			return entries, bad("offset %d not above the previous entry's %d", baseOffset+rel, baseOffset+lastRel)
		case pos <= lastPos:
			return entries, bad("position %d not above the previous entry's %d", pos, lastPos)
		}
		entries = append(entries, IndexEntry{Offset: baseOffset + rel, Position: pos})
		lastRel, lastPos = rel, pos
	}
	if rest := len(data) % OffsetIndexEntrySize; rest != 0 {
		return entries, &IndexError{Name: name, Entry: n, Position: int64(n * OffsetIndexEntrySize),
			Reason: fmt.Sprintf("torn entry: %d trailing bytes", rest)}
	}
	return entries, nil
}

// DecodeTimeIndex decodes the bytes of a .timeindex file of the segment
// at baseOffset. Timestamps and offsets must not decrease and the file
// must be a whole number of entries; on the first violation it returns the
// entries before it and an *IndexError.
func DecodeTimeIndex(name string, baseOffset int64, data []byte) ([]TimeIndexEntry, error) {
	n := len(data) / TimeIndexEntrySize
	entries := make([]TimeIndexEntry, 0, n)
	lastTs, lastRel := int64(math.MinInt64), int64(0)
	for i := range n {
		b := data[i*TimeIndexEntrySize:]
		ts := int64(binary.BigEndian.Uint64(b))
		rel := int64(int32(binary.BigEndian.Uint32(b[8:])))
		bad := func(format string, args ...any) error {
			return &IndexError{Name: name, Entry: i, Position: int64(i * TimeIndexEntrySize), Reason: fmt.Sprintf(format, args...)}
		}
		switch {
		case rel < 0 || baseOffset > math.MaxInt64-rel:
			return entries, bad("relative offset %d out of range", rel)
		case rel < lastRel:
			return entries, bad("offset %d below the previous entry's %d", baseOffset+rel, baseOffset+lastRel)
		case ts < lastTs:
			return entries, bad("timestamp %d below the previous entry's %d", ts, lastTs)
		}
		entries = append(entries, TimeIndexEntry{Timestamp: ts, Offset: baseOffset + rel})
		lastTs, lastRel = ts, rel
	}
	if rest := len(data) % TimeIndexEntrySize; rest != 0 {
		return entries, &IndexError{Name: name, Entry: n, Position: int64(n * TimeIndexEntrySize),
			Reason: fmt.Sprintf("torn entry: %d trailing bytes", rest)}
	}
	return entries, nil
}

// ProducerSnapshotEntry is one producer of a .snapshot file: its state
// with only its last batch. Kafka: the ProducerSnapshotEntry schema.
type ProducerSnapshotEntry = producer.SnapshotEntry

// DecodeProducerSnapshot decodes a producer snapshot file (Kafka's
// .snapshot, version 1). A short file, another version, a CRC mismatch or
// a size that is not header plus whole entries returns an error wrapping
// ErrCorruption.
func DecodeProducerSnapshot(data []byte) ([]ProducerSnapshotEntry, error) {
	return producer.DecodeSnapshot(data)
}

// OffsetsCheckpoint is the content of a log's offsets-checkpoint file.
type OffsetsCheckpoint struct {
	LogStartOffset int64
	RecoveryPoint  int64
}

// ParseOffsetsCheckpoint parses an offsets-checkpoint file; name is used
// in errors. A malformed file returns a *CheckpointError (ErrCorruption).
func ParseOffsetsCheckpoint(name string, data []byte) (OffsetsCheckpoint, error) {
	c, err := parseOffsetsCheckpoint(name, data)
	return OffsetsCheckpoint{LogStartOffset: c.logStartOffset, RecoveryPoint: c.recoveryPoint}, err
}

// ParseSegmentFileName parses a name found in a log directory. It returns
// the offset the name carries and the file's kind: "log", "index",
// "timeindex", "txnindex", "snapshot", "producerbatches" or "tmp" (an unfinished replacement
// of one of those). ok is false for any other name.
func ParseSegmentFileName(name string) (offset int64, kind string, ok bool) {
	offset, k, ok := segment.ParseFileName(name)
	if !ok {
		return 0, "", false
	}
	return offset, k.String(), true
}
