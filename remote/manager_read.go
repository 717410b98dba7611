package remote

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"

	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/internal/mutation"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
	"go.uber.org/zap"
)

// ReadResult is what a remote read returns (Kafka: the FetchDataInfo of
// RemoteLogManager.read).
type ReadResult struct {
	// Records holds whole batches: the first one with last offset at or
	// above FetchOffset and as many following ones as fit in the byte
	// budget. Empty when no batch is found, or when the first is larger
	// than the budget and the read is not min-one-message; never nil on
	// success (an empty record set, not a null one: see
	// log.NonNilRecords). Unlike Kafka, which may end with a partial
	// batch, Records never does.
	Records []byte
	// FetchOffset is the offset requested.
	FetchOffset int64
	// BatchBaseOffset is the base offset of the first batch, -1 when
	// Records is empty.
	BatchBaseOffset int64
	// Segment is the remote segment the records come from, and Position
	// the first batch's byte position in it.
	Segment  SegmentMetadata
	Position int64
	// AbortedTransactions, for IsolationCommitted only, are the aborted
	// transactions overlapping the records, from the remote transaction
	// indexes and then the local ones (Kafka: collectAbortedTransactions).
	AbortedTransactions []log.AbortedTxn
}

// Read serves a fetch at an offset below the local log start (logStart <=
// offset < localLogStart) from remote storage (Kafka:
// RemoteLogManager.read): the segment holding offset in the leader epoch
// the log's cache gives it, positioned through the segment's remote offset
// index. If the segment has no batch at or above offset (compaction), the
// next segment is read. maxBytes bounds the records; minOneMessage returns
// a first batch larger than it whole. A read below the committed seal of
// a switched partition (Partition.Seal) ends before the first batch that
// reaches the seal, and is refused with a *SealCapError when its first
// batch does: such a batch is from a tail the partition discarded (a
// remote segment that crosses the seal after an unclean election,
// github.com/aiven/inkless/pull/857). Every batch returned carries the
// leader epoch the log's cache gives its base offset: a segment copied
// before an unclean election may hold, in the same epoch, records past
// that epoch's end in the leader's lineage, which the partition
// discarded. The read ends before such a batch, and is refused with a
// *LineageError when its first batch is one. Every returned batch passed its CRC
// check: a corrupt byte from the object store is an error wrapping
// ErrCorruption, never returned data.
func (m *Manager) Read(ctx context.Context, tp TopicIDPartition, offset int64, maxBytes int, isolation log.Isolation, minOneMessage bool) (ReadResult, error) {
	start := m.opts.Now()
	m.metrics.readsInFlight.Add(1)
	defer m.metrics.readsInFlight.Add(-1)
	var seg SegmentMetadata
	res, err := m.read(ctx, tp, offset, maxBytes, isolation, minOneMessage, &seg)
	m.metrics.reads.Add(1)
	m.metrics.readNanos.Add(int64(m.opts.Now().Sub(start)))
	if err != nil {
		m.metrics.readErrors.Add(1)
		if errors.Is(err, ErrCorruption) {
			err = &ReadCorruptionError{TopicIDPartition: tp, Offset: offset, Segment: seg.SegmentID,
				StartOffset: seg.StartOffset, EndOffset: seg.EndOffset, Err: err}
			m.metrics.readCorruptions.Add(1)
			m.logger.Error("remote read found corrupt data", zap.Stringer("partition", tp),
				zap.Int64("offset", offset), zap.Error(err))
			m.notify(func(ls *ManagerListener) {
				if ls.Corruption != nil {
					ls.Corruption(tp, err)
				}
			})
		}
		return ReadResult{}, err
	}
	m.metrics.readBytes.Add(int64(len(res.Records)))
	res.Records = log.NonNilRecords(res.Records)
	return res, nil
}

// read serves Read; *seg is the segment it read last (for the error).
func (m *Manager) read(ctx context.Context, tp TopicIDPartition, offset int64, maxBytes int, isolation log.Isolation, minOneMessage bool, seg *SegmentMetadata) (ReadResult, error) {
	pt, err := m.partition(tp)
	if err != nil {
		return ReadResult{}, err
	}
	if maxBytes < 0 {
		return ReadResult{}, fmt.Errorf("%w: read with negative max bytes %d", ErrInvalidArgument, maxBytes)
	}
	l := pt.p.Log
	epoch, ok := l.EpochForOffset(offset)
	if !ok {
		return ReadResult{}, &ReadRangeError{TopicIDPartition: tp, Offset: offset, Epoch: base.UndefinedEpoch}
	}
	first, ok, err := m.meta.SegmentFor(tp, epoch, offset)
	if err != nil {
		return ReadResult{}, err
	}
	if !ok {
		return ReadResult{}, &ReadRangeError{TopicIDPartition: tp, Offset: offset, Epoch: epoch}
	}
	*seg = first
	limit := int64(math.MaxInt64)
	if c := pt.readCap.Load(); c != noReadCap && offset < c && !mutation.Disabled(mutation.SealCapRemoteRead) {
		limit = c
	}
	res := ReadResult{FetchOffset: offset, BatchBaseOffset: base.UndefinedOffset}
	for {
		found, err := m.readSegment(ctx, seg, offset, maxBytes, minOneMessage, limit, l, &res)
		var capErr *SealCapError
		if errors.As(err, &capErr) {
			capErr.TopicIDPartition = tp
		}
		var linErr *LineageError
		if errors.As(err, &linErr) {
			linErr.TopicIDPartition = tp
		}
		if err != nil || found {
			if err == nil && isolation == log.IsolationCommitted && len(res.Records) > 0 {
				err = m.collectAborted(ctx, tp, l, &res)
			}
			return res, err
		}
		// No batch at or above offset in this segment: the next one.
		next, ok, err := m.nextSegment(tp, l, seg.EndOffset+1)
		if err != nil || !ok {
			return res, err
		}
		*seg = next
	}
}

// nextSegment returns the finished segment holding offset in the epoch
// the log's cache gives it.
func (m *Manager) nextSegment(tp TopicIDPartition, l PartitionLog, offset int64) (SegmentMetadata, bool, error) {
	epoch, ok := l.EpochForOffset(offset)
	if !ok {
		return SegmentMetadata{}, false, nil
	}
	return m.meta.SegmentFor(tp, epoch, offset)
}

// readSegment scans seg from the offset index's floor position of offset
// for the first batch with last offset >= offset and fills res. found is
// false when the segment has none. No batch with last offset >= limit is
// returned: the records end before it, or, when it is the first, the
// read fails with a *SealCapError. No batch outside l's lineage
// (inLineage) is returned either: the records end before it, or, when it
// is the first, the read fails with a *LineageError.
func (m *Manager) readSegment(ctx context.Context, seg *SegmentMetadata, offset int64, maxBytes int, minOne bool, limit int64, l PartitionLog, res *ReadResult) (found bool, err error) {
	pos, indexed, err := m.lookupPosition(ctx, seg, offset)
	if err != nil {
		return false, err
	}
	body, err := m.storage.FetchSegment(ctx, seg, pos, seg.SizeBytes-pos)
	if err != nil {
		return false, err
	}
	defer body.Close()
	sc := newBatchStream(body, seg, pos, indexed)
	for {
		b, err := sc.next()
		if err == io.EOF {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if b.LastOffset() < offset {
			continue
		}
		res.Segment, res.Position = *seg, sc.pos-int64(b.Size())
		if b.LastOffset() >= limit {
			return true, &SealCapError{Offset: offset, Seal: limit, Segment: seg.SegmentID,
				BatchBaseOffset: b.BaseOffset(), BatchLastOffset: b.LastOffset()}
		}
		if e, ok := inLineage(l, b); !ok {
			return true, &LineageError{Offset: offset, Segment: seg.SegmentID, BatchBaseOffset: b.BaseOffset(),
				BatchLastOffset: b.LastOffset(), BatchEpoch: b.PartitionLeaderEpoch(), LineageEpoch: e}
		}
		if b.Size() > maxBytes && !minOne {
			return true, nil
		}
		res.BatchBaseOffset = b.BaseOffset()
		res.Records = append(res.Records[:0], b.Bytes()...)
		for budget := maxBytes - b.Size(); budget > 0; {
			nb, fits, err := sc.nextFits(budget)
			if err == io.EOF || (err == nil && (!fits || nb.LastOffset() >= limit)) {
				break
			}
			if err == nil {
				if _, ok := inLineage(l, nb); !ok {
					break
				}
			}
			if err != nil {
				return false, err
			}
			res.Records = append(res.Records, nb.Bytes()...)
			budget -= nb.Size()
		}
		return true, nil
	}
}

// inLineage reports whether every record of batch b is in l's lineage:
// b carries the leader epoch l's cache gives its base offset and its last
// offset, and ends below l's log end. It returns the epoch that decided
// (record.UndefinedEpoch when the cache has none: then b is not in the
// lineage either). A batch that straddles the log start (a DeleteRecords
// inside it truncated the cache from the start to the new log start) has
// no epoch at its base offset; its records share one epoch, so it is
// checked at its last offset, which the cache covers. A batch whose last
// offset has another epoch, or lies at or past the log end (a truncation
// below the local log start cut the lineage inside it), holds records the
// lineage discarded: served whole, they would stand at offsets where the
// lineage has other records, or none.
func inLineage(l PartitionLog, b record.Batch) (int32, bool) {
	if mutation.Disabled(mutation.RemoteReadLineage) {
		return b.PartitionLeaderEpoch(), true
	}
	last, lok := l.EpochForOffset(b.LastOffset())
	e, ok := l.EpochForOffset(b.BaseOffset())
	if !ok && !mutation.Disabled(mutation.RemoteReadLogStartBatch) {
		e, ok = last, lok
	}
	if !ok {
		return base.UndefinedEpoch, false
	}
	if e != b.PartitionLeaderEpoch() {
		return e, false
	}
	if !lok || last != e {
		return last, false
	}
	return e, b.LastOffset() < l.LogEndOffset()
}

// batchStream reads whole batches from a segment body, each checked as
// the copy checks them (framing, CRC, offset order) before it is returned.
type batchStream struct {
	r   io.Reader
	seg *SegmentMetadata
	// pos is the segment position after the last batch returned.
	pos int64
	// indexed is the offset the offset index maps to the body's first
	// position, record.UndefinedOffset when it starts at 0 by default.
	// The first batch must hold it: an index pointing at a later batch
	// would skip records without any other check noticing.
	indexed int64
	checker batchChecker
	started bool
	buf     []byte
}

func newBatchStream(r io.Reader, seg *SegmentMetadata, pos, indexed int64) *batchStream {
	return &batchStream{r: r, seg: seg, pos: pos, indexed: indexed, checker: newBatchChecker(seg, true)}
}

// next returns the next batch (valid until the following call), io.EOF at
// the segment's end. Bad bytes are a *BatchCorruptionError.
func (s *batchStream) next() (record.Batch, error) {
	if s.pos >= s.seg.SizeBytes {
		return record.Batch{}, io.EOF
	}
	var hdr [record.LogOverhead]byte
	if n, err := io.ReadFull(s.r, hdr[:]); err != nil {
		return record.Batch{}, s.readErr(hdr[:n], "batch header", err)
	}
	size, err := s.checker.declaredSize(s.pos, hdr[:])
	if err != nil {
		return record.Batch{}, err
	}
	if int64(cap(s.buf)) < size {
		s.buf = make([]byte, size)
	}
	s.buf = s.buf[:size]
	copy(s.buf, hdr[:])
	if _, err := io.ReadFull(s.r, s.buf[record.LogOverhead:]); err != nil {
		return record.Batch{}, s.readErr(hdr[:], "batch", err)
	}
	b, err := s.checker.check(s.pos, s.buf)
	if err != nil {
		return record.Batch{}, err
	}
	if !s.started && s.indexed != base.UndefinedOffset && (b.BaseOffset() > s.indexed || b.LastOffset() < s.indexed) {
		return record.Batch{}, s.checker.corrupt(s.pos, s.buf, nil,
			"the offset index maps offset %d here, the batch holds [%d, %d]", s.indexed, b.BaseOffset(), b.LastOffset())
	}
	s.started = true
	s.pos += size
	return b, nil
}

// nextFits returns the next batch and true if it fits in budget bytes;
// false if it does not (the stream is then spent: the caller stops).
func (s *batchStream) nextFits(budget int) (record.Batch, bool, error) {
	b, err := s.next()
	if err != nil {
		return b, false, err
	}
	return b, b.Size() <= budget, nil
}

// readErr classifies a read error. A body that ends cleanly before the
// size the metadata promises (io.ReadFull's own io.EOF or
// io.ErrUnexpectedEOF, compared by identity) is a short object:
// corruption. Anything else, a connection cut mid-body
// (objstore.ErrShortRead, which also wraps io.ErrUnexpectedEOF) or a
// context error, is an I/O failure and passes unchanged: corruption is
// never an I/O error (DESIGN.md section 3).
func (s *batchStream) readErr(hdr []byte, what string, err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return s.checker.corrupt(s.pos, hdr, nil, "%s cut short", what)
	}
	return fmt.Errorf("remote: segment %s: %s at %d: %w", s.seg.SegmentID, what, s.pos, err)
}

// lookupPosition returns the position of the floor entry of offset in the
// segment's remote offset index and the offset the entry maps (0 and
// record.UndefinedOffset when none), caching the index.
func (m *Manager) lookupPosition(ctx context.Context, seg *SegmentMetadata, offset int64) (pos, indexed int64, err error) {
	idx, err := m.offsetIndex(ctx, seg)
	if err != nil {
		return 0, 0, err
	}
	rel := offset - seg.StartOffset
	lo, hi := 0, len(idx)/8
	for lo < hi { // first entry with relative offset > rel
		mid := (lo + hi) / 2
		if int64(binary.BigEndian.Uint32(idx[mid*8:])) > rel {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	if lo == 0 {
		return 0, base.UndefinedOffset, nil
	}
	e := idx[(lo-1)*8:]
	return int64(binary.BigEndian.Uint32(e[4:])), seg.StartOffset + int64(binary.BigEndian.Uint32(e)), nil
}

// offsetIndex fetches, validates and caches a segment's offset index.
func (m *Manager) offsetIndex(ctx context.Context, seg *SegmentMetadata) ([]byte, error) {
	if idx, ok := m.indexes.get(seg.SegmentID); ok {
		return idx, nil
	}
	idx, err := m.storage.FetchIndex(ctx, seg, IndexOffset)
	if err != nil {
		return nil, err
	}
	if err := validateRemoteOffsetIndex(idx, seg); err != nil {
		return nil, err
	}
	m.indexes.put(seg.SegmentID, idx)
	return idx, nil
}

// validateRemoteOffsetIndex checks an uploaded .index: whole 8-byte
// entries, strictly increasing offsets inside the segment, increasing
// positions inside its data.
func validateRemoteOffsetIndex(idx []byte, seg *SegmentMetadata) error {
	bad := func(why string) error {
		return fmt.Errorf("%w: offset index of remote segment %s: %s", ErrCorruption, seg.SegmentID, why)
	}
	if len(idx)%8 != 0 {
		return bad("not whole 8-byte entries")
	}
	prevRel, prevPos := int64(-1), int64(-1)
	for i := 0; i < len(idx); i += 8 {
		rel, pos := int64(binary.BigEndian.Uint32(idx[i:])), int64(binary.BigEndian.Uint32(idx[i+4:]))
		if rel <= prevRel || pos <= prevPos || seg.StartOffset+rel > seg.EndOffset || pos >= seg.SizeBytes {
			return bad(fmt.Sprintf("entry %d (%d, %d) out of order or outside the segment", i/8, rel, pos))
		}
		prevRel, prevPos = rel, pos
	}
	return nil
}

// collectAborted fills res.AbortedTransactions for the returned records:
// the remote transaction indexes from res.Segment on, then the local ones
// while the search is not complete.
func (m *Manager) collectAborted(ctx context.Context, tp TopicIDPartition, l PartitionLog, res *ReadResult) error {
	start := res.BatchBaseOffset
	upper, err := lastNextOffset(res.Records)
	if err != nil {
		return err
	}
	out := []log.AbortedTxn{}
	seg, ok := res.Segment, true
	if seg.TxnIndexEmpty {
		seg, ok, err = m.nextWithTxnIndex(tp, l, seg.EndOffset+1)
	}
	for ok && err == nil {
		var data []byte
		data, err = m.storage.FetchIndex(ctx, &seg, IndexTransaction)
		if err != nil {
			break
		}
		var complete bool
		out, complete, err = log.CollectAbortedFromIndex(out, data, seg.StartOffset, start, upper)
		if err != nil || complete {
			res.AbortedTransactions = out
			return err
		}
		seg, ok, err = m.nextWithTxnIndex(tp, l, seg.EndOffset+1)
	}
	if err != nil {
		return err
	}
	local, err := l.CollectAbortedTransactions(start, upper)
	if err != nil {
		return err
	}
	res.AbortedTransactions = append(out, local...)
	return nil
}

// nextWithTxnIndex returns the first finished segment at or after offset,
// in the epoch the cache gives offset, with a transaction index.
func (m *Manager) nextWithTxnIndex(tp TopicIDPartition, l PartitionLog, offset int64) (SegmentMetadata, bool, error) {
	epoch, ok := l.EpochForOffset(offset)
	if !ok {
		return SegmentMetadata{}, false, nil
	}
	return m.meta.NextSegmentWithTxnIndex(tp, epoch, offset)
}

// lastNextOffset returns the offset after the last batch of data.
func lastNextOffset(data []byte) (int64, error) {
	next := int64(base.UndefinedOffset)
	for len(data) > 0 {
		b, err := record.ReadBatch(data)
		if err != nil {
			return 0, err
		}
		next = b.NextOffset()
		data = data[b.Size():]
	}
	return next, nil
}

// indexCache holds recently used remote offset indexes (Kafka's
// RemoteIndexCache, simplified: FIFO eviction at a fixed entry count).
type indexCache struct {
	mu    sync.Mutex
	byID  map[SegmentID][]byte
	order []SegmentID
}

const indexCacheEntries = 1024

func (c *indexCache) get(id SegmentID) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	idx, ok := c.byID[id]
	return idx, ok
}

func (c *indexCache) put(id SegmentID, idx []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byID == nil {
		c.byID = map[SegmentID][]byte{}
	}
	if _, ok := c.byID[id]; ok {
		return
	}
	if len(c.order) >= indexCacheEntries {
		delete(c.byID, c.order[0])
		c.order = c.order[1:]
	}
	c.byID[id] = idx
	c.order = append(c.order, id)
}
