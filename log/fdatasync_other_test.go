//go:build !linux

package log

import "os"

func fdatasync(f *os.File) error { return f.Sync() }

func preallocateKeepSize(*os.File, int64, int64) error { return nil }
