package remote

import (
	"encoding/binary"
	"fmt"

	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/internal/invariants"
	"github.com/tierlog/tierlog/log/record"
)

// BatchCorruptionError reports a batch of a segment's .log that fails its
// framing or its CRC (the record package's checks), or that breaks the
// segment's offset order. A copy finds it in the local segment before the
// segment is tiered (Remote false); a remote read finds it in tiered bytes
// that passed their chunk checksums, which is what a segment tiered
// without the copy's check, or one whose base-offset field (outside the
// batch CRC) was damaged, looks like (Remote true).
//
// errors.Is matches ErrCorruption, and ErrCorrupt as well when Remote; a
// batch cut by the segment's end is corruption here (a rolled segment has
// no tail to tear), and errors.As still reaches the record package's
// error in Err.
type BatchCorruptionError struct {
	Segment SegmentID
	// StartOffset is the segment's base offset.
	StartOffset int64
	// Position is the byte position of the bad batch in the segment's .log.
	Position int64
	// BatchBaseOffset is the base offset in the bad batch's header,
	// record.UndefinedOffset when fewer than 8 bytes of it exist.
	BatchBaseOffset int64
	// Remote tells a remote read's finding from a copy's.
	Remote bool
	// Reason says which check failed.
	Reason string
	// Err is the record package's error (*record.CorruptBatchError), or
	// nil for a check of this package (framing, offset order).
	Err error
}

func (e *BatchCorruptionError) Error() string {
	where := "local"
	if e.Remote {
		where = "remote"
	}
	msg := fmt.Sprintf("remote: corrupt batch in %s segment %s (start offset %d) at position %d (batch base offset %d): %s",
		where, e.Segment, e.StartOffset, e.Position, e.BatchBaseOffset, e.Reason)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns ErrCorruption, ErrCorrupt for remote data, and Err.
func (e *BatchCorruptionError) Unwrap() []error {
	errs := []error{ErrCorruption}
	if e.Remote {
		errs = append(errs, ErrCorrupt)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

// batchChecker holds what the checks of one segment's batches need: the
// segment's identity and bounds, and the offset order so far. Both the
// copy (batchVerifier) and the remote read (batchStream) use it.
type batchChecker struct {
	seg    SegmentID
	start  int64 // the segment's base offset
	end    int64 // its end offset (inclusive)
	size   int64 // bytes of its .log
	remote bool
	// nextOffset is the lowest base offset the next batch may have: the
	// segment's start, then one past the previous batch's last offset.
	nextOffset int64
}

func newBatchChecker(m *SegmentMetadata, remote bool) batchChecker {
	return batchChecker{seg: m.SegmentID, start: m.StartOffset, end: m.EndOffset, size: m.SizeBytes,
		remote: remote, nextOffset: m.StartOffset}
}

// corrupt returns a *BatchCorruptionError about the batch at pos whose
// header starts with hdr (fewer than 8 bytes: base offset unknown).
func (c *batchChecker) corrupt(pos int64, hdr []byte, cause error, format string, args ...any) *BatchCorruptionError {
	baseOffset := int64(base.UndefinedOffset)
	if len(hdr) >= 8 {
		baseOffset = int64(binary.BigEndian.Uint64(hdr))
	}
	return &BatchCorruptionError{Segment: c.seg, StartOffset: c.start, Position: pos, BatchBaseOffset: baseOffset,
		Remote: c.remote, Reason: fmt.Sprintf(format, args...), Err: cause}
}

// declaredSize returns the size the batch at pos declares in its first
// LogOverhead bytes hdr, checked against the header size and the
// segment's end.
func (c *batchChecker) declaredSize(pos int64, hdr []byte) (int64, error) {
	size := int64(record.LogOverhead) + int64(int32(binary.BigEndian.Uint32(hdr[8:record.LogOverhead])))
	switch {
	case size < record.HeaderSize:
		return 0, c.corrupt(pos, hdr, nil, "declares %d bytes, below the header size %d", size, record.HeaderSize)
	case size > c.size-pos:
		return 0, c.corrupt(pos, hdr, nil, "declares %d bytes, the segment has %d after it", size, c.size-pos)
	}
	return size, nil
}

// check validates the whole batch b at pos (record.ReadBatch and
// Batch.Validate: size, magic, CRC, header fields) and its offsets: at or
// above nextOffset, not beyond the segment's end offset. The base offset
// is outside the batch CRC, so only this order check catches a damaged
// one.
func (c *batchChecker) check(pos int64, b []byte) (record.Batch, error) {
	batch, err := record.ReadBatch(b)
	if err == nil {
		err = batch.Validate()
	}
	if err != nil {
		return record.Batch{}, c.corrupt(pos, b, err, "fails its check")
	}
	first, last := batch.BaseOffset(), batch.LastOffset()
	switch {
	case last < first: // the delta overflowed the base offset
		return record.Batch{}, c.corrupt(pos, b, nil, "last offset overflows")
	case first < c.nextOffset:
		return record.Batch{}, c.corrupt(pos, b, nil, "base offset %d below %d (the segment start or after the previous batch)",
			first, c.nextOffset)
	case last > c.end:
		return record.Batch{}, c.corrupt(pos, b, nil, "last offset %d beyond the segment's end offset %d", last, c.end)
	}
	c.nextOffset = last + 1
	return batch, nil
}

// batchVerifier checks the batches of a segment's .log from its bytes fed
// in order, in pieces of any size: the copy feeds it the blocks its
// checksum pass reads, so the check costs no extra read of the segment.
// Batches inside one piece are checked in place; a batch that straddles
// pieces is gathered into pending first, so memory is bounded by the
// largest such batch (itself bounded by the log's maximum batch size).
type batchVerifier struct {
	c batchChecker
	// fed is how many bytes were fed; pos is where the batch being
	// gathered starts (all bytes before it are checked).
	fed, pos int64
	// pending holds the bytes [pos, fed) of a batch not complete yet;
	// pendingSize is its declared size once its first LogOverhead bytes
	// are in, else 0.
	pending     []byte
	pendingSize int64
	err         error // sticky: the first failure
}

func newBatchVerifier(m *SegmentMetadata) *batchVerifier {
	return &batchVerifier{c: newBatchChecker(m, false)}
}

// feed checks the next len(p) bytes of the segment.
func (v *batchVerifier) feed(p []byte) error {
	if v.err != nil {
		return v.err
	}
	v.fed += int64(len(p))
	for len(p) > 0 {
		if len(v.pending) == 0 && len(p) >= record.LogOverhead {
			size, err := v.c.declaredSize(v.pos, p)
			if err != nil {
				return v.fail(err)
			}
			if int64(len(p)) >= size {
				if _, err := v.c.check(v.pos, p[:size]); err != nil {
					return v.fail(err)
				}
				v.pos += size
				p = p[size:]
				continue
			}
		}
		// Gather: first the length field, then the rest of the batch.
		want := int64(record.LogOverhead)
		if v.pendingSize > 0 {
			want = v.pendingSize
		}
		take := min(want-int64(len(v.pending)), int64(len(p)))
		v.pending = append(v.pending, p[:take]...)
		p = p[take:]
		if int64(len(v.pending)) < want {
			continue // p is spent
		}
		if v.pendingSize == 0 {
			size, err := v.c.declaredSize(v.pos, v.pending)
			if err != nil {
				return v.fail(err)
			}
			v.pendingSize = size // > LogOverhead: gather the rest
			continue
		}
		if _, err := v.c.check(v.pos, v.pending); err != nil {
			return v.fail(err)
		}
		v.pos += v.pendingSize
		v.pending, v.pendingSize = v.pending[:0], 0
	}
	return nil
}

// finish reports the result once the whole segment was fed: nil when
// every batch checked out, else the first failure.
func (v *batchVerifier) finish() error {
	if v.err == nil && len(v.pending) > 0 {
		// Only fewer than LogOverhead bytes can be left over: a longer
		// declared size past the end fails declaredSize.
		v.fail(v.c.corrupt(v.pos, v.pending, nil, "%d bytes at the segment's end, too few for a batch", len(v.pending)))
	}
	invariants.Assertf(v.err != nil || (v.pos == v.fed && v.fed == v.c.size),
		"batch verifier finished at %d of %d fed, segment of %d", v.pos, v.fed, v.c.size)
	return v.err
}

func (v *batchVerifier) fail(err error) error {
	v.err = err
	return err
}
