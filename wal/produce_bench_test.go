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

	"github.com/tierlog/tierlog/internal/harness/s3test"
	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/wal"
)

// benchCommitInterval replaces the 250 ms default so that a benchmark
// measures the store and the control plane, not the batching wait.
const benchCommitInterval = 5 * time.Millisecond

// benchUploads is the writer's default UploadConcurrency, spelled out so
// the raw-put baseline runs as many Puts at once.
const benchUploads = 8

// benchMaxBytes is the writer's default MaxBytes, and
// benchMaxBytes*(benchUploads+1) its default MaxBytesInFlight.
const benchMaxBytes = 8 << 20

// A produceLoad is how many produce calls are outstanding at once. Both
// are closed loops: each caller (a connection of one broker) sends one
// batch per call and waits for its ack before the next.
type produceLoad struct {
	name string
	// outstanding is the request bytes the callers keep in flight.
	outstanding int64
}

var produceLoads = []produceLoad{
	// 16 MiB outstanding: two objects' worth. Latency-bound by design
	// (Little's law: MB/s <= 16 MiB / ack latency), against a raw put
	// that keeps 8 objects in flight.
	{"closed-16MiB", 16 << 20},
	// Enough callers to fill the writer's whole in-flight budget
	// (MaxBytesInFlight, 72 MiB by default), so that all 8 upload slots
	// can be busy as the raw put's 8 Puts are: the load under which the
	// two are comparable.
	{"closed-budget", benchMaxBytes * (benchUploads + 1)},
}

// producers is how many callers keep l.outstanding bytes of batchBytes
// batches in flight (at least 16).
func (l produceLoad) producers(batchBytes int) int {
	return max(16, int(l.outstanding/int64(batchBytes)))
}

// benchStore opens a store for one sub-benchmark.
type benchStore struct {
	name string
	open func(b *testing.B) objstore.Store // nil: the fs store of newBenchEnv
}

var benchStores = []benchStore{
	{name: "fs"},
	// The real S3 server of the tests (versitygw, TLS on 127.0.0.1,
	// its posix backend on the same disk), a fresh bucket per
	// sub-benchmark.
	{name: "s3", open: func(b *testing.B) objstore.Store {
		srv := s3test.Start(b)
		return s3test.OpenStore(b, srv.StoreOptions(b))
	}},
}

func (s benchStore) env(b *testing.B, partitions int32) *benchEnv {
	if s.open == nil {
		return newBenchEnv(b, partitions)
	}
	return newBenchEnvOn(b, s.open(b), partitions)
}

// BenchmarkProduce produces through the Writer, with the Pebble control
// plane on vfs.Default, into the fs store (real fsyncs) and into the S3
// test server, and compares each run with a raw objstore Put into the
// same kind of store of the same bytes in objects of the size the writer
// made, with as many Puts at once as the writer's upload slots. One op is
// one batch (for the raw put, a batch's worth of bytes); MB/s counts
// batch bytes. The raw-put line also reports the
// writer's MB/s divided by its own ("writer/raw"). -short keeps 1 and
// 1024 partitions.
func BenchmarkProduce(b *testing.B) {
	partitionSets := []int32{1, 64, 1024}
	if testing.Short() {
		partitionSets = []int32{1, 1024}
	}
	for _, st := range benchStores {
		for _, batchBytes := range []int{16 << 10, 1 << 20} {
			for _, partitions := range partitionSets {
				for _, load := range produceLoads {
					name := fmt.Sprintf("store=%s/batch-bytes=%s/partitions=%d/load=%s", st.name, sizeLabel(batchBytes), partitions, load.name)
					var writer produceRun
					b.Run(name+"/impl=writer", func(b *testing.B) {
						writer = benchProduceWriter(b, st.env(b, partitions), batchBytes, partitions, load)
					})
					b.Run(name+"/impl=raw-put", func(b *testing.B) {
						size := writer.objectBytes
						if size == 0 {
							size = int64(batchBytes) // the writer sub-benchmark was filtered out
						}
						raw := benchRawPut(b, st.env(b, 1), size, batchBytes, benchUploads)
						if writer.mbs > 0 && raw > 0 {
							b.ReportMetric(writer.mbs/raw, "writer/raw")
						}
					})
				}
			}
		}
	}
}

// produceRun is what a writer sub-benchmark hands its raw-put twin.
type produceRun struct {
	objectBytes int64   // mean size of the objects uploaded
	mbs         float64 // batch bytes per second / 1e6, of the last run
}

// benchProduceWriter runs b.N one-batch produce calls from the load's
// callers, round-robin over the partitions.
func benchProduceWriter(b *testing.B, e *benchEnv, batchBytes int, partitions int32, load produceLoad) produceRun {
	data := benchBatch(b, batchBytes)
	w, err := wal.NewWriter(wal.WriterOptions{
		Store: e.store, ControlPlane: e.cp,
		CommitInterval: benchCommitInterval, UploadConcurrency: benchUploads, MaxBytes: benchMaxBytes,
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
	start := time.Now()
	var wg sync.WaitGroup
	for range load.producers(batchBytes) {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				req := []wal.ProduceRequest{{Partition: benchTP(int32(i % int64(partitions))), Batches: data}}
				t0 := time.Now()
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
				lat.add(time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	m := w.Metrics()
	lat.report(b, "ack", "ms")
	if m.ObjectsUploaded == 0 {
		return produceRun{}
	}
	mean := m.BytesUploaded / m.ObjectsUploaded
	b.ReportMetric(float64(mean)/(1<<20), "MiB/object")
	b.ReportMetric(float64(m.BackPressureWaits)/float64(b.N), "waits/op")
	if m.ObjectsCommitted > 0 {
		// One CommitFiles call at a time, of the objects uploaded by
		// then: objects/commit above 1 means the uploads outpace the
		// commits, which the plane then writes as one group.
		b.ReportMetric(float64(m.CommitLatencySum.Microseconds())/1e3/float64(m.ObjectsCommitted), "commit-ms")
		if m.CommitCalls > 0 {
			b.ReportMetric(float64(m.ObjectsCommitted)/float64(m.CommitCalls), "objects/commit")
		}
	}
	return produceRun{objectBytes: mean, mbs: float64(b.N) * float64(len(data)) / elapsed.Seconds() / 1e6}
}

// benchRawPut is the baseline: the bytes of b.N batches of batchBytes as
// Puts of objects of objectBytes under fresh WAL keys (at least one),
// uploads at a time, so that one op is again one batch's worth. It
// returns its MB/s.
func benchRawPut(b *testing.B, e *benchEnv, objectBytes int64, batchBytes, uploads int) float64 {
	data := bytes.Repeat([]byte{0xa5}, int(objectBytes))
	ctx := context.Background()
	var lat latencies
	var next atomic.Int64
	var failed atomic.Value
	puts := max(1, int64(b.N)*int64(batchBytes)/objectBytes)
	b.SetBytes(puts * objectBytes / int64(b.N))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for range uploads {
		wg.Go(func() {
			for next.Add(1) <= puts {
				t0 := time.Now()
				if err := e.store.Put(ctx, wal.NewObjectKey("wal"), bytes.NewReader(data), objectBytes, objstore.PutOptions{}); err != nil {
					failed.Store(err)
					return
				}
				lat.add(time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	lat.report(b, "put", "ms")
	b.ReportMetric(float64(objectBytes)/(1<<20), "MiB/object")
	return float64(puts) * float64(objectBytes) / elapsed.Seconds() / 1e6
}
