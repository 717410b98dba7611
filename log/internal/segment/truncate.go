package segment

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tierlog/tierlog/internal/invariants"
	"github.com/tierlog/tierlog/log/record"
)

// TruncateTo removes the batches from the one holding offset to the end
// (Kafka's LogSegment.truncateTo): the batch whose last offset is >= offset
// is removed whole, with the index entries at or above it. offset must be a
// batch boundary (leader epoch boundaries and high watermarks are); this is
// asserted under invariants, and otherwise the cut is at that batch's
// start, as in Kafka.
//
// vfs.File has no truncate, so the kept prefix is rewritten (see the
// package comment, "Truncation"): it costs O(kept bytes) and two
// directory fsyncs, which is acceptable because truncations are rare
// (divergence after a leader change, a torn tail at recovery). It returns
// a new *Segment for the truncated files and the number of bytes removed.
// The receiver is left as it was and stays readable (its open handle still
// reads the old file), but may no longer write: the log swaps the new
// segment in and Closes the receiver when its readers are done (Delete on
// it only closes). If nothing is removed it returns the receiver and 0.
//
// If an error is returned the receiver is still the live segment, except
// when the error says the rename may have happened; it is then sticky and
// the log must reopen the segment from disk.
func (s *Segment) TruncateTo(offset int64) (*Segment, int64, error) {
	return s.truncateTo(offset, true)
}

// truncateTo is TruncateTo; checkBoundary = false skips the batch-boundary
// assertion so tests can show Kafka's behaviour for an offset inside a
// batch (the whole batch holding it goes).
func (s *Segment) truncateTo(offset int64, checkBoundary bool) (*Segment, int64, error) {
	if err := s.checkWritable(); err != nil {
		return nil, 0, err
	}
	size := s.size.Load()
	h, found, err := s.translate(offset, size)
	if err != nil {
		return nil, 0, err
	}
	if !found {
		return s, 0, nil
	}
	// Inside a batch means the batch holding offset starts below it; a
	// first batch found above offset (a gap a follower append left, or a
	// segment whose records start above its base) splits nothing.
	invariants.Assertf(!checkBoundary || h.baseOffset >= offset || offset < s.baseOffset,
		"%s: truncation offset %d is inside batch [%d, %d]", s.logPath, offset, h.baseOffset, h.lastOffset)
	if err := s.loadTimeIndex(); err != nil {
		return nil, 0, err
	}
	// Entries at or above the batch start go with it. Index offsets are
	// last offsets of batches, so the kept ones all point below h.pos.
	offsetEntries := s.offsetIdx.entriesBelow(h.baseOffset)
	timeEntries := s.timeIdx.entriesBelow(h.baseOffset)
	ns, err := s.rewrite(h.pos, offsetEntries, timeEntries)
	if err != nil {
		return nil, 0, err
	}
	return ns, size - h.pos, nil
}

// RecoveryResult reports what Recover found.
type RecoveryResult struct {
	// ValidBytes is the size of the recovered .log: the valid prefix.
	ValidBytes int64
	// TruncatedBytes is the number of bytes cut after it.
	TruncatedBytes int64
	// Tail says why recovery stopped before the end of the file (torn or
	// corrupt, and where); nil when the whole file was valid.
	Tail *TailError
	// ZeroTailBytes is the length of an all-zero tail after the valid
	// prefix (preallocated space a file system exposed, see zeroTail):
	// not data, not cut, not damage. The segment's size ends before it
	// and appends overwrite it.
	ZeroTailBytes int64
	// ResumedAt is the .log position recovery started reading at: 0, or
	// the boundary at RecoverOptions.From.
	ResumedAt int64
}

// Recover rebuilds the segment from its .log (Kafka's
// LogSegment.recover): it reads the file in bounded chunks (1 MiB, more
// only for a larger batch), validates every batch (framing, CRC, offsets
// above the previous batch's and within MaxInt32 of the base), calls
// onBatch for each valid one in order (the log assigns leader epochs and
// replays producer state there; the batch aliases a buffer that is reused
// after the call), rebuilds both indexes with Append's interval rule,
// and stops at the first torn or corrupt batch. The rebuilt entries,
// with the final time-index entry, replace the in-memory indexes; the
// index files are left to the next index write unless bytes were cut
// (see index.adoptFile).
//
// If bytes were cut it returns a new *Segment, exactly as TruncateTo does
// (same lifecycle for the receiver); otherwise it returns the receiver,
// its indexes replaced in place. An error from onBatch aborts recovery
// and is returned as is; nothing is changed then. An all-zero tail after
// the last valid batch is not cut (see zeroTail): the receiver is
// returned with its size ending before the zeros (ZeroTailBytes).
func (s *Segment) Recover(onBatch func(record.Batch) error) (*Segment, RecoveryResult, error) {
	return s.RecoverWith(RecoverOptions{OnBatch: onBatch})
}

// RecoverOptions are the callbacks of RecoverWith.
type RecoverOptions struct {
	// OnBatch is Recover's onBatch.
	OnBatch func(record.Batch) error
	// BeforeCut, if set, is called when recovery is about to cut bytes,
	// after the walk and before the rewrite: the log moves damaged bytes
	// aside there (LinkAside), durably, while the .log still holds them.
	// An error aborts recovery with nothing cut.
	BeforeCut func(tail *TailError) error
	// From, when above the base offset, resumes recovery at the batch
	// boundary at that offset (a recovery point the log made durable
	// with the segment's index files, see resumeBuilder): the bytes below
	// it are trusted, the index builder continues from the entries below
	// it, and only the batches from it on are read, validated and passed
	// to OnBatch. If the files show no such boundary, RecoverWith returns
	// ErrCannotResume before any callback and changes nothing.
	From int64
}

// RecoverWith is Recover with the callbacks of o.
func (s *Segment) RecoverWith(o RecoverOptions) (*Segment, RecoveryResult, error) {
	onBatch := o.OnBatch
	if err := s.checkWritable(); err != nil {
		return nil, RecoveryResult{}, err
	}
	size := s.size.Load()
	b, start := newIndexBuilder(s, s.opts.MaxIndexBytes), int64(0)
	// files are the index files as found, read once (by resumeBuilder
	// when resuming): the rebuilt entries are adopted against them.
	var files *[2]indexFile
	if o.From > s.baseOffset {
		var err error
		if b, start, files, err = s.resumeBuilder(o.From, size); err != nil {
			return nil, RecoveryResult{}, err
		}
	}
	var buf []byte
	stop, tail, err := walkBatches(s.logFile, s.logPath, &buf, walkOptions{
		from:          start,
		end:           size,
		maxBatchBytes: s.opts.MaxBatchBytes,
		validate:      true,
		mapped:        s.mappedBytes(size),
		onBatch: func(pos int64, batch record.Batch) error {
			if err := s.checkRecoveredOffsets(pos, batch, b.next); err != nil {
				return &stopWalk{err}
			}
			if onBatch != nil {
				if err := onBatch(batch); err != nil {
					return err
				}
			}
			b.add(pos, batch)
			return nil
		},
	})
	if err != nil {
		return nil, RecoveryResult{}, err
	}
	_ = b.timeIdx.maybeAppend(b.maxTimestamp, b.offsetOfMaxTimestamp, true) // full at capacity: skip
	res := RecoveryResult{ValidBytes: stop, TruncatedBytes: size - stop, ResumedAt: start}
	if tail != nil {
		zero, err := s.zeroTail(stop, size)
		if err != nil {
			return nil, RecoveryResult{}, err
		}
		if zero {
			tail, res.TruncatedBytes, res.ZeroTailBytes = nil, 0, size-stop
		} else {
			res.Tail = &TailError{Path: s.logPath, Pos: stop, Err: tail}
		}
	}
	offsetEntries, timeEntries := b.offsetIdx.mu.entries, b.timeIdx.mu.entries
	if tail != nil && stop < size {
		if o.BeforeCut != nil {
			if err := o.BeforeCut(res.Tail); err != nil {
				return nil, RecoveryResult{}, err
			}
		}
		ns, err := s.rewrite(stop, offsetEntries, timeEntries)
		if err != nil {
			return nil, RecoveryResult{}, err
		}
		return ns, res, nil
	}
	if files == nil {
		files = new([2]indexFile)
		for i, x := range []*index{&s.offsetIdx.index, &s.timeIdx.index} {
			if files[i], err = s.readIndexFile(x); err != nil {
				return nil, RecoveryResult{}, err
			}
		}
	}
	s.offsetIdx.adoptFile(offsetEntries, files[0])
	s.timeIdx.adoptFile(timeEntries, files[1])
	if res.ZeroTailBytes > 0 {
		s.shedZeroTail(stop, size)
	}
	s.installRecovered(b, stop)
	return s, res, nil
}

// zeroTail reports whether [from, end) of the .log holds only zero bytes.
// Such a tail is file space without data: a preallocation that grew the
// file (vfs.File.Preallocate may), or blocks a file system exposed after
// a crash with the size ahead of the data. It holds no record: a batch
// starts with its base offset and a length of at least minBatchLength, so
// an all-zero header never frames, and nothing follows it but zeros.
// The tail is read in bounded chunks.
func (s *Segment) zeroTail(from, end int64) (bool, error) {
	buf := make([]byte, min(end-from, 64<<10))
	for pos := from; pos < end; {
		chunk := buf[:min(int64(len(buf)), end-pos)]
		if err := s.readAt(chunk, pos); err != nil {
			return false, err
		}
		for _, c := range chunk {
			if c != 0 {
				return false, nil
			}
		}
		pos += int64(len(chunk))
	}
	return true, nil
}

// shedZeroTail ends the segment's size at stop, before a zero tail that
// reaches the file's end (fileSize): appends overwrite the zeros, and
// trimLog releases what is left at roll or close. REQUIRES: the
// segment's writer, before readers see the segment.
func (s *Segment) shedZeroTail(stop, fileSize int64) {
	s.size.Store(stop)
	s.w.reserved = max(s.w.reserved, fileSize)
}

// checkRecoveredOffsets rejects a valid batch whose offsets cannot follow
// the previous one in this segment.
func (s *Segment) checkRecoveredOffsets(pos int64, b record.Batch, next int64) error {
	switch {
	case b.BaseOffset() < next:
		return corruptionf(s.logPath, pos, "batch base offset %d below the previous batch's next offset %d",
			b.BaseOffset(), next)
	case b.LastOffset()-s.baseOffset > maxRelativeOffset:
		return corruptionf(s.logPath, pos, "batch last offset %d overflows base offset %d",
			b.LastOffset(), s.baseOffset)
	}
	return nil
}

// installRecovered sets the segment's state to what the builder computed
// over a .log of size bytes. The index entries must be installed already.
func (s *Segment) installRecovered(b *indexBuilder, size int64) {
	s.mu.Lock()
	s.mu.maxTimestamp, s.mu.offsetOfMaxTimestamp, s.mu.maxKnown = b.maxTimestamp, b.offsetOfMaxTimestamp, true
	s.mu.firstBatchTimestamp, s.mu.firstState = b.firstTimestamp, firstKnown
	if b.batches == 0 {
		s.mu.firstState = firstNone
	}
	s.mu.Unlock()
	_, lastPos := s.offsetIdx.lastEntry()
	s.w.bytesSinceLastIndexEntry, s.w.counterKnown = size-lastPos, true
	s.nextOffset.Store(b.next)
}

// replaceIndexFiles writes both index files atomically with the given
// entries and fsyncs the directory; the caller installs the entries in
// memory (for TruncateTo, in the new segment: the receiver keeps its own,
// which its readers use). The append handles are closed first: they point
// at the files being replaced.
func (s *Segment) replaceIndexFiles(offsetEntries, timeEntries []byte) error {
	if err := errors.Join(s.offsetIdx.closeFile(), s.timeIdx.closeFile()); err != nil {
		return err
	}
	// Until the renames are durable the files may hold anything valid;
	// mark them stale so a failure below is repaired by the next write.
	s.offsetIdx.markStale()
	s.timeIdx.markStale()
	// Copies: vfs.File.Write may modify what it is given.
	if err := writeFileAtomic(s.fs, s.offsetIdx.path, clone(offsetEntries)); err != nil {
		return err
	}
	if err := writeFileAtomic(s.fs, s.timeIdx.path, clone(timeEntries)); err != nil {
		return err
	}
	return syncDir(s.fs, s.dir)
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }

// rewrite replaces the segment's files with the prefix [0, cut) of the
// .log and the given index entries, and returns the segment object for
// them. Steps (docs/log.md, "Each operation, step by step"):
//
//  1. copy [0, cut) to <base>.log.tmp, fsync it;
//  2. write <base>.index.tmp and <base>.timeindex.tmp, fsync, rename them
//     over the index files, fsync the directory;
//  3. rename <base>.log.tmp over <base>.log, fsync the directory. Commit
//     point.
//
// A crash before 3 leaves the old .log with index files that are a prefix
// of its own (truncated entries are a prefix of the old ones; rebuilt
// entries index a prefix of the same batches), plus .tmp files the loader
// deletes. The indexes are renamed first because an index longer than its
// .log would point past the end, while a shorter one is only sparser.
func (s *Segment) rewrite(cut int64, offsetEntries, timeEntries []byte) (*Segment, error) {
	tmpLog := tempName(s.logPath)
	st, err := s.copyPrefix(tmpLog, cut)
	if err != nil {
		_ = s.fs.Remove(tmpLog)
		return nil, err
	}
	if err := s.replaceIndexFiles(offsetEntries, timeEntries); err != nil {
		_ = s.fs.Remove(tmpLog)
		return nil, err
	}
	if err := s.fs.Rename(tmpLog, s.logPath); err != nil {
		_ = s.fs.Remove(tmpLog)
		return nil, ioErr("rename", tmpLog, err)
	}
	// From here the directory holds the new .log: the receiver no longer
	// matches the disk, whatever happens next.
	s.w.superseded = true
	s.detached.Store(true)
	if err := syncDir(s.fs, s.dir); err != nil {
		s.w.err = fmt.Errorf("segment: %s: truncation renamed but not synced, reopen the segment: %w", s.logPath, err)
		return nil, s.w.err
	}
	ns, err := newSegment(s.fs, s.dir, s.baseOffset, s.createdMs.Load(), s.opts)
	if err == nil {
		err = ns.openLog()
	}
	if err != nil {
		s.w.err = fmt.Errorf("segment: %s: truncated but cannot reopen: %w", s.logPath, err)
		return nil, s.w.err
	}
	invariants.Assertf(ns.size.Load() == cut, "%s: rewritten size %d, want %d", s.logPath, ns.size.Load(), cut)
	ns.offsetIdx.install(offsetEntries, len(offsetEntries), false)
	ns.timeIdx.install(timeEntries, len(timeEntries), false)
	ns.installRecovered(st, cut)
	return ns, nil
}

// copyPrefix writes [0, cut) of the .log to path, fsynced and closed,
// framing the batches on the way to recompute the timestamps and next
// offset of the prefix. A batch that does not frame below cut is
// corruption: the copy is abandoned.
func (s *Segment) copyPrefix(path string, cut int64) (*indexBuilder, error) {
	f, err := s.fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, ioErr("create", path, err)
	}
	b := newIndexBuilder(s, s.opts.MaxIndexBytes)
	var buf []byte
	stop, tail, err := walkBatches(s.logFile, s.logPath, &buf, walkOptions{
		end:           cut,
		maxBatchBytes: s.opts.MaxBatchBytes,
		onBatch: func(pos int64, batch record.Batch) error {
			b.add(pos, batch)
			return nil
		},
		onChunk: func(_ int64, chunk []byte) error {
			_, err := f.Write(chunk)
			return ioErr("write", path, err)
		},
	})
	if err == nil && stop < cut {
		err = corruptionf(s.logPath, stop, "copying the kept prefix: %v", tail)
	}
	if err == nil {
		err = ioErr("sync", path, f.Sync())
	}
	if cerr := f.Close(); err == nil {
		err = ioErr("close", path, cerr)
	}
	if err != nil {
		return nil, err
	}
	return b, nil
}
