package record

import (
	"encoding/binary"
	"hash/crc32"
	"math"

	"github.com/tierlog/tierlog/internal/base"
)

// Sizes and values fixed by the v2 batch format.
const (
	// LogOverhead is the size of the BaseOffset and Length fields that
	// precede the part of the batch Length counts. Kafka: LOG_OVERHEAD.
	LogOverhead = 12
	// HeaderSize is the size of the batch header up to the first record,
	// the smallest possible batch. Kafka: RECORD_BATCH_OVERHEAD.
	HeaderSize = 61
	// Magic is the only batch format version this package reads and
	// writes. Kafka: RecordBatch.MAGIC_VALUE_V2.
	Magic = 2
	// MaxBatchSize is the largest size a Length field can declare.
	MaxBatchSize = LogOverhead + math.MaxInt32

	// minLength is the smallest Length a batch can declare: the header
	// after the Length field.
	minLength = HeaderSize - LogOverhead
)

// Attribute bits (Kafka DefaultRecordBatch; transactional and control
// bits from KIP-98).
const (
	// AttrCompressionMask selects the codec bits; see Compression.
	AttrCompressionMask int16 = 0x07
	// AttrTimestampType is set for LogAppendTime batches.
	AttrTimestampType int16 = 0x08
	// AttrTransactional is set for batches written in a transaction.
	AttrTransactional int16 = 0x10
	// AttrControl is set for control batches (transaction markers).
	AttrControl int16 = 0x20
	// AttrDeleteHorizon is set when BaseTimestamp holds the delete
	// horizon the log cleaner stamped (KIP-534).
	AttrDeleteHorizon int16 = 0x40
)

// Byte offsets of the header fields (Kafka DefaultRecordBatch). The CRC
// covers
// [offAttributes, end of batch).
const (
	offBaseOffset           = 0
	offLength               = 8
	offPartitionLeaderEpoch = 12
	offMagic                = 16
	offCRC                  = 17
	offAttributes           = 21
	offLastOffsetDelta      = 23
	offBaseTimestamp        = 27
	offMaxTimestamp         = 35
	offProducerID           = 43
	offProducerEpoch        = 51
	offBaseSequence         = 53
	offRecordsCount         = 57
)

// castagnoli is the CRC-32C table. crc32 uses the SSE4.2 / ARMv8 CRC
// instructions for it when the CPU has them, so Validate runs at memory
// speed.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// TimestampType says what a batch's timestamps mean.
type TimestampType int8

const (
	// CreateTime timestamps were set by the producer.
	CreateTime TimestampType = 0
	// LogAppendTime timestamps were set by the broker on append; every
	// record's timestamp is then the batch's MaxTimestamp.
	LogAppendTime TimestampType = 1
)

func (t TimestampType) String() string {
	if t == LogAppendTime {
		return "LogAppendTime"
	}
	return "CreateTime"
}

// Batch is a read-only view over the bytes of one v2 record batch. It
// copies nothing: the accessors decode the header in place, and
// SetBaseOffset / SetPartitionLeaderEpoch write into the underlying bytes.
//
// A Batch is only obtained from ReadBatch or a Scanner, which guarantee at
// least HeaderSize bytes, exactly the declared size, and magic 2, so the
// accessors never index out of range. They do not imply a valid CRC: call
// Validate. The zero Batch holds no bytes; only Bytes, Size and Validate
// may be called on it.
type Batch struct {
	b []byte
}

// ReadBatch frames the batch at the start of buf. The returned Batch
// aliases buf[:Size()]; bytes beyond it are ignored.
//
// It returns a *TornTailError if buf is shorter than the declared size
// (or than LogOverhead), and a *CorruptBatchError if the declared size is
// below HeaderSize or the magic byte is not 2. It does not check the CRC.
func ReadBatch(buf []byte) (Batch, error) {
	if len(buf) < LogOverhead {
		return Batch{}, &TornTailError{Declared: -1, Available: len(buf)}
	}
	baseOffset := int64(binary.BigEndian.Uint64(buf[offBaseOffset:]))
	length := int32(binary.BigEndian.Uint32(buf[offLength:]))
	if length < minLength {
		return Batch{}, corruptf(baseOffset, "length %d below the minimum %d", length, minLength)
	}
	size := LogOverhead + int(length)
	if size > len(buf) {
		return Batch{}, &TornTailError{Declared: size, Available: len(buf)}
	}
	if m := int8(buf[offMagic]); m != Magic {
		return Batch{}, corruptf(baseOffset, "magic %d, want %d", m, Magic)
	}
	return Batch{b: buf[:size:size]}, nil
}

// Bytes returns the batch's bytes, header included. They alias the input
// the Batch was read from.
func (b Batch) Bytes() []byte { return b.b }

// Size returns the batch's size in bytes: LogOverhead + Length.
func (b Batch) Size() int { return len(b.b) }

// BaseOffset returns the offset of the first record.
func (b Batch) BaseOffset() int64 { return b.i64(offBaseOffset) }

// Length returns the Length field: the size of the batch after it.
func (b Batch) Length() int32 { return b.i32(offLength) }

// PartitionLeaderEpoch returns the leader epoch that appended the batch,
// or UndefinedEpoch. It is outside the CRC.
func (b Batch) PartitionLeaderEpoch() int32 { return b.i32(offPartitionLeaderEpoch) }

// Magic returns the format version byte, always 2.
func (b Batch) Magic() int8 { return int8(b.b[offMagic]) }

// CRC returns the stored CRC-32C of bytes [21, Size()).
func (b Batch) CRC() uint32 { return binary.BigEndian.Uint32(b.b[offCRC:]) }

// Attributes returns the raw attribute bits (AttrCompressionMask, ...).
func (b Batch) Attributes() int16 { return b.i16(offAttributes) }

// Compression returns the codec the records are compressed with. It may be
// an unknown codec (> CompressionZstd) in a batch that fails Validate.
func (b Batch) Compression() Compression {
	return Compression(b.Attributes() & AttrCompressionMask)
}

// TimestampType returns CreateTime or LogAppendTime.
func (b Batch) TimestampType() TimestampType {
	if b.Attributes()&AttrTimestampType != 0 {
		return LogAppendTime
	}
	return CreateTime
}

// IsTransactional reports whether the batch belongs to a transaction.
func (b Batch) IsTransactional() bool { return b.Attributes()&AttrTransactional != 0 }

// IsControl reports whether the batch holds a control record.
func (b Batch) IsControl() bool { return b.Attributes()&AttrControl != 0 }

// HasDeleteHorizon reports whether BaseTimestamp holds a delete horizon.
func (b Batch) HasDeleteHorizon() bool { return b.Attributes()&AttrDeleteHorizon != 0 }

// LastOffsetDelta returns LastOffset - BaseOffset. It survives compaction:
// it may exceed RecordsCount - 1.
func (b Batch) LastOffsetDelta() int32 { return b.i32(offLastOffsetDelta) }

// BaseTimestamp returns the timestamp record timestamp deltas are relative
// to (the delete horizon if HasDeleteHorizon).
func (b Batch) BaseTimestamp() int64 { return b.i64(offBaseTimestamp) }

// MaxTimestamp returns the largest record timestamp, or the log append
// time for LogAppendTime batches.
func (b Batch) MaxTimestamp() int64 { return b.i64(offMaxTimestamp) }

// ProducerID returns the producer id, or NoProducerID.
func (b Batch) ProducerID() int64 { return b.i64(offProducerID) }

// ProducerEpoch returns the producer epoch, or NoProducerEpoch.
func (b Batch) ProducerEpoch() int16 { return b.i16(offProducerEpoch) }

// BaseSequence returns the sequence number of the first record, or
// NoSequence.
func (b Batch) BaseSequence() int32 { return b.i32(offBaseSequence) }

// RecordsCount returns the number of records the batch declares.
func (b Batch) RecordsCount() int32 { return b.i32(offRecordsCount) }

// LastOffset returns the offset of the last record, inclusive.
func (b Batch) LastOffset() int64 { return b.BaseOffset() + int64(b.LastOffsetDelta()) }

// NextOffset returns LastOffset() + 1: the log end offset after appending
// this batch.
func (b Batch) NextOffset() int64 { return b.LastOffset() + 1 }

// LastSequence returns the sequence number of the last record, or
// NoSequence for a batch without one.
func (b Batch) LastSequence() int32 {
	if b.BaseSequence() == base.NoSequence {
		return base.NoSequence
	}
	return LastSequence(b.BaseSequence(), b.LastOffsetDelta())
}

// LastSequence returns baseSequence + delta, wrapping as Kafka does:
// sequence numbers run from 0 to MaxInt32 and then start again at 0
// (DefaultRecordBatch.incrementSequence), so the result is never negative for non-negative inputs.
func LastSequence(baseSequence, delta int32) int32 {
	if baseSequence > math.MaxInt32-delta {
		return delta - (math.MaxInt32 - baseSequence) - 1
	}
	return baseSequence + delta
}

// ComputeCRC returns the CRC-32C of bytes [21, Size()), the value a valid
// batch stores in its CRC field.
func (b Batch) ComputeCRC() uint32 {
	return crc32.Checksum(b.b[offAttributes:], castagnoli)
}

// Validate checks the batch: size, magic 2, the CRC, and header fields no
// writer produces (a negative LastOffsetDelta or RecordsCount, more
// records than offsets, a records count of 0 with records present, a last
// offset beyond MaxInt64, an unknown codec). It returns a *CorruptBatchError
// (Pos 0) or nil. It does not decode records; an Iter does.
func (b Batch) Validate() error {
	// Return a nil interface, not a nil *CorruptBatchError.
	if err := b.validate(); err != nil {
		return err
	}
	return nil
}

func (b Batch) validate() *CorruptBatchError { return b.validateCRC(true) }

// validateCRC is validate, comparing the CRC only if crc is set.
func (b Batch) validateCRC(crc bool) *CorruptBatchError {
	if len(b.b) < HeaderSize {
		baseOffset := base.UndefinedOffset
		if len(b.b) >= 8 {
			baseOffset = b.BaseOffset()
		}
		return corruptf(baseOffset, "%d bytes, below the header size %d", len(b.b), HeaderSize)
	}
	if size := LogOverhead + int(b.Length()); size != len(b.b) {
		return corruptf(b.BaseOffset(), "length field declares %d bytes, batch has %d", size, len(b.b))
	}
	if m := b.Magic(); m != Magic {
		return corruptf(b.BaseOffset(), "magic %d, want %d", m, Magic)
	}
	if !crc {
		return b.checkHeader()
	}
	if stored, computed := b.CRC(), b.ComputeCRC(); stored != computed {
		return corruptf(b.BaseOffset(), "crc %#08x, computed %#08x", stored, computed)
	}
	return b.checkHeader()
}

// checkHeader rejects header values no writer produces. It reads only the
// header, so Iter runs it too without paying for the CRC.
func (b Batch) checkHeader() *CorruptBatchError {
	delta, count := b.LastOffsetDelta(), b.RecordsCount()
	switch {
	case delta < 0:
		return corruptf(b.BaseOffset(), "negative last offset delta %d", delta)
	case count < 0:
		return corruptf(b.BaseOffset(), "negative records count %d", count)
	case int64(count) > int64(delta)+1:
		// Every record has its own offset in [base, base+delta].
		return corruptf(b.BaseOffset(), "records count %d exceeds last offset delta %d + 1", count, delta)
	case count == 0 && len(b.b) > HeaderSize:
		// An empty batch (what compaction leaves to keep a producer's
		// state) is a bare header; bytes after it are records the count
		// hides, and a reader would skip them unchecked.
		return corruptf(b.BaseOffset(), "records count 0 with %d bytes of records", len(b.b)-HeaderSize)
	case b.BaseOffset() > math.MaxInt64-int64(delta):
		// The last offset would wrap negative: offsets after it would
		// go backwards.
		return corruptf(b.BaseOffset(), "last offset %d + %d overflows", b.BaseOffset(), delta)
	case b.Compression() > CompressionZstd:
		return corruptf(b.BaseOffset(), "unknown compression codec %d", b.Compression())
	}
	return nil
}

// SetBaseOffset overwrites the base offset in place, as a leader does when
// it assigns offsets on append. The field is outside the CRC, so a valid
// batch stays valid.
func (b Batch) SetBaseOffset(offset int64) {
	binary.BigEndian.PutUint64(b.b[offBaseOffset:], uint64(offset))
}

// SetPartitionLeaderEpoch overwrites the partition leader epoch in place
// (Inkless stamps the diskless leader epoch this way). The field is
// outside the CRC, so a valid batch stays valid
// (TestLeaderEpochOutsideCRC).
func (b Batch) SetPartitionLeaderEpoch(epoch int32) {
	binary.BigEndian.PutUint32(b.b[offPartitionLeaderEpoch:], uint32(epoch))
}

func (b Batch) i16(off int) int16 { return int16(binary.BigEndian.Uint16(b.b[off:])) }
func (b Batch) i32(off int) int32 { return int32(binary.BigEndian.Uint32(b.b[off:])) }
func (b Batch) i64(off int) int64 { return int64(binary.BigEndian.Uint64(b.b[off:])) }
