package segment

import (
	"errors"
)

// ErrCannotResume is returned by RecoverWith with RecoverOptions.From
// above the base offset when the segment's files do not show a batch
// boundary at From below which the index files hold genuine entries:
// nothing was read past the check and no callback ran. The caller
// recovers the whole segment instead.
var ErrCannotResume = errors.New("segment: cannot resume recovery at the given offset")

// maxResumeScanHeaders bounds the header scan from the floor index entry
// to the resume offset: past it, the index is too sparse to be the one a
// recovery point was written with, and the whole segment is recovered.
const maxResumeScanHeaders = 4096

// resumeBuilder prepares the recovery of [from, size) of the segment: it
// reads both index files, keeps the entries that can only have been
// durable when the recovery point at from was written (the increasing
// prefix whose offsets lie below from and whose positions lie below the
// .log's size), finds the position of the batch boundary at from with a
// header scan from the floor entry, and returns a builder in the state a
// recovery from the start would have reached there. The bytes below the
// boundary are trusted, not read: they were fsynced before the recovery
// point was written (Kafka trusts the prefix below its recovery point the
// same way).
//
// It also returns the two files as read, for adoptFile.
func (s *Segment) resumeBuilder(from, size int64) (*indexBuilder, int64, *[2]indexFile, error) {
	offEntries, torn, err := s.offsetIdx.readFile(s.fs)
	if err != nil && !errors.Is(err, errMissingIndex) && !errors.Is(err, errBadIndex) {
		return nil, 0, nil, err
	}
	files := &[2]indexFile{{entries: offEntries, exact: err == nil && !torn}}
	timeEntries, torn, err := s.timeIdx.readFile(s.fs)
	if err != nil && !errors.Is(err, errMissingIndex) && !errors.Is(err, errBadIndex) {
		return nil, 0, nil, err
	}
	files[1] = indexFile{entries: timeEntries, exact: err == nil && !torn}
	rel := from - s.baseOffset
	n, prevKey, prevPos := 0, int64(-1), int64(-1)
	for ; n+offsetEntrySize <= len(offEntries); n += offsetEntrySize {
		e := offEntries[n:]
		k, p := be32(e), be32(e[4:])
		if k <= prevKey || p <= prevPos || k >= rel || p >= size {
			break
		}
		prevKey, prevPos = k, p
	}
	// Capacity clipped: the builder's appends must not overwrite the
	// file image adoptFile compares with.
	offEntries = offEntries[:n:n]
	m, prevTs, prevOff := 0, int64(noTimestamp), int64(-1)
	for ; m+timeEntrySize <= len(timeEntries); m += timeEntrySize {
		e := timeEntries[m:]
		ts, o := be64(e), be32(e[8:])
		if (m > 0 && ts <= prevTs) || o < prevOff || o >= rel {
			break
		}
		prevTs, prevOff = ts, o
	}
	timeEntries = timeEntries[:m:m]

	b := newIndexBuilder(s, s.opts.MaxIndexBytes)
	b.offsetIdx.install(offEntries, len(offEntries), false)
	b.timeIdx.install(timeEntries, len(timeEntries), false)
	if m > 0 {
		b.maxTimestamp, b.offsetOfMaxTimestamp = prevTs, s.baseOffset+prevOff
	}
	pos := int64(0)
	if n > 0 {
		pos = prevPos
		b.lastEntryPos = prevPos
	}
	buf := headerPool.Get().(*headerBuf)
	defer headerPool.Put(buf)
	first, ok, err := readHeader(s.logFile, s.logPath, 0, size, buf)
	if err != nil || !ok {
		return nil, 0, nil, errors.Join(ErrCannotResume, err)
	}
	b.firstTimestamp, b.batches = first.maxTimestamp, 1
	for i := 0; ; i++ {
		h, ok, err := readHeader(s.logFile, s.logPath, pos, size, buf)
		if err != nil || !ok || i >= maxResumeScanHeaders || h.lastOffset >= from || h.baseOffset < b.next {
			// A torn or corrupt header below from, from inside a batch,
			// or a scan too long: not the boundary a recovery point
			// names.
			return nil, 0, nil, errors.Join(ErrCannotResume, err)
		}
		if h.maxTimestamp > b.maxTimestamp {
			b.maxTimestamp, b.offsetOfMaxTimestamp = h.maxTimestamp, h.lastOffset
		}
		b.next = h.lastOffset + 1
		pos = h.end()
		if b.next == from {
			return b, pos, files, nil
		}
	}
}
