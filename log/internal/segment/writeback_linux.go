package segment

import "syscall"

// startWriteback starts the writeback of the file's dirty pages in [off,
// off+n): sync_file_range(2) with SYNC_FILE_RANGE_WRITE alone, which
// queues the writes and does not wait for them (nor for writes already
// in flight, as SYNC_FILE_RANGE_WAIT_BEFORE would). It syncs no metadata
// and guarantees nothing about durability.
func startWriteback(fd uintptr, off, n int64) {
	const syncFileRangeWrite = 0x2 // SYNC_FILE_RANGE_WRITE
	_ = syscall.SyncFileRange(int(fd), off, n, syncFileRangeWrite)
}
