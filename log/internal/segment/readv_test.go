//go:build linux

package segment

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/tierlog/tierlog/internal/harness/testseed"
)

// TestReadvAt: a vectored read gives the bytes ReadAt gives, split over
// any number of buffers (more than one preadv takes included), cut at the
// segment's end with io.EOF; on the real file system it issues no pread
// (one preadv per 1024 buffers), on MemFS it reads buffer by buffer.
func TestReadvAt(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Seed(t, 1), 4))
	tw := newTwins(t, Options{})
	for tw.mapped.Size() < 2<<20 {
		tw.appendRandom(t, rng)
	}
	size := tw.mapped.Size()
	preads := tw.fs.ReadAts.Load()
	for range 200 {
		off := rng.Int64N(size + 10)
		nbufs := 1 + rng.IntN(2500)
		bufs := make([][]byte, nbufs)
		want := 0
		for i := range bufs {
			bufs[i] = make([]byte, rng.IntN(600))
			want += len(bufs[i])
		}
		expect := make([]byte, max(0, min(int64(want), size-off)))
		if len(expect) > 0 {
			if _, err := tw.pread.ReadAt(expect, off); err != nil && !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
		}
		for _, s := range []*Segment{tw.mapped, tw.pread} {
			for i := range bufs {
				clear(bufs[i])
			}
			n, err := s.ReadvAt(bufs, off)
			switch {
			case want == 0:
				if n != 0 || err != nil {
					t.Fatalf("empty read at %d: %d, %v", off, n, err)
				}
				continue
			case n != len(expect):
				t.Fatalf("read of %d at %d of %d: n = %d, want %d (%v)", want, off, size, n, len(expect), err)
			case n < want && !errors.Is(err, io.EOF):
				t.Fatalf("read past the end at %d: %v, want io.EOF", off, err)
			case n == want && err != nil:
				t.Fatalf("read at %d: %v", off, err)
			}
			if got := bytes.Join(bufs, nil)[:n]; !bytes.Equal(got, expect) {
				t.Fatalf("read of %d bytes in %d buffers at %d differs from ReadAt", want, nbufs, off)
			}
		}
	}
	if n := tw.fs.ReadAts.Load(); n != preads {
		t.Fatalf("%d preads by vectored reads of the real file, want 0", n-preads)
	}
}
