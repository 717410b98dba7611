package log

import (
	"github.com/cockroachdb/pebble/v2/vfs"
)

// FileSlice names bytes of a segment file without copying them: what
// ReadSlice returns to a broker that sends fetch responses with sendfile
// (Kafka's FileRecords slice). The segment stays open, and File valid,
// until Release.
type FileSlice struct {
	// File is the segment's .log handle: read [Position, Position+Size)
	// of it with ReadAt, or send it from File.Fd(). Never write to it or
	// close it. Nil when Size is 0.
	File vfs.File
	// Data is [Position, Position+Size) of the file as a slice of the
	// segment's read-only memory mapping, when the log reads through
	// mappings (vfs.Default, Options.DisableMmapReads unset): a broker
	// writes it to the socket without a pread or a copy. Nil otherwise
	// (use File). Valid until Release, which the mapping outlives (it is
	// unmapped only when the last view of the segment is released, after
	// any deletion, truncation or close of the log); never write to it.
	// Reading it bypasses the I/O error a pread would return for a page
	// the disk cannot supply: that is a fault (see
	// runtime/debug.SetPanicOnFault).
	Data []byte
	// Position and Size are the range of the file to send. It starts at
	// the batch holding FetchOffset and ends before the first batch that
	// does not end below the isolation bound; it may end inside a batch
	// when maxBytes falls there (consumers drop a trailing partial batch,
	// as with Kafka's zero-copy path).
	Position, Size int64
	// FetchOffset, BatchBaseOffset, SegmentBaseOffset, the aborted
	// transactions (IsolationCommitted) and the log's offsets at the read
	// are as in FetchDataInfo.
	FetchOffset         int64
	BatchBaseOffset     int64
	SegmentBaseOffset   int64
	AbortedTransactions []AbortedTxn
	HighWatermark       int64
	LastStableOffset    int64
	LogStartOffset      int64
	LogEndOffset        int64

	view *segmentView
}

// Release unpins the segment: File must not be used afterwards. It is
// idempotent and a no-op on a zero FileSlice.
func (f *FileSlice) Release() {
	if f.view != nil {
		f.view.unref()
		f.view = nil
	}
	f.File, f.Data = nil, nil
}

// ReadSlice is Read without the copy: it returns where the batches Read
// would return lie in a segment file, with the segment pinned until
// Release. Positioning costs one pread of a batch header (two with an
// isolation bound inside the segment) and the bytes are not read, so
// damage inside them is not detected here (the consumer's CRC check finds
// it), unless Options.VerifyReads is set: then the range's whole batches
// are checked as Read checks them. The errors are Read's; on error
// nothing is pinned.
func (l *UnifiedLog) ReadSlice(offset int64, maxBytes int, isolation Isolation, minOneMessage bool) (FileSlice, error) {
	st, err := l.acquireState()
	if err != nil {
		return FileSlice{FetchOffset: offset}, err
	}
	v, o := st.view, st.offsets
	fs, err := l.slicePinned(v, o, offset, maxBytes, isolation, minOneMessage)
	if err != nil || fs.Size == 0 {
		v.unref()
		fs.File, fs.Data = nil, nil
		return fs, err
	}
	fs.view = v
	return fs, nil
}

// slicePinned is ReadSlice on a pinned view v and the offsets o published
// with it.
func (l *UnifiedLog) slicePinned(v *segmentView, o Offsets, offset int64, maxBytes int,
	isolation Isolation, minOneMessage bool) (FileSlice, error) {
	fs := FileSlice{
		FetchOffset:      offset,
		HighWatermark:    o.HighWatermark,
		LastStableOffset: o.LastStableOffset,
		LogStartOffset:   o.LogStartOffset,
		LogEndOffset:     o.LogEndOffset,
	}
	bound, i, err := readStart(v, o, offset, isolation)
	if err != nil || i < 0 {
		return fs, err
	}
	for ; i < len(v.segments); i++ {
		s := v.segments[i]
		if s.BaseOffset() >= bound {
			break
		}
		// The bound also cuts batches appended after o was loaded: the
		// segment may hold them, and they end at or above the log end
		// offset of o.
		res, err := s.Slice(offset, maxBytes, bound, minOneMessage)
		if err != nil {
			return fs, l.readFailed(s, offset, err)
		}
		if !res.Found {
			continue // a gap: next segment
		}
		fs.File, fs.Position, fs.Size = s.File(), res.Position, res.Size
		if res.Size > 0 {
			fs.Data = s.Mapped(res.Position, res.Size)
		}
		if l.opts.VerifyReads && fs.Size > 0 {
			if err := l.verifySlice(&fs, s, offset); err != nil {
				return fs, err
			}
		}
		fs.BatchBaseOffset, fs.SegmentBaseOffset = res.BatchBaseOffset, s.BaseOffset()
		if isolation == IsolationCommitted && fs.Size > 0 {
			// Without the bytes the last returned offset is unknown: the
			// bound is an upper limit, and a listed transaction that
			// overlaps no returned batch is ignored by the consumer.
			fs.AbortedTransactions = collectAborted(v.segments[i:], offset, bound)
		}
		return fs, nil
	}
	return fs, nil
}

// verifySlice is Options.VerifyReads for ReadSlice: it checks the whole
// batches of fs's range, from the mapping or read with pread, and ends the
// range before the first that fails, or fails when that is the first.
func (l *UnifiedLog) verifySlice(fs *FileSlice, s *segmentRef, offset int64) error {
	data := fs.Data
	if data == nil {
		data = make([]byte, fs.Size)
		if _, err := s.ReadAt(data, fs.Position); err != nil {
			return l.readFailed(s, offset, err)
		}
	}
	good, bad := verifyBatches(data)
	switch {
	case bad == nil:
		return nil
	case good == 0:
		fs.Size = 0
		return l.damagedRead(s, offset, fs.Position, bad)
	}
	l.counters.readsCutAtDamage.Add(1)
	fs.Size = int64(good)
	if fs.Data != nil {
		fs.Data = fs.Data[:good]
	}
	return nil
}
