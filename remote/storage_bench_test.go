package remote

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/remote/objstore/fs"
)

// BenchmarkStorageCopy copies one 16 MiB segment into a mem store; the
// baseline Puts the same bytes as one object, so the difference is the
// data plane's own cost (checksum pass, indexes, manifest, compression).
func BenchmarkStorageCopy(b *testing.B) {
	const size = 16 << 20
	c := newTestCopy(storageTopic, 1, 0, size, true)
	b.Run("baseline-put", func(b *testing.B) {
		store := newMemStore()
		ctx := context.Background()
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			if err := store.Put(ctx, "segment", bytes.NewReader(c.src), size, objstore.PutOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, compression := range []bool{false, true} {
		b.Run(fmt.Sprintf("compression=%t", compression), func(b *testing.B) {
			store := newMemStore()
			s := newTestStorage(b, store, StorageOptions{Compression: compression})
			ctx := context.Background()
			b.SetBytes(size)
			b.ReportAllocs()
			for b.Loop() {
				// The same id each time: a retry overwrites, so memory stays flat.
				if _, err := s.CopySegment(ctx, &c.m, c.data); err != nil {
					b.Fatal(err)
				}
			}
			m := s.Metrics()
			b.ReportMetric(float64(m.BytesPut)/float64(m.SegmentsCopied)/size, "stored/raw")
		})
	}
}

// BenchmarkStorageFetchBatch reads a 16 KiB range (one fetch batch) at a
// random position of a 16 MiB remote segment, as a consumer reading below
// the local log start does. manifest=cold reads the manifest on every
// fetch (no cache); manifest=cached is a hot segment.
func BenchmarkStorageFetchBatch(b *testing.B) {
	const size, batch = 16 << 20, 16 << 10
	c := newTestCopy(storageTopic, 2, 0, size, false)
	for _, compression := range []bool{false, true} {
		for _, chunk := range []int{256 << 10, 1 << 20, 4 << 20} {
			for _, cold := range []bool{true, false} {
				name := fmt.Sprintf("compression=%t/chunk=%dKiB/manifest=%s", compression, chunk>>10, map[bool]string{true: "cold", false: "cached"}[cold])
				b.Run(name, func(b *testing.B) {
					ctx := context.Background()
					store := newMemStore()
					opts := StorageOptions{ChunkSize: chunk, Compression: compression}
					if _, err := newTestStorage(b, store, opts).CopySegment(ctx, &c.m, c.data); err != nil {
						b.Fatal(err)
					}
					if cold {
						opts.ManifestCacheEntries = -1
					}
					s := newTestStorage(b, store, opts)
					rng := rand.New(rand.NewPCG(1, 2))
					buf := make([]byte, batch)
					b.SetBytes(batch)
					b.ReportAllocs()
					for b.Loop() {
						body, err := s.FetchSegment(ctx, &c.m, rng.Int64N(size-batch), batch)
						if err != nil {
							b.Fatal(err)
						}
						if _, err := io.ReadFull(body, buf); err != nil {
							b.Fatal(err)
						}
						_ = body.Close()
					}
					m := s.Metrics()
					b.ReportMetric(float64(m.BytesFetched)/float64(b.N), "fetched-B/op")
				})
			}
		}
	}
}

// BenchmarkStorageCopyFS copies a 64 MiB segment from memory into the fs
// store with its default durability (each object fsynced before its Put
// returns), beside objstore.PutLarge of the same bytes into the same
// store: the copy's extra cost is its checksums and the indexes and
// manifest objects.
func BenchmarkStorageCopyFS(b *testing.B) {
	const size = 64 << 20
	c := newTestCopy(storageTopic, 1, 0, size, false)
	st, err := fs.Open(b.TempDir(), fs.Options{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.Run("raw-put", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			if err := objstore.PutLarge(ctx, st, "raw/segment", bytes.NewReader(c.src), size, objstore.MultipartOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("copy", func(b *testing.B) {
		s := newTestStorage(b, st, StorageOptions{})
		b.SetBytes(size)
		for b.Loop() {
			// The same id each time: a retry overwrites the same keys.
			if _, err := s.CopySegment(ctx, &c.m, c.data); err != nil {
				b.Fatal(err)
			}
		}
	})
}
