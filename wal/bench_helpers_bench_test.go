package wal_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/remote/objstore/fs"
	"github.com/tierlog/tierlog/wal"
	"github.com/tierlog/tierlog/wal/pebblecp"
)

// benchTopic is the topic every benchmark produces to.
var benchTopic = wal.TopicID{0xBE, 0x4C}

// benchEnv is what the produce and fetch benchmarks run on: the fs
// object store with real fsyncs and the Pebble control plane on
// vfs.Default, both in temp dirs, as a broker would run them.
type benchEnv struct {
	store objstore.Store
	cp    *pebblecp.ControlPlane
}

func newBenchEnv(b *testing.B, partitions int32) *benchEnv {
	b.Helper()
	store, err := fs.Open(b.TempDir(), fs.Options{})
	require.NoError(b, err)
	return newBenchEnvOn(b, store, partitions)
}

// newBenchEnvOn is newBenchEnv on another store, which it closes at b's
// cleanup.
func newBenchEnvOn(b *testing.B, store objstore.Store, partitions int32) *benchEnv {
	b.Helper()
	cp, err := pebblecp.Open(vfs.Default, b.TempDir(), pebblecp.Options{})
	require.NoError(b, err)
	b.Cleanup(func() { _ = cp.Close(); _ = store.Close() })
	require.NoError(b, cp.CreatePartitions(context.Background(), []wal.CreatePartitionsRequest{
		{TopicID: benchTopic, Topic: "bench", NumPartitions: partitions},
	}))
	return &benchEnv{store: store, cp: cp}
}

func benchTP(p int32) wal.TopicIDPartition {
	return wal.TopicIDPartition{TopicID: benchTopic, Partition: p}
}

// benchBatch builds one uncompressed client batch of about size bytes
// from 1 KiB records of random (incompressible) values.
func benchBatch(b *testing.B, size int) []byte {
	b.Helper()
	const recordValue = 1 << 10
	bld := record.NewBuilder(record.DefaultBuilderOptions())
	value := make([]byte, recordValue)
	for n := 0; n+recordValue+64 <= size || n == 0; n += recordValue + 20 {
		_, _ = rand.Read(value)
		bld.Add(time.Now().UnixMilli(), nil, value)
	}
	buf, err := bld.Build()
	require.NoError(b, err)
	return buf
}

// latencies collects per-operation latencies from many goroutines and
// reports their quantiles with b.ReportMetric.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

func (l *latencies) quantile(q float64) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0
	}
	slices.Sort(l.d)
	return l.d[min(len(l.d)-1, int(q*float64(len(l.d))))]
}

// report adds p50 and p99 in milliseconds (microseconds when unit is
// "us") to the benchmark's line.
func (l *latencies) report(b *testing.B, what, unit string) {
	scale := float64(time.Millisecond)
	if unit == "us" {
		scale = float64(time.Microsecond)
	}
	for _, q := range []struct {
		name string
		q    float64
	}{{"p50", 0.50}, {"p99", 0.99}} {
		b.ReportMetric(float64(l.quantile(q.q))/scale, fmt.Sprintf("%s-%s-%s", what, q.name, unit))
	}
}

func sizeLabel(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}
