package record

import "github.com/tierlog/tierlog/internal/base"

// minRecordSize is the smallest encoded record: one byte each for the
// length, attributes, timestamp delta, offset delta, key length, value
// length and header count. It bounds how many records the bytes can hold
// before anything is decoded.
const minRecordSize = 7

// Record is one decoded record. Key, Value and the headers alias the batch
// bytes (uncompressed batches) or the Iter's buffer (compressed batches):
// they stay valid until the Iter is reset, and must be copied to be kept.
type Record struct {
	// Offset is BaseOffset + OffsetDelta.
	Offset int64
	// OffsetDelta is the record's offset relative to the batch base offset.
	OffsetDelta int32
	// Timestamp is BaseTimestamp + TimestampDelta for CreateTime batches,
	// and the batch's MaxTimestamp for LogAppendTime batches, as Kafka
	// reports it to consumers.
	Timestamp int64
	// TimestampDelta is the stored delta, relative to BaseTimestamp.
	TimestampDelta int64
	// Attributes is the record attribute byte (unused by Kafka, 0).
	Attributes int8
	// Key is nil for a null key, and non-nil (possibly empty) otherwise.
	Key []byte
	// Value is nil for a null value (a tombstone), and non-nil (possibly
	// empty) otherwise.
	Value []byte

	headers     []byte // the encoded headers, validated by the Iter
	headerCount int32
}

// Header is a record header. The builder takes it; Record.AppendHeaders
// returns it. A nil Value is a null header value.
type Header struct {
	Key   string
	Value []byte
}

// NumHeaders returns the number of headers.
func (r *Record) NumHeaders() int { return int(r.headerCount) }

// Headers returns an iterator over the headers that allocates nothing.
func (r *Record) Headers() HeaderIter {
	return HeaderIter{b: r.headers, left: r.headerCount}
}

// AppendHeaders appends the headers to dst, converting each key to a string
// (one allocation per header); values alias the record.
func (r *Record) AppendHeaders(dst []Header) []Header {
	for h := r.Headers(); h.Next(); {
		dst = append(dst, Header{Key: string(h.Key()), Value: h.Value()})
	}
	return dst
}

// HeaderIter walks a record's headers without allocating:
//
//	for h := r.Headers(); h.Next(); {
//		use(h.Key(), h.Value())
//	}
//
// The Iter validated the header bytes when it decoded the record, so
// walking them cannot fail.
type HeaderIter struct {
	b          []byte
	left       int32
	key, value []byte
}

// Next advances to the next header and reports whether there is one.
func (h *HeaderIter) Next() bool {
	if h.left <= 0 {
		return false
	}
	h.left--
	var ok bool
	h.key, h.b, ok = readBytes(h.b)
	if ok {
		h.value, h.b, ok = readBytes(h.b)
	}
	if !ok {
		// Unreachable for headers the Iter validated; stop rather than
		// return garbage.
		h.left = 0
		return false
	}
	return true
}

// Key returns the current header's key (never nil).
func (h *HeaderIter) Key() []byte { return h.key }

// Value returns the current header's value, nil for a null value.
func (h *HeaderIter) Value() []byte { return h.value }

// readBytes reads a varint length and that many bytes. A negative length
// is a null (nil) slice, as in Kafka's DefaultRecord, which reads any
// negative key, value or header value length as null. ok is false if the
// bytes are cut or the varint is malformed.
func readBytes(b []byte) (v, rest []byte, ok bool) {
	n, k := Varint(b)
	if k <= 0 {
		return nil, nil, false
	}
	b = b[k:]
	if n < 0 {
		return nil, b, true
	}
	if int(n) > len(b) {
		return nil, nil, false
	}
	return b[:n:n], b[n:], true
}

// IterOptions configures an Iter. The zero value is the default.
type IterOptions struct {
	// MaxDecompressedBytes caps the decompressed size of a batch's
	// records. A batch that expands beyond it fails with a
	// *DecompressedSizeError. Default DefaultMaxDecompressedBytes (64
	// MiB).
	MaxDecompressedBytes int
}

// Iter decodes the records of a batch, in the style of bufio.Scanner:
//
//	it.Reset(batch)
//	for it.Next() {
//		r := it.Record()
//		...
//	}
//	if err := it.Err(); err != nil { ... }
//
// Uncompressed batches decode with no allocation: Record is reused and
// its slices alias the batch. Compressed batches are decompressed once, on
// the first Next, into a buffer the Iter owns and reuses across batches.
//
// Beyond each record's own framing, the Iter checks what ties records to
// the header: exactly RecordsCount records that fill the records section,
// offset deltas strictly increasing within [0, LastOffsetDelta]. It does
// not check the CRC (call Batch.Validate, or use a Scanner). The zero
// Iter is ready to use. An Iter is not safe for concurrent use.
type Iter struct {
	batch Batch
	dec   Decompressor

	// data is the records section still to decode, decompressed.
	data []byte
	// decompressed is true once data is set for the current batch.
	decompressed bool
	// read counts the records returned so far.
	read      int32
	lastDelta int32
	rec       Record
	err       error
}

// NewIter returns an Iter with the given options.
func NewIter(opts IterOptions) *Iter {
	it := &Iter{}
	it.dec.SetLimit(opts.MaxDecompressedBytes)
	return it
}

// SetMaxDecompressedBytes changes the decompression limit for the batches
// Reset starts on from now on (0 means the default), so that a pooled Iter
// can serve callers with different limits.
func (it *Iter) SetMaxDecompressedBytes(n int) { it.dec.SetLimit(n) }

// Clear drops the Iter's references to the batch it iterated (keeping its
// own buffers), so that a pooled Iter does not keep a caller's bytes alive.
// Next returns false until the next Reset.
func (it *Iter) Clear() {
	it.batch, it.data, it.rec = Batch{}, nil, Record{}
	it.decompressed, it.read, it.err = false, 0, nil
}

// Reset starts iterating over b, keeping the Iter's buffers.
func (it *Iter) Reset(b Batch) {
	it.batch = b
	it.data = nil
	it.decompressed = false
	it.read = 0
	it.lastDelta = -1
	it.rec = Record{}
	it.err = nil
	if len(b.b) < HeaderSize {
		it.err = corruptf(base.UndefinedOffset, "iterating a batch of %d bytes", len(b.b))
		return
	}
	if err := b.checkHeader(); err != nil {
		it.err = err
	}
}

// Batch returns the batch being iterated.
func (it *Iter) Batch() Batch { return it.batch }

// Err returns the first error the Iter met, or nil once every record
// decoded. It is a *CorruptBatchError or a *DecompressedSizeError.
func (it *Iter) Err() error { return it.err }

// Record returns the record the last successful Next decoded. The pointer
// is reused by the next call to Next.
func (it *Iter) Record() *Record { return &it.rec }

// Next decodes the next record and reports whether it succeeded. It
// returns false at the end of the batch or on an error; Err tells which.
func (it *Iter) Next() bool {
	if it.err != nil || it.batch.b == nil { // nil: cleared
		return false
	}
	if !it.decompressed && !it.decompress() {
		return false
	}
	count := it.batch.RecordsCount()
	if it.read == count {
		if len(it.data) != 0 {
			it.fail("%d bytes after the last of %d records", len(it.data), count)
		}
		return false
	}
	if len(it.data) == 0 {
		it.fail("records section ends after %d of %d records", it.read, count)
		return false
	}
	if err := it.decodeRecord(); err != "" {
		it.fail("record %d of %d: %s", it.read, count, err)
		return false
	}
	it.read++
	return true
}

func (it *Iter) fail(format string, args ...any) {
	it.err = corruptf(it.batch.BaseOffset(), format, args...)
}

// decompress sets it.data to the records section, decompressed.
func (it *Iter) decompress() bool {
	it.decompressed = true
	raw := it.batch.b[HeaderSize:]
	c := it.batch.Compression()
	data, err := it.dec.decompress(c, raw)
	if err != nil {
		it.err = it.dec.wrapErr(err, c, it.batch.BaseOffset())
		return false
	}
	// Each record takes at least minRecordSize bytes; check the count
	// against the bytes before decoding any of them.
	if count := it.batch.RecordsCount(); int64(count)*minRecordSize > int64(len(data)) {
		it.fail("%d records cannot fit in %d bytes", count, len(data))
		return false
	}
	it.data = data
	return true
}

// decodeRecord decodes the record at the start of it.data into it.rec and
// advances it.data past it. It returns a reason on failure: a string, not
// an error, so that the happy path allocates nothing.
func (it *Iter) decodeRecord() string {
	length, n := Varint(it.data)
	if n <= 0 {
		return "malformed record length"
	}
	if length < minRecordSize-1 || int64(length) > int64(len(it.data)-n) {
		return "record length out of range"
	}
	body := it.data[n : n+int(length)]
	it.data = it.data[n+int(length):]

	r := &it.rec
	if len(body) < 1 {
		return "record cut before attributes"
	}
	r.Attributes = int8(body[0])
	body = body[1:]
	if r.TimestampDelta, n = Varlong(body); n <= 0 {
		return "malformed timestamp delta"
	}
	body = body[n:]
	if r.OffsetDelta, n = Varint(body); n <= 0 {
		return "malformed offset delta"
	}
	body = body[n:]
	if r.OffsetDelta <= it.lastDelta || r.OffsetDelta > it.batch.LastOffsetDelta() {
		return "offset delta not increasing within [0, last offset delta]"
	}
	it.lastDelta = r.OffsetDelta
	var ok bool
	if r.Key, body, ok = readBytes(body); !ok {
		return "malformed key"
	}
	if r.Value, body, ok = readBytes(body); !ok {
		return "malformed value"
	}
	if reason := r.decodeHeaders(body); reason != "" {
		return reason
	}
	r.Offset = it.batch.BaseOffset() + int64(r.OffsetDelta)
	if it.batch.TimestampType() == LogAppendTime {
		r.Timestamp = it.batch.MaxTimestamp()
	} else {
		r.Timestamp = it.batch.BaseTimestamp() + r.TimestampDelta
	}
	return ""
}

// decodeHeaders checks that body holds exactly the header count and the
// headers it announces, and records them for HeaderIter.
func (r *Record) decodeHeaders(body []byte) string {
	count, n := Varint(body)
	if n <= 0 {
		return "malformed header count"
	}
	body = body[n:]
	// Each header takes at least 2 bytes (two lengths).
	if count < 0 || int64(count)*2 > int64(len(body)) {
		return "header count out of range"
	}
	r.headers, r.headerCount = body, count
	for i := int32(0); i < count; i++ {
		klen, n := Varint(body)
		// Kafka rejects a null (negative) header key.
		if n <= 0 || klen < 0 || int(klen) > len(body)-n {
			return "malformed header key"
		}
		body = body[n+int(klen):]
		var ok bool
		if _, body, ok = readBytes(body); !ok {
			return "malformed header value"
		}
	}
	if len(body) != 0 {
		return "record length does not match its fields"
	}
	return ""
}
