package logmanager

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// syncFileSystem runs syncfs(2) on the file system holding dir: every
// dirty page and inode of it, written by anyone, reaches the disk.
func syncFileSystem(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	for {
		_, _, errno := syscall.Syscall(sysSyncfs, f.Fd(), 0, 0)
		if errno != syscall.EINTR {
			if errno != 0 {
				err = errno
			}
			break
		}
	}
	if err != nil {
		return fmt.Errorf("syncfs %s: %w", dir, err)
	}
	return nil
}

// syncfsReportsErrors reports whether the running kernel's syncfs(2)
// returns writeback errors (Linux 5.8 and later); before, it returned 0
// after a failed writeback, and the fsync of each file must be used.
var syncfsReportsErrors = sync.OnceValue(func() bool {
	var u syscall.Utsname
	if err := syscall.Uname(&u); err != nil {
		return false
	}
	var release []byte
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		release = append(release, byte(c))
	}
	return kernelAtLeast(string(release), 5, 8)
})

// kernelAtLeast reports whether a release string ("6.1.0-13-amd64")
// names a kernel at least major.minor.
func kernelAtLeast(release string, major, minor int) bool {
	parts := strings.SplitN(release, ".", 3)
	if len(parts) < 2 {
		return false
	}
	digits := func(s string) string { return s[:len(s)-len(strings.TrimLeft(s, "0123456789"))] }
	maj, err1 := strconv.Atoi(digits(parts[0]))
	mnr, err2 := strconv.Atoi(digits(parts[1]))
	if err1 != nil || err2 != nil {
		return false
	}
	return maj > major || (maj == major && mnr >= minor)
}
