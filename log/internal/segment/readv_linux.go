//go:build linux

package segment

import (
	"syscall"
	"unsafe"
)

const readvSupported = true

// preadv is one preadv(2) of fd at pos into bufs (raw syscall: this
// package imports nothing beyond the standard library and pebble's vfs).
func preadv(fd uintptr, bufs [][]byte, pos int64) (int, error) {
	iov := make([]syscall.Iovec, 0, len(bufs))
	for _, b := range bufs {
		if len(b) > 0 {
			v := syscall.Iovec{Base: &b[0]}
			v.SetLen(len(b))
			iov = append(iov, v)
		}
	}
	if len(iov) == 0 {
		return 0, nil
	}
	// The kernel takes the position as two words, low then high; on a
	// 64-bit platform the high word is 0.
	const wordBits = 8 * unsafe.Sizeof(uintptr(0))
	lo, hi := uintptr(pos), uintptr(uint64(pos)>>(wordBits-1)>>1)
	for {
		n, _, errno := syscall.Syscall6(syscall.SYS_PREADV, fd, uintptr(unsafe.Pointer(&iov[0])), uintptr(len(iov)), lo, hi, 0)
		switch errno {
		case 0:
			return int(n), nil
		case syscall.EINTR:
			continue
		}
		return 0, errno
	}
}
