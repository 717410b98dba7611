//go:build linux

package segment

import "golang.org/x/sys/unix"

const readvSupported = true

// preadv is one preadv(2) of fd at pos into bufs.
func preadv(fd uintptr, bufs [][]byte, pos int64) (int, error) {
	for {
		n, err := unix.Preadv(int(fd), bufs, pos)
		if err != unix.EINTR {
			return n, err
		}
	}
}
