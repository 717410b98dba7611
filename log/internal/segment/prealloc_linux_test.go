package segment

import (
	"os"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tierlog/tierlog/internal/countfs"
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

// TestPreallocateAndTrim on the real file system: Append reserves the
// .log ahead of its writes in steps (the file size stays at the data),
// and OnBecomeInactive and Close release the reservation.
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
			if st.Size() != size {
				t.Fatalf("file size %d, want the data's %d", st.Size(), size)
			}
			reserved := allocatedBytes(t, s.Path())
			if reserved < 64<<10 {
				t.Skipf("the file system did not preallocate (%d bytes allocated for %d)", reserved, size)
			}
			if end == "roll" {
				err = s.OnBecomeInactive()
			} else {
				err = s.Close()
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := allocatedBytes(t, s.Path()); got >= reserved || got > size+8<<10 {
				t.Fatalf("after %s: %d bytes allocated (%d before), want about the data's %d", end, got, reserved, size)
			}
			_ = s.Close()
		})
	}
}

// TestPreallocateSteps: reservations double from 64 KiB with the
// segment's size, up to the step, so a small segment reserves little and
// a large one makes one fallocate per step. A file that cannot be
// trimmed (here a wrapper without Truncate) is not preallocated.
func TestPreallocateSteps(t *testing.T) {
	fs := countfs.Wrap(vfs.Default)
	s, err := Create(vfs.Default, t.TempDir(), 0, 0, Options{PreallocateBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var got []int64
	prev := int64(0)
	for i := range 400 { // 400 x ~4 KiB: 1.6 MiB
		b := buildBatch(t, batchSpec{base: int64(i), last: int64(i), valueSize: 4000})
		if err := s.Append(int64(i), b); err != nil {
			t.Fatal(err)
		}
		if s.w.reserved != prev {
			got = append(got, s.w.reserved-prev)
			prev = s.w.reserved
		}
	}
	// 64 KiB, then about the size each time (64, 128, 256, 512 KiB),
	// then 1 MiB steps.
	want := []int64{64 << 10, 64 << 10, 128 << 10, 256 << 10, 512 << 10, 1 << 20}
	if len(got) != len(want) {
		t.Fatalf("reservations %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("reservations %v, want %v", got, want)
		}
	}
	u, err := Create(fs, t.TempDir(), 0, 0, Options{PreallocateBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	if err := u.Append(0, buildBatch(t, batchSpec{base: 0, last: 0, valueSize: 4000})); err != nil {
		t.Fatal(err)
	}
	if n := fs.Preallocates.Load(); n != 0 {
		t.Fatalf("%d preallocations of a file without Truncate", n)
	}
}
