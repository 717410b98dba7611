//go:build !linux

package segment

// startWriteback is a no-op where sync_file_range(2) does not exist; the
// fsync of Flush writes everything.
func startWriteback(fd uintptr, off, n int64) {}
