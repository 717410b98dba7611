//go:build !linux

package segment

// readvSupported is false: ReadvAt reads buffer by buffer.
const readvSupported = false

func preadv(fd uintptr, bufs [][]byte, pos int64) (int, error) {
	panic("segment: preadv without readvSupported")
}
