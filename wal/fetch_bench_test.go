package wal_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/wal"
)

// BenchmarkFetchTail fetches the last batch of one partition (a consumer
// at the tail) from objects of 64 partitions' 16 KiB batches, through a
// Reader whose ObjectCache the Writer filled (no GET) and through one
// without a cache (a ranged GET from the fs store; the OS page cache
// holds the file). The baseline in the same run is a raw ranged GET of
// the same bytes.
func BenchmarkFetchTail(b *testing.B) {
	const partitions, objects = 64, 16
	e := newBenchEnv(b, partitions)
	cache := wal.NewObjectCache(256 << 20)
	w, err := wal.NewWriter(wal.WriterOptions{Store: e.store, ControlPlane: e.cp, CommitInterval: benchCommitInterval, Cache: cache})
	require.NoError(b, err)
	ctx := context.Background()
	data := benchBatch(b, 16<<10)
	var last wal.BatchResult
	for range objects {
		reqs := make([]wal.ProduceRequest, partitions)
		for p := range reqs {
			reqs[p] = wal.ProduceRequest{Partition: benchTP(int32(p)), Batches: data}
		}
		res, err := w.Produce(ctx, reqs)
		require.NoError(b, err)
		require.NoError(b, res[0].Err)
		last = res[0].Batches[0]
	}
	require.NoError(b, w.Close())
	req := wal.FindBatchesRequest{Partitions: []wal.FindPartition{{Partition: benchTP(0), Offset: last.BaseOffset, MaxPartitionBytes: 1 << 20}}, MaxBytes: 1 << 20}
	found, err := e.cp.FindBatches(ctx, req)
	require.NoError(b, err)
	info := found[0].Batches[0]

	for _, c := range []struct {
		name  string
		cache *wal.ObjectCache
	}{{"impl=cache", cache}, {"impl=cold", nil}} {
		b.Run(c.name, func(b *testing.B) {
			r, err := wal.NewReader(wal.ReaderOptions{Store: e.store, ControlPlane: e.cp, Cache: c.cache})
			require.NoError(b, err)
			var lat latencies
			b.SetBytes(info.Size)
			b.ReportAllocs()
			for b.Loop() {
				t0 := time.Now()
				res, err := r.Fetch(ctx, req)
				if err != nil || res[0].Err != nil || len(res[0].Records) != int(info.Size) {
					b.Fatal(err, res[0].Err)
				}
				lat.add(time.Since(t0))
			}
			lat.report(b, "fetch", "us")
			b.ReportMetric(float64(r.Metrics().Gets)/float64(b.N), "GETs/fetch")
		})
	}
	b.Run("impl=raw-ranged-get", func(b *testing.B) {
		var lat latencies
		b.SetBytes(info.Size)
		b.ReportAllocs()
		for b.Loop() {
			t0 := time.Now()
			if _, err := objstore.ReadRange(ctx, e.store, info.ObjectKey, info.ByteOffset, info.Size); err != nil {
				b.Fatal(err)
			}
			lat.add(time.Since(t0))
		}
		lat.report(b, "fetch", "us")
		b.ReportMetric(1, "GETs/fetch")
	})

	// A consolidator's fetch: every partition's last batch, all in the
	// last object, with the partitions' ranges coalesced into one GET
	// (the default) beside one GET per partition (MaxCoalesceGap -1).
	all := wal.FindBatchesRequest{MaxBytes: 1 << 30}
	for p := range int32(partitions) {
		all.Partitions = append(all.Partitions, wal.FindPartition{Partition: benchTP(p), Offset: last.BaseOffset, MaxPartitionBytes: 1 << 20})
	}
	for _, c := range []struct {
		name string
		gap  int64
	}{{"impl=cold-64-partitions-coalesced", 0}, {"impl=cold-64-partitions-get-each", -1}} {
		b.Run(c.name, func(b *testing.B) {
			r, err := wal.NewReader(wal.ReaderOptions{Store: e.store, ControlPlane: e.cp, MaxCoalesceGap: c.gap})
			require.NoError(b, err)
			var lat latencies
			b.SetBytes(info.Size * partitions)
			b.ReportAllocs()
			for b.Loop() {
				t0 := time.Now()
				res, err := r.Fetch(ctx, all)
				if err != nil || res[partitions-1].Err != nil || len(res[partitions-1].Records) != int(info.Size) {
					b.Fatal(err)
				}
				lat.add(time.Since(t0))
			}
			lat.report(b, "fetch", "us")
			b.ReportMetric(float64(r.Metrics().Gets)/float64(b.N), "GETs/fetch")
		})
	}
}
