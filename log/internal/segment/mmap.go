package segment

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// This file is the read-only memory mapping of the .log (Options.MapReads):
// reads copy from it where its pages are warm (warm.go: read before and
// touched by the background warmer; elsewhere they pread), or return
// slices of it (Mapped), so a repeated point read makes no system call.
//
// Lifetime. A segment maps its .log lazily, on the first read that needs
// bytes the current mapping does not cover, with a length of the next
// power of two at or above the published size (at least minMapBytes).
// When appends fill three quarters of it, the writer maps the file again,
// twice as long (growMappingAhead; a read past it would too); the older
// mapping is kept, because readers may still hold slices
// of it, so an active segment holds a few mappings whose lengths add up
// to less than twice its final size, all unmapped together by Close.
// Close runs once no reader holds the segment (the log refcounts its
// views), which is the only place mappings are unmapped: a slice from
// Mapped stays valid until then, whatever happens to the files.
//
// Why a mapping never faults on bytes a reader may see. Pages of a shared
// mapping past the end of the file fault (SIGBUS), so the mapping may be
// read only below the file size. Readers never read at or past the
// published size, and the file is never shorter than that size: appends
// write before they publish; the zero tail's trim (trimLog, at roll and
// close) cuts to the size, never below it; a truncation or a recovery cut
// writes a new file and renames it over (rewrite), so this object's
// mapping keeps the old inode, whole, until Close; a deleted segment's
// inode lives while it is mapped. Pages between the size and the length
// are never touched. A mapping is coherent with the writes to the file
// (one page cache), so the active segment is read through it as it
// grows; the size is published after the write, so a reader that loaded
// it sees the bytes below it.
//
// What is left: a file shortened by someone else (an operator's
// truncate) or a page the disk cannot return. Reads in this package copy
// under debug.SetPanicOnFault, so such a fault is an I/O error, as a
// pread's EIO would be; a caller of Mapped reads outside that guard.

// minMapBytes is the length of a segment's first mapping at least.
const minMapBytes = 1 << 20

// mapState is a segment's mapping. cur is read without a lock on every
// read; mu serializes mapping, growth and unmapping (a leaf: the mmap and
// munmap system calls run under it, no file I/O).
type mapState struct {
	cur atomic.Pointer[mapping]
	// warmMu is held by the warmer while it touches a chunk and by unmap,
	// so a mapping is never unmapped under the warmer's touches; growth
	// does not take it, so readers that map never wait for a touch.
	// Order: warmMu -> mu.
	warmMu sync.Mutex
	mu     struct {
		sync.Mutex
		old []*mapping // superseded by a longer mapping, unmapped by Close
		off bool       // no (more) mapping: unsupported, failed or closed
	}
}

// mapping is one mmap of the .log from position 0, with the state of
// each of its chunks (see warm.go).
type mapping struct {
	data   []byte
	chunks []atomic.Uint32 // per chunk: its state and page bits (warm.go)
}

// mapped returns the mapping if it covers [0, end), mapping or growing
// it when needed, or nil (reads then use pread). end must not exceed the
// published size.
func (s *Segment) mapped(end int64) *mapping {
	if !s.opts.MapReads {
		return nil
	}
	if m := s.mm.cur.Load(); m != nil && int64(len(m.data)) >= end {
		return m
	}
	return s.growMapping(end)
}

// mappedBytes is mapped's bytes, or nil.
func (s *Segment) mappedBytes(end int64) []byte {
	if m := s.mapped(end); m != nil {
		return m.data
	}
	return nil
}

// growMapping maps the .log with a length covering end. A failed mmap
// (or an exhausted process budget, see mapBudget) turns mapping off for
// this segment: its reads use pread from then on. The new mapping
// starts with every chunk cold, except that chunks readers already
// read through pread (seen, queued or warm in the older mapping) start
// seen, so the next read of them queues their warming.
func (s *Segment) growMapping(end int64) *mapping {
	s.mm.mu.Lock()
	defer s.mm.mu.Unlock()
	if s.mm.mu.off || s.closed.Load() {
		return nil
	}
	cur := s.mm.cur.Load()
	if cur != nil && int64(len(cur.data)) >= end {
		return cur
	}
	fd := s.logFile.Fd()
	if fd == vfs.InvalidFd || !mapSupported {
		s.mm.mu.off = true
		return nil
	}
	// The whole published size at least: a segment that no longer grows
	// (rolled, reopened) is mapped once, whichever read comes first.
	n := mapLength(max(end, s.size.Load()))
	if !mapBudget.acquire() {
		s.mm.mu.off = true
		return nil
	}
	data, err := mmapFile(fd, n)
	if err != nil {
		mapBudget.release(1)
		s.mm.mu.off = true
		return nil
	}
	m := newMapping(data)
	if cur != nil {
		m.inherit(cur)
		s.mm.mu.old = append(s.mm.mu.old, cur)
	}
	s.mm.cur.Store(m)
	return m
}

// growMappingAhead maps the .log twice as long as its current mapping
// once the appends have filled three quarters of it, so that readers at
// the tail find the bytes mapped and never wait for an mmap (which, on a
// loaded machine, can take milliseconds). Only a segment that readers
// already mapped. Called by the writer after an append.
func (s *Segment) growMappingAhead(size int64) {
	if !s.opts.MapReads {
		return
	}
	m := s.mm.cur.Load()
	if m == nil || size <= int64(len(m.data))/4*3 {
		return
	}
	if next := int64(len(m.data)) + 1; mapLength(next) > len(m.data) {
		s.growMapping(next)
	}
}

// mapLength is the length of a mapping that covers end: the next power
// of two, at least minMapBytes, at most what a segment can hold.
func mapLength(end int64) int {
	n := int64(minMapBytes)
	if end > n {
		n = int64(1) << bits.Len64(uint64(end-1))
	}
	return int(min(n, int64(math.MaxInt32)+1))
}

// unmap releases every mapping of the segment; mapping stays off. Called
// by Close, when no reader holds the segment.
func (s *Segment) unmap() error {
	s.mm.warmMu.Lock()
	defer s.mm.warmMu.Unlock()
	s.mm.mu.Lock()
	defer s.mm.mu.Unlock()
	s.mm.mu.off = true
	all := s.mm.mu.old
	if cur := s.mm.cur.Load(); cur != nil {
		all = append(all, cur)
	}
	s.mm.cur.Store(nil)
	s.mm.mu.old = nil
	var errs []error
	for _, m := range all {
		if err := munmapFile(m.data); err != nil {
			errs = append(errs, ioErr("munmap", s.logPath, err))
		}
	}
	mapBudget.release(int64(len(all)))
	return errors.Join(errs...)
}

// Mapped returns the .log bytes [pos, pos+n) as a slice of the segment's
// read-only mapping, or nil when the segment is not mapped (Options.MapReads
// off, an FS without descriptors, a failed mmap) or the range is not below
// the published size. The slice stays valid until Close: the caller must
// keep the segment open while it uses it (the log pins it in a view) and
// must not write to it (a write faults). Unlike Read's copy, a read of it
// that the file system cannot serve is a fault the caller does not see as
// an error (see debug.SetPanicOnFault).
func (s *Segment) Mapped(pos, n int64) []byte {
	if s.closed.Load() || pos < 0 || n < 0 || pos+n > s.size.Load() {
		return nil
	}
	m := s.mappedBytes(pos + n)
	if m == nil {
		return nil
	}
	return m[pos : pos+n : pos+n]
}

// mapCopyMaxBytes is the largest read readBytes copies from the mapping;
// a larger one is a pread. A copy from the mapping saves the system call
// (about a microsecond), but only where the pages are already mapped and
// touched (warm, see warm.go); a large read is mostly the copy, which
// pread does as fast: so the mapping serves point reads and headers,
// pread the fetches of many batches. A variable for tests.
var mapCopyMaxBytes = 128 << 10

// readBytes fills p from the .log at pos: a copy from the mapping when
// there is one, p is at most mapCopyMaxBytes and every chunk it covers is
// warm; else one pread (and the read is counted towards warming the
// chunks, noteColdRead). The bytes must lie below the published size; a
// range that does not (a bug) is read with pread, which reports it,
// rather than from pages that may lie past the end of the file.
func (s *Segment) readBytes(p []byte, pos int64) error {
	end := pos + int64(len(p))
	if size := s.size.Load(); pos >= 0 && end <= size && len(p) <= mapCopyMaxBytes {
		if m := s.mapped(end); m != nil {
			if !coldReadsPread || m.warm(pos, end) {
				return s.copyMapped(p, m.data, pos)
			}
			s.noteColdRead(m, pos, end, size)
		}
	}
	return s.readAt(p, pos)
}

// copyMapped copies m[pos:] into p under faultGuard.
func (s *Segment) copyMapped(p, m []byte, pos int64) error {
	return faultGuard(s.logPath, pos, func() error {
		copy(p, m[pos:])
		return nil
	})
}

// faultGuard runs f, which reads a mapping of the file at path from
// position pos on, with faults turned into panics, and returns such a
// fault as an I/O error: a page the file no longer has (or the disk
// cannot return) is then an error, as a pread's EIO would be, instead of
// a crash of the process. Panics that are not faults pass through.
func faultGuard(path string, pos int64, f func() error) (err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			if _, ok := r.(interface{ Addr() uintptr }); !ok {
				panic(r)
			}
			err = ioErr("read", path, fmt.Errorf("fault reading the mapping at or after %d: %v", pos, r))
		}
	}()
	return f()
}

// headerAt reads the header of the batch at pos (see readHeader) through
// readBytes: from the mapping when there is one.
func (s *Segment) headerAt(pos, end int64, buf *headerBuf) (batchHeader, bool, error) {
	if end-pos < int64(len(buf)) {
		return batchHeader{}, false, nil
	}
	if err := s.readBytes(buf[:], pos); err != nil {
		return batchHeader{}, false, err
	}
	return parseHeader(buf[:], s.logPath, pos, end)
}

// IsMapped reports whether the segment currently reads through a
// mapping (for tests and metrics).
func (s *Segment) IsMapped() bool { return s.mm.cur.Load() != nil }

// mapBudget bounds the mappings the process holds. Every mapping is an
// entry of the kernel's per-process map table (vm.max_map_count, 65530 by
// default), which the Go runtime's own heap mappings need too: running
// out would fail an allocation, not a read. Half the table is ours at
// most; past it, new segments read with pread.
var mapBudget = budget{}

type budget struct {
	once  sync.Once
	limit int64
	used  atomic.Int64
}

func (b *budget) acquire() bool {
	b.once.Do(func() { b.limit = maxMappings() })
	if b.used.Add(1) > b.limit {
		b.used.Add(-1)
		return false
	}
	return true
}

func (b *budget) release(n int64) { b.used.Add(-n) }
