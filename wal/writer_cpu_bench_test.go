package wal_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/remote/objstore/mem"
	"github.com/tierlog/tierlog/wal"
	"github.com/tierlog/tierlog/wal/pebblecp"
)

// discardStore reads each Put's body into a reused buffer and keeps
// nothing: what a store's Put costs the writer's side (reading the
// body), without the store's own write, fsync and page cache, whose CPU
// per GB on this project's VMs moves with the memory's state (see
// docs/performance.md). Deletes of unknown keys succeed.
type discardStore struct {
	objstore.Store
	bufs sync.Pool
}

func newDiscardStore() *discardStore {
	return &discardStore{Store: mem.New(mem.Options{}), bufs: sync.Pool{New: func() any { b := make([]byte, 4<<20); return &b }}}
}

func (s *discardStore) Put(ctx context.Context, key string, r io.Reader, size int64, _ objstore.PutOptions) error {
	buf := s.bufs.Get().(*[]byte)
	defer s.bufs.Put(buf)
	n, err := io.CopyBuffer(struct{ io.Writer }{io.Discard}, struct{ io.Reader }{objstore.NewExactReader(ctx, r, size)}, *buf)
	if err == nil && n != size {
		err = fmt.Errorf("%d of %d bytes", n, size)
	}
	return err
}

func (s *discardStore) Delete(context.Context, string) error { return nil }

func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkWriterCPU is the writer's own CPU per GB: produce as the
// compare command's WAL rows do (64 partitions, the whole in-flight
// budget outstanding, one batch per call), into a store that only reads
// the bodies, with the Pebble control plane in memory (its CPU, no disk).
// Beside it, raw-put: the same store's Puts of the same bytes in objects
// of the writer's size, 8 at a time. "cpu-s/GB" is the process's CPU
// (all goroutines, GC included) per 1e9 batch bytes.
func BenchmarkWriterCPU(b *testing.B) {
	for _, batchBytes := range []int{16 << 10, 1 << 20} {
		var objectBytes int64
		b.Run(fmt.Sprintf("batch-bytes=%s/impl=writer", sizeLabel(batchBytes)), func(b *testing.B) {
			objectBytes = benchWriterCPU(b, batchBytes)
		})
		b.Run(fmt.Sprintf("batch-bytes=%s/impl=raw-put", sizeLabel(batchBytes)), func(b *testing.B) {
			size := max(objectBytes, int64(batchBytes))
			st := newDiscardStore()
			data := bytes.Repeat([]byte{0xa5}, int(size))
			puts := max(1, int64(b.N)*int64(batchBytes)/size)
			b.SetBytes(puts * size / int64(b.N))
			var next atomic.Int64
			b.ResetTimer()
			c0 := processCPU()
			var wg sync.WaitGroup
			for range benchUploads {
				wg.Go(func() {
					for next.Add(1) <= puts {
						if err := st.Put(context.Background(), "k", bytes.NewReader(data), size, objstore.PutOptions{}); err != nil {
							panic(err)
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric((processCPU()-c0).Seconds()/(float64(puts*size)/1e9), "cpu-s/GB")
		})
	}
}

func benchWriterCPU(b *testing.B, batchBytes int) int64 {
	const partitions = 64
	cp, err := pebblecp.Open(vfs.NewMem(), "cp", pebblecp.Options{})
	require.NoError(b, err)
	defer cp.Close()
	ctx := context.Background()
	require.NoError(b, cp.CreatePartitions(ctx, []wal.CreatePartitionsRequest{{TopicID: benchTopic, Topic: "bench", NumPartitions: partitions}}))
	w, err := wal.NewWriter(wal.WriterOptions{Store: newDiscardStore(), ControlPlane: cp,
		CommitInterval: benchCommitInterval, UploadConcurrency: benchUploads, MaxBytes: benchMaxBytes})
	require.NoError(b, err)
	data := benchBatch(b, batchBytes)
	producers := max(16, benchMaxBytes*(benchUploads+1)/len(data))
	var next atomic.Int64
	var failed atomic.Value
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	c0 := processCPU()
	var wg sync.WaitGroup
	for range producers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				res, err := w.Produce(ctx, []wal.ProduceRequest{{Partition: benchTP(int32(i % partitions)), Batches: data}})
				if err == nil {
					err = res[0].Err
				}
				if err == nil {
					err = res[0].Batches[0].Err
				}
				if err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	cpu := processCPU() - c0
	b.StopTimer()
	require.NoError(b, w.Close())
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(cpu.Seconds()/(float64(b.N)*float64(len(data))/1e9), "cpu-s/GB")
	m := w.Metrics()
	if m.ObjectsUploaded == 0 {
		return 0
	}
	return m.BytesUploaded / m.ObjectsUploaded
}
