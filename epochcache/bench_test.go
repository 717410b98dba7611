package epochcache

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

var benchSizes = []int{10, 1000, 100000}

// benchCache returns an in-memory cache of n epochs 0, 2, 4, ... starting
// at offsets 0, 100, 200, ...
func benchCache(b *testing.B, n int) *Cache {
	c := New()
	entries := make([]Entry, n)
	for i := range entries {
		entries[i] = Entry{Epoch: int32(2 * i), StartOffset: int64(100 * i)}
	}
	if err := c.AssignAll(entries); err != nil {
		b.Fatal(err)
	}
	return c
}

func BenchmarkEndOffsetFor(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("epochs=%d", n), func(b *testing.B) {
			c := benchCache(b, n)
			rng := rand.New(rand.NewPCG(1, 2))
			queries := make([]int32, 1024)
			for i := range queries {
				queries[i] = rng.Int32N(int32(2*n + 1))
			}
			leo := int64(100 * n)
			var sink int64
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				ans := c.EndOffsetFor(queries[i&1023], leo)
				e, o := ans.Epoch, ans.EndOffset
				sink += int64(e) + o
			}
			_ = sink
		})
	}
}

func BenchmarkEpochForOffset(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("epochs=%d", n), func(b *testing.B) {
			c := benchCache(b, n)
			rng := rand.New(rand.NewPCG(1, 2))
			queries := make([]int64, 1024)
			for i := range queries {
				queries[i] = rng.Int64N(int64(100 * n))
			}
			var sink int32
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				e, _ := c.EpochForOffset(queries[i&1023])
				sink += e
			}
			_ = sink
		})
	}
}

// BenchmarkAssign alternates between adding epoch n at the end of an
// n-entry cache and removing it again by assigning epoch n-1 at its old
// start offset, so every iteration is a change and the size stays fixed.
func BenchmarkAssign(b *testing.B) {
	const n = 100
	run := func(b *testing.B, c *Cache) {
		entries := make([]Entry, n)
		for i := range entries {
			entries[i] = Entry{Epoch: int32(i), StartOffset: int64(10 * i)}
		}
		if err := c.AssignAll(entries); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			var err error
			if i%2 == 0 {
				_, err = c.Assign(n, 10*n)
			} else {
				_, err = c.Assign(n-1, 10*(n-1))
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("in-memory", func(b *testing.B) { run(b, New()) })
	b.Run("checkpoint=vfs.NewMem", func(b *testing.B) {
		mem := vfs.NewMem()
		if err := mem.MkdirAll(testDir, 0o755); err != nil {
			b.Fatal(err)
		}
		c, err := Open(mem, testPath)
		if err != nil {
			b.Fatal(err)
		}
		run(b, c)
	})
}
