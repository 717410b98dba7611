//go:build linux || darwin || freebsd

package segment

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

// mapSupported: mappings of up to 2 GiB need a 64-bit address space.
const mapSupported = unsafe.Sizeof(uintptr(0)) == 8

// mmapFile maps n bytes of the file fd from position 0, read-only and
// shared (coherent with the writes to the file).
func mmapFile(fd uintptr, n int) ([]byte, error) {
	return syscall.Mmap(int(fd), 0, n, syscall.PROT_READ, syscall.MAP_SHARED)
}

func munmapFile(b []byte) error { return syscall.Munmap(b) }

// maxMappings is half of Linux's vm.max_map_count (16384 where it cannot
// be read).
func maxMappings() int64 {
	if b, err := os.ReadFile("/proc/sys/vm/max_map_count"); err == nil {
		if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n > 1 {
			return n / 2
		}
	}
	return 16384
}
