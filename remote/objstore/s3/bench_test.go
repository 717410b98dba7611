package s3_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/internal/harness/s3test"
	"github.com/tierlog/tierlog/remote/objstore"
)

// BenchmarkPut64MiB uploads a 64 MiB segment through the adapter
// (PutLarge: multipart, 16 MiB parts, 4 at a time) and with minio-go
// directly with the same part size and concurrency, against the same
// server, side by side. The goal: the adapter at 0.9x or better.
func BenchmarkPut64MiB(b *testing.B) {
	const size = 64 << 20
	const partBytes = 16 << 20
	const concurrency = 4
	srv := s3test.Start(b)
	ctx := context.Background()
	o := srv.StoreOptions(b)
	s := s3test.OpenStore(b, o)
	data := bytes.Repeat([]byte("tierlog-segment-"), size/16)
	// A warm-up upload, so the first sub-benchmark does not pay for a cold
	// server (the two otherwise differ by run order more than by client).
	require.NoError(b, objstore.PutLarge(ctx, s, "bench/warm-up", bytes.NewReader(data), size, objstore.MultipartOptions{}))

	b.Run("adapter", func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			err := objstore.PutLarge(ctx, s, "bench/adapter", bytes.NewReader(data), size,
				objstore.MultipartOptions{PartBytes: partBytes, Concurrency: concurrency})
			require.NoError(b, err)
		}
	})
	b.Run("minio-go", func(b *testing.B) {
		c := rawClient(b, srv)
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			_, err := c.PutObject(ctx, o.Bucket, "bench/minio", bytes.NewReader(data), size,
				minio.PutObjectOptions{PartSize: partBytes, NumThreads: concurrency})
			require.NoError(b, err)
		}
	})
}
