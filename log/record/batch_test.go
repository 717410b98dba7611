package record

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/internal/base"
)

// TestLeaderEpochOutsideCRC: the partition leader epoch lies before the
// CRC-covered bytes (Kafka DefaultRecordBatch), so overwriting it keeps a
// batch valid.
func TestLeaderEpochOutsideCRC(t *testing.T) {
	opts := DefaultBuilderOptions()
	opts.BaseOffset = 0
	opts.PartitionLeaderEpoch = 0
	buf := build(t, opts, numbered(3, 1000)...)
	b, err := ReadBatch(buf)
	require.NoError(t, err)
	require.NoError(t, b.Validate())
	require.Equal(t, int32(0), b.PartitionLeaderEpoch())
	require.Equal(t, int32(3), b.RecordsCount())
	crc := b.CRC()

	t.Run("epoch-rewrite", func(t *testing.T) {
		c := append([]byte{}, buf...)
		binary.BigEndian.PutUint32(c[12:16], 7) // bytes 12-15, CRC untouched
		b, err := ReadBatch(c)
		require.NoError(t, err)
		require.NoError(t, b.Validate())
		require.Equal(t, int32(7), b.PartitionLeaderEpoch())
		require.Equal(t, crc, b.CRC())
		_, recs := readAll(t, c)
		require.Len(t, recs, 3)
	})
	t.Run("set-partition-leader-epoch", func(t *testing.T) {
		c := append([]byte{}, buf...)
		b, _ := ReadBatch(c)
		b.SetPartitionLeaderEpoch(7)
		b.SetBaseOffset(1 << 40)
		require.NoError(t, b.Validate())
		require.Equal(t, int32(7), b.PartitionLeaderEpoch())
		require.Equal(t, int64(1<<40), b.BaseOffset())
		require.Equal(t, []byte{0, 0, 0, 7}, c[12:16])
	})
	t.Run("attribute-bit-flip", func(t *testing.T) {
		c := append([]byte{}, buf...)
		c[21] ^= 0x01 // one bit of the attributes, inside the CRC
		b, err := ReadBatch(c)
		require.NoError(t, err)
		err = b.Validate()
		require.ErrorIs(t, err, ErrCorruption)
		require.ErrorIs(t, err, base.ErrCorruption)
		var ce *CorruptBatchError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, int64(0), ce.BaseOffset)
		require.Contains(t, ce.Reason, "crc")
		require.False(t, errors.Is(err, ErrTornTail))
	})
}

// goldenBatch is a batch laid out by hand from Kafka's DefaultRecordBatch
// and DefaultRecord formats. Its CRC was
// computed by an independent bitwise CRC-32C implementation.
var goldenBatch = strings.Join([]string{
	"0000000000000005", // 0  BaseOffset 5
	"00000044",         // 8  Length 68 (80 - 12)
	"00000003",         // 12 PartitionLeaderEpoch 3
	"02",               // 16 Magic 2
	"db8a4d47",         // 17 CRC-32C of [21, 80)
	"0000",             // 21 Attributes: none, CreateTime
	"00000001",         // 23 LastOffsetDelta 1
	"0000000000000064", // 27 BaseTimestamp 100
	"0000000000000067", // 35 MaxTimestamp 103
	"ffffffffffffffff", // 43 ProducerId -1
	"ffff",             // 51 ProducerEpoch -1
	"ffffffff",         // 53 BaseSequence -1
	"00000002",         // 57 RecordsCount 2
	// 61 record 0: length 11, attrs, ts delta 0, offset delta 0,
	// key "k", value "v", 1 header "h" with a null value.
	"16" + "00" + "00" + "00" + "026b" + "0276" + "02" + "0268" + "01",
	// 73 record 1: length 6, attrs, ts delta 3, offset delta 1, null
	// key, empty value, no headers.
	"0c" + "00" + "06" + "02" + "01" + "00" + "00",
}, "")

func TestGoldenBatch(t *testing.T) {
	want, err := hex.DecodeString(goldenBatch)
	require.NoError(t, err)
	require.Len(t, want, 80)

	t.Run("decode", func(t *testing.T) {
		b, recs := readAll(t, want)
		assert.Equal(t, int64(5), b.BaseOffset())
		assert.Equal(t, int32(68), b.Length())
		assert.Equal(t, 80, b.Size())
		assert.Equal(t, int32(3), b.PartitionLeaderEpoch())
		assert.Equal(t, int8(2), b.Magic())
		assert.Equal(t, uint32(0xdb8a4d47), b.CRC())
		assert.Equal(t, int16(0), b.Attributes())
		assert.Equal(t, CompressionNone, b.Compression())
		assert.Equal(t, CreateTime, b.TimestampType())
		assert.False(t, b.IsTransactional())
		assert.False(t, b.IsControl())
		assert.False(t, b.HasDeleteHorizon())
		assert.Equal(t, int32(1), b.LastOffsetDelta())
		assert.Equal(t, int64(100), b.BaseTimestamp())
		assert.Equal(t, int64(103), b.MaxTimestamp())
		assert.Equal(t, base.NoProducerID, b.ProducerID())
		assert.Equal(t, base.NoProducerEpoch, b.ProducerEpoch())
		assert.Equal(t, base.NoSequence, b.BaseSequence())
		assert.Equal(t, base.NoSequence, b.LastSequence())
		assert.Equal(t, int32(2), b.RecordsCount())
		assert.Equal(t, int64(6), b.LastOffset())
		assert.Equal(t, int64(7), b.NextOffset())
		assert.Equal(t, []rec{
			{Offset: 5, Timestamp: 100, Key: []byte("k"), Value: []byte("v"),
				Headers: []Header{{Key: "h", Value: nil}}},
			{Offset: 6, Timestamp: 103, Key: nil, Value: []byte{}},
		}, recs)
	})
	t.Run("encode", func(t *testing.T) {
		opts := DefaultBuilderOptions()
		opts.BaseOffset = 5
		opts.PartitionLeaderEpoch = 3
		got := build(t, opts,
			rec{Timestamp: 100, Key: []byte("k"), Value: []byte("v"), Headers: []Header{{Key: "h"}}},
			rec{Timestamp: 103, Key: nil, Value: []byte{}})
		require.Equal(t, hex.EncodeToString(want), hex.EncodeToString(got))
	})
}

func TestHeaderAccessors(t *testing.T) {
	opts := BuilderOptions{
		BaseOffset:           1 << 33,
		PartitionLeaderEpoch: 9,
		ProducerID:           1234567890123,
		ProducerEpoch:        77,
		BaseSequence:         math.MaxInt32 - 1,
		Transactional:        true,
		TimestampType:        LogAppendTime,
		LogAppendTime:        5555,
		Compression:          CompressionZstd,
	}
	b, recs := readAll(t, build(t, opts, numbered(4, 10)...))
	assert.Equal(t, int64(1<<33), b.BaseOffset())
	assert.Equal(t, int32(9), b.PartitionLeaderEpoch())
	assert.Equal(t, int64(1234567890123), b.ProducerID())
	assert.Equal(t, int16(77), b.ProducerEpoch())
	assert.Equal(t, int32(math.MaxInt32-1), b.BaseSequence())
	assert.Equal(t, int32(1), b.LastSequence()) // wraps: MaxInt32-1, MaxInt32, 0, 1
	assert.True(t, b.IsTransactional())
	assert.False(t, b.IsControl())
	assert.Equal(t, LogAppendTime, b.TimestampType())
	assert.Equal(t, AttrTransactional|AttrTimestampType|int16(CompressionZstd), b.Attributes())
	assert.Equal(t, int64(10), b.BaseTimestamp())
	assert.Equal(t, int64(5555), b.MaxTimestamp())
	assert.Equal(t, int64(1<<33+3), b.LastOffset())
	for i, r := range recs {
		assert.Equal(t, int64(1<<33+i), r.Offset)
		assert.Equal(t, int64(5555), r.Timestamp, "LogAppendTime: every record has MaxTimestamp")
	}
	assert.Equal(t, crc32c(b.Bytes()[21:]), b.CRC())
}

func TestLastSequence(t *testing.T) {
	for _, tc := range []struct {
		base, delta, want int32
	}{
		{0, 0, 0},
		{0, 4, 4},
		{10, 5, 15},
		{math.MaxInt32, 0, math.MaxInt32},
		{math.MaxInt32 - 5, 5, math.MaxInt32},
		{math.MaxInt32 - 5, 6, 0}, // wraps to 0
		{math.MaxInt32 - 5, 10, 4},
		{math.MaxInt32, 1, 0},
		{math.MaxInt32, math.MaxInt32, math.MaxInt32 - 1},
	} {
		assert.Equal(t, tc.want, LastSequence(tc.base, tc.delta), "base %d delta %d", tc.base, tc.delta)
	}
}

func TestReadBatchErrors(t *testing.T) {
	good := build(t, DefaultBuilderOptions(), numbered(2, 0)...)

	t.Run("short", func(t *testing.T) {
		for n := 0; n < len(good); n++ {
			_, err := ReadBatch(good[:n])
			var te *TornTailError
			require.ErrorAs(t, err, &te, "n=%d", n)
			require.ErrorIs(t, err, ErrTornTail)
			require.False(t, errors.Is(err, ErrCorruption))
			require.Equal(t, n, te.Available)
			if n < LogOverhead {
				require.Equal(t, -1, te.Declared)
			} else {
				require.Equal(t, len(good), te.Declared)
			}
		}
	})
	t.Run("trailing-bytes-ignored", func(t *testing.T) {
		b, err := ReadBatch(append(append([]byte{}, good...), 1, 2, 3))
		require.NoError(t, err)
		require.Equal(t, len(good), b.Size())
		require.NoError(t, b.Validate())
	})
	t.Run("length-below-header", func(t *testing.T) {
		c := append([]byte{}, good...)
		binary.BigEndian.PutUint32(c[8:], 48)
		_, err := ReadBatch(c)
		require.ErrorIs(t, err, ErrCorruption)
		binary.BigEndian.PutUint32(c[8:], math.MaxUint32) // -1
		_, err = ReadBatch(c)
		require.ErrorIs(t, err, ErrCorruption)
	})
	t.Run("magic", func(t *testing.T) {
		for _, m := range []byte{0, 1, 3, 0xff} {
			c := append([]byte{}, good...)
			c[16] = m
			_, err := ReadBatch(c)
			var ce *CorruptBatchError
			require.ErrorAs(t, err, &ce)
			require.Contains(t, ce.Reason, "magic")
		}
	})
}

// TestValidateHeaderFields checks header values no writer produces, with
// a correct CRC so that only the field check can catch them.
func TestValidateHeaderFields(t *testing.T) {
	good := build(t, DefaultBuilderOptions(), numbered(2, 0)...)
	for _, tc := range []struct {
		name   string
		mutate func(c []byte)
		reason string
	}{
		{"negative-last-offset-delta", func(c []byte) { binary.BigEndian.PutUint32(c[23:], math.MaxUint32) }, "last offset delta"},
		{"negative-records-count", func(c []byte) { binary.BigEndian.PutUint32(c[57:], 1<<31) }, "negative records count"},
		{"count-above-delta", func(c []byte) { binary.BigEndian.PutUint32(c[57:], 3) }, "exceeds last offset delta"},
		{"codec-5", func(c []byte) { c[22] |= 5 }, "unknown compression"},
		{"codec-7", func(c []byte) { c[22] |= 7 }, "unknown compression"},
		{"count-zero-with-records", func(c []byte) { binary.BigEndian.PutUint32(c[57:], 0) }, "records count 0 with"},
		// The base offset is outside the CRC; delta 1 from MaxInt64 wraps.
		{"last-offset-overflows", func(c []byte) { binary.BigEndian.PutUint64(c[0:], math.MaxInt64) }, "overflows"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := append([]byte{}, good...)
			tc.mutate(c)
			binary.BigEndian.PutUint32(c[17:], crc32c(c[21:]))
			b, err := ReadBatch(c)
			require.NoError(t, err)
			err = b.Validate()
			var ce *CorruptBatchError
			require.ErrorAs(t, err, &ce)
			require.Contains(t, ce.Reason, tc.reason)
			var it Iter
			it.Reset(b)
			require.False(t, it.Next())
			require.ErrorIs(t, it.Err(), ErrCorruption)
		})
	}
	t.Run("zero-batch", func(t *testing.T) {
		require.ErrorIs(t, Batch{}.Validate(), ErrCorruption)
		var it Iter
		it.Reset(Batch{})
		require.False(t, it.Next())
		require.ErrorIs(t, it.Err(), ErrCorruption)
	})
	t.Run("empty-batch-accepted", func(t *testing.T) {
		// What compaction leaves: a bare header, count 0, at the very
		// end of the offset space.
		c := append([]byte{}, good[:HeaderSize]...)
		binary.BigEndian.PutUint64(c[0:], math.MaxInt64)
		binary.BigEndian.PutUint32(c[23:], 0)
		binary.BigEndian.PutUint32(c[57:], 0)
		binary.BigEndian.PutUint32(c[8:], uint32(HeaderSize-LogOverhead))
		binary.BigEndian.PutUint32(c[17:], crc32c(c[21:]))
		b, err := ReadBatch(c)
		require.NoError(t, err)
		require.NoError(t, b.Validate())
	})
	t.Run("unused-attribute-bits-accepted", func(t *testing.T) {
		// Kafka ignores bits 7-15; so does Validate.
		c := append([]byte{}, good...)
		c[21] |= 0x80
		binary.BigEndian.PutUint32(c[17:], crc32c(c[21:]))
		b, err := ReadBatch(c)
		require.NoError(t, err)
		require.NoError(t, b.Validate())
	})
}

func TestErrorMessages(t *testing.T) {
	for _, err := range []error{
		&CorruptBatchError{Pos: 10, BaseOffset: 4, Reason: "x"},
		&CorruptBatchError{Pos: 10, BaseOffset: 4, Reason: "x", Err: errors.New("inner")},
		&TornTailError{Pos: 3, Declared: -1, Available: 2},
		&TornTailError{Pos: 3, Declared: 100, Available: 20},
		&DecompressedSizeError{BaseOffset: 1, Compression: CompressionGzip, Limit: 10},
		&ControlRecordError{Part: "key", Reason: "short"},
	} {
		assert.True(t, strings.HasPrefix(err.Error(), "record: "), err.Error())
	}
	assert.True(t, strings.HasPrefix(ErrTornTail.Error(), "record: "))
	assert.True(t, strings.HasPrefix(ErrDecompressedTooLarge.Error(), "record: "))
	inner := errors.New("inner")
	err := error(&CorruptBatchError{Err: inner})
	assert.ErrorIs(t, err, inner)
	assert.ErrorIs(t, err, ErrCorruption)
}

// TestSetMaxTimestamp stamps a batch's timestamp type and max timestamp:
// the batch stays valid and its records report the new times.
func TestSetMaxTimestamp(t *testing.T) {
	buf := build(t, DefaultBuilderOptions(), numbered(3, 100)...)
	b, err := ReadBatch(buf)
	require.NoError(t, err)
	require.Equal(t, int64(102), b.MaxTimestamp())

	b.SetMaxTimestamp(LogAppendTime, 5000)
	require.NoError(t, b.Validate())
	require.Equal(t, LogAppendTime, b.TimestampType())
	require.Equal(t, int64(5000), b.MaxTimestamp())
	var it Iter
	for it.Reset(b); it.Next(); {
		require.Equal(t, int64(5000), it.Record().Timestamp)
	}
	require.NoError(t, it.Err())

	b.SetMaxTimestamp(CreateTime, 102)
	require.NoError(t, b.Validate())
	require.Equal(t, CreateTime, b.TimestampType())
	ts := int64(100)
	for it.Reset(b); it.Next(); ts++ {
		require.Equal(t, ts, it.Record().Timestamp)
	}
	require.NoError(t, it.Err())
}
