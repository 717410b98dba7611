package log

import (
	"os"
	"syscall"
)

func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }

// preallocateKeepSize reserves [off, off+n) of f without changing its
// size: fallocate(FALLOC_FL_KEEP_SIZE), what vfs.Default's Preallocate
// does.
func preallocateKeepSize(f *os.File, off, n int64) error {
	return syscall.Fallocate(int(f.Fd()), 1 /* FALLOC_FL_KEEP_SIZE */, off, n)
}
