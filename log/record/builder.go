package record

import (
	"encoding/binary"
	"math"
	"slices"

	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/internal/invariants"
)

// BuilderOptions sets a batch's header fields and codec.
//
// Unlike most Options structs, zero does not mean "default" here: 0 is a
// legal base offset, leader epoch, producer id, producer epoch and
// sequence, and the header carries exactly what is set. Start from
// DefaultBuilderOptions for a batch without a producer identity.
type BuilderOptions struct {
	// BaseOffset is the offset of the first record. A leader overwrites it
	// on append (Batch.SetBaseOffset).
	BaseOffset int64
	// PartitionLeaderEpoch is the leader epoch, or UndefinedEpoch.
	PartitionLeaderEpoch int32
	// ProducerID is the idempotent producer id, or NoProducerID.
	ProducerID int64
	// ProducerEpoch is the producer epoch, or NoProducerEpoch.
	ProducerEpoch int16
	// BaseSequence is the first record's sequence, or NoSequence.
	BaseSequence int32
	// Transactional sets AttrTransactional.
	Transactional bool
	// Control sets AttrControl. Use AppendEndTxnBatch for markers.
	Control bool
	// TimestampType is CreateTime (default) or LogAppendTime.
	TimestampType TimestampType
	// LogAppendTime is the broker's append time in milliseconds, stored
	// as MaxTimestamp of a LogAppendTime batch. Ignored for CreateTime,
	// whose MaxTimestamp is the largest record timestamp.
	LogAppendTime int64
	// Compression is the records codec. Default CompressionNone. Kafka:
	// compression.type.
	Compression Compression
	// CompressionLevel is the codec level; 0 means the codec's default.
	// gzip 1-9, lz4 1-9, zstd -131072..22 (Kafka: compression.gzip.level,
	// compression.lz4.level, compression.zstd.level). Ignored by snappy.
	CompressionLevel int
}

// DefaultBuilderOptions returns options for a batch at offset 0 with no
// leader epoch and no producer identity: what a non-idempotent producer
// sends.
func DefaultBuilderOptions() BuilderOptions {
	return BuilderOptions{
		PartitionLeaderEpoch: base.UndefinedEpoch,
		ProducerID:           base.NoProducerID,
		ProducerEpoch:        base.NoProducerEpoch,
		BaseSequence:         base.NoSequence,
	}
}

// Builder assembles one batch from records, the producer side of Iter:
//
//	b := record.NewBuilder(opts)
//	b.Add(ts, key, value)
//	buf, err := b.AppendTo(buf[:0])
//
// Records are encoded as they are added, so Add copies key, value and
// headers and the caller may reuse them at once. The i-th record gets
// offset delta i. BaseTimestamp is the first record's timestamp, as in
// Kafka's MemoryRecordsBuilder. A Builder is reusable through Reset, and
// after warm-up neither Add nor AppendTo allocates (given room in dst).
// A Builder is not safe for concurrent use.
type Builder struct {
	opts BuilderOptions

	// buf is HeaderSize bytes of room for the header followed by the
	// encoded, uncompressed records (records()), so that Finish returns an
	// uncompressed batch where its records were encoded, without a copy.
	buf []byte
	// out holds Finish's compressed batches.
	out            []byte
	count          int32
	firstTimestamp int64
	maxTimestamp   int64
	// err is sticky: the first record that cannot be encoded fails Build.
	err error

	enc compressor
}

// NewBuilder returns a Builder for a batch with the given options.
func NewBuilder(opts BuilderOptions) *Builder {
	b := &Builder{}
	b.Reset(opts)
	return b
}

// Reset discards the records and starts a new batch with opts, keeping
// buffers and codec state.
func (b *Builder) Reset(opts BuilderOptions) {
	b.opts = opts
	if cap(b.buf) < HeaderSize {
		b.buf = make([]byte, HeaderSize, 64<<10)
	}
	b.buf = b.buf[:HeaderSize]
	b.count = 0
	b.firstTimestamp, b.maxTimestamp = 0, 0
	b.err = nil
}

// Len returns the number of records added.
func (b *Builder) Len() int { return int(b.count) }

// UncompressedBytes returns the encoded size of the records added so far,
// before compression and without the header.
func (b *Builder) UncompressedBytes() int { return len(b.buf) - HeaderSize }

// records returns the encoded records added so far.
func (b *Builder) records() []byte { return b.buf[HeaderSize:] }

// Add appends a record. A nil key or value is null; an empty non-nil one
// is empty. Headers with a nil Value have a null value.
func (b *Builder) Add(timestamp int64, key, value []byte, headers ...Header) {
	if b.err != nil {
		return
	}
	if b.count == math.MaxInt32 {
		b.err = invalidArgf("builder: more than %d records", math.MaxInt32)
		return
	}
	if len(b.buf) < HeaderSize { // a zero Builder
		b.buf = make([]byte, HeaderSize, 64<<10)
	}
	if b.count == 0 {
		b.firstTimestamp, b.maxTimestamp = timestamp, timestamp
	}
	b.maxTimestamp = max(b.maxTimestamp, timestamp)
	tsDelta := timestamp - b.firstTimestamp
	offDelta := b.count

	size, ok := recordBodySize(tsDelta, offDelta, key, value, headers)
	if !ok {
		b.err = invalidArgf("builder: record %d larger than %d bytes", b.count, math.MaxInt32)
		return
	}
	r := slices.Grow(b.buf, maxVarintLen+size)
	start := len(r)
	r = AppendVarint(r, int32(size))
	r = append(r, 0) // attributes
	r = AppendVarlong(r, tsDelta)
	r = AppendVarint(r, offDelta)
	r = appendNullableBytes(r, key)
	r = appendNullableBytes(r, value)
	r = AppendVarint(r, int32(len(headers)))
	for i := range headers {
		r = AppendVarint(r, int32(len(headers[i].Key)))
		r = append(r, headers[i].Key...)
		r = appendNullableBytes(r, headers[i].Value)
	}
	invariants.Assertf(len(r)-start == VarintLen(int32(size))+size,
		"record encoded to %d bytes, sized %d", len(r)-start, size)
	b.buf = r
	b.count++
}

// recordBodySize returns the size of a record after its length field, and
// false if it, or any length in it, does not fit in an int32.
func recordBodySize(tsDelta int64, offDelta int32, key, value []byte, headers []Header) (int, bool) {
	size := 1 + VarlongLen(tsDelta) + VarintLen(offDelta) +
		nullableBytesSize(key) + nullableBytesSize(value) + VarintLen(int32(len(headers)))
	if len(headers) > math.MaxInt32 {
		return 0, false
	}
	for i := range headers {
		if len(headers[i].Key) > math.MaxInt32 {
			return 0, false
		}
		size += VarintLen(int32(len(headers[i].Key))) + len(headers[i].Key) +
			nullableBytesSize(headers[i].Value)
	}
	return size, size <= math.MaxInt32 && len(key) <= math.MaxInt32 && len(value) <= math.MaxInt32
}

func nullableBytesSize(v []byte) int {
	if v == nil {
		return 1
	}
	return VarintLen(int32(len(v))) + len(v)
}

func appendNullableBytes(dst, v []byte) []byte {
	if v == nil {
		return AppendVarint(dst, -1)
	}
	dst = AppendVarint(dst, int32(len(v)))
	return append(dst, v...)
}

// Build returns the batch in a new slice. See AppendTo.
func (b *Builder) Build() ([]byte, error) {
	return b.AppendTo(nil)
}

// AppendTo appends the batch to dst and returns the extended slice. It
// fails, leaving dst as it was, if no record was added, a record was too
// large, the options are invalid, or the batch exceeds MaxBatchSize. The
// Builder keeps its records: AppendTo may be called again.
//
// The header is laid out as Batch documents; the records section is
// compressed as one blob with the codec, and the CRC is computed last,
// over [21, end).
func (b *Builder) AppendTo(dst []byte) ([]byte, error) {
	if err := b.check(); err != nil {
		return dst, err
	}
	start := len(dst)
	dst = slices.Grow(dst, len(b.buf))[:start+HeaderSize]
	out, err := b.enc.compress(dst, b.opts.Compression, b.opts.CompressionLevel, b.records())
	if err != nil {
		return dst[:start], err
	}
	if len(out)-start > MaxBatchSize {
		return dst[:start], invalidArgf("builder: batch of %d bytes exceeds %d", len(out)-start, MaxBatchSize)
	}
	b.putHeader(out[start:])
	if invariants.Enabled {
		// Check in pairs: what we write must read back.
		batch, err := ReadBatch(out[start:])
		invariants.Assertf(err == nil, "built batch does not frame: %v", err)
		invariants.Assertf(batch.Validate() == nil, "built batch invalid: %v", batch.Validate())
	}
	return out, nil
}

// Finish returns the batch in the Builder's own memory, valid until the
// next Add, Reset or Finish: the batch AppendTo would append, without its
// copy. An uncompressed batch is finished where Add encoded its records
// (the header written in the room kept before them, the CRC computed
// once, over [21, end)), so building it copies each key and value once;
// a compressed one is compressed into a buffer the Builder reuses. The
// caller may modify the returned bytes (a log stamps offsets and the
// leader epoch in place, outside the CRC). Errors are AppendTo's.
func (b *Builder) Finish() ([]byte, error) {
	if err := b.check(); err != nil {
		return nil, err
	}
	var out []byte
	if b.opts.Compression == CompressionNone {
		out = b.buf
	} else {
		var err error
		out, err = b.enc.compress(slices.Grow(b.out[:0], HeaderSize)[:HeaderSize], b.opts.Compression,
			b.opts.CompressionLevel, b.records())
		if err != nil {
			return nil, err
		}
		b.out = out
	}
	if len(out) > MaxBatchSize {
		return nil, invalidArgf("builder: batch of %d bytes exceeds %d", len(out), MaxBatchSize)
	}
	b.putHeader(out)
	if invariants.Enabled {
		batch, err := ReadBatch(out)
		invariants.Assertf(err == nil, "finished batch does not frame: %v", err)
		invariants.Assertf(batch.Validate() == nil, "finished batch invalid: %v", batch.Validate())
	}
	return out, nil
}

func (b *Builder) check() error {
	switch {
	case b.err != nil:
		return b.err
	case b.count == 0:
		return invalidArgf("builder: no records")
	case b.opts.Compression < CompressionNone || b.opts.Compression > CompressionZstd:
		return invalidArgf("builder: unknown compression %d", b.opts.Compression)
	case b.opts.TimestampType != CreateTime && b.opts.TimestampType != LogAppendTime:
		return invalidArgf("builder: unknown timestamp type %d", b.opts.TimestampType)
	}
	return nil
}

// putHeader writes every header field of h, the batch with its records in
// place, and then the CRC.
func (b *Builder) putHeader(h []byte) {
	o := &b.opts
	attrs := int16(o.Compression)
	if o.TimestampType == LogAppendTime {
		attrs |= AttrTimestampType
	}
	if o.Transactional {
		attrs |= AttrTransactional
	}
	if o.Control {
		attrs |= AttrControl
	}
	maxTimestamp := b.maxTimestamp
	if o.TimestampType == LogAppendTime {
		maxTimestamp = o.LogAppendTime
	}
	be := binary.BigEndian
	be.PutUint64(h[offBaseOffset:], uint64(o.BaseOffset))
	be.PutUint32(h[offLength:], uint32(len(h)-LogOverhead))
	be.PutUint32(h[offPartitionLeaderEpoch:], uint32(o.PartitionLeaderEpoch))
	h[offMagic] = Magic
	be.PutUint16(h[offAttributes:], uint16(attrs))
	be.PutUint32(h[offLastOffsetDelta:], uint32(b.count-1))
	be.PutUint64(h[offBaseTimestamp:], uint64(b.firstTimestamp))
	be.PutUint64(h[offMaxTimestamp:], uint64(maxTimestamp))
	be.PutUint64(h[offProducerID:], uint64(o.ProducerID))
	be.PutUint16(h[offProducerEpoch:], uint16(o.ProducerEpoch))
	be.PutUint32(h[offBaseSequence:], uint32(o.BaseSequence))
	be.PutUint32(h[offRecordsCount:], uint32(b.count))
	be.PutUint32(h[offCRC:], Batch{b: h}.ComputeCRC())
}
