package segment

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tierlog/tierlog/log/record"
)

// benchBatch builds one uncompressed batch of 1 KiB records totalling
// about batchBytes.
func benchBatch(b *testing.B, batchBytes int) []byte {
	opts := record.DefaultBuilderOptions()
	bl := record.NewBuilder(opts)
	value := make([]byte, 1000)
	for bl.UncompressedBytes()+1100 <= batchBytes {
		bl.Add(time.Now().UnixMilli(), nil, value)
	}
	buf, err := bl.Build()
	if err != nil {
		b.Fatal(err)
	}
	return buf
}

// benchSegmentBytes bounds the disk a benchmark uses: the segment is
// deleted and recreated when it reaches this size.
const benchSegmentBytes = 64 << 20

// BenchmarkSegmentAppend appends batches of 1 KiB records to a segment on
// the real file system, against a baseline that writes the same bytes to
// a plain vfs file with WriteAt. Neither fsyncs.
func BenchmarkSegmentAppend(b *testing.B) {
	for _, size := range []int{16 << 10, 1 << 20} {
		batch := benchBatch(b, size)
		rb, _ := record.ReadBatch(batch)
		count := rb.LastOffset() + 1
		name := fmt.Sprintf("batch-bytes=%dKiB", size>>10)
		b.Run(name+"/segment", func(b *testing.B) {
			fs, dir := vfs.Default, b.TempDir()
			s, err := Create(fs, dir, 0, 0, Options{})
			if err != nil {
				b.Fatal(err)
			}
			next := int64(0)
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if s.Size()+int64(len(batch)) > benchSegmentBytes {
					b.StopTimer()
					if err := s.Delete(); err != nil {
						b.Fatal(err)
					}
					if s, err = Create(fs, dir, next, 0, Options{}); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				rb.SetBaseOffset(next)
				if err := s.Append(next+count-1, batch); err != nil {
					b.Fatal(err)
				}
				next += count
			}
			b.StopTimer()
			_ = s.Delete()
		})
		b.Run(name+"/baseline-vfs-file", func(b *testing.B) {
			fs, dir := vfs.Default, b.TempDir()
			path := fs.PathJoin(dir, "baseline")
			f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
			if err != nil {
				b.Fatal(err)
			}
			pos := int64(0)
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if pos+int64(len(batch)) > benchSegmentBytes {
					b.StopTimer()
					_ = f.Close()
					if f, err = fs.Create(path, vfs.WriteCategoryUnspecified); err != nil {
						b.Fatal(err)
					}
					pos = 0
					b.StartTimer()
				}
				if _, err := f.WriteAt(batch, pos); err != nil {
					b.Fatal(err)
				}
				pos += int64(len(batch))
			}
			b.StopTimer()
			_ = f.Close()
		})
	}
}

// fillBenchSegment writes batches of about batchBytes to a new segment
// until it holds about total bytes, and returns the batch positions.
func fillBenchSegment(b *testing.B, fs vfs.FS, dir string, batchBytes, total int) (*Segment, []int64, int64) {
	s, err := Create(fs, dir, 0, 0, Options{})
	if err != nil {
		b.Fatal(err)
	}
	batch := benchBatch(b, batchBytes)
	rb, _ := record.ReadBatch(batch)
	count := rb.LastOffset() + 1
	var positions []int64
	next := int64(0)
	for s.Size() < int64(total) {
		positions = append(positions, s.Size())
		rb.SetBaseOffset(next)
		if err := s.Append(next+count-1, batch); err != nil {
			b.Fatal(err)
		}
		next += count
	}
	return s, positions, count
}

// BenchmarkSegmentRead reads a 64 MiB segment sequentially, 1 MiB per
// Read (a consumer fetch), against a pread baseline of the same ranges.
func BenchmarkSegmentRead(b *testing.B) {
	const total, fetch = 64 << 20, 1 << 20
	fs, dir := vfs.Default, b.TempDir()
	s, _, _ := fillBenchSegment(b, fs, dir, 16<<10, total)
	defer s.Delete()
	b.Run("segment", func(b *testing.B) {
		dst := make([]byte, 0, fetch)
		offset := int64(0)
		b.SetBytes(fetch)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			res, err := s.Read(dst, offset, fetch, -1, true)
			if err != nil {
				b.Fatal(err)
			}
			if !res.Found {
				offset = 0
				continue
			}
			// Continue after the last whole batch of the data.
			data := res.Data
			for len(data) > 0 {
				bt, err := record.ReadBatch(data)
				if err != nil {
					break
				}
				offset = bt.NextOffset()
				data = data[bt.Size():]
			}
			dst = res.Data
		}
	})
	b.Run("baseline-pread", func(b *testing.B) {
		f, err := fs.Open(s.Path())
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		buf := make([]byte, fetch)
		pos := int64(0)
		b.SetBytes(fetch)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if pos+fetch > s.Size() {
				pos = 0
			}
			if _, err := f.ReadAt(buf, pos); err != nil {
				b.Fatal(err)
			}
			pos += fetch
		}
	})
}

// BenchmarkOffsetLookup positions reads at random offsets of a warm
// 64 MiB segment of 4 KiB batches (default 4 KiB index interval): an
// index binary search plus a header scan. Reports p50 and p99.
func BenchmarkOffsetLookup(b *testing.B) {
	fs, dir := vfs.Default, b.TempDir()
	s, _, count := fillBenchSegment(b, fs, dir, 4<<10, 64<<20)
	defer s.Delete()
	next, _ := s.ReadNextOffset()
	rng := rand.New(rand.NewPCG(1, 2))
	samples := make([]time.Duration, 0, min(b.N, 1<<20))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		o := rng.Int64N(next)
		start := time.Now()
		_, base, found, err := s.TranslateOffset(o)
		d := time.Since(start)
		if err != nil || !found || base > o || base+count <= o {
			b.Fatalf("translate(%d) = %d, %t, %v", o, base, found, err)
		}
		if len(samples) < cap(samples) {
			samples = append(samples, d)
		}
	}
	b.StopTimer()
	slices.Sort(samples)
	if n := len(samples); n > 0 {
		b.ReportMetric(float64(samples[n/2].Nanoseconds()), "p50-ns")
		b.ReportMetric(float64(samples[n*99/100].Nanoseconds()), "p99-ns")
	}
}
