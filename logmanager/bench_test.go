package logmanager

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/log"
)

// benchPartitions is the number of partitions of BenchmarkOpenClose: 100
// with -short, 1,000 without, or TIERLOG_BENCH_PARTITIONS.
func benchPartitions() int {
	if s := os.Getenv("TIERLOG_BENCH_PARTITIONS"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			return n
		}
	}
	if testing.Short() {
		return 100
	}
	return 1000
}

// BenchmarkOpenClose opens a log directory of N partitions (10 records
// each) on the operating system's file system, after a clean shutdown and
// after a crash (a manager abandoned without Close, as after kill -9: its
// page cache survives, no clean-shutdown marker does), and closes it. It
// reports the time per partition of Open and of Close, and the heap an
// idle open partition holds. Goals for 10,000 partitions: open after a
// clean shutdown <= 1 s, after kill -9 <= 5 s, close <= 5 s, <= 8 KiB of
// heap each.
func BenchmarkOpenClose(b *testing.B) {
	n := benchPartitions()
	for _, after := range []string{"clean", "crash"} {
		b.Run(fmt.Sprintf("partitions=%d/after=%s", n, after), func(b *testing.B) {
			dir := b.TempDir()
			opts := Options{Dirs: []string{dir}, FS: vfs.Default, NoBackgroundTasks: true,
				RecoveryThreadsPerDir: runtime.GOMAXPROCS(0), Log: log.Options{SegmentIndexBytes: 64 << 10}}
			m, err := Open(b.Context(), opts)
			require.NoError(b, err)
			for p := range n {
				l := getOrCreate(b, m, tpOf("bench", int32(p)), "")
				appendN(b, l, 10)
				l.UpdateHighWatermark(10)
			}
			require.NoError(b, m.Close())
			var openD, closeD time.Duration
			var heap uint64
			for b.Loop() {
				b.StopTimer()
				if after == "crash" {
					// Written since the last clean open, then abandoned.
					m, err := Open(b.Context(), opts)
					require.NoError(b, err)
					for _, p := range m.Partitions() {
						l, err := m.Get(p.Partition)
						require.NoError(b, err)
						appendN(b, l, 1)
					}
					require.NoError(b, m.RunTask(TaskHighWatermarkCheckpoint))
				}
				runtime.GC()
				var before, afterOpen runtime.MemStats
				runtime.ReadMemStats(&before)
				b.StartTimer()
				start := time.Now()
				m, err := Open(b.Context(), opts)
				openD += time.Since(start)
				b.StopTimer()
				require.NoError(b, err)
				require.Len(b, m.Partitions(), n)
				runtime.GC()
				runtime.ReadMemStats(&afterOpen)
				heap += afterOpen.HeapAlloc - min(afterOpen.HeapAlloc, before.HeapAlloc)
				b.StartTimer()
				start = time.Now()
				require.NoError(b, m.Close())
				closeD += time.Since(start)
			}
			runs := float64(b.N)
			b.ReportMetric(float64(openD.Microseconds())/1000/runs/float64(n), "open-ms/partition")
			b.ReportMetric(float64(closeD.Microseconds())/1000/runs/float64(n), "close-ms/partition")
			b.ReportMetric(float64(heap)/runs/float64(n), "heap-B/partition")
			b.ReportMetric(0, "ns/op")
		})
	}
}
