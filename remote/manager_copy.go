package remote

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/internal/mutation"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/truncation"
	"go.uber.org/zap"
)

// copyState is the copy task's memory between runs (Kafka: RLMCopyTask's
// copiedOffsetOption, plus the Inkless truncation count).
type copyState struct {
	// known is false until the copied offset is derived, and again after
	// a rejected install: the next run derives it anew.
	known bool
	// copied is the highest offset of this lineage in remote storage, and
	// copiedEpoch its epoch.
	copied      int64
	copiedEpoch int32
	// count is the truncation count copied was derived under
	// (https://github.com/aiven/inkless/pull/857):
	// a different count means the log truncated since, and copied may
	// point past the discarded tail.
	count truncation.Count
	// logStartReported: the log start was reported once.
	logStartReported bool
	// stalled is the corrupt segment the copy stopped at, nil when none.
	stalled *copyStall
}

// CopyCandidate is a local segment the copy task uploads.
type CopyCandidate struct {
	BaseOffset int64
	// NextOffset is the next segment's base: the remote segment ends at
	// NextOffset - 1.
	NextOffset int64
}

// CopyCandidates returns the segments of segs (from Segments(from): the
// floor segment of from first) that may be copied with last stable
// offset lso: each rolled segment whose next segment starts at or below
// lso. The active segment never is (Kafka: RLMCopyTask's candidate
// segments).
func CopyCandidates(segs []log.SegmentInfo, lso int64) []CopyCandidate {
	var out []CopyCandidate
	for _, s := range segs {
		if s.Active || s.NextOffset > lso {
			break
		}
		out = append(out, CopyCandidate{BaseOffset: s.BaseOffset, NextOffset: s.NextOffset})
	}
	return out
}

// runCopy is one run of a leader's copy task (Kafka: RLMCopyTask, with the
// truncation fence of https://github.com/aiven/inkless/pull/857). The
// result says what it did, also when it fails.
func (m *Manager) runCopy(ctx context.Context, pt *partitionTasks) (CopyResult, error) {
	pt.copyMu.Lock()
	defer pt.copyMu.Unlock()
	res := newCopyResult()
	fail := func(err error) (CopyResult, error) {
		res.Stop = CopyFailed
		switch {
		case errors.Is(err, ErrCopyStalled):
			res.Stop = CopyStalled
		case errors.Is(err, ErrTaskCancelled) || context.Cause(ctx) != nil:
			res.Stop = CopyCancelled
		}
		return res, err
	}
	if pt.copyCancelled {
		return fail(fmt.Errorf("%w: the copy task of %s cancelled itself", ErrTaskCancelled, pt.p.TopicIDPartition))
	}
	tp, l, st := pt.p.TopicIDPartition, pt.p.Log, &pt.copy
	if st.known {
		res.CopiedOffset = st.copied
	}
	if !st.logStartReported {
		// Once per task: a new leader first deletes the copies that an
		// earlier leader (or this broker before a crash) left unfinished,
		// then reports the log start.
		var err error
		if res.DanglingDeleted, err = m.deleteDanglingCopies(ctx, tp); err != nil {
			return fail(err)
		}
		if res.LogStartReported, err = m.reportLogStart(tp, l); err != nil {
			return fail(err)
		}
		st.logStartReported = true
	}
	// The count first, under the log lock: everything read after it
	// (epochs, segments) is at least as new, so an install with it fails
	// if a truncation changed the log after this point.
	count := l.TruncationCount()
	if !st.known || st.count != count {
		off, epoch, err := m.findHighestRemoteOffset(tp, l)
		if err != nil {
			return fail(err)
		}
		st.known, st.copied, st.copiedEpoch, st.count = true, off, epoch, count
		capUnheldRemoteOffset(l, off, count)
		if !installRemoteOffset(l, off, count) {
			st.known = false // truncated during the lookup: derive again
			res.Stop, res.CopiedOffset = CopyTruncated, -1
			return res, nil
		}
		res.CopiedOffset = off
	}
	lso := l.LastStableOffset()
	res.LastStableOffset = lso
	if lso <= 0 || st.copied >= lso {
		pt.recordCopyLag(nil)
		res.Stop = CopyCaughtUp
		return res, nil
	}
	segs, err := l.Segments(max(st.copied+1, l.LogStartOffset()))
	if err != nil {
		return fail(err)
	}
	cands := CopyCandidates(segs, lso)
	for i, c := range cands {
		pt.recordCopyLag(segs[i:len(cands)])
		if err := context.Cause(ctx); err != nil {
			return fail(err)
		}
		if err := pt.stalledAt(c, segs[i].SizeBytes, count); err != nil {
			res.StoppedAt = c.BaseOffset
			return fail(err)
		}
		seg, err := m.copySegment(ctx, pt, c)
		if errors.As(err, new(*BatchCorruptionError)) {
			// Stop here rather than fail the same way every run: a
			// rolled segment's bytes do not change, and each retry
			// would read it again and write and delete a metadata
			// record (and, compressed, objects) for nothing.
			pt.setStall(&copyStall{base: c.BaseOffset, size: segs[i].SizeBytes, count: count, err: err})
			m.logger.Error("local segment corrupt; the copy task stops at it",
				zap.Stringer("partition", tp), zap.Int64("segment", c.BaseOffset), zap.Error(err))
		}
		if err != nil {
			if seg.SegmentID != (SegmentID{}) {
				res.Failed = &seg
			}
			res.StoppedAt = c.BaseOffset
			return fail(err)
		}
		res.Copied = append(res.Copied, seg)
		end, lastEpoch := seg.EndOffset, seg.SegmentLeaderEpochs[len(seg.SegmentLeaderEpochs)-1].Epoch
		st.copied, st.copiedEpoch = end, lastEpoch
		res.CopiedOffset = end
		if !installRemoteOffset(l, end, count) {
			// A truncation ran during the upload: the log may no longer
			// hold what was uploaded, so resuming after end could skip
			// the records that replaced the discarded tail. The next run
			// derives the copied offset again.
			st.known = false
			m.logger.Info("truncation during upload; copied offset is derived again",
				zap.Stringer("partition", tp), zap.Int64("uploaded-end", end))
			res.Stop, res.CopiedOffset = CopyTruncated, -1
			return res, nil
		}
	}
	pt.recordCopyLag(nil)
	res.Stop = CopyCaughtUp
	return res, nil
}

// deleteDanglingCopies deletes the partition's COPY_SEGMENT_STARTED
// segments that no copy of this Manager is uploading: a crash or a
// leadership change interrupted them, and only their leader could have
// finished them. Their objects may be partly written; their metadata
// names them, so the deletion removes every one (the commit point of a
// copy is COPY_SEGMENT_FINISHED, never an object).
func (m *Manager) deleteDanglingCopies(ctx context.Context, tp TopicIDPartition) ([]SegmentMetadata, error) {
	segs, err := m.meta.ListSegments(tp)
	if err != nil {
		return nil, err
	}
	var deleted []SegmentMetadata
	for i := range segs {
		if segs[i].State != CopySegmentStarted || m.beingCopied(segs[i].SegmentID) {
			continue
		}
		if err := m.deleteSegment(ctx, &segs[i]); err != nil {
			return deleted, err
		}
		m.logger.Info("deleted an unfinished copy", zap.Stringer("partition", tp),
			zap.Stringer("segment", segs[i].SegmentID))
		deleted = append(deleted, segs[i])
	}
	return deleted, nil
}

// installRemoteOffset installs offset as the log's highest offset in
// remote storage under count and reports false only when a truncation
// since count dropped it (a value not above the current one is not
// installed either, but that is no reason to derive progress again).
func installRemoteOffset(l PartitionLog, offset int64, count truncation.Count) bool {
	return l.UpdateHighestOffsetInRemoteStorage(offset, count) || l.TruncationCount() == count
}

// HighestRemoteOffset is the highest offset of l's lineage that remote
// storage holds, as the copy and follower tasks derive it before they
// install it on l (FindHighestRemoteOffset over l's leader epochs, an
// epoch's never-lowered highest offset counted only while a finished
// segment still holds it or it lies below l's log start), or -1. It
// reads the metadata only: a task of a broker's own, or a check of
// what a task would install, can call it without the task's lock.
func (m *Manager) HighestRemoteOffset(tp TopicIDPartition, l PartitionLog) (int64, error) {
	off, _, err := m.findHighestRemoteOffset(tp, l)
	return off, err
}

// findHighestRemoteOffset runs FindHighestRemoteOffset over l's cache and
// the metadata, each epoch's highest offset as heldHighestOffset gives it,
// and stops the answer at a hole below it (gapFreeRemoteEnd): an epoch
// cleanup after an unclean election deletes the segments of the epochs
// outside the new leader's lineage, and when an older lineage leads again
// its higher epochs may still have their segments while a lower one has
// none. Kafka counts everything up to the highest offset as copied, so
// local retention would delete the only copy of the hole's records; here
// the copy task uploads them again.
func (m *Manager) findHighestRemoteOffset(tp TopicIDPartition, l PartitionLog) (int64, int32, error) {
	logStart := l.LogStartOffset()
	entries := l.EpochEntries()
	off, epoch, err := FindHighestRemoteOffset(entries,
		func(e int32) (int64, bool, error) { return m.heldHighestOffset(tp, e, logStart) },
		l.EndOffsetForEpoch)
	if err != nil || off < 0 || mutation.Disabled(mutation.RemoteLineageHole) {
		return off, epoch, err
	}
	// From the local log start (never below the log start): below it the
	// records are in remote storage only, and what is missing there a
	// copy cannot bring back.
	end, err := m.gapFreeRemoteEnd(tp, entries, l.LocalLogStartOffset())
	if err != nil || end >= off {
		return off, epoch, err
	}
	if e, ok := l.EpochForOffset(end); ok {
		return end, e, nil
	}
	return base.UndefinedOffset, base.UndefinedEpoch, nil
}

// gapFreeRemoteEnd is the last offset of the run of finished segments
// that holds entries' lineage over [from, end] without a hole, each
// segment counted over the prefix where its epochs are the lineage's
// (lineageAgreedEnd: a segment copied before an unclean election holds
// this lineage's records up to where the lineages part), or from - 1
// when none holds from.
func (m *Manager) gapFreeRemoteEnd(tp TopicIDPartition, entries []epochcache.Entry, from int64) (int64, error) {
	segs, err := m.meta.ListSegments(tp)
	if err != nil {
		return base.UndefinedOffset, err
	}
	lineage := FilterLineage(entries)
	type span struct{ start, end int64 }
	held := make([]span, 0, len(segs))
	for i := range segs {
		if segs[i].State != CopySegmentFinished {
			continue
		}
		if end := lineageAgreedEnd(&segs[i], lineage, from); end >= max(segs[i].HeldStartOffset(), from) {
			held = append(held, span{segs[i].HeldStartOffset(), end})
		}
	}
	slices.SortFunc(held, func(a, b span) int { return cmp.Compare(a.start, b.start) })
	end := from - 1
	for _, s := range held {
		if s.start > end+1 {
			break
		}
		end = max(end, s.end)
	}
	return end, nil
}

// lineageAgreedEnd is the last offset of m, from from on, up to which
// its leader epoch at each offset is the one lineage gives it (below
// max(m.HeldStartOffset(), from) when the first is not): each epoch has one
// leader, so there the segment holds the lineage's own records. An offset
// below the lineage's first entry has no epoch in it and ends the run;
// the offsets below from are not looked at (below the log start, the
// cache may have been truncated from the start).
func lineageAgreedEnd(m *SegmentMetadata, lineage []epochcache.Entry, from int64) int64 {
	seg := m.SegmentLeaderEpochs
	start := max(m.HeldStartOffset(), from)
	// The offsets where either side's epoch may change, from start: at
	// each, the two epochs must still be equal.
	points := []int64{start}
	for _, e := range seg {
		if e.StartOffset > start && e.StartOffset <= m.EndOffset {
			points = append(points, e.StartOffset)
		}
	}
	for _, e := range lineage {
		if e.StartOffset > start && e.StartOffset <= m.EndOffset {
			points = append(points, e.StartOffset)
		}
	}
	slices.Sort(points)
	for _, o := range points {
		se, sok := epochcache.EpochForOffsetIn(seg, o)
		le, lok := epochcache.EpochForOffsetIn(lineage, o)
		if !sok || !lok || se != le {
			return o - 1
		}
	}
	return m.EndOffset
}

// heldHighestOffset is the highest offset of epoch in remote storage:
// the metadata's (Kafka's highestOffsetForEpoch, never lowered) while a
// finished segment still holds it or it lies below the log start
// (retention deleted it, with everything below); otherwise the highest
// offset of epoch a finished segment still holds (ok false when none
// does). Segments above the log start go only when a leader of another
// lineage deletes them (the epoch cleanup, after an unclean election);
// an unclean election can make this log's lineage the partition's
// again, and then what they held is copied again rather than counted
// as copied.
func (m *Manager) heldHighestOffset(tp TopicIDPartition, epoch int32, logStart int64) (int64, bool, error) {
	h, ok, err := m.meta.HighestOffsetForEpoch(tp, epoch)
	if err != nil || !ok || h < logStart || mutation.Disabled(mutation.RemoteHighestHeld) {
		return h, ok, err
	}
	if _, held, err := m.meta.SegmentFor(tp, epoch, h); err != nil || held {
		return h, ok, err
	}
	segs, err := m.meta.ListSegmentsForEpoch(tp, epoch)
	if err != nil {
		return base.UndefinedOffset, false, err
	}
	h, ok = base.UndefinedOffset, false
	for i := range segs {
		if segs[i].State != CopySegmentFinished {
			continue
		}
		if _, end, found := segs[i].epochRange(epoch); found && end > h {
			h, ok = end, true
		}
	}
	return h, ok, nil
}

// capUnheldRemoteOffset lowers the log's in-lineage highest offset in
// remote storage to off, derived under count, when remote storage no
// longer holds what the log recorded (heldHighestOffset).
func capUnheldRemoteOffset(l PartitionLog, off int64, count truncation.Count) {
	if off < l.HighestOffsetInRemoteStorageInLineage() && !mutation.Disabled(mutation.RemoteHighestHeld) {
		l.CapHighestOffsetInRemoteStorage(off, count)
	}
}

// reportLogStart raises the log start to the first remote segment's start
// (Kafka: findLogStartOffset, reported once per copy task): for the
// earliest cached epoch upward, the start of the first segment listed for
// that epoch; the local log start when none is.
//
// A consolidating partition's report is the first finished segment of
// any epoch when that is lower: the report reaches the cross-tier log
// start X (consolidate.ReportingLog), which only advances, and a leader
// whose epoch cache begins at the seal (recreated, or reset there by an
// out-of-range fetch) while remote storage still holds the classic
// prefix in older epochs would otherwise move X past that prefix, and
// retention would then delete it.
func (m *Manager) reportLogStart(tp TopicIDPartition, l PartitionLog) (int64, error) {
	start, err := m.findLogStartOffset(tp, l)
	if err != nil {
		return -1, err
	}
	if m.crossTier(tp).Consolidating {
		segs, err := m.meta.ListSegments(tp)
		if err != nil {
			return -1, err
		}
		for _, s := range segs {
			if s.State == CopySegmentFinished && s.HeldStartOffset() < start {
				start = s.HeldStartOffset()
			}
		}
	}
	// The report never passes a record the local log holds: an epoch
	// cleanup may have deleted its segment in a lineage that leads again,
	// and then it is copied again (findHighestRemoteOffset). A record
	// that remote retention expired while this replica missed the new log
	// start is served a little longer, until this leader's own retention
	// expires it again.
	if local := l.LocalLogStartOffset(); start > local && !mutation.Disabled(mutation.RemoteLineageHole) {
		start = local
	}
	if _, err = l.UpdateLogStartOffsetFromRemoteTier(start); err != nil {
		return -1, err
	}
	return start, nil
}

func (m *Manager) findLogStartOffset(tp TopicIDPartition, l PartitionLog) (int64, error) {
	for _, e := range l.EpochEntries() {
		segs, err := m.meta.ListSegmentsForEpoch(tp, e.Epoch)
		if err != nil {
			return base.UndefinedOffset, err
		}
		if len(segs) > 0 {
			return segs[0].HeldStartOffset(), nil
		}
	}
	return l.LocalLogStartOffset(), nil
}

// danglingDeleteTimeout bounds the cleanup of a failed copy, which runs
// even when the run's context ended (a cancelled upload still leaves
// objects) but must not hold the task, and so Close, for long; what it
// cannot finish stays DELETE_SEGMENT_STARTED for the next expiration run.
const danglingDeleteTimeout = 10 * time.Second

// copySegment uploads one candidate (Kafka: RLMCopyTask.copyLogSegment).
// Commit points: AddSegment(COPY_SEGMENT_STARTED) records the attempt (and
// so its object keys) before any object is written;
// UpdateSegment(COPY_SEGMENT_FINISHED) makes the copy visible. A failed
// upload is deleted at once; a crash leaves a STARTED segment that
// expiration deletes and whose objects DeleteOrphans can sweep.
//
// It returns the committed segment, or on failure the attempted one (zero
// when the attempt never got a segment id).
func (m *Manager) copySegment(ctx context.Context, pt *partitionTasks, c CopyCandidate) (SegmentMetadata, error) {
	tp, l := pt.p.TopicIDPartition, pt.p.Log
	files, err := l.OpenSegment(c.BaseOffset)
	if err != nil {
		return SegmentMetadata{}, err
	}
	defer files.Close()
	epochs := l.EpochEntriesInRange(c.BaseOffset, c.NextOffset)
	if len(epochs) == 0 {
		return SegmentMetadata{}, fmt.Errorf("%w: segment %d of %s", ErrNoLeaderEpoch, c.BaseOffset, tp)
	}
	snapshot, batches, err := l.ProducerSnapshotWithBatches(c.NextOffset)
	if err != nil {
		return SegmentMetadata{}, fmt.Errorf("remote: producer snapshot at %d of %s: %w", c.NextOffset, tp, err)
	}
	seg := SegmentMetadata{
		SegmentID:           NewSegmentID(tp),
		StartOffset:         c.BaseOffset,
		EndOffset:           c.NextOffset - 1,
		SegmentLeaderEpochs: epochs,
		SizeBytes:           files.Info.SizeBytes,
		MaxTimestampMs:      files.Info.MaxTimestampMs,
		BrokerID:            m.opts.BrokerID,
		EventTimestampMs:    m.opts.Now().UnixMilli(),
		State:               CopySegmentStarted,
		TxnIndexEmpty:       len(files.TxnIndex) == 0,
	}
	// The data plane's first pass over the log checks every batch too.
	vlog, logReader := newVerifiedLog(files.Log, newBatchVerifier(&seg))
	data := SegmentData{
		Log: logReader, LogSize: files.Info.SizeBytes,
		OffsetIndex: files.OffsetIndex, TimeIndex: files.TimeIndex, TxnIndex: files.TxnIndex,
		ProducerSnapshot: snapshot,
		// Every producer's dedup window, beside Kafka's snapshot (which
		// holds the last batch only): a rebuild from this segment answers
		// a retry of any batch of the window as a duplicate.
		ProducerBatches: batches,
		LeaderEpochs:    l.EpochEntriesInRange(base.UndefinedOffset, c.NextOffset),
	}
	m.beginCopy(seg.SegmentID)
	defer m.endCopy(seg.SegmentID)
	if err := m.meta.AddSegment(ctx, seg); err != nil {
		// Not recorded, so no copy started (no CopyStart event).
		return SegmentMetadata{}, err
	}
	m.notify(func(ls *ManagerListener) {
		if ls.CopyStart != nil {
			ls.CopyStart(CopyInfo{Segment: seg})
		}
	})
	start := m.opts.Now()
	custom, err := m.storage.CopySegment(ctx, &seg, data)
	if verr := vlog.failed(); verr != nil {
		// The typed error, whatever the data plane made of it (a read
		// error, or nothing if it ignored the failed read).
		err = verr
	} else if err == nil {
		err = vlog.result(ctx) // nil at once unless the data plane skipped bytes
	}
	if errors.As(err, new(*BatchCorruptionError)) {
		m.metrics.copyCorruptions.Add(1)
	}
	if err == nil && len(custom) > MaxCustomMetadataBytes {
		pt.copyCancelled = true
		err = fmt.Errorf("%w: %d bytes for segment %s (limit %d); the copy task of %s is cancelled",
			ErrCustomMetadataTooLarge, len(custom), seg.SegmentID, MaxCustomMetadataBytes, tp)
	}
	if err != nil {
		m.metrics.copyErrors.Add(1)
		// Delete the dangling copy now rather than leave it to retention
		// (Kafka does the same). Its own failure is reported with the
		// copy's.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), danglingDeleteTimeout)
		derr := m.deleteSegment(dctx, &seg)
		cancel()
		err = errors.Join(fmt.Errorf("remote: copy segment %d of %s: %w", c.BaseOffset, tp, err), derr)
		m.notify(func(ls *ManagerListener) {
			if ls.CopyError != nil {
				ls.CopyError(CopyInfo{Segment: seg, Duration: m.opts.Now().Sub(start)}, err)
			}
			if ls.Corruption != nil && errors.Is(err, ErrCorruption) {
				ls.Corruption(tp, err)
			}
		})
		return seg, err
	}
	if err := m.meta.UpdateSegment(ctx, SegmentMetadataUpdate{
		SegmentID: seg.SegmentID, State: CopySegmentFinished,
		EventTimestampMs: m.opts.Now().UnixMilli(), BrokerID: m.opts.BrokerID, CustomMetadata: custom,
	}); err != nil {
		// The copy is not committed: it stays COPY_SEGMENT_STARTED, which
		// the next leader's first run deletes. Reported as a failed copy,
		// so that every CopyStart has a CopyEnd or a CopyError.
		m.metrics.copyErrors.Add(1)
		err = fmt.Errorf("remote: copy segment %d of %s: commit: %w", c.BaseOffset, tp, err)
		m.notify(func(ls *ManagerListener) {
			if ls.CopyError != nil {
				ls.CopyError(CopyInfo{Segment: seg, Duration: m.opts.Now().Sub(start)}, err)
			}
		})
		return seg, err
	}
	seg.State = CopySegmentFinished
	dur := m.opts.Now().Sub(start)
	m.metrics.segmentsCopied.Add(1)
	m.metrics.bytesCopied.Add(seg.SizeBytes)
	m.metrics.copyNanos.Add(int64(dur))
	m.notify(func(ls *ManagerListener) {
		if ls.CopyEnd != nil {
			ls.CopyEnd(CopyInfo{Segment: seg, Duration: dur})
		}
	})
	return seg, nil
}
