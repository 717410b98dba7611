package wal_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/wal"
)

// benchCommitInterval replaces the 250 ms default so that a benchmark
// measures the store and the control plane, not the batching wait.
const benchCommitInterval = 5 * time.Millisecond

// benchUploads is the writer's default UploadConcurrency, spelled out so
// the raw-put baseline runs as many Puts at once.
const benchUploads = 8

// benchProducers is how many produce calls are outstanding at once
// (connections of one broker); each call carries one batch.
func benchProducers(batchBytes int) int {
	return max(16, (16<<20)/batchBytes) // 16 MiB outstanding, at least 16 calls
}

// BenchmarkProduce produces through the Writer into the fs store (real
// fsyncs) with the Pebble control plane on vfs.Default, and compares it
// in the same run with a raw objstore Put of the same bytes in objects of
// the size the writer made, with as many Puts at once as the writer's
// upload slots. One op is one batch; MB/s counts batch bytes.
func BenchmarkProduce(b *testing.B) {
	for _, batchBytes := range []int{16 << 10, 1 << 20} {
		for _, partitions := range []int32{1, 64, 1024} {
			name := fmt.Sprintf("batch-bytes=%s/partitions=%d", sizeLabel(batchBytes), partitions)
			var objectBytes atomic.Int64
			b.Run(name+"/impl=writer", func(b *testing.B) {
				objectBytes.Store(benchProduceWriter(b, batchBytes, partitions))
			})
			b.Run(name+"/impl=raw-put", func(b *testing.B) {
				size := objectBytes.Load()
				if size == 0 {
					size = int64(batchBytes) // the writer sub-benchmark was filtered out
				}
				benchRawPut(b, size, benchUploads)
			})
		}
	}
}

// benchProduceWriter runs b.N one-batch produce calls from
// benchProducers goroutines, round-robin over the partitions, and
// returns the mean size of the objects the writer uploaded.
func benchProduceWriter(b *testing.B, batchBytes int, partitions int32) int64 {
	e := newBenchEnv(b, partitions)
	data := benchBatch(b, batchBytes)
	w, err := wal.NewWriter(wal.WriterOptions{
		Store: e.store, ControlPlane: e.cp,
		CommitInterval: benchCommitInterval, UploadConcurrency: benchUploads,
	})
	require.NoError(b, err)
	defer func() { _ = w.Close() }()
	ctx := context.Background()
	var lat latencies
	var next atomic.Int64
	var failed atomic.Value
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for range benchProducers(batchBytes) {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				req := []wal.ProduceRequest{{Partition: benchTP(int32(i % int64(partitions))), Batches: data}}
				start := time.Now()
				res, err := w.Produce(ctx, req)
				if err == nil {
					err = res[0].Err
				}
				if err == nil && res[0].Batches[0].Err != nil {
					err = res[0].Batches[0].Err
				}
				if err != nil {
					failed.Store(err)
					return
				}
				lat.add(time.Since(start))
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	m := w.Metrics()
	lat.report(b, "ack", "ms")
	if m.ObjectsUploaded == 0 {
		return 0
	}
	mean := m.BytesUploaded / m.ObjectsUploaded
	b.ReportMetric(float64(mean)/(1<<20), "MiB/object")
	return mean
}

// benchRawPut is the baseline: b.N Puts of objects of objectBytes under
// fresh WAL keys, uploads at a time, reported per batch-equivalent byte
// through SetBytes(objectBytes).
func benchRawPut(b *testing.B, objectBytes int64, uploads int) {
	e := newBenchEnv(b, 1)
	data := bytes.Repeat([]byte{0xa5}, int(objectBytes))
	ctx := context.Background()
	var lat latencies
	var next atomic.Int64
	var failed atomic.Value
	b.SetBytes(objectBytes)
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for range uploads {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				start := time.Now()
				if err := e.store.Put(ctx, wal.NewObjectKey("wal"), bytes.NewReader(data), objectBytes, objstore.PutOptions{}); err != nil {
					failed.Store(err)
					return
				}
				lat.add(time.Since(start))
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	lat.report(b, "put", "ms")
	b.ReportMetric(float64(objectBytes)/(1<<20), "MiB/object")
}
