package wal

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/tierlog/tierlog/log/record"
)

// # The WAL object format
//
// One object holds the Kafka v2 batches of many partitions, grouped by
// partition (in the writer's sort order) and in arrival order within a
// partition, followed by a footer that lists every batch and a fixed-size
// trailer:
//
//	+---------+---------+-----+---------+----------------------+---------+
//	| batch 0 | batch 1 | ... | batch n | footer entries (n+1) | trailer |
//	+---------+---------+-----+---------+----------------------+---------+
//	 ^ byte 0                             ^ dataLen              size-16
//
//	footer entry (44 bytes, big-endian), one per batch, in data order:
//	  topic id      [16]byte
//	  partition     int32
//	  byte offset   uint64   position of the batch in the object
//	  size          uint32   bytes of the batch
//	  offset count  uint32   LastOffsetDelta + 1
//	  record count  uint32
//	  batch crc     uint32   the batch's own CRC-32C field
//
//	trailer (16 bytes, last):
//	  magic         "TLWF"
//	  version       uint16   1
//	  reserved      uint16   0
//	  footer crc    uint32   CRC-32C of the entries, magic, version, reserved
//	  footer length uint32   bytes of the entries (a multiple of 44)
//
// The batches themselves are exactly what the client sent (base offset 0,
// request-relative offsets); the control plane's coordinates (ByteOffset,
// Size) point into the data part, so a reader never needs the footer. The
// footer exists so that the coordinates of a lost control plane can be
// rebuilt from the objects alone (a scan of the key prefix, then the footer
// of each object), and so that a tool can check an object against its
// coordinates: Inkless's objects are bare concatenations, and losing its
// control plane loses the WAL. The cost is 44 bytes per batch and 16 per
// object (0.3% for 16 KiB batches).
const (
	objectMagic       = "TLWF"
	objectVersion     = 1
	footerEntryBytes  = 44
	objectTrailerSize = 16
	// maxObjectBytes bounds an object so that every byte offset and size
	// fits the footer's fields and an int on 32-bit platforms.
	maxObjectBytes = math.MaxInt32
)

var castagnoliTable = crc32.MakeTable(crc32.Castagnoli)

// ObjectEntry is one footer entry: where one batch is and what it holds.
type ObjectEntry struct {
	Partition   TopicIDPartition
	ByteOffset  int64
	Size        int64
	OffsetCount int64
	RecordCount int32
	BatchCRC    uint32
}

// ObjectFooter is the decoded footer of a WAL object.
type ObjectFooter struct {
	// DataBytes is the length of the batch part (the footer starts there).
	DataBytes int64
	Entries   []ObjectEntry
}

// appendFooter appends the footer and the trailer for entries to dst.
func appendFooter(dst []byte, entries []ObjectEntry) []byte {
	start := len(dst)
	for _, e := range entries {
		dst = append(dst, e.Partition.TopicID[:]...)
		dst = binary.BigEndian.AppendUint32(dst, uint32(e.Partition.Partition))
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.ByteOffset))
		dst = binary.BigEndian.AppendUint32(dst, uint32(e.Size))
		dst = binary.BigEndian.AppendUint32(dst, uint32(e.OffsetCount))
		dst = binary.BigEndian.AppendUint32(dst, uint32(e.RecordCount))
		dst = binary.BigEndian.AppendUint32(dst, e.BatchCRC)
	}
	footerLen := len(dst) - start
	dst = append(dst, objectMagic...)
	dst = binary.BigEndian.AppendUint16(dst, objectVersion)
	dst = binary.BigEndian.AppendUint16(dst, 0)
	crc := crc32.Checksum(dst[start:], castagnoliTable)
	dst = binary.BigEndian.AppendUint32(dst, crc)
	return binary.BigEndian.AppendUint32(dst, uint32(footerLen))
}

// DecodeObjectFooter decodes the footer of a whole WAL object and checks
// it against the object: the entries tile the data part exactly, in
// order, with no gap and no overlap. It returns an *ObjectFormatError
// (errors.Is ErrCorruption) for any damage and never panics. It does not
// read the batches; CheckObject does.
func DecodeObjectFooter(object []byte) (ObjectFooter, error) {
	size := int64(len(object))
	if size < objectTrailerSize {
		return ObjectFooter{}, formatErr(size, "%d bytes, shorter than the %d-byte trailer", size, objectTrailerSize)
	}
	if size > maxObjectBytes {
		return ObjectFooter{}, formatErr(size, "%d bytes, larger than %d", size, maxObjectBytes)
	}
	tr := object[size-objectTrailerSize:]
	if string(tr[:4]) != objectMagic {
		return ObjectFooter{}, formatErr(size, "magic %q, want %q", tr[:4], objectMagic)
	}
	if v := binary.BigEndian.Uint16(tr[4:]); v != objectVersion {
		return ObjectFooter{}, formatErr(size, "version %d, want %d", v, objectVersion)
	}
	footerLen := int64(binary.BigEndian.Uint32(tr[12:]))
	if footerLen%footerEntryBytes != 0 || footerLen > size-objectTrailerSize {
		return ObjectFooter{}, formatErr(size, "footer length %d does not fit (object %d bytes, entries %d bytes each)",
			footerLen, size, footerEntryBytes)
	}
	dataLen := size - objectTrailerSize - footerLen
	covered := object[dataLen : size-4-4]
	if stored, computed := binary.BigEndian.Uint32(tr[8:]), crc32.Checksum(covered, castagnoliTable); stored != computed {
		return ObjectFooter{}, formatErr(size, "footer crc %#08x, computed %#08x", stored, computed)
	}
	entries, err := decodeEntries(object[dataLen:dataLen+footerLen], dataLen, size)
	if err != nil {
		return ObjectFooter{}, err
	}
	return ObjectFooter{DataBytes: dataLen, Entries: entries}, nil
}

// decodeEntries decodes the entries and checks that they tile [0, dataLen).
func decodeEntries(b []byte, dataLen, size int64) ([]ObjectEntry, error) {
	entries := make([]ObjectEntry, 0, len(b)/footerEntryBytes)
	next := int64(0)
	for i := 0; len(b) >= footerEntryBytes; i++ {
		var e ObjectEntry
		copy(e.Partition.TopicID[:], b[:16])
		e.Partition.Partition = int32(binary.BigEndian.Uint32(b[16:]))
		e.ByteOffset = int64(binary.BigEndian.Uint64(b[20:]))
		e.Size = int64(binary.BigEndian.Uint32(b[28:]))
		e.OffsetCount = int64(binary.BigEndian.Uint32(b[32:]))
		e.RecordCount = int32(binary.BigEndian.Uint32(b[36:]))
		e.BatchCRC = binary.BigEndian.Uint32(b[40:])
		b = b[footerEntryBytes:]
		switch {
		case e.ByteOffset != next:
			return nil, formatErr(size, "entry %d at byte %d, want %d", i, e.ByteOffset, next)
		case e.Size <= 0 || e.Size > dataLen-next:
			return nil, formatErr(size, "entry %d: size %d at byte %d beyond the data (%d bytes)", i, e.Size, next, dataLen)
		case e.OffsetCount <= 0 || e.RecordCount <= 0 || int64(e.RecordCount) > e.OffsetCount:
			return nil, formatErr(size, "entry %d: %d records over %d offsets", i, e.RecordCount, e.OffsetCount)
		}
		next += e.Size
		entries = append(entries, e)
	}
	if next != dataLen {
		return nil, formatErr(size, "entries cover %d bytes, data has %d", next, dataLen)
	}
	return entries, nil
}

// NewObjectKey returns a fresh key under prefix: prefix, two hex digits, a
// slash and 30 more hex digits of a random 128-bit id. The random part
// comes first after the prefix, so the keys of all writers spread evenly
// over the store's key space (S3 partitions request rates by key prefix),
// and the two-digit directory keeps an fs store's directories small.
func NewObjectKey(prefix string) string {
	var id [16]byte
	_, _ = rand.Read(id[:]) // crypto/rand.Read never fails (Go 1.24)
	h := hex.EncodeToString(id[:])
	return prefix + h[:2] + "/" + h[2:]
}

// ObjectFormatError reports a WAL object that fails a format check.
// errors.Is(err, ErrCorruption) holds.
type ObjectFormatError struct {
	ObjectKey  string // "" when the caller does not know it
	ObjectSize int64
	Reason     string
}

func (e *ObjectFormatError) Error() string {
	return fmt.Sprintf("wal: corrupt object %q (%d bytes): %s", e.ObjectKey, e.ObjectSize, e.Reason)
}

func (e *ObjectFormatError) Unwrap() error { return ErrCorruption }

func formatErr(size int64, format string, args ...any) *ObjectFormatError {
	return &ObjectFormatError{ObjectSize: size, Reason: fmt.Sprintf(format, args...)}
}

// CheckObject decodes the footer of object and checks every batch against
// its entry: framing, size, CRC, offset and record counts. It returns the
// footer, or the first mismatch as an *ObjectFormatError (errors.Is
// ErrCorruption). It is what a rebuild of lost coordinates runs per object.
func CheckObject(object []byte) (ObjectFooter, error) {
	f, err := DecodeObjectFooter(object)
	if err != nil {
		return ObjectFooter{}, err
	}
	size := int64(len(object))
	for i, e := range f.Entries {
		b, err := record.ReadBatch(object[e.ByteOffset : e.ByteOffset+e.Size])
		if err == nil {
			err = b.Validate()
		}
		switch {
		case err != nil:
			return ObjectFooter{}, formatErr(size, "entry %d: batch at byte %d: %v", i, e.ByteOffset, err)
		case int64(b.Size()) != e.Size:
			return ObjectFooter{}, formatErr(size, "entry %d: batch of %d bytes, entry says %d", i, b.Size(), e.Size)
		case int64(b.LastOffsetDelta())+1 != e.OffsetCount || b.RecordsCount() != e.RecordCount || b.CRC() != e.BatchCRC:
			return ObjectFooter{}, formatErr(size, "entry %d: batch (%d offsets, %d records, crc %#08x) does not match (%d, %d, %#08x)",
				i, int64(b.LastOffsetDelta())+1, b.RecordsCount(), b.CRC(), e.OffsetCount, e.RecordCount, e.BatchCRC)
		}
	}
	return f, nil
}

// objectBuilder concatenates batches into an object and records their
// footer entries; the commit list is derived from the same entries, so
// the coordinates the control plane stores and the footer never disagree.
type objectBuilder struct {
	data    []byte
	entries []ObjectEntry
}

// add appends one validated batch of tp.
func (ob *objectBuilder) add(tp TopicIDPartition, b record.Batch) ObjectEntry {
	e := ObjectEntry{
		Partition:   tp,
		ByteOffset:  int64(len(ob.data)),
		Size:        int64(b.Size()),
		OffsetCount: int64(b.LastOffsetDelta()) + 1,
		RecordCount: b.RecordsCount(),
		BatchCRC:    b.CRC(),
	}
	ob.data = append(ob.data, b.Bytes()...)
	ob.entries = append(ob.entries, e)
	return e
}

// finish returns the whole object: the batches, the footer and the trailer.
func (ob *objectBuilder) finish() []byte {
	return appendFooter(ob.data, ob.entries)
}
