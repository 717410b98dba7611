package record

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Differential tests against franz-go, an independent Kafka client
// implementation: batches it encodes decode identically here, and batches
// built here decode identically there.

// kgoCodec returns franz-go's codec for c.
func kgoCodec(c Compression) kgo.CompressionCodec {
	switch c {
	case CompressionGzip:
		return kgo.GzipCompression()
	case CompressionSnappy:
		return kgo.SnappyCompression()
	case CompressionLZ4:
		return kgo.Lz4Compression()
	case CompressionZstd:
		return kgo.ZstdCompression()
	}
	return kgo.NoCompression()
}

// kmsgRecord encodes one record with kmsg, setting its Length field.
func kmsgRecord(r kmsg.Record) []byte {
	r.Length = 0
	body := len(r.AppendTo(nil)) - 1 // Length 0 encodes in one byte
	r.Length = int32(body)
	return r.AppendTo(nil)
}

// franzBatch encodes a batch with kmsg and compresses it with kgo's
// compressor. kmsg leaves the CRC to the caller; we compute it over
// [21, end) with the standard library.
func franzBatch(t *testing.T, hdr kmsg.RecordBatch, codec Compression, recs []kmsg.Record) []byte {
	t.Helper()
	var raw []byte
	for _, r := range recs {
		raw = append(raw, kmsgRecord(r)...)
	}
	if codec != CompressionNone {
		comp, err := kgo.DefaultCompressor(kgoCodec(codec))
		require.NoError(t, err)
		out, used := comp.Compress(new(bytes.Buffer), raw)
		require.Equal(t, kgo.CompressionCodecType(codec), used)
		raw = append([]byte{}, out...)
	}
	hdr.Magic = 2
	hdr.Attributes |= int16(codec)
	hdr.NumRecords = int32(len(recs))
	hdr.Records = raw
	hdr.Length = int32(HeaderSize - LogOverhead + len(raw))
	hdr.CRC = 0
	buf := hdr.AppendTo(nil)
	binary.BigEndian.PutUint32(buf[17:], crc32c(buf[21:]))
	return buf
}

// kmsgRecords is a record mix for the franz-go side: null and empty keys
// and values, headers with null values, timestamp deltas of both signs.
func kmsgRecords(n int) []kmsg.Record {
	recs := []kmsg.Record{
		{TimestampDelta64: 0, OffsetDelta: 0, Key: []byte("k0"), Value: []byte("v0")},
		{TimestampDelta64: 5, OffsetDelta: 1, Key: nil, Value: []byte("null key")},
		{TimestampDelta64: -3, OffsetDelta: 2, Key: []byte("tomb"), Value: nil},
		{TimestampDelta64: 1 << 40, OffsetDelta: 3, Key: []byte{}, Value: []byte{}},
		{TimestampDelta64: 7, OffsetDelta: 4, Headers: []kmsg.Header{
			{Key: "a", Value: []byte("1")}, {Key: "null", Value: nil}, {Key: "", Value: []byte{}},
		}},
	}
	for i := len(recs); i < n; i++ {
		recs = append(recs, kmsg.Record{
			TimestampDelta64: int64(i),
			OffsetDelta:      int32(i),
			Key:              fmt.Appendf(nil, "key-%d", i),
			Value:            bytes.Repeat([]byte{byte(i)}, i*37),
		})
	}
	return recs[:n]
}

// requireSameHeader checks every header field of ours against kmsg's.
func requireSameHeader(t *testing.T, k kmsg.RecordBatch, b Batch) {
	t.Helper()
	require.Equal(t, k.FirstOffset, b.BaseOffset())
	require.Equal(t, k.Length, b.Length())
	require.Equal(t, k.PartitionLeaderEpoch, b.PartitionLeaderEpoch())
	require.Equal(t, k.Magic, b.Magic())
	require.Equal(t, uint32(k.CRC), b.CRC())
	require.Equal(t, k.Attributes, b.Attributes())
	require.Equal(t, k.LastOffsetDelta, b.LastOffsetDelta())
	require.Equal(t, k.FirstTimestamp, b.BaseTimestamp())
	require.Equal(t, k.MaxTimestamp, b.MaxTimestamp())
	require.Equal(t, k.ProducerID, b.ProducerID())
	require.Equal(t, k.ProducerEpoch, b.ProducerEpoch())
	require.Equal(t, k.FirstSequence, b.BaseSequence())
	require.Equal(t, k.NumRecords, b.RecordsCount())
	require.Equal(t, k.Records, b.Bytes()[HeaderSize:])
}

// requireSameRecord checks a record of ours against kmsg's.
func requireSameRecord(t *testing.T, k *kmsg.Record, b Batch, r *Record) {
	t.Helper()
	require.Equal(t, k.Attributes, r.Attributes)
	require.Equal(t, k.TimestampDelta64, r.TimestampDelta)
	require.Equal(t, k.OffsetDelta, r.OffsetDelta)
	require.Equal(t, b.BaseOffset()+int64(k.OffsetDelta), r.Offset)
	if b.TimestampType() == LogAppendTime {
		require.Equal(t, b.MaxTimestamp(), r.Timestamp)
	} else {
		require.Equal(t, b.BaseTimestamp()+k.TimestampDelta64, r.Timestamp)
	}
	require.Equal(t, k.Key, r.Key)
	require.Equal(t, k.Key == nil, r.Key == nil)
	require.Equal(t, k.Value, r.Value)
	require.Equal(t, k.Value == nil, r.Value == nil)
	require.Equal(t, len(k.Headers), r.NumHeaders())
	hs := r.AppendHeaders(nil)
	for i, h := range k.Headers {
		require.Equal(t, h.Key, hs[i].Key)
		require.Equal(t, h.Value, hs[i].Value)
		require.Equal(t, h.Value == nil, hs[i].Value == nil)
	}
}

// kmsgParse parses buf with franz-go: the header with kmsg, the records
// decompressed with kgo's decompressor and parsed one by one with kmsg.
func kmsgParse(buf []byte) (kmsg.RecordBatch, []kmsg.Record, error) {
	var kb kmsg.RecordBatch
	if err := kb.ReadFrom(buf); err != nil {
		return kb, nil, err
	}
	raw, err := kgo.DefaultDecompressor().Decompress(kb.Records, kgo.CompressionCodecType(kb.Attributes&0x07))
	if err != nil {
		return kb, nil, err
	}
	var recs []kmsg.Record
	for len(raw) > 0 {
		l, n := binary.Varint(raw)
		if n <= 0 || l < 0 || int64(len(raw)-n) < l {
			return kb, recs, fmt.Errorf("bad record length")
		}
		var r kmsg.Record
		if err := r.ReadFrom(raw[:n+int(l)]); err != nil {
			return kb, recs, err
		}
		recs = append(recs, r)
		raw = raw[n+int(l):]
	}
	return kb, recs, nil
}

func TestFranzToOurs(t *testing.T) {
	for _, codec := range allCodecs {
		for _, tc := range []struct {
			name string
			hdr  kmsg.RecordBatch
			recs []kmsg.Record
		}{
			{"plain", kmsg.RecordBatch{FirstOffset: 10, PartitionLeaderEpoch: -1, FirstTimestamp: 1000,
				MaxTimestamp: 1000 + 1<<40, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
				LastOffsetDelta: 8}, kmsgRecords(9)},
			{"idempotent-txn", kmsg.RecordBatch{FirstOffset: 1 << 50, PartitionLeaderEpoch: 12,
				Attributes: 0x10, FirstTimestamp: -1, MaxTimestamp: 77, ProducerID: 991,
				ProducerEpoch: 4, FirstSequence: 2147483640, LastOffsetDelta: 30}, kmsgRecords(31)},
			{"log-append-time", kmsg.RecordBatch{FirstOffset: 3, Attributes: 0x08, FirstTimestamp: 5,
				MaxTimestamp: 123456, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
				LastOffsetDelta: 4}, kmsgRecords(5)},
			{"control", kmsg.RecordBatch{FirstOffset: 99, Attributes: 0x30, FirstTimestamp: 5,
				MaxTimestamp: 5, ProducerID: 4, ProducerEpoch: 1, FirstSequence: -1},
				[]kmsg.Record{{Key: []byte{0, 0, 0, 1}, Value: []byte{0, 0, 0, 0, 0, 9}}}},
		} {
			t.Run(fmt.Sprintf("%s/%s", codec, tc.name), func(t *testing.T) {
				buf := franzBatch(t, tc.hdr, codec, tc.recs)
				b, err := ReadBatch(buf)
				require.NoError(t, err)
				require.NoError(t, b.Validate())
				var kb kmsg.RecordBatch
				require.NoError(t, kb.ReadFrom(buf))
				requireSameHeader(t, kb, b)

				it := NewIter(IterOptions{})
				it.Reset(b)
				i := 0
				for ; it.Next(); i++ {
					require.Less(t, i, len(tc.recs))
					requireSameRecord(t, &tc.recs[i], b, it.Record())
				}
				require.NoError(t, it.Err())
				require.Equal(t, len(tc.recs), i)
				if b.IsControl() {
					it.Reset(b)
					require.True(t, it.Next())
					k, err := ParseControlKey(it.Record().Key)
					require.NoError(t, err)
					require.Equal(t, ControlCommit, k.Type)
					m, err := ParseEndTxnMarker(it.Record().Value)
					require.NoError(t, err)
					require.Equal(t, int32(9), m.CoordinatorEpoch)
				}
			})
		}
	}
}

func TestOursToFranz(t *testing.T) {
	type variant struct {
		name string
		opts func(o *BuilderOptions)
	}
	variants := []variant{
		{"plain", func(o *BuilderOptions) {}},
		{"transactional", func(o *BuilderOptions) {
			o.Transactional, o.ProducerID, o.ProducerEpoch, o.BaseSequence = true, 77, 2, 100
		}},
		{"log-append-time", func(o *BuilderOptions) {
			o.TimestampType, o.LogAppendTime, o.PartitionLeaderEpoch = LogAppendTime, 424242, 8
		}},
	}
	for _, codec := range allCodecs {
		for _, vr := range variants {
			t.Run(fmt.Sprintf("%s/%s", codec, vr.name), func(t *testing.T) {
				opts := DefaultBuilderOptions()
				opts.BaseOffset = 1000
				opts.Compression = codec
				vr.opts(&opts)
				recs := append(mixedRecords(), numbered(40, 5000)...)
				buf := build(t, opts, recs...)
				checkFranzAgrees(t, buf, true)
			})
		}
	}
	t.Run("control", func(t *testing.T) {
		opts := DefaultBuilderOptions()
		opts.ProducerID, opts.ProducerEpoch = 5, 6
		buf, err := AppendEndTxnBatch(nil, opts, 1234, ControlAbort, 3)
		require.NoError(t, err)
		kb, krecs := checkFranzAgrees(t, buf, true)
		require.Equal(t, int16(0x30), kb.Attributes)
		require.Equal(t, []byte{0, 0, 0, 0}, krecs[0].Key)
		require.Equal(t, []byte{0, 0, 0, 0, 0, 3}, krecs[0].Value)
	})
	t.Run("xerial-framing", func(t *testing.T) {
		// Our snappy output carries the xerial framing Kafka's Java
		// producer writes, with 32 KiB blocks.
		opts := DefaultBuilderOptions()
		opts.Compression = CompressionSnappy
		buf := build(t, opts, rec{Value: bytes.Repeat([]byte("abcdefgh"), 20000)})
		rs := buf[HeaderSize:]
		require.Equal(t, xerialMagic, rs[:8])
		require.Equal(t, []byte{0, 0, 0, 1, 0, 0, 0, 1}, rs[8:16])
		blocks := 0
		for rem := rs[16:]; len(rem) > 0; blocks++ {
			n := binary.BigEndian.Uint32(rem)
			rem = rem[4+n:]
		}
		require.Equal(t, 5, blocks, "160 KiB of records in 32 KiB blocks")
	})
}

// checkFranzAgrees parses buf with franz-go and with this package and
// requires identical header fields, CRC and, if withRecords, records.
func checkFranzAgrees(t *testing.T, buf []byte, withRecords bool) (kmsg.RecordBatch, []kmsg.Record) {
	t.Helper()
	kb, krecs, err := kmsgParse(buf)
	require.NoError(t, err)
	b, err := ReadBatch(buf)
	require.NoError(t, err)
	require.NoError(t, b.Validate())
	requireSameHeader(t, kb, b)
	require.Equal(t, crc32c(buf[21:]), uint32(kb.CRC))
	if !withRecords {
		return kb, krecs
	}
	var it Iter
	it.Reset(b)
	i := 0
	for ; it.Next(); i++ {
		require.Less(t, i, len(krecs))
		requireSameRecord(t, &krecs[i], b, it.Record())
	}
	require.NoError(t, it.Err())
	require.Equal(t, len(krecs), i)
	return kb, krecs
}
