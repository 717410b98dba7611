package record

import (
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// benchRecords returns n records of about valueSize bytes each, half
// random (incompressible) and half repetitive, so codecs do some work.
func benchRecords(n, valueSize int) []rec {
	rng := rand.New(rand.NewPCG(5, 6))
	recs := make([]rec, n)
	for i := range recs {
		v := make([]byte, valueSize)
		for j := range v[:valueSize/2] {
			v[j] = byte(rng.Uint32())
		}
		for j := valueSize / 2; j < valueSize; j++ {
			v[j] = byte('a' + j%7)
		}
		recs[i] = rec{Timestamp: int64(i), Key: fmt.Appendf(nil, "key-%06d", i), Value: v}
	}
	return recs
}

// benchBatch builds a batch of about size bytes of ~1 KiB records.
func benchBatch(b *testing.B, size int, c Compression) ([]byte, int) {
	n := max(size/1024, 1)
	opts := DefaultBuilderOptions()
	opts.Compression = c
	return build(b, opts, benchRecords(n, 1000)...), n
}

func BenchmarkValidate(b *testing.B) {
	for _, size := range []struct {
		name  string
		bytes int
	}{{"16KiB", 16 << 10}, {"1MiB", 1 << 20}} {
		buf, _ := benchBatch(b, size.bytes, CompressionNone)
		batch, err := ReadBatch(buf)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("size=%s/impl=validate", size.name), func(b *testing.B) {
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				if err := batch.Validate(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("size=%s/impl=crc32-baseline", size.name), func(b *testing.B) {
			table := crc32.MakeTable(crc32.Castagnoli)
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				_ = crc32.Checksum(buf[21:], table)
			}
		})
	}
}

func BenchmarkIterate(b *testing.B) {
	for _, c := range allCodecs {
		buf, n := benchBatch(b, 16<<10, c)
		batch, err := ReadBatch(buf)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("batch-bytes=16KiB/record-bytes=1KiB/codec=%s", c), func(b *testing.B) {
			var it Iter
			// SetBytes counts the uncompressed records section.
			it.Reset(batch)
			raw, err := it.dec.decompress(c, buf[HeaderSize:])
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				it.Reset(batch)
				got := 0
				for it.Next() {
					got++
				}
				if it.Err() != nil || got != n {
					b.Fatalf("got %d records, err %v", got, it.Err())
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

func BenchmarkBuild(b *testing.B) {
	recs := benchRecords(16, 1000)
	for _, c := range allCodecs {
		b.Run(fmt.Sprintf("batch-bytes=16KiB/codec=%s", c), func(b *testing.B) {
			opts := DefaultBuilderOptions()
			opts.Compression = c
			bld := NewBuilder(opts)
			var dst []byte
			size := 0
			for _, r := range recs {
				size += len(r.Key) + len(r.Value)
			}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				bld.Reset(opts)
				for _, r := range recs {
					bld.Add(r.Timestamp, r.Key, r.Value)
				}
				var err error
				if dst, err = bld.AppendTo(dst[:0]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDecompress(b *testing.B) {
	for _, c := range allCodecs[1:] {
		buf, _ := benchBatch(b, 64<<10, c)
		src := buf[HeaderSize:]
		b.Run(fmt.Sprintf("batch-bytes=64KiB/codec=%s", c), func(b *testing.B) {
			d := NewDecompressor(0)
			out, err := d.Decompress(c, src)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(out)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := d.Decompress(c, src); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
