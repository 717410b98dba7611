package consolidate

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/tierstate"
	"github.com/tierlog/tierlog/wal"
)

// BenchmarkConsolidate compares consolidation (WAL -> local log through
// the endpoint and the fetcher, mem store and Pebble control plane on
// vfs.NewMem) with a follower append of the same batches from memory.
// 64 batches of 16 KiB per iteration, each in its own WAL object (one
// produce per commit), all served by one fetch.
//
//   - path=wal-consolidation: the reader GETs every object.
//   - path=wal-consolidation-writer-cache: the reader shares the
//     writer's ObjectCache (the objects were produced on this broker),
//     so no GET.
//   - path=endpoint-fetch-only: the WAL read alone, the part of the
//     consolidation path a follower append does not have.
//   - path=follower-append-from-memory: the baseline.
func BenchmarkConsolidate(b *testing.B) {
	const batches, recordsPerBatch, valueBytes = 64, 16, 1000
	e := newWALEnv(b)
	require.NoError(b, e.cp.CreatePartitions(e.ctx, []wal.CreatePartitionsRequest{{TopicID: walTP(e.tp).TopicID, Topic: e.tp.Topic, NumPartitions: 1}}))
	cache := wal.NewObjectCache(64 << 20)
	w, err := wal.NewWriter(wal.WriterOptions{Store: e.store, ControlPlane: e.cp, CommitInterval: time.Millisecond, Cache: cache})
	require.NoError(b, err)
	b.Cleanup(func() { _ = w.Close() })
	value := bytes.Repeat([]byte("v"), valueBytes)
	for range batches {
		bld := record.NewBuilder(record.DefaultBuilderOptions())
		for i := range recordsPerBatch {
			bld.Add(int64(1000+i), nil, value)
		}
		buf, err := bld.Build()
		require.NoError(b, err)
		res, err := w.Produce(e.ctx, []wal.ProduceRequest{{Partition: walTP(e.tp), Batches: buf}})
		require.NoError(b, err)
		require.NoError(b, res[0].Err)
	}
	end := int64(batches * recordsPerBatch)
	born := tierstate.State{}.WithConsolidating(true)
	ep := e.endpoint(EndpointOptions{})
	cachedReader, err := wal.NewReader(wal.ReaderOptions{Store: e.store, ControlPlane: e.cp, Cache: cache})
	require.NoError(b, err)
	cachedEp, err := NewEndpoint(EndpointOptions{ControlPlane: e.cp, WAL: cachedReader, Remote: e.meta, Partitions: e.parts})
	require.NoError(b, err)
	e.parts.set(e.tp, born, nil)
	// The same bytes in memory, stamped, for the follower-append baseline.
	res, err := ep.Fetch(e.ctx, []FetchPartition{{Partition: e.tp, Offset: 0}})
	require.NoError(b, err)
	all := res[0].Records
	require.NoError(b, stampEpoch(all, 0))
	total := int64(len(all))
	require.Len(b, values(b, all), int(end))

	consolidate := func(b *testing.B, ep *Endpoint) {
		b.SetBytes(total)
		b.ReportAllocs()
		i, cpu := 0, time.Duration(0)
		for b.Loop() {
			b.StopTimer()
			l, err := log.Open(fmt.Sprintf("c%d", i), log.Options{FS: e.fs})
			require.NoError(b, err)
			e.parts.set(e.tp, born, l)
			f, err := NewFetcher(FetcherOptions{Endpoint: ep, Machine: e.machine(ep, checkpointData{}), Clock: &manualClock{}})
			require.NoError(b, err)
			require.NoError(b, f.Add(FetcherPartition{Partition: e.tp, Log: l, State: born}))
			b.StartTimer()
			c0 := processCPU()
			for l.LogEndOffset() < end {
				if _, err := f.Step(e.ctx); err != nil {
					b.Fatal(err)
				}
			}
			cpu += processCPU() - c0
			b.StopTimer()
			require.NoError(b, l.Close())
			require.NoError(b, e.fs.RemoveAll(fmt.Sprintf("c%d", i)))
			i++
			b.StartTimer()
		}
		reportCPU(b, cpu)
	}
	b.Run("path=wal-consolidation", func(b *testing.B) { consolidate(b, ep) })
	b.Run("path=wal-consolidation-writer-cache", func(b *testing.B) { consolidate(b, cachedEp) })
	b.Run("path=endpoint-fetch-only", func(b *testing.B) {
		b.SetBytes(total)
		b.ReportAllocs()
		c0 := processCPU()
		for b.Loop() {
			res, err := ep.Fetch(e.ctx, []FetchPartition{{Partition: e.tp, Offset: 0}})
			if err != nil || len(res[0].Records) != len(all) {
				b.Fatal(err, len(res[0].Records))
			}
		}
		reportCPU(b, processCPU()-c0)
	})
	b.Run("path=follower-append-from-memory", func(b *testing.B) {
		b.SetBytes(total)
		b.ReportAllocs()
		i, cpu := 0, time.Duration(0)
		for b.Loop() {
			b.StopTimer()
			l, err := log.Open(fmt.Sprintf("m%d", i), log.Options{FS: e.fs})
			require.NoError(b, err)
			buf := bytes.Clone(all)
			b.StartTimer()
			c0 := processCPU()
			if _, err := l.AppendAsFollower(buf, 0); err != nil {
				b.Fatal(err)
			}
			cpu += processCPU() - c0
			b.StopTimer()
			require.NoError(b, l.Close())
			require.NoError(b, e.fs.RemoveAll(fmt.Sprintf("m%d", i)))
			i++
			b.StartTimer()
		}
		reportCPU(b, cpu)
	})
}

// reportCPU reports the process CPU time per iteration spent in the
// timed part (cpu-ns/op): unlike ns/op it does not grow with the time
// the benchmark waits for a CPU on a loaded machine. It includes the
// runtime's own work (GC) done meanwhile on any thread.
func reportCPU(b *testing.B, cpu time.Duration) {
	if cpu > 0 && b.N > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}
