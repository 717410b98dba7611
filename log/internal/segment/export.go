package segment

import (
	"io"
	"slices"
)

// This file exposes a segment's bytes whole, for a copy to remote storage
// (KIP-405's RemoteStorageManager.copyLogSegmentData: the .log file and
// both indexes are uploaded as they are). Safe for concurrent use with the
// writer, like Read.

// ReadAt reads the .log bytes [off, off+len(p)) below the published size
// (io.ReaderAt). A read reaching past the size returns the bytes below
// it and io.EOF.
func (s *Segment) ReadAt(p []byte, off int64) (int, error) {
	n, err := s.span(off, len(p))
	if err != nil || n == 0 {
		return 0, err
	}
	if err := s.readAt(p[:n], off); err != nil {
		return 0, err
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// span checks a read of want bytes at off (ReadAt, ReadvAt) and returns
// how many of them lie below the size: io.EOF when none do (and want is
// not 0).
func (s *Segment) span(off int64, want int) (int, error) {
	if s.closed.Load() {
		return 0, ErrClosed
	}
	if off < 0 {
		return 0, invalidArgf("%s: read at negative position %d", s.logPath, off)
	}
	size := s.size.Load()
	if off >= size {
		if want == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	return int(min(int64(want), size-off)), nil
}

// IndexBytes returns copies of the offset and time index entries in
// their file formats (8- and 12-byte entries), loading the index files
// (or rebuilding them from the .log) if needed. For an inactive segment
// they are what the files hold after a flush.
func (s *Segment) IndexBytes() (offsetIndex, timeIndex []byte, err error) {
	if s.closed.Load() {
		return nil, nil, ErrClosed
	}
	if err := s.loadOffsetIndex(); err != nil {
		return nil, nil, err
	}
	if err := s.loadTimeIndex(); err != nil {
		return nil, nil, err
	}
	return s.offsetIdx.copyEntries(), s.timeIdx.copyEntries(), nil
}

// copyEntries returns a copy of the entries. REQUIRES: loaded.
func (x *index) copyEntries() []byte {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return slices.Clone(x.mu.entries)
}
