package segment

import (
	"encoding/binary"
	"errors"
	"io"
	iofs "io/fs"
	"math"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Entry sizes of the two index formats (Kafka's).
const (
	offsetEntrySize = 8  // relativeOffset int32 | position int32
	timeEntrySize   = 12 // timestamp int64 | relativeOffset int32
)

// maxRelativeOffset is the largest offset - base an index entry can hold.
const maxRelativeOffset = math.MaxInt32

// noTimestamp is Kafka's RecordBatch.NO_TIMESTAMP: a batch or time-index
// lookup without a timestamp.
const noTimestamp int64 = -1

// preallocChunkBytes is how much file space an index reserves ahead of its
// writes. Kafka preallocates the whole segment.index.bytes file and trims
// it when the segment becomes inactive; vfs.File has no truncate, and on
// Linux Preallocate is fallocate(FALLOC_FL_KEEP_SIZE), whose blocks past
// the end of file stay allocated until a truncate that never comes. So we
// reserve in bounded steps: the file size always equals the entries
// written, and at most one step of reserved space outlives the segment.
const preallocChunkBytes = 64 << 10

// index is the in-memory image of one index file (offset or time index)
// and the state of that file. Entries are kept encoded exactly as on disk,
// so writing the file is a copy and loading it is a validation.
//
// Concurrency: lookups (readers, any goroutine) take mu for reading;
// appends (the segment's single writer) take it for writing, for the few
// nanoseconds an in-memory append takes. The file is written only by the
// writer, at Flush, OnBecomeInactive and Close, never with mu held for
// writing: readers never wait for I/O, except for the one-time load of
// the file, which every lookup needs anyway.
type index struct {
	path      string
	entrySize int
	// capacity is the number of entries the index holds (MaxIndexBytes /
	// entrySize).
	capacity int

	// loaded is set once mu.entries holds the index; it never goes back.
	// Race-free because it is stored with mu held after entries are set,
	// and a reader that sees true then takes mu to read entries.
	loaded atomic.Bool

	mu struct {
		sync.RWMutex
		// entries holds n*entrySize bytes in file format.
		entries []byte
		// fileLen is how many bytes of entries the file holds: the prefix
		// entries[:fileLen] is on disk (maybe not yet synced),
		// entries[fileLen:] is pending.
		fileLen int
		// fileStale is set when the file does not hold entries[:fileLen]
		// (it was rebuilt from the .log, or a write to it failed): the
		// next write replaces the whole file.
		fileStale bool
	}

	// Writer-only state: touched only by the segment's single writer.
	w struct {
		// file is the open handle appends go to, nil until the first
		// write and after the segment becomes inactive.
		file vfs.File
		// reserved is how far the file is preallocated.
		reserved int64
		// scratch holds pending entries while they are written: a
		// vfs.File may modify the slice given to Write, so the live
		// entries are never passed to it.
		scratch []byte
	}
}

func (x *index) init(path string, entrySize, maxIndexBytes int) {
	x.path = path
	x.entrySize = entrySize
	x.capacity = maxIndexBytes / entrySize
}

// entriesCount returns the number of entries. REQUIRES: loaded.
func (x *index) entriesCount() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.mu.entries) / x.entrySize
}

// install replaces the entries with a loaded or rebuilt set. fileLen is
// how much of it the file holds; stale says the file holds something else.
func (x *index) install(entries []byte, fileLen int, stale bool) {
	x.mu.Lock()
	x.mu.entries = entries
	x.mu.fileLen = fileLen
	x.mu.fileStale = stale
	x.mu.Unlock()
	x.loaded.Store(true)
}

// readFile reads the whole index file. A missing file returns
// errMissingIndex. A torn trailing partial entry (a crash mid-write) is
// dropped and reported through torn; the next append overwrites it.
func (x *index) readFile(fs vfs.FS) (entries []byte, torn bool, err error) {
	f, err := fs.Open(x.path)
	if err != nil {
		if isNotExist(err) {
			return nil, false, errMissingIndex
		}
		return nil, false, ioErr("open", x.path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, false, ioErr("stat", x.path, err)
	}
	size := st.Size()
	if size > int64(x.capacity)*int64(x.entrySize)+int64(x.entrySize) || size > math.MaxInt32 {
		// Larger than any index we write: garbage. Rebuilding costs less
		// than reading it.
		return nil, true, errBadIndex
	}
	buf := make([]byte, size)
	if n, err := f.ReadAt(buf, 0); n < len(buf) {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, false, ioErr("read", x.path, err)
	}
	whole := len(buf) / x.entrySize * x.entrySize
	return buf[:whole], whole != len(buf), nil
}

// errBadIndex is internal: an index file that fails validation is rebuilt,
// never returned as an error.
var errBadIndex = corruptionf("", 0, "bad index file")

// errMissingIndex is internal: a missing index file is rebuilt (or, for
// an empty .log, is an empty index).
var errMissingIndex = corruptionf("", 0, "missing index file")

// writePending appends the pending entries to the file and, if sync,
// fsyncs it. A stale file is replaced whole (write temp, fsync, rename;
// the caller fsyncs the directory if replaced is true).
//
// REQUIRES: the segment's writer. mu is taken only to copy the pending
// bytes and to record the new fileLen.
func (x *index) writePending(fs vfs.FS, sync bool) (replaced bool, err error) {
	if !x.loaded.Load() {
		return false, nil // never loaded: nothing was appended
	}
	x.mu.RLock()
	stale, fileLen, total := x.mu.fileStale, x.mu.fileLen, len(x.mu.entries)
	if stale {
		fileLen = 0
	}
	x.w.scratch = append(x.w.scratch[:0], x.mu.entries[fileLen:]...)
	x.mu.RUnlock()

	if stale {
		if err := x.closeFile(); err != nil {
			return false, err
		}
		if err := writeFileAtomic(fs, x.path, x.w.scratch); err != nil {
			return false, err
		}
		x.mu.Lock()
		x.mu.fileLen, x.mu.fileStale = total, false
		x.mu.Unlock()
		return true, nil
	}
	if len(x.w.scratch) > 0 {
		opened, err := x.openFile(fs)
		if err != nil {
			return false, err
		}
		// A handle opened now may have created the file: the caller
		// fsyncs the directory.
		replaced = opened
		x.reserve(int64(total))
		if _, err := x.w.file.WriteAt(x.w.scratch, int64(fileLen)); err != nil {
			x.markStale()
			return false, ioErr("write", x.path, err)
		}
		x.mu.Lock()
		x.mu.fileLen = total
		x.mu.Unlock()
	}
	if sync && x.w.file != nil {
		if err := x.w.file.Sync(); err != nil {
			// After a failed fsync the file's contents are unknown
			// (the kernel may have dropped the dirty pages): rewrite it.
			x.markStale()
			return false, ioErr("sync", x.path, err)
		}
	}
	return replaced, nil
}

func (x *index) markStale() {
	x.mu.Lock()
	x.mu.fileStale = true
	x.mu.Unlock()
}

// openFile opens the append handle if it is not open. The file is opened,
// not created: it may hold entries already (a reopened active segment).
func (x *index) openFile(fs vfs.FS) (opened bool, err error) {
	if x.w.file != nil {
		return false, nil
	}
	f, err := fs.OpenReadWrite(x.path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return false, ioErr("open", x.path, err)
	}
	x.w.file, x.w.reserved = f, 0
	return true, nil
}

// reserve preallocates file space ahead of the entries, in bounded steps
// (see preallocChunkBytes). Errors are ignored: Preallocate is advisory
// (vfs implementations may do nothing, some file systems refuse
// fallocate), and a real lack of space fails the write that follows.
func (x *index) reserve(upTo int64) {
	if upTo <= x.w.reserved {
		return
	}
	limit := int64(x.capacity * x.entrySize)
	n := min(max(upTo-x.w.reserved, preallocChunkBytes), limit-x.w.reserved)
	if n > 0 {
		_ = x.w.file.Preallocate(x.w.reserved, n)
	}
	x.w.reserved += max(n, 0)
}

// closeFile closes the append handle if it is open.
func (x *index) closeFile() error {
	if x.w.file == nil {
		return nil
	}
	err := x.w.file.Close()
	x.w.file = nil
	return ioErr("close", x.path, err)
}

// search returns the number of entries whose key is <= target, for keys
// non-decreasing in entry order: the index of the floor entry plus one.
// key decodes entry i.
//
// REQUIRES: mu held (read or write).
func searchEntries(entries []byte, entrySize int, target int64, key func(e []byte) int64) int {
	lo, hi := 0, len(entries)/entrySize
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if key(entries[mid*entrySize:]) <= target {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

func be32(b []byte) int64 { return int64(int32(binary.BigEndian.Uint32(b))) }
func be64(b []byte) int64 { return int64(binary.BigEndian.Uint64(b)) }

// isNotExist reports whether err says a file does not exist.
func isNotExist(err error) bool { return errors.Is(err, iofs.ErrNotExist) }
