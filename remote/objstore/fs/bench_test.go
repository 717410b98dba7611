package fs

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/remote/objstore"
)

var benchSizes = []int{1 << 20, 64 << 20}

func sizeName(n int) string { return fmt.Sprintf("size=%dMiB", n>>20) }

// BenchmarkPut compares a Put (temp file, fsync, rename, directory fsync)
// with os.WriteFile of the same bytes, with and without an fsync, in the
// same run.
func BenchmarkPut(b *testing.B) {
	ctx := context.Background()
	for _, size := range benchSizes {
		data := bytes.Repeat([]byte{0xa5}, size)
		b.Run(sizeName(size)+"/impl=fs", func(b *testing.B) {
			s, err := Open(b.TempDir(), Options{})
			require.NoError(b, err)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if err := s.Put(ctx, "t/p/seg.log", bytes.NewReader(data), int64(size), objstore.PutOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(sizeName(size)+"/impl=fs-nosync", func(b *testing.B) {
			s, err := Open(b.TempDir(), Options{NoSync: true})
			require.NoError(b, err)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if err := s.Put(ctx, "t/p/seg.log", bytes.NewReader(data), int64(size), objstore.PutOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(sizeName(size)+"/impl=os.WriteFile+fsync", func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "seg.log")
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				f, err := os.Create(path)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := f.Write(data); err != nil {
					b.Fatal(err)
				}
				if err := f.Sync(); err != nil {
					b.Fatal(err)
				}
				if err := f.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(sizeName(size)+"/impl=os.WriteFile", func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "seg.log")
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if err := os.WriteFile(path, data, 0o644); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGet compares ReadAll and a ranged ReadRange of the whole object
// with os.ReadFile.
func BenchmarkGet(b *testing.B) {
	ctx := context.Background()
	for _, size := range benchSizes {
		data := bytes.Repeat([]byte{0x5a}, size)
		dir := b.TempDir()
		s, err := Open(dir, Options{NoSync: true})
		require.NoError(b, err)
		require.NoError(b, s.Put(ctx, "t/p/seg.log", bytes.NewReader(data), int64(size), objstore.PutOptions{}))
		raw := filepath.Join(b.TempDir(), "seg.log")
		require.NoError(b, os.WriteFile(raw, data, 0o644))

		b.Run(sizeName(size)+"/impl=fs-ReadAll", func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				got, err := objstore.ReadAll(ctx, s, "t/p/seg.log")
				if err != nil || len(got) != size {
					b.Fatal(err, len(got))
				}
			}
		})
		b.Run(sizeName(size)+"/impl=fs-ReadRange", func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				got, err := objstore.ReadRange(ctx, s, "t/p/seg.log", 0, int64(size))
				if err != nil || len(got) != size {
					b.Fatal(err, len(got))
				}
			}
		})
		b.Run(sizeName(size)+"/impl=os.ReadFile", func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				got, err := os.ReadFile(raw)
				if err != nil || len(got) != size {
					b.Fatal(err, len(got))
				}
			}
		})
	}
}
