package segment

import (
	"bytes"
	"os"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tierlog/tierlog/internal/harness/countfs"
)

// allocatedBytes returns the disk space of path (st_blocks).
func allocatedBytes(t *testing.T, path string) int64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

// TestPreallocateAndTrim on the real file system: Append writes zeros
// ahead of its data (the file runs past the segment's size by a zero
// tail, reads never see it), and OnBecomeInactive and Close cut the tail:
// the file then ends at the last batch, with no space held past it.
func TestPreallocateAndTrim(t *testing.T) {
	dir := t.TempDir()
	for _, end := range []string{"roll", "close"} {
		t.Run(end, func(t *testing.T) {
			base := int64(0)
			if end == "close" {
				base = 1000
			}
			s, err := Create(vfs.Default, dir, base, 0, Options{PreallocateBytes: 1 << 20})
			if err != nil {
				t.Fatal(err)
			}
			var size int64
			var last []byte
			for i := range 8 {
				last = buildBatch(t, batchSpec{base: base + int64(i), last: base + int64(i), valueSize: 4000})
				size += int64(len(last))
				if err := s.Append(base+int64(i), bytes.Clone(last)); err != nil {
					t.Fatal(err)
				}
			}
			st, err := os.Stat(s.Path())
			if err != nil {
				t.Fatal(err)
			}
			if s.Size() != size || st.Size() <= size {
				t.Fatalf("segment size %d, file size %d; want %d and a zero tail", s.Size(), st.Size(), size)
			}
			tail := make([]byte, st.Size()-size)
			if _, err := s.File().ReadAt(tail, size); err != nil || !bytes.Equal(tail, make([]byte, len(tail))) {
				t.Fatalf("the tail past the data is not zeros (%v)", err)
			}
			if res, err := s.Read(nil, base+7, 1<<20, -1, true); err != nil || !bytes.Equal(res.Data, last) {
				t.Fatalf("read of the last batch: %d bytes, %v", len(res.Data), err)
			}
			endAndCheckTrimmed(t, s, end, size)
		})
	}
}

// TestPreallocateSteps: a reservation is made when an append reaches past
// the zeros, and reaches min(PreallocateBytes, max(64 KiB, end)) past the
// append's end: steps double with the segment, so a small segment (a new
// partition) holds little unused space. A file that cannot be trimmed
// (here a wrapper without Truncate) is not preallocated.
func TestPreallocateSteps(t *testing.T) {
	const step = 1 << 20
	s, err := Create(vfs.Default, t.TempDir(), 0, 0, Options{PreallocateBytes: step})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	reservations := 0
	for i := range 400 { // 400 x ~4 KiB: 1.6 MiB
		before := s.w.reserved
		b := buildBatch(t, batchSpec{base: int64(i), last: int64(i), valueSize: 4000})
		if err := s.Append(int64(i), b); err != nil {
			t.Fatal(err)
		}
		end := s.Size()
		if s.w.reserved == before {
			if end > before {
				t.Fatalf("append %d ends at %d past the reservation %d", i, end, before)
			}
			continue
		}
		reservations++
		if want := end + min(step, max(64<<10, end)); s.w.reserved != want {
			t.Fatalf("append %d to %d: reserved up to %d, want %d", i, end, s.w.reserved, want)
		}
	}
	if reservations > 6 {
		t.Fatalf("%d reservations for 1.6 MiB, want at most 6", reservations)
	}
	fs := countfs.Wrap(vfs.Default)
	u, err := Create(fs, t.TempDir(), 0, 0, Options{PreallocateBytes: step})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	writes := fs.Writes.Load()
	if err := u.Append(0, buildBatch(t, batchSpec{base: 0, last: 0, valueSize: 4000})); err != nil {
		t.Fatal(err)
	}
	if n := fs.Writes.Load() - writes; n != 1 {
		t.Fatalf("%d writes for one append to a file without Truncate, want 1 (no zeros)", n)
	}
}

// TestAllocateOnly on the real file system: with AllocateOnly the blocks
// ahead of the appends are reserved by fallocate while the file's size
// stays the segment's (no zero tail: the .log is Kafka's format byte for
// byte at every moment), and OnBecomeInactive and Close release the
// blocks past the data.
func TestAllocateOnly(t *testing.T) {
	dir := t.TempDir()
	for _, end := range []string{"roll", "close"} {
		t.Run(end, func(t *testing.T) {
			base := int64(0)
			if end == "close" {
				base = 1000
			}
			s, err := Create(vfs.Default, dir, base, 0, Options{PreallocateBytes: 1 << 20, AllocateOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			var size int64
			for i := range 8 {
				b := buildBatch(t, batchSpec{base: base + int64(i), last: base + int64(i), valueSize: 4000})
				size += int64(len(b))
				if err := s.Append(base+int64(i), b); err != nil {
					t.Fatal(err)
				}
			}
			st, err := os.Stat(s.Path())
			if err != nil {
				t.Fatal(err)
			}
			if s.Size() != size || st.Size() != size {
				t.Fatalf("segment size %d, file size %d; want both %d", s.Size(), st.Size(), size)
			}
			if got := allocatedBytes(t, s.Path()); got < size+16<<10 {
				t.Fatalf("%d bytes allocated for %d of data: nothing reserved ahead", got, size)
			}
			endAndCheckTrimmed(t, s, end, size)
		})
	}
}

// endAndCheckTrimmed ends the active segment s by a roll or a close (end)
// and checks that what was reserved or written ahead is gone: the file
// is the data's size and holds about that many blocks.
func endAndCheckTrimmed(t *testing.T, s *Segment, end string, size int64) {
	t.Helper()
	var err error
	if end == "roll" {
		err = s.OnBecomeInactive()
	} else {
		err = s.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(s.Path()); err != nil || st.Size() != size {
		t.Fatalf("after %s: file size %d (%v), want the data's %d", end, st.Size(), err, size)
	}
	if got := allocatedBytes(t, s.Path()); got > size+8<<10 {
		t.Fatalf("after %s: %d bytes allocated, want about the data's %d", end, got, size)
	}
	_ = s.Close()
}
