//go:build linux || darwin

package s3test

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// haveLock: lockFile excludes other processes (and other calls in this one:
// flock locks belong to the open file, not to the process).
const haveLock = true

// lockFile takes an exclusive flock on path, calling waiting first if
// another holder makes it wait. The lock goes with the process, so a
// builder that dies releases it.
func lockFile(path string, waiting func()) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	err = flock(f, syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		waiting()
		err = flock(f, syscall.LOCK_EX)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
