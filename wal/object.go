package wal

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"

	"github.com/tierlog/tierlog/log/record"
)

// A WAL object holds the Kafka v2 batches of many partitions, grouped by
// partition (in arrival order within one), followed by a footer that names
// each group's partition:
//
//	+--------------------------------------------------------------+
//	| batches of partition A | batches of B | ...                  |  Kafka v2 batches, back to back
//	+--------------------------------------------------------------+
//	| run: topicID [16] | partition u32 | batchCount u32 |         |  one per partition,
//	|      byteOffset u64 | byteLength u64                (40 B)   |  in (topic id, partition) order
//	+--------------------------------------------------------------+
//	| runCount u32 | version u16 (1) | magic "TLWF"                |  trailer (18 B)
//	| batchesCRC u32 | footerCRC u32                               |
//	+--------------------------------------------------------------+
//
// batchesCRC is the CRC-32C of the batch area: Kafka's batch CRC leaves
// the base offset and the partition leader epoch uncovered, so only this
// one catches damage there. footerCRC covers the runs and the trailer
// before it.
//
// Inkless's objects are bare concatenations: the control plane's
// coordinates are their only index, and a lost control plane loses the
// WAL. The footer costs 40 bytes per partition and 18 per object, and
// makes an object self-describing: ParseObject rebuilds the CommitFile
// request of any object from its bytes alone (each batch's offsets,
// record count, timestamps and producer fields are in its own header;
// only its partition is not), so a control plane can be rebuilt from the
// store, and an orphan's content can be checked before it is deleted.
// Readers never need the footer: they read batches at the coordinates
// the control plane gives.
const (
	objectVersion = 1
	objectMagic   = "TLWF"
	runSize       = 16 + 4 + 4 + 8 + 8
	trailerSize   = 4 + 2 + 4 + 4 + 4
)

var objectCRC = crc32.MakeTable(crc32.Castagnoli)

// ObjectError reports a WAL object that fails its format checks. It
// unwraps to ErrCorruption.
type ObjectError struct {
	Pos    int64 // byte position of the problem in the object
	Reason string
	Err    error // the batch's own error, if a batch failed
}

func (e *ObjectError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%v: wal: object byte %d: %s: %v", ErrCorruption, e.Pos, e.Reason, e.Err)
	}
	return fmt.Sprintf("%v: wal: object byte %d: %s", ErrCorruption, e.Pos, e.Reason)
}

func (e *ObjectError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrCorruption, e.Err}
	}
	return []error{ErrCorruption}
}

func objectErrorf(pos int64, format string, args ...any) error {
	return &ObjectError{Pos: pos, Reason: fmt.Sprintf(format, args...)}
}

// NewObjectKey returns prefix + "/" + a random 22-character name
// (URL-safe base64 of 16 random bytes, as Kafka's Uuid prints). The
// random part comes right after the prefix so that keys spread over an
// object store's key-range partitions instead of piling onto one.
func NewObjectKey(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	name := base64.RawURLEncoding.EncodeToString(b[:])
	if prefix == "" {
		return name
	}
	return prefix + "/" + name
}

// ObjectBuilder collects the batches of one WAL object. Not safe for
// concurrent use.
type ObjectBuilder struct {
	entries []objectEntry
	size    int64
}

type objectEntry struct {
	tp    TopicIDPartition
	batch record.Batch
	// crcChecked: the batch's CRC was checked against its bytes (the
	// writer's validation), so the object's CRC may be derived from it.
	crcChecked bool
}

// Add appends a batch of tp. The batch must frame as one Kafka v2 batch
// (record.ReadBatch) of exactly len(batch) bytes; its bytes are retained,
// not copied.
func (o *ObjectBuilder) Add(tp TopicIDPartition, batch []byte) error {
	b, err := record.ReadBatch(batch)
	if err != nil {
		return fmt.Errorf("%w: wal: batch of %s: %w", ErrInvalidArgument, tp, err)
	}
	if b.Size() != len(batch) {
		return invalidf("batch of %s: %d bytes given, the batch frames %d", tp, len(batch), b.Size())
	}
	o.entries = append(o.entries, objectEntry{tp: tp, batch: b})
	o.size += int64(len(batch))
	return nil
}

// addChecked is Add of a batch framed already whose CRC was checked
// against its bytes.
func (o *ObjectBuilder) addChecked(tp TopicIDPartition, b record.Batch) {
	o.entries = append(o.entries, objectEntry{tp: tp, batch: b, crcChecked: true})
	o.size += int64(b.Size())
}

// Len returns the bytes of the batches added so far (the footer excluded).
func (o *ObjectBuilder) Len() int64 { return o.size }

func comparePartitions(a, b TopicIDPartition) int {
	if c := bytes.Compare(a.TopicID[:], b.TopicID[:]); c != 0 {
		return c
	}
	return cmp.Compare(a.Partition, b.Partition)
}

// Build lays the batches out grouped by partition ((topic id, partition)
// order, arrival order within a partition), appends the footer, and
// returns the object's bytes and the CommitFile batches that describe it.
// Each batch's bytes are copied once, into a buffer that is not zeroed
// first.
func (o *ObjectBuilder) Build() ([]byte, []CommitBatch) {
	l := o.layout()
	return l.concat(), l.batches
}

// objectLayout is an object not yet copied: its parts (the batches'
// bytes in object order, then the footer) and its commit list.
type objectLayout struct {
	parts   [][]byte
	batches []CommitBatch
	size    int64
}

// layout orders the batches as Build does and returns the object as the
// batches' own bytes followed by the footer, without copying them.
func (o *ObjectBuilder) layout() objectLayout {
	entries := slices.Clone(o.entries)
	slices.SortStableFunc(entries, func(a, b objectEntry) int { return comparePartitions(a.tp, b.tp) })
	l := objectLayout{parts: make([][]byte, 0, len(entries)+1), batches: make([]CommitBatch, 0, len(entries))}
	var footer []byte // the runs, then the trailer
	var batchesCRC uint32
	pos := int64(0)
	for i := 0; i < len(entries); {
		j, start := i, pos
		for ; j < len(entries) && entries[j].tp == entries[i].tp; j++ {
			b := entries[j].batch.Bytes()
			l.batches = append(l.batches, commitBatchOf(entries[j].tp, pos, entries[j].batch))
			l.parts = append(l.parts, b)
			batchesCRC = appendBatchCRC(batchesCRC, entries[j])
			pos += int64(len(b))
		}
		footer = appendRun(footer, entries[i].tp, uint32(j-i), start, pos-start)
		i = j
	}
	footer = binary.BigEndian.AppendUint32(footer, uint32(len(footer)/runSize))
	footer = binary.BigEndian.AppendUint16(footer, objectVersion)
	footer = append(footer, objectMagic...)
	footer = binary.BigEndian.AppendUint32(footer, batchesCRC)
	footer = binary.BigEndian.AppendUint32(footer, crc32.Checksum(footer, objectCRC))
	l.parts = append(l.parts, footer)
	l.size = pos + int64(len(footer))
	return l
}

// appendBatchCRC extends crc, the CRC-32C of the batch area so far, with
// e's bytes. A batch whose CRC was checked needs no second pass over its
// bytes: Kafka's batch CRC is the CRC-32C of its bytes from the
// attributes on, so only the 21 bytes before them are read and the two
// CRCs combined.
func appendBatchCRC(crc uint32, e objectEntry) uint32 {
	b := e.batch.Bytes()
	if !e.crcChecked {
		return crc32.Update(crc, objectCRC, b)
	}
	crc = crc32.Update(crc, objectCRC, b[:batchCRCStart])
	return crc32Combine(crc, e.batch.CRC(), int64(len(b)-batchCRCStart))
}

// batchCRCStart is where the bytes a v2 batch's CRC covers start: its
// attributes, after base offset (8), length (4), partition leader epoch
// (4), magic (1) and the CRC itself (4).
const batchCRCStart = 8 + 4 + 4 + 1 + 4

// crc32Combine returns the CRC-32C of A followed by B from crcA, crcB and
// the length of B, without reading either (zlib's crc32_combine: crcA
// times x^(8*lenB) modulo the polynomial, plus crcB).
//
// The writer combines once per batch, so x^(8*lenB) comes from one table
// entry per non-zero byte of lenB (two for a 16 KiB batch) rather than
// one product per set bit (twelve for a 16 KiB batch).
func crc32Combine(crcA, crcB uint32, lenB int64) uint32 {
	return multModP(x8nModP(uint64(lenB)), crcA) ^ crcB
}

// x8nModP returns x^(8*n) modulo the polynomial: x2nModP(n, 3).
func x8nModP(n uint64) uint32 {
	if n >= 1<<(8*len(x8nByteTable)) {
		return x2nModP(n, 3)
	}
	p := uint32(1) << 31 // x^0
	for j := 0; n != 0; j++ {
		if v := n & 0xff; v != 0 {
			p = multModP(x8nByteTable[j][v], p)
		}
		n >>= 8
	}
	return p
}

// x8nByteTable[j][v] is x^(8*v*256^j) modulo the polynomial (16 KiB).
var x8nByteTable = func() (t [4][256]uint32) {
	for j := range t {
		for v := range t[j] {
			t[j][v] = x2nModP(uint64(v)<<(8*j), 3)
		}
	}
	return t
}()

// castagnoliReversed is the CRC-32C polynomial, bit-reversed as the
// table-driven CRC uses it.
const castagnoliReversed = 0x82f63b78

// multModP returns a*b modulo the polynomial, in the reflected bit order
// (the x^0 coefficient is the top bit).
func multModP(a, b uint32) uint32 {
	m := uint32(1) << 31
	var p uint32
	for {
		if a&m != 0 {
			p ^= b
			if a&(m-1) == 0 {
				return p
			}
		}
		m >>= 1
		if b&1 != 0 {
			b = b>>1 ^ castagnoliReversed
		} else {
			b >>= 1
		}
	}
}

// x2nTable[k] is x^(2^k) modulo the polynomial.
var x2nTable = func() (t [32]uint32) {
	p := uint32(1) << 30 // x^1
	t[0] = p
	for k := 1; k < 32; k++ {
		p = multModP(p, p)
		t[k] = p
	}
	return t
}()

// x2nModP returns x^(n*2^k) modulo the polynomial.
func x2nModP(n uint64, k uint) uint32 {
	p := uint32(1) << 31 // x^0
	for n != 0 {
		if n&1 != 0 {
			p = multModP(x2nTable[k&31], p)
		}
		n >>= 1
		k++
	}
	return p
}

// concat copies the parts into one new buffer.
func (l objectLayout) concat() []byte {
	dst := make([]byte, 0, l.size)
	for _, p := range l.parts {
		dst = append(dst, p...)
	}
	return dst
}

func appendRun(dst []byte, tp TopicIDPartition, count uint32, offset, length int64) []byte {
	dst = append(dst, tp.TopicID[:]...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(tp.Partition))
	dst = binary.BigEndian.AppendUint32(dst, count)
	dst = binary.BigEndian.AppendUint64(dst, uint64(offset))
	return binary.BigEndian.AppendUint64(dst, uint64(length))
}

// commitBatchOf describes a batch at byteOffset in the terms of a
// CommitFile request, from its own header.
func commitBatchOf(tp TopicIDPartition, byteOffset int64, b record.Batch) CommitBatch {
	ts := CreateTime
	if b.TimestampType() == record.LogAppendTime {
		ts = LogAppendTime
	}
	return CommitBatch{Partition: tp, ByteOffset: byteOffset, Size: int64(b.Size()),
		BaseOffset: b.BaseOffset(), LastOffset: b.LastOffset(), RecordCount: b.RecordsCount(),
		MaxTimestamp: b.MaxTimestamp(), TimestampType: ts,
		ProducerID: b.ProducerID(), ProducerEpoch: b.ProducerEpoch(), BaseSequence: b.BaseSequence(),
		CRC: b.CRC(), PartitionLeaderEpoch: b.PartitionLeaderEpoch()}
}

// ParseObject rebuilds the CommitFile batches of a WAL object from its
// bytes: it checks the footer (magic, version, both CRCs, runs in
// partition order covering the batch area exactly) and every batch (framing, CRC,
// header; the run's count), and returns an *ObjectError (ErrCorruption)
// on the first problem. It never panics and allocates in proportion to
// len(data) only.
func ParseObject(data []byte) ([]CommitBatch, error) {
	runs, batchEnd, err := parseFooter(data)
	if err != nil {
		return nil, err
	}
	var out []CommitBatch
	pos := int64(0)
	for i := 0; i < len(runs); i++ {
		r := runs[i]
		if i > 0 && comparePartitions(runs[i-1].tp, r.tp) >= 0 {
			return nil, objectErrorf(r.footerPos, "run %d (%s) not after run %d (%s)", i, r.tp, i-1, runs[i-1].tp)
		}
		if r.offset != pos || r.length <= 0 || r.length > batchEnd-pos || r.count == 0 {
			return nil, objectErrorf(r.footerPos, "run %d of %s: %d batches at [%d, +%d), want a non-empty run at %d within %d",
				i, r.tp, r.count, r.offset, r.length, pos, batchEnd)
		}
		end := pos + r.length
		for n := uint32(0); n < r.count; n++ {
			if pos >= end {
				return nil, objectErrorf(r.footerPos, "run %d of %s: %d batches declared, %d found", i, r.tp, r.count, n)
			}
			b, err := record.ReadBatch(data[pos:end])
			if err == nil {
				err = b.Validate()
			}
			if err == nil && b.RecordsCount() < 1 {
				err = errors.New("no records")
			}
			if err != nil {
				return nil, &ObjectError{Pos: pos, Reason: fmt.Sprintf("batch %d of %s", n, r.tp), Err: err}
			}
			out = append(out, commitBatchOf(r.tp, pos, b))
			pos += int64(b.Size())
		}
		if pos != end {
			return nil, objectErrorf(pos, "run %d of %s: %d bytes after its %d batches", i, r.tp, end-pos, r.count)
		}
	}
	if pos != batchEnd {
		return nil, objectErrorf(pos, "%d bytes before the footer belong to no run", batchEnd-pos)
	}
	// What a batch header may hold but a commit may not (a negative base
	// offset, a producer id without a sequence) is damage here.
	req := CommitFileRequest{ObjectKey: "parse", ObjectSize: int64(len(data)), Batches: out}
	if err := req.Validate(); err != nil {
		return nil, objectErrorf(0, "batch headers make no valid commit: %v", err)
	}
	return out, nil
}

type objectRun struct {
	tp             TopicIDPartition
	count          uint32
	offset, length int64
	footerPos      int64
}

// parseFooter checks the trailer and returns the runs and where the batch
// area ends.
func parseFooter(data []byte) ([]objectRun, int64, error) {
	size := int64(len(data))
	if size < trailerSize {
		return nil, 0, objectErrorf(0, "%d bytes, shorter than the %d-byte trailer", size, trailerSize)
	}
	t := data[size-trailerSize:]
	if string(t[6:10]) != objectMagic {
		return nil, 0, objectErrorf(size-trailerSize+6, "magic %q, want %q", t[6:10], objectMagic)
	}
	if v := binary.BigEndian.Uint16(t[4:6]); v != objectVersion {
		return nil, 0, objectErrorf(size-trailerSize+4, "object format version %d, want %d", v, objectVersion)
	}
	n := int64(binary.BigEndian.Uint32(t[0:4]))
	if n > (size-trailerSize)/runSize {
		return nil, 0, objectErrorf(size-trailerSize, "%d runs do not fit in %d bytes", n, size)
	}
	footer := size - trailerSize - n*runSize
	if sum, want := crc32.Checksum(data[footer:size-4], objectCRC), binary.BigEndian.Uint32(t[14:18]); sum != want {
		return nil, 0, objectErrorf(size-4, "footer crc32c %08x, stored %08x", sum, want)
	}
	if sum, want := crc32.Checksum(data[:footer], objectCRC), binary.BigEndian.Uint32(t[10:14]); sum != want {
		return nil, 0, objectErrorf(size-8, "batch area crc32c %08x, stored %08x", sum, want)
	}
	runs := make([]objectRun, n)
	for i := range runs {
		p := footer + int64(i)*runSize
		e := data[p : p+runSize]
		r := objectRun{count: binary.BigEndian.Uint32(e[20:24]),
			offset: int64(binary.BigEndian.Uint64(e[24:32])), length: int64(binary.BigEndian.Uint64(e[32:40])), footerPos: p}
		copy(r.tp.TopicID[:], e[0:16])
		r.tp.Partition = int32(binary.BigEndian.Uint32(e[16:20]))
		if r.tp.Partition < 0 {
			return nil, 0, objectErrorf(p+16, "negative partition %d", r.tp.Partition)
		}
		runs[i] = r
	}
	return runs, footer, nil
}
