package segment

import (
	"errors"
	"fmt"
	"io"

	"github.com/tierlog/tierlog/log/record"
)

// This file holds the checks that notice damage in a segment the log
// trusts (a rolled segment after a clean shutdown or below the recovery
// point, and the tail of the active segment after a clean shutdown), and
// the renames that move a damaged segment aside for an operator instead
// of deleting it.

// CorruptionError reports file contents that fail a format check, with
// the file and the byte position of the bad data. errors.Is(err,
// ErrCorruption) reports true for it.
type CorruptionError struct {
	Path   string // the file
	Pos    int64  // byte position of the bad data in it
	Reason string
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("%v: segment: %s@%d: %s", ErrCorruption, e.Path, e.Pos, e.Reason)
}

// Unwrap returns ErrCorruption.
func (e *CorruptionError) Unwrap() error { return ErrCorruption }

// indexBeyondLog returns a *CorruptionError if entries, a well-formed
// offset index (offsets and positions strictly increasing, offsets in
// range), has an entry at or past logSize: the .log is shorter than its
// index says, so batches once written are missing. An index that is not
// well-formed is garbage of its own and is rebuilt instead (nil).
func (s *Segment) indexBeyondLog(entries []byte, logSize int64) error {
	n := len(entries) / offsetEntrySize
	if n == 0 || !validateOffsetEntries(entries, 1<<31) {
		return nil
	}
	last := entries[(n-1)*offsetEntrySize:]
	rel, pos := be32(last), be32(last[4:])
	if pos < logSize {
		return nil
	}
	return &CorruptionError{Path: s.logPath, Pos: logSize, Reason: fmt.Sprintf(
		"the .log ends at %d but its offset index has offset %d at position %d", logSize, s.baseOffset+rel, pos)}
}

// CheckIndexBounds is the cheap check of a segment the log trusts: the
// last whole entry of the .index file must point below the end of the
// .log. It reads one entry (an open, a stat and an 8-byte pread); only if
// that entry fails does it load the whole index, to tell a .log that lost
// bytes (a *CorruptionError, as every later read of the segment returns)
// from an index file that is garbage (rebuilt from the .log, nil). A
// zero-length .log beside a non-empty .index fails here.
func (s *Segment) CheckIndexBounds() error {
	if s.closed.Load() {
		return ErrClosed
	}
	if s.offsetIdx.loaded.Load() || s.detached.Load() {
		return nil // loaded entries were validated against the .log
	}
	f, err := s.fs.Open(s.offsetIdx.path)
	if isNotExist(err) {
		return nil
	} else if err != nil {
		return ioErr("open", s.offsetIdx.path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ioErr("stat", s.offsetIdx.path, err)
	}
	whole := st.Size() / offsetEntrySize * offsetEntrySize
	if whole == 0 {
		return nil
	}
	var e [offsetEntrySize]byte
	if n, err := f.ReadAt(e[:], whole-offsetEntrySize); n < len(e) {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return ioErr("read", s.offsetIdx.path, err)
	}
	if pos := be32(e[4:]); pos >= 0 && pos < s.size.Load() {
		return nil
	}
	return s.loadOffsetIndex()
}

// VerifyTail validates the batches from the last offset-index entry to the
// end of the .log: framing, CRC, offsets increasing and within the
// segment's range, and the first batch ending at the entry's offset. It is
// what a clean open checks of the active segment, whose tail a crash after
// the clean-shutdown marker (or a bad disk) may have torn: an append at
// the file size would then sit behind garbage. The cost is one index load
// and at most IndexIntervalBytes plus one batch read. It returns the
// *TailError that Recover would cut, or nil if the tail is sound; err is
// an I/O failure. Damage below the last index entry is not looked for.
// An all-zero tail after the last batch (see zeroTail) is sound: the
// segment's size then ends at the last batch.
func (s *Segment) VerifyTail() (*TailError, error) {
	return s.VerifyTailFunc(nil)
}

// VerifyTailFunc is VerifyTail calling onBatch for each sound batch of the
// tail, in order, so a caller can check what the batches say (their leader
// epochs) in the same pass.
func (s *Segment) VerifyTailFunc(onBatch func(record.Batch)) (*TailError, error) {
	if err := s.checkWritable(); err != nil {
		return nil, err
	}
	if err := s.loadOffsetIndex(); err != nil {
		var ce *CorruptionError
		if errors.As(err, &ce) {
			return &TailError{Path: s.logPath, Pos: ce.Pos, Err: err}, nil
		}
		return nil, err
	}
	lastOffset, pos := s.offsetIdx.lastEntry()
	indexed := pos > 0
	next := s.baseOffset
	var buf []byte
	stop, tail, err := walkBatches(s.logFile, s.logPath, &buf, walkOptions{
		from: pos, end: s.size.Load(), maxBatchBytes: s.opts.MaxBatchBytes, validate: true,
		onBatch: func(p int64, b record.Batch) error {
			if indexed && p == pos && b.LastOffset() != lastOffset {
				return &stopWalk{corruptionf(s.logPath, p, "batch [%d, %d] where the offset index says offset %d",
					b.BaseOffset(), b.LastOffset(), lastOffset)}
			}
			if err := s.checkRecoveredOffsets(p, b, next); err != nil {
				return &stopWalk{err}
			}
			next = b.NextOffset()
			if onBatch != nil {
				onBatch(b)
			}
			return nil
		},
	})
	if err != nil || tail == nil {
		return nil, err
	}
	if zero, err := s.zeroTail(stop, s.size.Load()); err != nil {
		return nil, err
	} else if zero {
		// Preallocated space, not damage (see zeroTail): the size ends
		// at the last batch.
		s.shedZeroTail(stop, s.size.Load())
		return nil, nil
	}
	return &TailError{Path: s.logPath, Pos: stop, Err: tail}, nil
}

// DamagedFileName returns the name a file of a damaged segment is moved
// aside to: name + ".damaged", or name + ".<n>.damaged" for n > 0 when an
// earlier move took the plain one. ParseFileName does not recognise these
// names, so a loader neither opens nor deletes them.
func DamagedFileName(name string, n int) string {
	if n == 0 {
		return name + damagedSuffix
	}
	return fmt.Sprintf("%s.%d%s", name, n, damagedSuffix)
}

const damagedSuffix = ".damaged"

// freeDamagedName returns the first DamagedFileName of name in the
// directory that does not exist.
func (s *Segment) freeDamagedName(name string) (string, error) {
	for n := 0; ; n++ {
		p := s.fs.PathJoin(s.dir, DamagedFileName(name, n))
		if _, err := s.fs.Stat(p); isNotExist(err) {
			return p, nil
		} else if err != nil {
			return "", ioErr("stat", p, err)
		}
	}
}

// LinkAside hard-links the .log under a free DamagedFileName, so that the
// bytes a Recover or TruncateTo is about to cut stay on disk for an
// operator: the rewrite replaces the live name, the link keeps the old
// file. It costs no copy. The caller fsyncs the directory before the
// rewrite (the link must be durable first). It returns the link's path.
func (s *Segment) LinkAside() (string, error) {
	if err := s.checkWritable(); err != nil {
		return "", err
	}
	p, err := s.freeDamagedName(LogFileName(s.baseOffset))
	if err != nil {
		return "", err
	}
	if err := s.fs.Link(s.logPath, p); err != nil {
		return "", ioErr("link", s.logPath, err)
	}
	return p, nil
}

// MoveAside renames the segment's files (.log, .index, .timeindex,
// .txnindex, whichever exist) to free DamagedFileNames and closes the
// segment without writing its indexes. The caller fsyncs the directory:
// until then a crash may bring the live names back, which only makes the
// next recovery move them again. It returns the new paths, .log first.
func (s *Segment) MoveAside() ([]string, error) {
	if s.w.superseded {
		return nil, invalidArgf("%s: moving aside a segment whose files were replaced", s.logPath)
	}
	s.w.superseded = true
	s.detached.Store(true)
	var moved []string
	var errs []error
	for _, name := range []string{LogFileName(s.baseOffset), IndexFileName(s.baseOffset),
		TimeIndexFileName(s.baseOffset), TxnIndexFileName(s.baseOffset)} {
		from := s.fs.PathJoin(s.dir, name)
		if _, err := s.fs.Stat(from); isNotExist(err) {
			continue
		}
		to, err := s.freeDamagedName(name)
		if err == nil {
			err = ioErr("rename", from, s.fs.Rename(from, to))
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		moved = append(moved, to)
	}
	return moved, errors.Join(append(errs, s.Close())...)
}
