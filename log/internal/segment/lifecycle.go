package segment

import (
	"errors"

	"github.com/tierlog/tierlog/internal/invariants"
)

// RollParams are the inputs of ShouldRoll, the facts about the append
// about to happen and the log's limits.
type RollParams struct {
	// MaxSegmentBytes is the log's segment size limit. Kafka:
	// segment.bytes.
	MaxSegmentBytes int64
	// MaxSegmentMs is the log's segment age limit. Kafka: segment.ms.
	MaxSegmentMs int64
	// MaxTimestampInBatch is the largest timestamp of the incoming
	// batches.
	MaxTimestampInBatch int64
	// MaxOffsetInBatch is the largest offset of the incoming batches.
	MaxOffsetInBatch int64
	// IncomingBytes is the size of the incoming batches.
	IncomingBytes int
	// NowMs is the current time (injected, milliseconds).
	NowMs int64
}

// ShouldRoll reports whether the log must roll a new segment before
// appending (Kafka's LogSegment.shouldRoll): true iff
//
//   - the append would not fit: Size > MaxSegmentBytes - IncomingBytes;
//   - the segment is not empty and is too old: the time waited exceeds
//     MaxSegmentMs - RollJitterMs, where the time waited is
//     MaxTimestampInBatch - the first batch's MaxTimestamp if that is >= 0,
//     else NowMs - the creation time;
//   - either index is full (the time index at capacity - 1);
//   - MaxOffsetInBatch does not fit relative to the base offset.
//
// An index that cannot be loaded counts as not full; the append then
// returns the error.
func (s *Segment) ShouldRoll(p RollParams) bool {
	size := s.size.Load()
	if size > p.MaxSegmentBytes-int64(p.IncomingBytes) {
		return true
	}
	if size > 0 && s.timeWaitedForRoll(p.NowMs, p.MaxTimestampInBatch) > p.MaxSegmentMs-s.opts.RollJitterMs {
		return true
	}
	if s.loadOffsetIndex() == nil && s.offsetIdx.isFull() {
		return true
	}
	if s.loadTimeIndex() == nil && s.timeIdx.isFull() {
		return true
	}
	rel := p.MaxOffsetInBatch - s.baseOffset
	return rel < 0 || rel > maxRelativeOffset
}

// timeWaitedForRoll is Kafka's LogSegment.timeWaitedForRoll: record time
// when the segment has a timestamped first batch, wall time otherwise.
func (s *Segment) timeWaitedForRoll(nowMs, maxTimestampInBatch int64) int64 {
	if first, ok := s.FirstBatchTimestamp(); ok && first >= 0 {
		return maxTimestampInBatch - first
	}
	return nowMs - s.createdMs.Load()
}

// OnBecomeInactive is called when the log rolls past this segment. It
// appends the final time-index entry (the segment's max timestamp, using
// the slot the full rule keeps free), writes and fsyncs both index files
// and closes their handles: an inactive segment holds one file descriptor,
// its .log. Kafka also trims its preallocated index files here; ours
// already hold exactly their entries. The .log is not fsynced: the log's
// Flush does that.
//
// Nor is the directory: the entries of files created here (and the
// segment's own, if no Flush synced it yet) are left to the segment's
// next Flush or Close, or to the log's next directory fsync. A directory
// fsync here, under the log's mutex at a roll, would make this segment's
// entry durable while the data of a segment rolled before it may not be
// (the log syncs that data first, outside its mutex: syncRolled), and a
// crash would then recover this segment above an empty one. Index files
// whose entries a crash loses are rebuilt from the .log.
func (s *Segment) OnBecomeInactive() error {
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	if err := s.checkWritable(); err != nil {
		return err
	}
	if err := s.appendFinalTimeEntry(); err != nil {
		return err
	}
	created, err := s.writeIndexFiles(true)
	if created {
		s.w.needDirSync = true
	}
	err = errors.Join(err, s.offsetIdx.closeFile(), s.timeIdx.closeFile(), s.trimLog())
	return err
}

// appendFinalTimeEntry appends (max timestamp, its offset) to the time
// index, skipping the full check (Kafka's maybeAppend(..., true)).
func (s *Segment) appendFinalTimeEntry() error {
	if err := s.loadMaxTimestamp(); err != nil {
		return err
	}
	s.mu.Lock()
	ts, offset := s.mu.maxTimestamp, s.mu.offsetOfMaxTimestamp
	s.mu.Unlock()
	err := s.timeIdx.maybeAppend(ts, offset, true)
	// Full at capacity: there is nothing more to say than the index
	// holds. Anything else is a bug: the entry is the running maximum.
	invariants.Assertf(err == nil || errors.Is(err, ErrIndexFull), "final time index entry: %v", err)
	return nil
}

// writeIndexes writes the pending entries of both indexes (and fsyncs
// them if sync), then fsyncs the directory if a file was created or
// replaced.
func (s *Segment) writeIndexes(sync bool) error {
	dirty, err := s.writeIndexFiles(sync)
	if err != nil {
		return err
	}
	if dirty || s.w.needDirSync {
		if err := syncDir(s.fs, s.dir); err != nil {
			return err
		}
		s.w.needDirSync = false
	}
	return nil
}

// writeIndexFiles writes the pending entries of both indexes (and
// fsyncs them if sync) and reports whether a file was created or
// replaced: its directory entry is not durable yet.
func (s *Segment) writeIndexFiles(sync bool) (created bool, err error) {
	var errs []error
	for _, x := range []*index{&s.offsetIdx.index, &s.timeIdx.index} {
		changed, err := x.writePending(s.fs, sync)
		created = created || changed
		errs = append(errs, err)
	}
	return created, errors.Join(errs...)
}

// Flush makes everything appended durable: fdatasync of the .log, then
// the pending index entries are written and fsynced, then the directory
// is fsynced if a file of the segment is new. The .log goes first so an
// index entry is never durable before the bytes it points to. A failed
// .log fsync is sticky (the kernel may have dropped the dirty pages; the
// log must reload); a failed index write is retried by the next Flush,
// which rewrites the whole index file.
//
// On a segment replaced by TruncateTo or Recover, Flush does nothing: its
// files belong to the new segment.
func (s *Segment) Flush() error {
	if s.w.superseded && !s.closed.Load() {
		return nil
	}
	if err := s.FlushData(); err != nil {
		return err
	}
	return s.writeIndexes(true)
}

// FlushIndexes writes the pending entries of both index files and
// fsyncs them (and the directory when a file was created), without the
// .log: the log calls it for the active segment, beside appends, after
// the .log's fdatasync, when it makes a recovery point inside the segment
// durable (every entry it writes then points below bytes already
// durable, or is dropped by a resumed recovery, see resumeBuilder).
// Entries appended meanwhile may be written too. A no-op on a segment
// that is closed or was replaced.
func (s *Segment) FlushIndexes() error {
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	if s.w.superseded || s.closed.Load() {
		return nil
	}
	return s.writeIndexes(true)
}

// FlushData makes the appended bytes of the .log durable (fdatasync) and
// nothing else: the index files and the directory entry are left to Flush,
// OnBecomeInactive or Close. The log uses it for the active segment, whose
// indexes recovery rebuilds after any crash anyway (it recovers from the
// segment holding the recovery point), so an fsync per append costs one
// fsync instead of three. A failed fsync is sticky, as in Flush.
func (s *Segment) FlushData() error {
	if s.w.superseded && !s.closed.Load() {
		return nil
	}
	if err := s.checkWritable(); err != nil {
		return err
	}
	if err := s.logFile.SyncData(); err != nil {
		s.w.err = ioErr("sync", s.logPath, err)
		return s.w.err
	}
	return nil
}

// Close releases the segment's file handles. Like Kafka's, it first
// appends the final time-index entry and writes the pending index entries
// (fsynced), so a cleanly closed segment reopens with exact indexes; it
// does not fsync the .log (the log flushes before a clean shutdown). Close
// is idempotent; every other method then returns ErrClosed. The log calls
// it once no reader holds the segment.
func (s *Segment) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	var errs []error
	if !s.w.superseded && s.w.err == nil && s.timeIdx.loaded.Load() {
		errs = append(errs, s.appendFinalTimeEntry(), s.writeIndexes(true))
	}
	if !s.w.superseded {
		errs = append(errs, s.trimLog())
	}
	// No reader holds the segment (the log closes it after its last
	// view), so no slice of the mapping is in use.
	errs = append(errs, s.offsetIdx.closeFile(), s.timeIdx.closeFile(), s.unmap())
	if s.logFile != nil {
		errs = append(errs, ioErr("close", s.logPath, s.logFile.Close()))
	}
	return errors.Join(errs...)
}

// Delete closes the segment and removes its files; see RemoveFiles. A
// segment replaced by TruncateTo or Recover is only closed: the files
// under its names are the new segment's.
func (s *Segment) Delete() error {
	if s.closed.Load() && !s.w.superseded {
		// Closed but not removed: remove the files, which Close left.
		return s.removeFiles()
	}
	err := s.RemoveFiles()
	return errors.Join(err, s.Close())
}

// RemoveFiles removes the segment's files (.log first, then the indexes
// and any temporary files; missing files are fine) but keeps its open
// handles, so readers that still hold the segment keep reading (Linux and
// MemFS keep an unlinked file's data until its last handle is closed).
// From then on the segment writes nothing (Close writes no index entries);
// the log Closes it when its readers are done. On a segment replaced by
// TruncateTo or Recover it does nothing: the files are the new segment's.
//
// Removal is not fsynced: after a crash a removed segment may reappear,
// and the log's loader drops segments below its log start offset (Kafka
// renames to .deleted for the same reason).
func (s *Segment) RemoveFiles() error {
	if s.w.superseded {
		return nil
	}
	s.w.superseded = true
	s.detached.Store(true)
	return s.removeFiles()
}

func (s *Segment) removeFiles() error {
	var errs []error
	for _, name := range []string{LogFileName(s.baseOffset), IndexFileName(s.baseOffset),
		TimeIndexFileName(s.baseOffset), TxnIndexFileName(s.baseOffset)} {
		for _, p := range []string{s.fs.PathJoin(s.dir, name), s.fs.PathJoin(s.dir, tempName(name))} {
			if err := s.fs.Remove(p); err != nil && !isNotExist(err) {
				errs = append(errs, ioErr("remove", p, err))
			}
		}
	}
	return errors.Join(errs...)
}
