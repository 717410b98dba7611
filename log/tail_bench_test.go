package log

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/tierlog/tierlog/log/internal/segment"
)

// The tail and first-touch read benchmarks: the latency of single reads
// where a mapped log is at its worst, each with the mappings on
// (impl=mmap, the default on vfs.Default) and off (impl=pread,
// DisableMmapReads) in the same run. Run:
//
//	go test -run XXX -bench 'TailRead|FirstPass' -benchtime=20000x ./log
//
// Each reports the p50, p99 and p99.9 latency of one read in ns.

// tailImpls are the two read paths every benchmark here runs.
var tailImpls = []struct {
	name string
	opts Options
}{{"mmap", Options{}}, {"pread", Options{DisableMmapReads: true}}}

// tailLogBytes is the size of the logs: 4096 batches of 16 KiB.
const tailLogBytes = 64 << 20

// reportLatencies reports the p50, p99 and p99.9 of lat (sorted here).
func reportLatencies(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	at := func(q float64) float64 { return float64(lat[int(float64(len(lat)-1)*q)].Nanoseconds()) }
	b.ReportMetric(at(0.5), "p50-ns")
	b.ReportMetric(at(0.99), "p99-ns")
	b.ReportMetric(at(0.999), "p99.9-ns")
}

// BenchmarkTailRead is a consumer at the tail: each iteration appends a
// 16 KiB batch (AppendAsLeader, default options) and reads it back at
// once (Read with maxBytes 1 and minOneMessage, Kafka's answer: the whole
// batch); only the read is timed. The log rolls at 64 MiB and retention
// keeps one segment, so every run reads the first pages of new segments
// as well as pages of the active one.
func BenchmarkTailRead(b *testing.B) {
	for _, impl := range tailImpls {
		b.Run("batch-bytes=16KiB/impl="+impl.name, func(b *testing.B) {
			o := impl.opts
			o.SegmentBytes = tailLogBytes
			l := benchLog(b, b.TempDir(), o)
			defer l.Close()
			batch := benchBatch(b, 16, 1024-21)
			buf := make([]byte, 0, 64<<10)
			lat := make([]time.Duration, 0, b.N)
			appendLat := make([]time.Duration, 0, b.N)
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				start := time.Now()
				info, err := l.AppendAsLeader(batch, 0, OriginClient)
				appendLat = append(appendLat, time.Since(start))
				if err != nil {
					b.Fatal(err)
				}
				mustBatch(b, batch).SetBaseOffset(0)
				b.StartTimer()
				start = time.Now()
				got, err := l.Read(buf, info.FirstOffset, 1, IsolationLogEnd, true)
				lat = append(lat, time.Since(start))
				if err != nil || len(got.Records) != len(batch) {
					b.Fatalf("read %d bytes at %d: %v", len(got.Records), info.FirstOffset, err)
				}
				buf = got.Records[:0]
				if (info.LastOffset+1)%(tailLogBytes/1024) == 0 {
					b.StopTimer()
					l.UpdateHighWatermark(l.LogEndOffset())
					if _, err := l.DeleteOldSegments(); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
			}
			b.StopTimer()
			reportLatencies(b, lat)
			slices.Sort(appendLat)
			b.ReportMetric(float64(appendLat[len(appendLat)/2].Nanoseconds()), "append-p50-ns")
			b.ReportMetric(float64(appendLat[len(appendLat)*99/100].Nanoseconds()), "append-p99-ns")
		})
	}
}

// BenchmarkFirstPass reads every batch of a 64 MiB log of 16 KiB
// batches once, in random order (Read with maxBytes 1 and minOneMessage),
// right after Open: the page cache holds the file, the process has not
// touched it (pass=first, a cold mapping), then again (pass=second, the
// same log read once before; pass=third, twice before, so the pages read
// again were handed to the background warmer, which the benchmark waits
// for). Each pass reopens the log, untimed.
func BenchmarkFirstPass(b *testing.B) {
	for _, pass := range []string{"first", "second", "third"} {
		for _, impl := range tailImpls {
			b.Run("pass="+pass+"/impl="+impl.name, func(b *testing.B) {
				dir, l := fillLogOpts(b, impl.opts, tailLogBytes)
				if err := l.Close(); err != nil {
					b.Fatal(err)
				}
				l = nil
				o := impl.opts
				o.RetentionBytes = RetentionInfinite
				buf := make([]byte, 0, 64<<10)
				rng := rand.New(rand.NewPCG(1, 2))
				lat := make([]time.Duration, 0, b.N)
				var order []int64
				read := func(o int64, timed bool) {
					start := time.Now()
					got, err := l.Read(buf, o, 1, IsolationLogEnd, true)
					if timed {
						lat = append(lat, time.Since(start))
					}
					if err != nil || len(got.Records) == 0 {
						b.Fatalf("read at %d: %d bytes, %v", o, len(got.Records), err)
					}
					buf = got.Records[:0]
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if len(order) == 0 {
						b.StopTimer()
						if l != nil {
							_ = l.Close()
						}
						l = benchLog(b, dir, o)
						for o := int64(0); o < l.LogEndOffset(); o += 16 {
							order = append(order, o)
						}
						rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
						// One read loads the segment's indexes (lazy,
						// milliseconds, not a matter of the mapping).
						read(order[0], false)
						for range map[string]int{"first": 0, "second": 1, "third": 2}[pass] {
							for _, o := range order {
								read(o, false)
							}
						}
						// The chunks whose pages were read twice are
						// warmed in the background: measure once that
						// is done.
						segment.WaitWarmer()
						b.StartTimer()
					}
					read(order[len(order)-1], true)
					order = order[:len(order)-1]
				}
				b.StopTimer()
				_ = l.Close()
				reportLatencies(b, lat)
			})
		}
	}
}
