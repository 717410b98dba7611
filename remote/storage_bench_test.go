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

// BenchmarkStorageRead16KiB reads 16 KiB at random positions of a 64 MiB
// segment copied with the default options (layout version 3), beside one
// ranged Get of the same bytes from a plain object in the same store:
//
//   - raw-get: the plain object, one ranged Get;
//   - located-cold: a new StorageManager per read, the locator in the
//     metadata (what a broker's copy task stores): one Get, no manifest;
//   - manifest-cold: a new StorageManager per read, metadata without the
//     locator: the manifest's Get and the data's beside it;
//   - warm: one StorageManager, the layout cached.
//
// gets/op and fetched-B/op count what each read cost; fetched÷requested
// is fetched-B/op over 16 KiB.
func BenchmarkStorageRead16KiB(b *testing.B) {
	const size, batch = 64 << 20, 16 << 10
	c := newTestCopy(storageTopic, 2, 0, size, false)
	for _, storeName := range []string{"mem", "fs"} {
		ctx := context.Background()
		var store objstore.Store = newMemStore()
		if storeName == "fs" {
			st, err := fs.Open(b.TempDir(), fs.Options{NoSync: true})
			if err != nil {
				b.Fatal(err)
			}
			store = st
		}
		counted := &countingStore{Store: store}
		custom, err := newTestStorage(b, store, StorageOptions{}).CopySegment(ctx, &c.m, c.data)
		if err != nil {
			b.Fatal(err)
		}
		located := c.m
		located.CustomMetadata = custom
		if err := objstore.PutLarge(ctx, store, "raw/segment", bytes.NewReader(c.src), size, objstore.MultipartOptions{}); err != nil {
			b.Fatal(err)
		}
		warm := newTestStorage(b, counted, StorageOptions{})
		for _, mode := range []string{"raw-get", "located-cold", "manifest-cold", "warm"} {
			b.Run(fmt.Sprintf("store=%s/%s", storeName, mode), func(b *testing.B) {
				rng := rand.New(rand.NewPCG(1, 2))
				buf := make([]byte, batch)
				gets0, bytes0 := counted.gets.Load(), counted.bytes.Load()
				b.SetBytes(batch)
				b.ReportAllocs()
				for b.Loop() {
					pos := rng.Int64N(size - batch)
					var body io.ReadCloser
					var err error
					switch mode {
					case "raw-get":
						body, err = counted.Get(ctx, "raw/segment", pos, batch)
					case "located-cold":
						body, err = newTestStorage(b, counted, StorageOptions{}).FetchSegment(ctx, &located, pos, batch)
					case "manifest-cold":
						body, err = newTestStorage(b, counted, StorageOptions{}).FetchSegment(ctx, &c.m, pos, batch)
					default:
						body, err = warm.FetchSegment(ctx, &located, pos, batch)
					}
					if err != nil {
						b.Fatal(err)
					}
					if _, err := io.ReadFull(body, buf); err != nil {
						b.Fatal(err)
					}
					_ = body.Close()
				}
				n := float64(b.N)
				fetched := float64(counted.bytes.Load()-bytes0) / n
				b.ReportMetric(float64(counted.gets.Load()-gets0)/n, "gets/op")
				b.ReportMetric(fetched, "fetched-B/op")
				b.ReportMetric(fetched/batch, "fetched÷requested")
			})
		}
	}
}
