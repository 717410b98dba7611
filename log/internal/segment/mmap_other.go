//go:build !(linux || darwin || freebsd)

package segment

import "errors"

// mapSupported is false: segments read with pread.
const mapSupported = false

func mmapFile(uintptr, int) ([]byte, error) { return nil, errors.ErrUnsupported }

func munmapFile([]byte) error { return nil }

func maxMappings() int64 { return 0 }
