package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/tierlog/tierlog/truncation"
)

// ErrCopyStalled means the copy task of a partition stopped at a local
// segment whose batches fail their checks: it does not read or upload that
// segment again until the log changes under it (a truncation, or another
// segment at that base offset) or the partition's tasks are replaced (a
// leadership change). The error also wraps the *BatchCorruptionError.
var ErrCopyStalled = errors.New("remote: copy stalled at a corrupt local segment")

// verifiedLog is the SegmentData.Log a copy hands to the data plane: it
// passes every ReadAt through and feeds the bytes of reads that continue
// where the previous fed one ended to a batchVerifier. The data plane's
// one pass (the upload of an uncompressed segment, which checksums as it
// reads, or the compressing pass) reads the segment front to back on a
// store that uploads in order, so every batch is checked in that pass and
// the check adds no read; re-reads of bytes already fed pass unchecked,
// and bytes a multipart upload read out of order are checked by result.
// Once a batch fails, reads at or after it fail with its
// *BatchCorruptionError, so the upload stops before anything after the
// damage is read and its data object is never completed.
type verifiedLog struct {
	r io.ReaderAt
	// mu guards v. The feed is CPU only (CRC-32C of at most one read),
	// and parallel readers (a multipart upload's parts) read bytes
	// already fed, so they take it only briefly.
	mu sync.Mutex
	v  *batchVerifier
}

func (l *verifiedLog) ReadAt(p []byte, off int64) (int, error) {
	return l.readThrough([][]byte{p}, off, func() (int, error) { return l.r.ReadAt(p, off) })
}

// readThrough runs read, which fills bufs (consecutive bytes from off),
// and feeds what it read to the verifier when it continues the fed bytes.
func (l *verifiedLog) readThrough(bufs [][]byte, off int64, read func() (int, error)) (int, error) {
	want := int64(0)
	for _, b := range bufs {
		want += int64(len(b))
	}
	l.mu.Lock()
	if err := l.v.err; err != nil && off+want > l.v.pos {
		l.mu.Unlock()
		return 0, err
	}
	l.mu.Unlock()
	n, err := read()
	l.mu.Lock()
	defer l.mu.Unlock()
	if off == l.v.fed && n > 0 {
		for left, i := n, 0; left > 0; i++ {
			b := bufs[i][:min(len(bufs[i]), left)]
			if verr := l.v.feed(b); verr != nil {
				return 0, verr
			}
			left -= len(b)
		}
	}
	return n, err
}

// verifiedVecLog is a verifiedLog over a log that reads vectored
// (VectorReaderAt), which it passes on to the data plane.
type verifiedVecLog struct {
	*verifiedLog
	vec VectorReaderAt
}

func (l *verifiedVecLog) ReadvAt(bufs [][]byte, off int64) (int, error) {
	return l.readThrough(bufs, off, func() (int, error) { return l.vec.ReadvAt(bufs, off) })
}

// newVerifiedLog wraps r, keeping its VectorReaderAt if it has one.
func newVerifiedLog(r io.ReaderAt, v *batchVerifier) (*verifiedLog, io.ReaderAt) {
	l := &verifiedLog{r: r, v: v}
	if vec, ok := r.(VectorReaderAt); ok {
		return l, &verifiedVecLog{verifiedLog: l, vec: vec}
	}
	return l, l
}

// failed returns the first batch failure the data plane's reads met.
func (l *verifiedLog) failed() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.v.err
}

// result returns the verification's outcome after the data plane's copy
// returned: when the data plane did not read the whole segment in order
// (a SegmentStorage other than *StorageManager), the rest is read and
// checked now, an extra pass only such a data plane pays.
func (l *verifiedLog) result(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.v.err != nil || l.v.fed == l.v.c.size {
		return l.v.finish()
	}
	buf := getBuffer(checksumBlockBytes)
	defer putBuffer(buf)
	for l.v.fed < l.v.c.size {
		if err := ctx.Err(); err != nil {
			return err
		}
		b := (*buf)[:min(int64(len(*buf)), l.v.c.size-l.v.fed)]
		if err := readFullAt(l.r, b, l.v.fed); err != nil {
			return err
		}
		if err := l.v.feed(b); err != nil {
			return err
		}
	}
	return l.v.finish()
}

// copyStall is the corrupt segment a partition's copy task stopped at.
type copyStall struct {
	base, size int64
	count      truncation.Count
	err        error // the copy's error, wrapping the *BatchCorruptionError
}

// stalledAt returns the stall error when the copy of candidate c (of
// size bytes) under count would only meet the same damage again, and
// clears a stall the log has moved past.
func (pt *partitionTasks) stalledAt(c CopyCandidate, size int64, count truncation.Count) error {
	s := pt.copy.stalled
	if s == nil {
		return nil
	}
	if s.base == c.BaseOffset && s.size == size && s.count == count {
		return fmt.Errorf("%w: segment %d: %w", ErrCopyStalled, s.base, s.err)
	}
	// The log truncated, or another segment is there: try again.
	pt.setStall(nil)
	return nil
}

// setStall records the copy task's stall (nil clears it).
//
// REQUIRES: pt.copyMu held.
func (pt *partitionTasks) setStall(s *copyStall) {
	pt.copy.stalled = s
	if s == nil {
		pt.stallGauge.Store(0)
	} else {
		pt.stallGauge.Store(s.base + 1)
	}
}
