package record

import (
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/stretchr/testify/require"
)

// allCodecs lists the five codecs, for table tests.
var allCodecs = []Compression{
	CompressionNone, CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd,
}

// rec is a record as a test writes or expects it.
type rec struct {
	Offset    int64
	Timestamp int64
	Key       []byte
	Value     []byte
	Headers   []Header
}

// build builds a batch of recs with opts and fails the test on error.
func build(t testing.TB, opts BuilderOptions, recs ...rec) []byte {
	t.Helper()
	b := NewBuilder(opts)
	for _, r := range recs {
		b.Add(r.Timestamp, r.Key, r.Value, r.Headers...)
	}
	out, err := b.Build()
	require.NoError(t, err)
	return out
}

// numbered returns n records with distinct keys and values, timestamps
// from ts.
func numbered(n int, ts int64) []rec {
	recs := make([]rec, n)
	for i := range recs {
		recs[i] = rec{
			Timestamp: ts + int64(i),
			Key:       fmt.Appendf(nil, "key-%d", i),
			Value:     fmt.Appendf(nil, "value-%d", i),
		}
	}
	return recs
}

// readAll decodes every record of buf's first batch, failing the test on
// any error.
func readAll(t testing.TB, buf []byte) (Batch, []rec) {
	t.Helper()
	b, err := ReadBatch(buf)
	require.NoError(t, err)
	require.NoError(t, b.Validate())
	var it Iter
	it.Reset(b)
	var out []rec
	for it.Next() {
		r := it.Record()
		out = append(out, rec{
			Offset:    r.Offset,
			Timestamp: r.Timestamp,
			Key:       clone(r.Key),
			Value:     clone(r.Value),
			Headers:   cloneHeaders(r.AppendHeaders(nil)),
		})
	}
	require.NoError(t, it.Err())
	return b, out
}

// clone copies v, keeping nil apart from empty.
func clone(v []byte) []byte {
	if v == nil {
		return nil
	}
	return append([]byte{}, v...)
}

func cloneHeaders(hs []Header) []Header {
	for i := range hs {
		hs[i].Value = clone(hs[i].Value)
	}
	return hs
}

// crc32c computes the CRC with the standard library directly, independent
// of Batch.ComputeCRC.
func crc32c(b []byte) uint32 {
	return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli))
}

// concat builds n single-record batches at offsets 0..n-1 and returns
// their concatenation and the start position of each.
func concat(t testing.TB, n int) (buf []byte, starts []int) {
	t.Helper()
	for i := 0; i < n; i++ {
		opts := DefaultBuilderOptions()
		opts.BaseOffset = int64(i)
		starts = append(starts, len(buf))
		buf = append(buf, build(t, opts, rec{Timestamp: int64(i), Value: fmt.Appendf(nil, "v%d", i)})...)
	}
	return buf, starts
}
