package s3_test

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/harness/s3test"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/remote/objstore"
)

// These benchmarks measure the remote tier's data plane against the real S3
// server, each beside the raw minio-go call that moves the same bytes (the
// remote tier's performance goals): a 64 MiB segment copy (goal: 0.9x of a
// direct multipart PUT) and a cold read of one 16 KiB fetch from a 64 MiB
// segment (goal: one ranged GET per chunk needed; here a cold read also
// fetches the manifest).

const tierSegmentBytes = 64 << 20

var tierTP = remote.TopicIDPartition{TopicID: remote.UUID{1, 2, 3}, Topic: "bench", Partition: 0}

func tierSegment(data []byte) (remote.SegmentMetadata, remote.SegmentData) {
	m := remote.SegmentMetadata{
		SegmentID: remote.NewSegmentID(tierTP), StartOffset: 0, EndOffset: 999,
		SegmentLeaderEpochs: []epochcache.Entry{{Epoch: 0, StartOffset: 0}},
		SizeBytes:           int64(len(data)), State: remote.CopySegmentStarted, TxnIndexEmpty: true,
	}
	d := remote.SegmentData{
		Log: bytes.NewReader(data), LogSize: int64(len(data)),
		OffsetIndex: make([]byte, 8<<10), TimeIndex: make([]byte, 12<<10),
		ProducerSnapshot: make([]byte, 64),
		LeaderEpochs:     []epochcache.Entry{{Epoch: 0, StartOffset: 0}},
	}
	return m, d
}

// BenchmarkTierCopy64MiB: remote.StorageManager.CopySegment of a 64 MiB
// segment (data object by multipart, indexes, manifest, checksums) beside
// minio-go's PutObject of the same bytes with the same part size and
// concurrency as the adapter's multipart default.
func BenchmarkTierCopy64MiB(b *testing.B) {
	srv := s3test.Start(b)
	ctx := context.Background()
	o := srv.StoreOptions(b)
	s := s3test.OpenStore(b, o)
	data := bytes.Repeat([]byte("tierlog-segment-"), tierSegmentBytes/16)
	sm, err := remote.NewStorageManager(s, remote.StorageOptions{})
	require.NoError(b, err)
	warm, d := tierSegment(data)
	_, err = sm.CopySegment(ctx, &warm, d)
	require.NoError(b, err)
	mo := objstore.MultipartOptions{}
	b.Run("storage-manager", func(b *testing.B) {
		b.SetBytes(tierSegmentBytes)
		b.ReportAllocs()
		for b.Loop() {
			m, d := tierSegment(data)
			_, err := sm.CopySegment(ctx, &m, d)
			require.NoError(b, err)
		}
	})
	b.Run("minio-go", func(b *testing.B) {
		c := rawClient(b, srv)
		b.SetBytes(tierSegmentBytes)
		b.ReportAllocs()
		for b.Loop() {
			_, err := c.PutObject(ctx, o.Bucket, "bench/minio-segment", bytes.NewReader(data), tierSegmentBytes,
				minio.PutObjectOptions{PartSize: uint64(max(mo.PartBytes, 16<<20)), NumThreads: 4})
			require.NoError(b, err)
		}
	})
}

// BenchmarkTierReadCold: one 16 KiB read at a random position of a 64 MiB
// remote segment through a StorageManager whose manifest cache is cold
// (a fresh one per read: the consumer's first fetch from a segment),
// beside minio-go's ranged GetObject of the same bytes. Reports p50 and
// p99 latency and the GETs per read.
func BenchmarkTierReadCold(b *testing.B) {
	const readBytes = 16 << 10
	srv := s3test.Start(b)
	ctx := context.Background()
	o := srv.StoreOptions(b)
	s := s3test.OpenStore(b, o)
	data := make([]byte, tierSegmentBytes)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	sm, err := remote.NewStorageManager(s, remote.StorageOptions{})
	require.NoError(b, err)
	m, d := tierSegment(data)
	_, err = sm.CopySegment(ctx, &m, d)
	require.NoError(b, err)
	c := rawClient(b, srv)
	_, err = c.PutObject(ctx, o.Bucket, "bench/raw-segment", bytes.NewReader(data), tierSegmentBytes, minio.PutObjectOptions{})
	require.NoError(b, err)
	buf := make([]byte, readBytes)

	report := func(b *testing.B, lat []time.Duration) {
		slices.Sort(lat)
		if len(lat) > 0 {
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		}
	}
	b.Run("storage-manager", func(b *testing.B) {
		b.SetBytes(readBytes)
		var lat []time.Duration
		var gets int64
		for b.Loop() {
			cold, err := remote.NewStorageManager(s, remote.StorageOptions{})
			require.NoError(b, err)
			pos := rng.Int64N(tierSegmentBytes - readBytes)
			start := time.Now()
			rc, err := cold.FetchSegment(ctx, &m, pos, readBytes)
			require.NoError(b, err)
			_, err = io.ReadFull(rc, buf)
			require.NoError(b, err)
			require.NoError(b, rc.Close())
			lat = append(lat, time.Since(start))
			require.Equal(b, data[pos:pos+readBytes], buf)
			gets += cold.Metrics().GetRequests
		}
		report(b, lat)
		b.ReportMetric(float64(gets)/float64(len(lat)), "gets/read")
	})
	b.Run("minio-go", func(b *testing.B) {
		b.SetBytes(readBytes)
		var lat []time.Duration
		for b.Loop() {
			pos := rng.Int64N(tierSegmentBytes - readBytes)
			start := time.Now()
			opts := minio.GetObjectOptions{}
			require.NoError(b, opts.SetRange(pos, pos+readBytes-1))
			obj, err := c.GetObject(ctx, o.Bucket, "bench/raw-segment", opts)
			require.NoError(b, err)
			_, err = io.ReadFull(obj, buf)
			require.NoError(b, err)
			require.NoError(b, obj.Close())
			lat = append(lat, time.Since(start))
		}
		report(b, lat)
		b.ReportMetric(1, "gets/read")
	})
}
