package segment

import (
	"github.com/tierlog/tierlog/log/record"
)

// This file holds the lazy initialisation of a segment opened from disk:
// index files are loaded (or rebuilt) on first lookup, the next offset,
// the timestamps and the index counter on first need. Each result is
// published once and then only changed by the writer.

// loadOffsetIndex makes the offset index usable: it reads the .index
// file, validates it, and rebuilds the entries from the .log if the file
// is invalid. A torn trailing partial entry is dropped.
func (s *Segment) loadOffsetIndex() error {
	if s.offsetIdx.loaded.Load() {
		return nil
	}
	// File I/O under loadMu, never under index.mu: readers of a loaded
	// index are not held up by a load of another.
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	if s.offsetIdx.loaded.Load() {
		return nil
	}
	entries, _, err := s.readOwnIndex(&s.offsetIdx.index)
	if err == errMissingIndex && s.size.Load() == 0 {
		err = nil // nothing to index
	}
	if err != nil && err != errBadIndex && err != errMissingIndex {
		return err
	}
	if err == nil && validateOffsetEntries(entries, s.size.Load()) {
		s.offsetIdx.install(entries, len(entries), false)
		return nil
	}
	if err == nil {
		// A well-formed index pointing past the .log means the .log lost
		// bytes: rebuilding would hide the loss, and reads would skip to
		// the next segment. Not marked loaded: every read reports it.
		if derr := s.indexBeyondLog(entries, s.size.Load()); derr != nil {
			return derr
		}
	}
	missing := err == errMissingIndex
	rebuilt, _, err := s.rebuildIndexes()
	if err != nil {
		return err
	}
	// A missing file holds the empty index: rewriting it (a create per
	// close of an idle log) would change nothing.
	s.offsetIdx.install(rebuilt, 0, !missing || len(rebuilt) > 0)
	return nil
}

// loadTimeIndex is loadOffsetIndex for the time index.
func (s *Segment) loadTimeIndex() error {
	if s.timeIdx.loaded.Load() {
		return nil
	}
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	if s.timeIdx.loaded.Load() {
		return nil
	}
	entries, _, err := s.readOwnIndex(&s.timeIdx.index)
	if err == errMissingIndex && s.size.Load() == 0 {
		err = nil // nothing to index
	}
	if err != nil && err != errBadIndex && err != errMissingIndex {
		return err
	}
	if err == nil && validateTimeEntries(entries) {
		s.timeIdx.install(entries, len(entries), false)
		return nil
	}
	missing := err == errMissingIndex
	_, rebuilt, err := s.rebuildIndexes()
	if err != nil {
		return err
	}
	s.timeIdx.install(rebuilt, 0, !missing || len(rebuilt) > 0)
	return nil
}

// rebuildIndexes computes both indexes from the .log, framing batches
// (without checking CRCs: this is for lookups, Recover validates) with the
// interval rule of Append. It stops quietly at the first batch that does
// not frame: an unrecovered tail is Recover's business.
func (s *Segment) rebuildIndexes() (offsetEntries, timeEntries []byte, err error) {
	b := newIndexBuilder(s, s.opts.MaxIndexBytes)
	var buf []byte // not s.w.walkBuf: readers may get here
	_, _, err = walkBatches(s.logFile, s.logPath, &buf, walkOptions{
		end:           s.size.Load(),
		maxBatchBytes: s.opts.MaxBatchBytes,
		onBatch: func(pos int64, batch record.Batch) error {
			b.add(pos, batch)
			return nil
		},
	})
	if err != nil {
		return nil, nil, err
	}
	return b.offsetIdx.mu.entries, b.timeIdx.mu.entries, nil
}

// indexBuilder rebuilds a segment's indexes batch by batch (Recover, lazy
// rebuilds), with the same rule as Append: a batch is indexed when more
// than IndexIntervalBytes were seen since the last entry.
type indexBuilder struct {
	offsetIdx            offsetIndex
	timeIdx              timeIndex
	interval             int64
	lastEntryPos         int64
	maxTimestamp         int64
	offsetOfMaxTimestamp int64
	firstTimestamp       int64
	next                 int64
	batches              int
}

func newIndexBuilder(s *Segment, maxIndexBytes int) *indexBuilder {
	b := &indexBuilder{interval: int64(s.opts.IndexIntervalBytes),
		maxTimestamp: noTimestamp, offsetOfMaxTimestamp: s.baseOffset,
		firstTimestamp: noTimestamp, next: s.baseOffset}
	b.offsetIdx.baseOffset, b.timeIdx.baseOffset = s.baseOffset, s.baseOffset
	b.offsetIdx.init(s.offsetIdx.path, offsetEntrySize, maxIndexBytes)
	b.timeIdx.init(s.timeIdx.path, timeEntrySize, maxIndexBytes)
	b.offsetIdx.loaded.Store(true)
	b.timeIdx.loaded.Store(true)
	return b
}

// add accounts for the batch at pos. The caller checked that its offsets
// fit and increase; entries beyond an index's capacity are skipped, as in
// Append.
func (b *indexBuilder) add(pos int64, batch record.Batch) {
	if b.batches == 0 {
		b.firstTimestamp = batch.MaxTimestamp()
	}
	b.batches++
	if ts := batch.MaxTimestamp(); ts > b.maxTimestamp {
		b.maxTimestamp, b.offsetOfMaxTimestamp = ts, batch.LastOffset()
	}
	if pos-b.lastEntryPos > b.interval {
		// Errors are impossible for checked batches but for a full index
		// or an out-of-order batch in an unrecovered file; either way
		// the entry is skipped and lookups stay correct.
		_ = b.offsetIdx.append(batch.LastOffset(), pos)
		_ = b.timeIdx.maybeAppend(b.maxTimestamp, b.offsetOfMaxTimestamp, false)
		b.lastEntryPos = pos
	}
	b.next = batch.NextOffset()
}

// prepareAppend makes sure everything Append reads is initialised: both
// indexes loaded, the next offset, the max timestamp and the index
// counter known. A no-op for a segment made by Create.
func (s *Segment) prepareAppend() error {
	if s.w.counterKnown {
		return nil
	}
	if err := s.loadOffsetIndex(); err != nil {
		return err
	}
	if err := s.loadTimeIndex(); err != nil {
		return err
	}
	if _, err := s.ReadNextOffset(); err != nil {
		return err
	}
	if err := s.loadMaxTimestamp(); err != nil {
		return err
	}
	// Continue the interval rule where the entries stop, so a segment
	// reopened mid-way gets the same entries as one never closed.
	_, lastPos := s.offsetIdx.lastEntry()
	s.w.bytesSinceLastIndexEntry = s.size.Load() - lastPos
	s.w.counterKnown = true
	return nil
}

// loadMaxTimestamp initialises the max timestamp from the last time-index
// entry if it is not known (Kafka does the same). The final entry written
// by OnBecomeInactive and Close makes it exact for a cleanly closed
// segment; Recover recomputes it from the batches.
func (s *Segment) loadMaxTimestamp() error {
	s.mu.Lock()
	known := s.mu.maxKnown
	s.mu.Unlock()
	if known {
		return nil
	}
	if err := s.loadTimeIndex(); err != nil {
		return err
	}
	ts, offset := s.timeIdx.lastEntry()
	s.mu.Lock()
	if !s.mu.maxKnown {
		s.mu.maxTimestamp, s.mu.offsetOfMaxTimestamp, s.mu.maxKnown = ts, offset, true
	}
	s.mu.Unlock()
	return nil
}

// loadFirstBatch initialises the first batch's timestamp with one header
// read.
func (s *Segment) loadFirstBatch() error {
	s.mu.Lock()
	state := s.mu.firstState
	s.mu.Unlock()
	if state != firstUnknown {
		return nil
	}
	buf := headerPool.Get().(*headerBuf)
	defer headerPool.Put(buf)
	h, ok, err := readHeader(s.logFile, s.logPath, 0, s.size.Load(), buf)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.firstState != firstUnknown {
		return nil // an append got there first
	}
	if ok {
		s.mu.firstBatchTimestamp, s.mu.firstState = h.maxTimestamp, firstKnown
	} else {
		s.mu.firstState = firstNone
	}
	return nil
}

// readOwnIndex reads an index file of this segment. A detached segment
// (its files removed or replaced) reports errBadIndex so the caller
// rebuilds from the open .log handle: the file under the index's name,
// if any, belongs to another segment object now.
func (s *Segment) readOwnIndex(x *index) ([]byte, bool, error) {
	if s.detached.Load() {
		return nil, false, errBadIndex
	}
	return x.readFile(s.fs)
}
