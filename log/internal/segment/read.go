package segment

import (
	"encoding/binary"
	"errors"
	"io"
	"math"
	"slices"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tierlog/tierlog/internal/invariants"
	"github.com/tierlog/tierlog/log/record"
)

// ReadResult is what Read returns.
type ReadResult struct {
	// Found is false when the segment holds no batch whose last offset is
	// >= the start offset (Kafka's read returning null). The other fields
	// are then zero.
	Found bool
	// Data holds the bytes read, appended to dst[:0]. It starts at the
	// first byte of the batch holding the start offset, so it may include
	// records below it (readers skip them), and it may end inside a batch
	// when the size limit falls there, as in Kafka. Empty (but Found) when
	// the size limit or maxPosition leaves no room.
	Data []byte
	// BatchBaseOffset is the base offset of the first batch in Data (the
	// fetch offset metadata's message offset).
	BatchBaseOffset int64
	// Position is the .log position Data starts at.
	Position int64
	// DamageCut is true when Data stops before bytes that fail the
	// header checks (or a batch cut at the segment's end): a read from
	// there returns the damage as an error.
	DamageCut bool
}

// Read reads from the first batch whose last offset is >= startOffset
// (Kafka's LogSegment.read). It returns at most maxSize bytes and never
// bytes at or past maxPosition (< 0: the segment size). With
// minOneMessage, maxSize is raised to the first batch's size so a
// consumer always makes progress.
//
// Positioning costs one pread in the common case: the offset index is
// keyed by each batch's last offset, so the first entry at or above
// startOffset names the batch holding it whenever that batch is indexed
// (every batch but the first when batches are larger than
// IndexIntervalBytes), and the next entry's position bounds its size, so
// header and batch come in one read (readIndexed). When the entries
// around the offset are close (batches smaller than the index interval),
// the one read covers the batches between them instead (readBetween);
// anything unexpected (an entry that
// does not match its batch, damage, a gap in the offsets) falls back to
// the header scan from the floor entry (readScanned), which is always
// right.
//
// Read may run concurrently with Append and with other reads; it sees the
// data published when it loaded the size.
func (s *Segment) Read(dst []byte, startOffset int64, maxSize int, maxPosition int64, minOneMessage bool) (ReadResult, error) {
	if s.closed.Load() {
		return ReadResult{}, ErrClosed
	}
	if maxSize < 0 {
		return ReadResult{}, invalidArgf("%s: read with negative max size %d", s.logPath, maxSize)
	}
	size := s.size.Load()
	if maxPosition < 0 || maxPosition > size {
		maxPosition = size
	}
	if err := s.loadOffsetIndex(); err != nil {
		return ReadResult{}, err
	}
	r := readRequest{target: startOffset, maxSize: maxSize, maxPosition: maxPosition, end: size, minOne: minOneMessage}
	res, done, err := s.readIndexed(dst, r)
	if err != nil || done {
		return res, err
	}
	return s.readScanned(res.Data, r)
}

// readRequest is one Read's arguments, with the size it loaded (end).
type readRequest struct {
	target      int64
	maxSize     int
	maxPosition int64
	end         int64
	minOne      bool
}

// limitFor returns how many bytes the read returns from the batch h.
func (r readRequest) limitFor(h batchHeader) int64 {
	limit := int64(r.maxSize)
	if r.minOne {
		limit = max(limit, h.size)
	}
	return min(r.maxPosition-h.pos, limit)
}

// lastEntryGuessBytes bounds the first read at the last index entry,
// whose batch size no next entry bounds: a larger batch costs a second
// read.
const lastEntryGuessBytes = walkChunkBytes

// readIndexed is Read through the index entries around the target, in
// one pread when the batch holding it is indexed or the entries are close
// together. done is false when the caller must fall back to readScanned
// (res.Data is then a buffer to reuse).
func (s *Segment) readIndexed(dst []byte, r readRequest) (res ReadResult, done bool, err error) {
	sp := s.offsetIdx.span(r.target)
	if !sp.ok {
		// Past the last entry: the batch holding the target follows the
		// last entry's batch (or starts the segment), below the end.
		sp.pos = r.end
		return s.readBetween(dst, r, sp, r.end)
	}
	if sp.pos+record.HeaderSize > r.end {
		return ReadResult{Data: dst[:0]}, false, nil
	}
	guess := min(r.end-sp.pos, lastEntryGuessBytes)
	if sp.nextPos > sp.pos && sp.nextPos <= r.end {
		guess = sp.nextPos - sp.pos
	}
	want := min(r.maxPosition-sp.pos, int64(r.maxSize))
	if r.minOne {
		want = max(want, min(guess, r.maxPosition-sp.pos))
	}
	if gap := sp.pos - sp.prevPos; gap <= 2*int64(s.opts.IndexIntervalBytes) ||
		(sp.prevOffset < s.baseOffset && gap <= nearRegionBytes) {
		// The entries are close (batches smaller than the interval, or
		// a small first batch): one pread from the previous entry's
		// batch through the entry's covers the batch holding the target
		// wherever it starts.
		return s.readBetween(dst, r, sp, min(r.end, sp.pos+max(guess, want, record.HeaderSize)))
	}
	readLen := min(r.end-sp.pos, max(want, record.HeaderSize))
	buf := slices.Grow(dst[:0], int(readLen))[:readLen]
	if err := s.readBytes(buf, sp.pos); err != nil {
		return ReadResult{}, true, err
	}
	h, ok, err := parseHeader(buf, s.logPath, sp.pos, r.end)
	if err != nil || !ok || h.lastOffset != sp.offset || s.checkHeaderOffsets(h, sp.prevOffset) != nil {
		// A wrong entry or damage at it: the scan finds the batch from
		// an earlier position, or reports the damage where it is.
		return ReadResult{Data: buf[:0]}, false, nil
	}
	if h.baseOffset > r.target {
		return s.readBetween(buf, r, sp, sp.pos)
	}
	res, err = s.finishRead(buf, readLen, h, r)
	return res, true, err
}

// nearRegionBytes bounds the region readIndexed reads in one pread from
// the start of a segment whose first entry is near it.
const nearRegionBytes = 64 << 10

// readBetween reads [sp.prevPos, regionEnd) in one pread and returns the
// batch holding the target found there, moved to the front of the
// buffer. The region starts at the previous entry's batch (or the
// segment's start) and ends at or past the entry's batch, sp.pos (the
// end when the target is past the last entry): the batch holding the
// target, if any, starts in between, and the interval rule puts at most
// IndexIntervalBytes plus a batch or two there. Every header is checked
// as the scan checks it, and the batches at the two entries must end at
// the entries' offsets; anything else is left to readScanned.
func (s *Segment) readBetween(buf []byte, r readRequest, sp indexSpan, regionEnd int64) (ReadResult, bool, error) {
	start := sp.prevPos
	n := regionEnd - start
	if n < record.HeaderSize || n > int64(s.opts.IndexIntervalBytes)+2*int64(s.opts.MaxBatchBytes) {
		return ReadResult{Data: buf[:0]}, false, nil
	}
	buf = slices.Grow(buf[:0], int(n))[:n]
	if err := s.readBytes(buf, start); err != nil {
		return ReadResult{}, true, err
	}
	prevLast := sp.prevOffset
	for off := int64(0); off+record.HeaderSize <= n; {
		pos := start + off
		h, ok, err := parseHeader(buf[off:], s.logPath, pos, r.end)
		if err != nil || !ok {
			break
		}
		if off == 0 && sp.prevOffset >= s.baseOffset {
			// The previous entry's batch: it must end at the entry's
			// offset, which is below the target.
			if h.lastOffset != sp.prevOffset || s.checkHeaderOffsets(h, s.baseOffset-1) != nil {
				break
			}
		} else {
			if s.checkHeaderOffsets(h, prevLast) != nil || (sp.ok && pos > sp.pos) ||
				(sp.ok && pos == sp.pos && h.lastOffset != sp.offset) {
				break // damage, or an entry that does not match its batch
			}
			if h.lastOffset >= r.target {
				if h.baseOffset > r.target {
					break // a gap: the scan checks what follows
				}
				have := int64(copy(buf, buf[off:]))
				res, err := s.finishRead(buf, have, h, r)
				return res, true, err
			}
		}
		if h.end() > regionEnd {
			break
		}
		prevLast = h.lastOffset
		off += h.size
	}
	return ReadResult{Data: buf[:0]}, false, nil
}

// finishRead returns the read of the batch h whose first have bytes are
// at the start of buf, reading what the request needs beyond them.
func (s *Segment) finishRead(buf []byte, have int64, h batchHeader, r readRequest) (ReadResult, error) {
	res := ReadResult{Found: true, BatchBaseOffset: h.baseOffset, Position: h.pos, Data: buf[:0]}
	n := r.limitFor(h)
	if n <= 0 {
		return res, nil
	}
	if n > have {
		buf = slices.Grow(buf[:have], int(n-have))[:n]
		if err := s.readBytes(buf[have:], h.pos+have); err != nil {
			return ReadResult{}, err
		}
	}
	res.Data = buf[:n]
	valid, damaged := s.validPrefix(res.Data, h.pos+n == r.end)
	res.Data, res.DamageCut = res.Data[:valid], damaged
	return res, nil
}

// readScanned is Read by a floor lookup in the offset index and a forward
// scan of batch headers (one pread of the header per batch), then one
// pread of the data.
func (s *Segment) readScanned(dst []byte, r readRequest) (ReadResult, error) {
	h, found, err := s.translate(r.target, r.end)
	if err != nil || !found {
		return ReadResult{}, err
	}
	return s.finishRead(dst[:0], 0, h, r)
}

// validPrefix returns how much of data, read from the .log starting at a
// batch translate checked, a reader may be given: the batches whose
// headers frame and whose offsets stay in the segment and increase, and
// then at most the start of a batch the size limit cut (unless atEnd:
// data reaches the end of the segment, so a cut batch is damage). It
// stops before the first batch that fails: the next read starts there,
// and translate reports the damage with its position, instead of a
// consumer silently passing over records behind a damaged header. The
// walk is over bytes in memory, a few header fields per batch. damaged
// reports that it stopped at damage, not at a batch the limit cut.
func (s *Segment) validPrefix(data []byte, atEnd bool) (n int, damaged bool) {
	off, prevLast := 0, s.baseOffset-1
	for off < len(data) {
		rest := data[off:]
		if len(rest) < record.HeaderSize {
			break
		}
		length := int32(binary.BigEndian.Uint32(rest[hdrLength:]))
		delta := int32(binary.BigEndian.Uint32(rest[hdrLastOffsetDelta:]))
		h := batchHeader{size: record.LogOverhead + int64(length), baseOffset: int64(binary.BigEndian.Uint64(rest))}
		h.lastOffset = h.baseOffset + int64(delta)
		if length < minBatchLength || rest[hdrMagic] != record.Magic || delta < 0 ||
			s.checkHeaderOffsets(h, prevLast) != nil {
			return off, true
		}
		if h.size > int64(len(rest)) {
			break
		}
		prevLast = h.lastOffset
		off += int(h.size)
	}
	if atEnd {
		return off, off < len(data) // a batch cut at the segment's end is damage
	}
	return len(data), false
}

// readAt fills p from the .log at pos with one pread; a short read is an
// error (the bytes are below the published size, so they exist). Reads
// go through readBytes, which uses the mapping when there is one.
func (s *Segment) readAt(p []byte, pos int64) error {
	if got, err := s.logFile.ReadAt(p, pos); got < len(p) {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return ioErr("read", s.logPath, err)
	}
	return nil
}

// TranslateOffset returns the position and base offset of the first batch
// whose last offset is >= offset: the positioning step of Read alone, one
// header read when the index entry at or above the offset names the
// batch (see Read).
func (s *Segment) TranslateOffset(offset int64) (position int64, batchBaseOffset int64, found bool, err error) {
	if s.closed.Load() {
		return 0, 0, false, ErrClosed
	}
	h, found, err := s.locate(offset, s.size.Load())
	if err != nil || !found {
		return 0, 0, false, err
	}
	return h.pos, h.baseOffset, true, nil
}

// SliceResult locates bytes of the .log without reading them: what
// Slice returns.
type SliceResult struct {
	// Found is false when the segment holds no batch whose last offset
	// is >= the start offset; the other fields are then zero.
	Found bool
	// Position and Size are the range of the .log to send, [Position,
	// Position+Size). It starts at the batch holding the start offset and
	// may end inside a batch when the size limit falls there (as a
	// Kafka FileRecords slice may); Size is 0 when the bound leaves no
	// room.
	Position, Size int64
	// BatchBaseOffset is the base offset of the batch at Position.
	BatchBaseOffset int64
}

// Slice is Read without the data: it returns where the bytes Read would
// return lie in the .log (File), for a broker that sends them with
// sendfile. The range ends before the batch holding boundOffset (the
// batches it covers end below the bound; math.MaxInt64: no bound) and
// spans at most maxSize bytes, or the first batch if minOneMessage.
// Positioning reads one batch header (two with a bound inside the
// segment); the bytes themselves are not read, so damage inside them is
// not detected here: the consumer's CRC check finds it, as with Kafka's
// zero-copy path.
func (s *Segment) Slice(startOffset int64, maxSize int, boundOffset int64, minOneMessage bool) (SliceResult, error) {
	if s.closed.Load() {
		return SliceResult{}, ErrClosed
	}
	if maxSize < 0 {
		return SliceResult{}, invalidArgf("%s: slice with negative max size %d", s.logPath, maxSize)
	}
	size := s.size.Load()
	h, found, err := s.locate(startOffset, size)
	if err != nil || !found {
		return SliceResult{}, err
	}
	maxPosition := size
	if boundOffset <= startOffset {
		maxPosition = h.pos
	} else if next := s.nextOffset.Load(); boundOffset != math.MaxInt64 && (next < 0 || boundOffset < next) {
		// A bound at or past the next offset (loaded after the size, so
		// every batch below the size ends below it) cuts nothing.
		b, found, err := s.locate(boundOffset, size)
		if err != nil {
			return SliceResult{}, err
		}
		if found {
			maxPosition = b.pos
		}
	}
	r := readRequest{target: startOffset, maxSize: maxSize, maxPosition: maxPosition, end: size, minOne: minOneMessage}
	return SliceResult{Found: true, Position: h.pos, Size: max(r.limitFor(h), 0), BatchBaseOffset: h.baseOffset}, nil
}

// File returns the .log handle for reads of the ranges Slice returns
// (ReadAt, or Fd for sendfile). It stays valid until Close: a caller
// keeps the segment open (the log pins it in a view) while it uses it,
// and never writes to it.
func (s *Segment) File() vfs.File { return s.logFile }

// locate is translate through the index entry at or above target (see
// Read): one header read when that entry's batch holds target, else the
// floor lookup and header scan.
func (s *Segment) locate(target, end int64) (batchHeader, bool, error) {
	if err := s.loadOffsetIndex(); err != nil {
		return batchHeader{}, false, err
	}
	if sp := s.offsetIdx.span(target); sp.ok && sp.pos+record.HeaderSize <= end {
		buf := headerPool.Get().(*headerBuf)
		h, ok, err := s.headerAt(sp.pos, end, buf)
		headerPool.Put(buf)
		if err != nil && !errors.Is(err, ErrCorruption) {
			return batchHeader{}, false, err
		}
		if err == nil && ok && h.lastOffset == sp.offset && h.baseOffset <= target &&
			s.checkHeaderOffsets(h, sp.prevOffset) == nil {
			return h, true, nil
		}
	}
	return s.translate(target, end)
}

// translate finds the first batch below end whose last offset is >=
// target.
func (s *Segment) translate(target, end int64) (batchHeader, bool, error) {
	if err := s.loadOffsetIndex(); err != nil {
		return batchHeader{}, false, err
	}
	entry, pos := s.offsetIdx.lookup(target)
	invariants.Assertf(pos <= end, "%s: index entry position %d beyond the size %d", s.logPath, pos, end)
	h, found, err := s.scanFromEntry(entry, pos, end, false, func(h batchHeader) bool { return h.lastOffset >= target })
	if err != nil || !found || h.baseOffset <= target {
		return h, found, err
	}
	// The batch starts above the target: a gap (a follower's log may
	// have one), or a damaged base offset field, which the CRC does not
	// cover. One more header read tells them apart: after a damaged
	// base offset the next batch goes backwards.
	return h, true, s.checkNextHeader(h, end)
}

// scanFromEntry is scanHeaders from the index entry (offset, pos): the
// batch at pos must end at offset, else the entry is wrong and the scan
// restarts at position 0, which is slower but always right. Trusting a
// wrong entry would make a read start at a later batch, skipping records.
func (s *Segment) scanFromEntry(offset, pos, end int64, lenient bool, match func(batchHeader) bool) (batchHeader, bool, error) {
	if pos == 0 {
		return s.scanHeaders(0, end, lenient, match)
	}
	first, mismatch := true, false
	h, found, err := s.scanHeaders(pos, end, lenient, func(h batchHeader) bool {
		if first {
			first = false
			if h.lastOffset != offset {
				mismatch = true
				return true
			}
		}
		return match(h)
	})
	// first is still set if no whole header was read at pos: the entry
	// may point inside a batch. Damage of the .log itself is found again
	// by the scan from the start; an I/O error is returned.
	if mismatch || (first && (err == nil || errors.Is(err, ErrCorruption))) {
		return s.scanHeaders(0, end, lenient, match)
	}
	return h, found, err
}

// scanHeaders reads batch headers from pos, a batch start, up to end (the
// published size) and returns the first that matches. A batch that runs
// past end is corruption: the writer publishes only whole batches, and
// the log recovers or verifies a tail before it trusts it, so such a batch
// is damage (a rolled segment that lost its end), and stopping quietly
// would make a read jump to the next segment. Only ReadNextOffset, which
// the log also calls on a segment before recovering it, passes lenient:
// it then stops quietly (not found) there.
func (s *Segment) scanHeaders(pos, end int64, lenient bool, match func(batchHeader) bool) (batchHeader, bool, error) {
	buf := headerPool.Get().(*headerBuf)
	defer headerPool.Put(buf)
	prevLast := s.baseOffset - 1
	for pos < end {
		h, ok, err := s.headerAt(pos, end, buf)
		if err != nil {
			return batchHeader{}, false, err
		}
		if !ok && lenient {
			return batchHeader{}, false, nil
		}
		if !ok {
			return batchHeader{}, false, corruptionf(s.logPath, pos,
				"batch runs past the end of the segment at %d (declared %d bytes, %d present)", end, h.size, end-pos)
		}
		if err := s.checkHeaderOffsets(h, prevLast); err != nil && !lenient {
			return batchHeader{}, false, err
		}
		prevLast = h.lastOffset
		if match(h) {
			return h, true, nil
		}
		pos = h.end()
	}
	return batchHeader{}, false, nil
}

// ReadNextOffset returns the offset after the last batch, or the base
// offset if the segment is empty (the segment's share of the log end
// offset). For a segment opened from disk the first call scans the
// headers after the last offset-index entry.
func (s *Segment) ReadNextOffset() (int64, error) {
	if s.closed.Load() {
		return 0, ErrClosed
	}
	if n := s.nextOffset.Load(); n >= 0 {
		return n, nil
	}
	if err := s.loadOffsetIndex(); err != nil {
		return 0, err
	}
	entry, pos := s.offsetIdx.lastEntry()
	next := s.baseOffset
	if _, _, err := s.scanFromEntry(entry, pos, s.size.Load(), true, func(h batchHeader) bool {
		next = h.lastOffset + 1
		return false
	}); err != nil {
		return 0, err
	}
	// CompareAndSwap: an append may have published a newer value since.
	s.nextOffset.CompareAndSwap(-1, next)
	return s.nextOffset.Load(), nil
}

// LargestTimestamp returns the largest batch timestamp in the segment, or
// the creation time if no batch has one (Kafka uses the file's mtime).
// Retention by time compares it with now. If the time index of a segment
// opened from disk cannot be read, it also returns the creation time.
func (s *Segment) LargestTimestamp() int64 {
	if ts, _ := s.MaxTimestampAndOffset(); ts >= 0 {
		return ts
	}
	return s.createdMs.Load()
}

// MaxTimestampAndOffset returns the largest batch MaxTimestamp and the
// last offset of the batch that carried it (Kafka's
// maxTimestampAndOffsetSoFar), or (-1, base) when there is none or the
// time index of a segment opened from disk cannot be read.
func (s *Segment) MaxTimestampAndOffset() (ts, offset int64) {
	if err := s.loadMaxTimestamp(); err != nil {
		return noTimestamp, s.baseOffset
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.maxTimestamp, s.mu.offsetOfMaxTimestamp
}

// FirstBatchTimestamp returns the MaxTimestamp of the segment's first
// batch (Kafka's rollingBasedTimestamp), and false if the segment is
// empty or its first header cannot be read.
func (s *Segment) FirstBatchTimestamp() (int64, bool) {
	if err := s.loadFirstBatch(); err != nil {
		return noTimestamp, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.firstBatchTimestamp, s.mu.firstState == firstKnown
}

// TimestampOffset is a record found by timestamp (Kafka's
// TimestampAndOffset).
type TimestampOffset struct {
	Timestamp   int64 // the record's timestamp
	Offset      int64 // the record's offset
	LeaderEpoch int32 // the partition leader epoch of its batch
}

// FindOffsetByTimestamp returns the offset of the first record with
// timestamp >= ts and offset >= startingOffset; see FindByTimestamp.
func (s *Segment) FindOffsetByTimestamp(ts int64, startingOffset int64) (offset int64, found bool, err error) {
	r, found, err := s.FindByTimestamp(ts, startingOffset)
	return r.Offset, found, err
}

// FindByTimestamp finds the first record with timestamp >= ts and offset
// >= startingOffset (Kafka's LogSegment.findOffsetByTimestamp, serving
// ListOffsets): the time index gives the offset to start from, the offset
// index its position, a header scan the first batch with MaxTimestamp >=
// ts and last offset >= startingOffset, and decoding that batch the
// record. found is false if no record qualifies.
func (s *Segment) FindByTimestamp(ts int64, startingOffset int64) (TimestampOffset, bool, error) {
	if s.closed.Load() {
		return TimestampOffset{}, false, ErrClosed
	}
	if err := s.loadTimeIndex(); err != nil {
		return TimestampOffset{}, false, err
	}
	if err := s.loadOffsetIndex(); err != nil {
		return TimestampOffset{}, false, err
	}
	_, from := s.timeIdx.lookup(ts)
	if next, err := s.ReadNextOffset(); err == nil && from >= next {
		// An entry beyond the segment's records is garbage (the time
		// index is not checked against the .log when loaded): start from
		// the base. A plausible but wrong entry is trusted, as in Kafka,
		// and may make the answer a later record at or above ts.
		from = s.baseOffset
	}
	entry, pos := s.offsetIdx.lookup(max(from, startingOffset))
	end := s.size.Load()
	var it *record.Iter
	var buf []byte
	fromEntry := true
	for pos < end {
		want := func(h batchHeader) bool { return h.maxTimestamp >= ts && h.lastOffset >= startingOffset }
		var h batchHeader
		var ok bool
		var err error
		if fromEntry {
			h, ok, err = s.scanFromEntry(entry, pos, end, false, want)
			fromEntry = false
		} else {
			h, ok, err = s.scanHeaders(pos, end, false, want)
		}
		if err != nil || !ok {
			return TimestampOffset{}, false, err
		}
		buf = slices.Grow(buf[:0], int(h.size))[:h.size]
		if err := s.readBytes(buf, h.pos); err != nil {
			return TimestampOffset{}, false, err
		}
		b, err := record.ReadBatch(buf)
		if err != nil {
			return TimestampOffset{}, false, corruptionf(s.logPath, h.pos, "%v", err)
		}
		if it == nil {
			it = record.NewIter(record.IterOptions{})
		}
		it.Reset(b)
		for it.Next() {
			if r := it.Record(); r.Timestamp >= ts && r.Offset >= startingOffset {
				return TimestampOffset{r.Timestamp, r.Offset, b.PartitionLeaderEpoch()}, true, nil
			}
		}
		if err := it.Err(); err != nil {
			return TimestampOffset{}, false, corruptionf(s.logPath, h.pos, "%v", err)
		}
		pos = h.end()
	}
	return TimestampOffset{}, false, nil
}

// checkHeaderOffsets rejects a header whose offsets cannot be in this
// segment after a batch ending at prevLast: below the base offset, beyond
// the relative range, or not above prevLast (the first header of a scan
// starting at an index entry is checked against the base only).
func (s *Segment) checkHeaderOffsets(h batchHeader, prevLast int64) error {
	switch {
	case h.baseOffset < s.baseOffset || h.lastOffset-s.baseOffset > maxRelativeOffset:
		return corruptionf(s.logPath, h.pos, "batch [%d, %d] outside the segment's offsets [%d, %d]",
			h.baseOffset, h.lastOffset, s.baseOffset, s.baseOffset+maxRelativeOffset)
	case h.baseOffset <= prevLast:
		return corruptionf(s.logPath, h.pos, "batch [%d, %d] after a batch ending at %d",
			h.baseOffset, h.lastOffset, prevLast)
	}
	return nil
}

// checkNextHeader reads the header after h, if one starts below end, and
// reports corruption if it does not follow h's offsets.
func (s *Segment) checkNextHeader(h batchHeader, end int64) error {
	if h.end() >= end {
		return nil
	}
	buf := headerPool.Get().(*headerBuf)
	defer headerPool.Put(buf)
	next, ok, err := s.headerAt(h.end(), end, buf)
	if err != nil {
		return err
	}
	if !ok {
		return corruptionf(s.logPath, h.end(),
			"batch runs past the end of the segment at %d (declared %d bytes, %d present)", end, next.size, end-h.end())
	}
	return s.checkHeaderOffsets(next, h.lastOffset)
}
