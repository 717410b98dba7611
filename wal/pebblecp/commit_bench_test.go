package pebblecp

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/tierlog/tierlog/wal"
)

var benchTopic = wal.TopicID{0xBE, 0x4D}

// benchRequest is an object of n batches of one record each, spread
// round-robin over partitions.
func benchRequest(i, n int, partitions int32) wal.CommitFileRequest {
	req := wal.CommitFileRequest{ObjectKey: fmt.Sprintf("wal/bench-%09d", i), ObjectSize: int64(n) * 100}
	for j := range n {
		req.Batches = append(req.Batches, wal.CommitBatch{
			Partition:  wal.TopicIDPartition{TopicID: benchTopic, Partition: int32(j) % partitions},
			ByteOffset: int64(j) * 100, Size: 100, BaseOffset: 0, LastOffset: 0, RecordCount: 1,
			MaxTimestamp: 1000, TimestampType: wal.CreateTime, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
		})
	}
	return req
}

func reportQuantiles(b *testing.B, lat []time.Duration, what string) {
	slices.Sort(lat)
	for _, q := range []struct {
		name string
		q    float64
	}{{"p50", 0.5}, {"p99", 0.99}} {
		b.ReportMetric(float64(lat[min(len(lat)-1, int(q.q*float64(len(lat))))])/float64(time.Microsecond), what+"-"+q.name+"-us")
	}
}

// BenchmarkCommit commits objects of 1, 100 and 1000 batches on vfs.Default
// (real fsync), beside a synced Pebble batch of one key on the same disk in
// the same run: the floor one CommitFile cannot go below.
func BenchmarkCommit(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("batches=%d/impl=pebblecp", n), func(b *testing.B) {
			cp, err := Open(vfs.Default, b.TempDir(), Options{})
			require.NoError(b, err)
			defer func() { _ = cp.Close() }()
			require.NoError(b, cp.CreatePartitions(ctx, []wal.CreatePartitionsRequest{{TopicID: benchTopic, Topic: "bench", NumPartitions: 64}}))
			reqs := make([]wal.CommitFileRequest, 0, 1024)
			var lat []time.Duration
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				b.StopTimer()
				if len(reqs) == 0 {
					for k := range 64 {
						reqs = append(reqs, benchRequest(i+k, n, 64))
					}
				}
				req := reqs[0]
				reqs = reqs[1:]
				i++
				b.StartTimer()
				t0 := time.Now()
				if _, err := cp.CommitFile(ctx, req); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
			reportQuantiles(b, lat, "commit")
		})
	}
	b.Run("impl=pebble-sync-set", func(b *testing.B) {
		db, err := pebble.Open(b.TempDir(), &pebble.Options{FS: vfs.Default})
		require.NoError(b, err)
		defer func() { _ = db.Close() }()
		var lat []time.Duration
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			t0 := time.Now()
			if err := db.Set(fmt.Appendf(nil, "k%09d", i), []byte("v"), pebble.Sync); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
			i++
		}
		reportQuantiles(b, lat, "commit")
	})
}

// BenchmarkFindBatches looks up a random offset in one partition of
// 1 million batches (built with 1000 commits of 1000 batches), beside the
// same lookup in a partition of 1000 batches in the same run.
func BenchmarkFindBatches(b *testing.B) {
	ctx := context.Background()
	for _, total := range []int{1000, 1_000_000} {
		b.Run(fmt.Sprintf("batches=%d", total), func(b *testing.B) {
			cp, err := Open(vfs.Default, b.TempDir(), Options{})
			require.NoError(b, err)
			defer func() { _ = cp.Close() }()
			require.NoError(b, cp.CreatePartitions(ctx, []wal.CreatePartitionsRequest{{TopicID: benchTopic, Topic: "bench", NumPartitions: 1}}))
			for i := range total / 1000 {
				if _, err := cp.CommitFile(ctx, benchRequest(i, 1000, 1)); err != nil {
					b.Fatal(err)
				}
			}
			tp := wal.TopicIDPartition{TopicID: benchTopic}
			var lat []time.Duration
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				off := int64((i * 7919) % total)
				i++
				t0 := time.Now()
				res, err := cp.FindBatches(ctx, wal.FindBatchesRequest{
					Partitions: []wal.FindPartition{{Partition: tp, Offset: off, MaxPartitionBytes: 1}}, MaxBytes: 1,
				})
				if err != nil || res[0].Err != nil || len(res[0].Batches) != 1 || res[0].Batches[0].BaseOffset != off {
					b.Fatal(err, res)
				}
				lat = append(lat, time.Since(t0))
			}
			reportQuantiles(b, lat, "find")
		})
	}
}

// BenchmarkLogInfo reads a partition's row (a broker asks on every
// fetch of a diskless partition and every tiering pass), beside a raw
// Pebble Get of one key of the same size range in the same run: the
// floor a LogInfo cannot go below.
func BenchmarkLogInfo(b *testing.B) {
	ctx := context.Background()
	b.Run("impl=pebblecp", func(b *testing.B) {
		cp, err := Open(vfs.Default, b.TempDir(), Options{})
		require.NoError(b, err)
		defer func() { _ = cp.Close() }()
		require.NoError(b, cp.CreatePartitions(ctx, []wal.CreatePartitionsRequest{{TopicID: benchTopic, Topic: "bench", NumPartitions: 64}}))
		for i := range 64 {
			_, err := cp.CommitFile(ctx, benchRequest(i, 64, 64))
			require.NoError(b, err)
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			tp := wal.TopicIDPartition{TopicID: benchTopic, Partition: int32(i % 64)}
			i++
			if info, err := cp.LogInfo(ctx, tp); err != nil || info.HighWatermark != 64 {
				b.Fatal(err, info)
			}
		}
	})
	b.Run("impl=pebble-get", func(b *testing.B) {
		db, err := pebble.Open(b.TempDir(), &pebble.Options{FS: vfs.Default, Logger: pebbleLogger{zap.NewNop().Sugar()}})
		require.NoError(b, err)
		defer func() { _ = db.Close() }()
		for i := range 64 {
			require.NoError(b, db.Set(fmt.Appendf(nil, "log/%02d", i), make([]byte, 64), pebble.Sync))
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			v, closer, err := db.Get(fmt.Appendf(nil, "log/%02d", i%64))
			if err != nil || len(v) != 64 {
				b.Fatal(err)
			}
			_ = closer.Close()
			i++
		}
	})
}
