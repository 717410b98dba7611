package record

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/internal/base"
)

// mixedRecords covers null and empty keys and values, headers with null
// and empty values, and decreasing timestamps.
func mixedRecords() []rec {
	return []rec{
		{Timestamp: 1000, Key: []byte("a"), Value: []byte("alpha")},
		{Timestamp: 900, Key: nil, Value: []byte("null key")},
		{Timestamp: 1200, Key: []byte("tombstone"), Value: nil},
		{Timestamp: 1100, Key: []byte{}, Value: []byte{}},
		{Timestamp: 1000, Key: nil, Value: nil, Headers: []Header{
			{Key: "h1", Value: []byte("v1")},
			{Key: "null", Value: nil},
			{Key: "empty", Value: []byte{}},
			{Key: "", Value: []byte("empty key")},
		}},
		{Timestamp: -5, Key: bytes.Repeat([]byte("k"), 300), Value: bytes.Repeat([]byte("v"), 70000)},
	}
}

func TestBuildIterRoundTrip(t *testing.T) {
	for _, c := range allCodecs {
		t.Run(c.String(), func(t *testing.T) {
			opts := DefaultBuilderOptions()
			opts.BaseOffset = 100
			opts.Compression = c
			want := mixedRecords()
			b, got := readAll(t, build(t, opts, want...))
			require.Equal(t, c, b.Compression())
			require.Equal(t, int64(1000), b.BaseTimestamp(), "base timestamp is the first record's")
			require.Equal(t, int64(1200), b.MaxTimestamp())
			require.Equal(t, int32(len(want)-1), b.LastOffsetDelta())
			for i := range want {
				want[i].Offset = 100 + int64(i)
			}
			require.Equal(t, want, got)
		})
	}
}

func TestNullVersusEmpty(t *testing.T) {
	buf := build(t, DefaultBuilderOptions(), mixedRecords()[:5]...)
	b, err := ReadBatch(buf)
	require.NoError(t, err)
	var it Iter
	it.Reset(b)
	var keys, values [][]byte
	for it.Next() {
		keys = append(keys, it.Record().Key)
		values = append(values, it.Record().Value)
	}
	require.NoError(t, it.Err())
	require.Nil(t, keys[1])
	require.Nil(t, values[2])
	require.NotNil(t, keys[3])
	require.Len(t, keys[3], 0)
	require.NotNil(t, values[3])
	require.Len(t, values[3], 0)
}

func TestHeaderIter(t *testing.T) {
	buf := build(t, DefaultBuilderOptions(), mixedRecords()[4])
	b, _ := ReadBatch(buf)
	var it Iter
	it.Reset(b)
	require.True(t, it.Next())
	r := it.Record()
	require.Equal(t, 4, r.NumHeaders())
	var got []string
	for h := r.Headers(); h.Next(); {
		got = append(got, fmt.Sprintf("%s=%q(nil=%v)", h.Key(), h.Value(), h.Value() == nil))
	}
	require.Equal(t, []string{
		`h1="v1"(nil=false)`, `null=""(nil=true)`, `empty=""(nil=false)`, `="empty key"(nil=false)`,
	}, got)
	require.False(t, it.Next())
	require.NoError(t, it.Err())

	allocs := testing.AllocsPerRun(100, func() {
		for h := r.Headers(); h.Next(); {
			_ = h.Key()
		}
	})
	require.Zero(t, allocs)
}

func TestIterZeroAllocsUncompressed(t *testing.T) {
	recs := numbered(50, 0)
	recs[3].Headers = []Header{{Key: "k", Value: []byte("v")}}
	buf := build(t, DefaultBuilderOptions(), recs...)
	b, _ := ReadBatch(buf)
	var it Iter
	allocs := testing.AllocsPerRun(100, func() {
		it.Reset(b)
		n := 0
		for it.Next() {
			n++
		}
		if n != 50 || it.Err() != nil {
			t.Fatalf("n=%d err=%v", n, it.Err())
		}
	})
	require.Zero(t, allocs)
}

func TestIterReusesBufferCompressed(t *testing.T) {
	for _, c := range allCodecs[1:] {
		t.Run(c.String(), func(t *testing.T) {
			opts := DefaultBuilderOptions()
			opts.Compression = c
			b, err := ReadBatch(build(t, opts, numbered(100, 0)...))
			require.NoError(t, err)
			var it Iter
			drain := func() {
				it.Reset(b)
				for it.Next() {
				}
				if it.Err() != nil {
					t.Fatal(it.Err())
				}
			}
			drain() // warm up decoders and the buffer
			allocs := testing.AllocsPerRun(20, drain)
			// The codecs' own per-stream state may allocate a little; the
			// output buffer must not be reallocated per batch.
			require.LessOrEqual(t, allocs, 16.0)
		})
	}
}

func TestBuilderReuse(t *testing.T) {
	var bld Builder
	var dst []byte
	for round, c := range append(allCodecs, allCodecs...) {
		opts := DefaultBuilderOptions()
		opts.BaseOffset = int64(round * 10)
		opts.Compression = c
		bld.Reset(opts)
		for _, r := range numbered(round+1, int64(round)) {
			bld.Add(r.Timestamp, r.Key, r.Value)
		}
		require.Equal(t, round+1, bld.Len())
		var err error
		start := len(dst)
		dst, err = bld.AppendTo(dst)
		require.NoError(t, err)
		_, got := readAll(t, dst[start:])
		require.Len(t, got, round+1)
		require.Equal(t, int64(round*10+round), got[round].Offset)
	}
	// Everything appended is still a sequence of valid batches.
	s := NewScanner(dst, ScannerOptions{})
	n := 0
	for s.Next() {
		n++
	}
	require.NoError(t, s.Err())
	require.Equal(t, 2*len(allCodecs), n)
}

func TestBuilderErrors(t *testing.T) {
	t.Run("empty", func(t *testing.T) {
		_, err := NewBuilder(DefaultBuilderOptions()).Build()
		require.ErrorIs(t, err, ErrInvalidArgument)
	})
	for _, tc := range []struct {
		name string
		opts func(o *BuilderOptions)
	}{
		{"codec", func(o *BuilderOptions) { o.Compression = 5 }},
		{"timestamp-type", func(o *BuilderOptions) { o.TimestampType = 2 }},
		{"gzip-level", func(o *BuilderOptions) { o.Compression, o.CompressionLevel = CompressionGzip, 10 }},
		{"lz4-level", func(o *BuilderOptions) { o.Compression, o.CompressionLevel = CompressionLZ4, 17 }},
		{"zstd-level", func(o *BuilderOptions) { o.Compression, o.CompressionLevel = CompressionZstd, 23 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := DefaultBuilderOptions()
			tc.opts(&opts)
			b := NewBuilder(opts)
			b.Add(0, nil, []byte("x"))
			dst := []byte("prefix")
			out, err := b.AppendTo(dst)
			require.ErrorIs(t, err, ErrInvalidArgument)
			require.Equal(t, "prefix", string(out))
		})
	}
	t.Run("levels", func(t *testing.T) {
		for _, tc := range []struct {
			c     Compression
			level int
		}{{CompressionGzip, 1}, {CompressionGzip, 9}, {CompressionLZ4, 1}, {CompressionLZ4, 9},
			{CompressionZstd, 1}, {CompressionZstd, 19}, {CompressionZstd, -5}, {CompressionSnappy, 7}} {
			opts := DefaultBuilderOptions()
			opts.Compression, opts.CompressionLevel = tc.c, tc.level
			_, got := readAll(t, build(t, opts, numbered(20, 0)...))
			require.Len(t, got, 20, "%s level %d", tc.c, tc.level)
		}
	})
}

func TestControlBatch(t *testing.T) {
	for _, typ := range []ControlType{ControlAbort, ControlCommit} {
		t.Run(typ.String(), func(t *testing.T) {
			opts := DefaultBuilderOptions()
			opts.BaseOffset = 42
			opts.ProducerID = 7
			opts.ProducerEpoch = 3
			opts.PartitionLeaderEpoch = 5
			opts.Compression = CompressionGzip // ignored: markers are uncompressed
			buf, err := AppendEndTxnBatch(nil, opts, 999, typ, 11)
			require.NoError(t, err)
			b, recs := readAll(t, buf)
			require.True(t, b.IsControl())
			require.True(t, b.IsTransactional())
			require.Equal(t, CompressionNone, b.Compression())
			require.Equal(t, base.NoSequence, b.BaseSequence())
			require.Equal(t, int64(7), b.ProducerID())
			require.Equal(t, int16(3), b.ProducerEpoch())
			require.Equal(t, int32(5), b.PartitionLeaderEpoch())
			require.Len(t, recs, 1)
			require.Equal(t, int64(42), recs[0].Offset)
			require.Equal(t, int64(999), recs[0].Timestamp)
			k, err := ParseControlKey(recs[0].Key)
			require.NoError(t, err)
			require.Equal(t, ControlKey{Version: 0, Type: typ}, k)
			m, err := ParseEndTxnMarker(recs[0].Value)
			require.NoError(t, err)
			require.Equal(t, EndTxnMarker{Version: 0, CoordinatorEpoch: 11}, m)
			require.Equal(t, []byte{0, 0, 0, byte(typ)}, recs[0].Key)
			require.Equal(t, []byte{0, 0, 0, 0, 0, 11}, recs[0].Value)
		})
	}
	t.Run("bad-type", func(t *testing.T) {
		_, err := AppendEndTxnBatch(nil, DefaultBuilderOptions(), 0, 4, 0)
		require.ErrorIs(t, err, ErrInvalidArgument)
	})
	t.Run("malformed", func(t *testing.T) {
		for _, key := range [][]byte{nil, {0}, {0, 0, 0}, {0x80, 0, 0, 1}} {
			_, err := ParseControlKey(key)
			var ce *ControlRecordError
			require.ErrorAs(t, err, &ce, "%x", key)
			require.ErrorIs(t, err, ErrCorruption)
			require.Equal(t, "key", ce.Part)
		}
		for _, v := range [][]byte{nil, {0, 0, 0, 0, 0}, {0xff, 0xff, 0, 0, 0, 1}} {
			_, err := ParseEndTxnMarker(v)
			var ce *ControlRecordError
			require.ErrorAs(t, err, &ce, "%x", v)
			require.Equal(t, "value", ce.Part)
		}
		// Longer keys and values (later versions) parse.
		k, err := ParseControlKey([]byte{0, 1, 0, 1, 9, 9})
		require.NoError(t, err)
		require.Equal(t, ControlKey{Version: 1, Type: ControlCommit}, k)
		require.Equal(t, "control(3)", ControlType(3).String())
	})
}

// rawBatch wraps a records section in a valid header (with a correct CRC)
// declaring count records and the given last offset delta.
func rawBatch(records []byte, count, lastOffsetDelta int32) []byte {
	h := make([]byte, HeaderSize, HeaderSize+len(records))
	binary.BigEndian.PutUint32(h[offLength:], uint32(HeaderSize-LogOverhead+len(records)))
	binary.BigEndian.PutUint32(h[offPartitionLeaderEpoch:], 0xffffffff)
	h[offMagic] = Magic
	binary.BigEndian.PutUint32(h[offLastOffsetDelta:], uint32(lastOffsetDelta))
	binary.BigEndian.PutUint64(h[offProducerID:], 0xffffffffffffffff)
	binary.BigEndian.PutUint32(h[offRecordsCount:], uint32(count))
	h = append(h, records...)
	binary.BigEndian.PutUint32(h[offCRC:], crc32c(h[offAttributes:]))
	return h
}

// rawRecord encodes a record from already-encoded parts after the length.
func rawRecord(body ...[]byte) []byte {
	b := bytes.Join(body, nil)
	return append(AppendVarint(nil, int32(len(b))), b...)
}

func v(x int32) []byte { return AppendVarint(nil, x) }

// TestIterMalformedRecords feeds records that break each rule the Iter
// checks. Every batch has a valid CRC, so only the Iter can notice.
func TestIterMalformedRecords(t *testing.T) {
	good := func(delta int32) []byte {
		return rawRecord([]byte{0}, v(0), v(delta), v(1), []byte("k"), v(1), []byte("v"), v(0))
	}
	for _, tc := range []struct {
		name    string
		records []byte
		count   int32
		delta   int32
		reason  string
	}{
		{"count-above-records", rawRecord([]byte{0}, v(0), v(0), v(-1), v(20), make([]byte, 20), v(0)), 2, 1, "ends after 1 of 2"},
		{"count-below-records", append(good(0), good(1)...), 1, 1, "after the last of 1"},
		{"count-cannot-fit", good(0), 3, 5, "cannot fit"},
		{"empty-with-count", nil, 1, 0, "cannot fit"},
		{"trailing-garbage", append(good(0), 0xff), 1, 0, "after the last"},
		{"length-too-long", append(AppendVarint(nil, 100), good(0)[1:]...), 1, 0, "length out of range"},
		{"length-too-short", rawRecord([]byte{0}, v(0), v(0), v(1), []byte("k"))[:1], 1, 0, "cannot fit"},
		{"length-negative", append(v(-3), make([]byte, 9)...), 1, 0, "length out of range"},
		{"length-overflow-varint", append([]byte{0xff, 0xff, 0xff, 0xff, 0xff}, make([]byte, 9)...), 1, 0, "malformed record length"},
		{"fields-shorter-than-length", rawRecord([]byte{0}, v(0), v(0), v(1), []byte("k"), v(1), []byte("v"), v(0), []byte{0}), 1, 0, "does not match"},
		{"key-past-record", rawRecord([]byte{0}, v(0), v(0), v(50), []byte("k"), v(1), []byte("v"), v(0)), 1, 0, "malformed key"},
		{"value-past-record", rawRecord([]byte{0}, v(0), v(0), v(1), []byte("k"), v(9), []byte("v"), v(0)), 1, 0, "malformed value"},
		{"offset-delta-negative", good(-1), 1, 0, "offset delta"},
		{"offset-delta-above-last", good(3), 1, 2, "offset delta"},
		{"offset-delta-repeated", append(good(0), good(0)...), 2, 1, "offset delta"},
		{"offset-delta-decreasing", append(good(1), good(0)...), 2, 1, "offset delta"},
		{"timestamp-varlong-overflow", rawRecord([]byte{0}, bytes.Repeat([]byte{0xff}, 10), v(0), v(-1), v(-1), v(0)), 1, 0, "timestamp delta"},
		{"header-count-negative", rawRecord([]byte{0}, v(0), v(0), v(-1), v(-1), v(-1)), 1, 0, "header count"},
		{"header-count-huge", rawRecord([]byte{0}, v(0), v(0), v(-1), v(-1), v(1<<30), []byte{2, 'a'}), 1, 0, "header count"},
		{"header-key-null", rawRecord([]byte{0}, v(0), v(0), v(-1), v(-1), v(1), v(-1), v(-1)), 1, 0, "header key"},
		{"header-key-past-end", rawRecord([]byte{0}, v(0), v(0), v(-1), v(-1), v(1), v(5), []byte("ab"), v(-1)), 1, 0, "header key"},
		{"header-value-past-end", rawRecord([]byte{0}, v(0), v(0), v(-1), v(-1), v(1), v(1), []byte("a"), v(9), []byte("b")), 1, 0, "header value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := ReadBatch(rawBatch(tc.records, tc.count, tc.delta))
			require.NoError(t, err)
			require.NoError(t, b.Validate())
			var it Iter
			it.Reset(b)
			for it.Next() {
			}
			var ce *CorruptBatchError
			require.ErrorAs(t, it.Err(), &ce)
			require.ErrorIs(t, it.Err(), ErrCorruption)
			require.Contains(t, ce.Reason, tc.reason)
			require.False(t, it.Next(), "errors are sticky")
		})
	}
	t.Run("negative-lengths-are-null", func(t *testing.T) {
		// Kafka reads any negative key or value length as null.
		b, err := ReadBatch(rawBatch(rawRecord([]byte{0}, v(0), v(0), v(-7), v(-2), v(0)), 1, 0))
		require.NoError(t, err)
		var it Iter
		it.Reset(b)
		require.True(t, it.Next())
		assert.Nil(t, it.Record().Key)
		assert.Nil(t, it.Record().Value)
		require.False(t, it.Next())
		require.NoError(t, it.Err())
	})
	t.Run("empty-batch-after-compaction", func(t *testing.T) {
		// Compaction may leave a batch with no records and a positive
		// last offset delta.
		b, err := ReadBatch(rawBatch(nil, 0, 9))
		require.NoError(t, err)
		require.NoError(t, b.Validate())
		require.Equal(t, int64(9), b.LastOffset())
		var it Iter
		it.Reset(b)
		require.False(t, it.Next())
		require.NoError(t, it.Err())
	})
	t.Run("gaps-after-compaction", func(t *testing.T) {
		b, err := ReadBatch(rawBatch(append(good(2), good(7)...), 2, 9))
		require.NoError(t, err)
		var it Iter
		it.Reset(b)
		var offs []int64
		for it.Next() {
			offs = append(offs, it.Record().Offset)
		}
		require.NoError(t, it.Err())
		require.Equal(t, []int64{2, 7}, offs)
	})
}

// TestIterClear: a cleared Iter holds no batch, yields nothing, reports
// no error, and iterates again after Reset.
func TestIterClear(t *testing.T) {
	buf := build(t, DefaultBuilderOptions(), numbered(2, 0)...)
	b, err := ReadBatch(buf)
	require.NoError(t, err)
	var it Iter
	it.Reset(b)
	require.True(t, it.Next())
	it.Clear()
	require.Nil(t, it.Batch().Bytes())
	require.False(t, it.Next())
	require.NoError(t, it.Err())
	n := 0
	for it.Reset(b); it.Next(); n++ {
	}
	require.NoError(t, it.Err())
	require.Equal(t, 2, n)
}
