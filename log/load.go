package log

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"slices"

	"github.com/tierlog/tierlog/internal/atomicfile"
	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/internal/invariants"
	"github.com/tierlog/tierlog/internal/mutation"
	"github.com/tierlog/tierlog/log/internal/producer"
	"github.com/tierlog/tierlog/log/internal/segment"
	"github.com/tierlog/tierlog/log/record"
	"go.uber.org/zap"
)

// Open opens the log in dir, creating the directory and an empty log if
// needed, and recovers it if it was not closed cleanly (as Kafka's
// LogLoader does):
//
//  1. remove temporary files left by interrupted writes;
//  2. open the segments named by the .log files;
//  3. check what can be checked cheaply of the segments it will not
//     recover (checkTrustedSegments): a .log as long as its index says,
//     and after a clean shutdown the active segment's tail from its last
//     index entry; a damaged tail there is recovered as after a crash;
//  4. after an unclean shutdown, recover every segment from the one
//     holding the checkpointed recovery point: validate each batch,
//     rebuild its indexes, re-assign its leader epoch (from the batches
//     that reach the log start); cut the first torn
//     or corrupt tail (or stop at a segment whose .log lost its end) and
//     move the damaged bytes and every later segment aside, renamed to
//     "<name>.damaged" (recover_damage.go);
//  5. if the log now ends below the checkpointed log start offset, start
//     an empty log there;
//  6. repair the epoch cache against the log (TruncateFromStart(log
//     start), TruncateFromEnd(LEO)), since truncations flush it lazily;
//  7. remove the clean-shutdown marker durably, so a crash from now on is
//     seen as unclean.
//
// The high watermark starts at the log start offset; the caller sets it
// from its own checkpoint (UpdateHighWatermark clamps it).
func Open(dir string, opts Options) (*UnifiedLog, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	l := &UnifiedLog{dir: dir, opts: opts, logger: opts.Logger.With(zap.String("dir", dir))}
	l.fs = withStage(opts.FS, &l.stage)
	l.mu.producers = producer.NewManager(producer.Options{})
	l.firstUnstableOffset.Store(base.UndefinedOffset)
	l.segOpts = segment.Options{
		IndexIntervalBytes: opts.IndexIntervalBytes,
		MaxIndexBytes:      opts.SegmentIndexBytes,
		MaxBatchBytes:      max(opts.MaxMessageBytes, record.HeaderSize) + record.LogOverhead,
		PreallocateBytes:   segmentPreallocateBytes(opts),
		AllocateOnly:       allocateOnly(opts),
		MapReads:           opts.mapReads,
	}

	l.highestOffsetInRemoteStorage.Store(base.UndefinedOffset)
	l.remoteRetentionCap.Store(math.MaxInt64)
	var ev events
	l.stage.loading.Store(true)
	err = l.load(&ev)
	l.stage.endLoad()
	if err != nil {
		l.closeSegments()
		return nil, err
	}
	l.fire(ev)
	return l, nil
}

// load runs the steps of Open's comment.
func (l *UnifiedLog) load(ev *events) error {
	if err := l.createDir(); err != nil {
		return err
	}
	bases, txnFiles, err := l.scanDir()
	if err != nil {
		return err
	}
	ownMarker, err := l.fileExists(CleanShutdownFileName)
	if err != nil {
		return err
	}
	clean := ownMarker || (l.opts.ManagedCleanShutdown && l.opts.CleanShutdown)
	ckpt, _, err := readOffsetsCheckpoint(l.fs, l.dir)
	if err != nil {
		return err
	}
	var rebuildEpochs bool
	l.epochs, rebuildEpochs, err = l.openEpochs()
	if err != nil {
		return err
	}
	recoverFrom, recover := ckpt.recoveryPoint, !clean
	if rebuildEpochs && len(bases) > 0 {
		// Recover every segment: their batches hold the epochs.
		recoverFrom, recover = bases[0], true
	}
	for _, b := range bases {
		s, err := segment.Open(l.fs, l.dir, b, l.opts.nowMs(), l.segOpts)
		if err != nil {
			return err
		}
		ref := newSegmentRef(s, nil, 0)
		l.mu.segments = append(l.mu.segments, ref)
		if !txnFiles[b] {
			continue
		}
		ti, err := l.readTxnIndex(b)
		switch {
		case errors.Is(err, ErrCorruption):
			// Rebuilt by recovering the segment (and the later ones, as
			// recovery does), clean shutdown or not.
			l.logger.Error("corrupt transaction index; recovering its segment", zap.Int64("base", b), zap.Error(err))
			l.counters.corruptionsFound.Add(1)
			if !recover || b < recoverFrom {
				recoverFrom = b
			}
			recover = true
			ref.txnPersisted.Store(-1)
		case err != nil:
			return err
		default:
			ref.txn = ti
			ref.txnPersisted.Store(int64(ti.Len()))
		}
	}
	recoverFrom, recover, err = l.checkTrustedSegments(clean && !recover, recoverFrom, recover, ckpt.logStartOffset, ev)
	if err != nil {
		return err
	}
	recovered := recover && len(l.mu.segments) > 0
	if recovered {
		if err := l.recoverSegments(recoverFrom, ckpt.segmentPoint, ckpt.logStartOffset, ev); err != nil {
			return err
		}
	}
	emptied, err := l.ensureStartLocked(ckpt.logStartOffset, ev)
	if err != nil {
		return err
	}
	if emptied {
		l.mu.producers.TruncateFullyAndStartAt(ckpt.logStartOffset)
	}
	return l.finishLoad(clean, ownMarker, recovered && !emptied, ckpt)
}

// scanDir removes leftovers of interrupted writes and returns the base
// offsets of the segments, sorted.
// It also reports which segments have a transaction index file.
func (l *UnifiedLog) scanDir() (bases []int64, txnFiles map[int64]bool, err error) {
	names, err := l.fs.List(l.dir)
	if err != nil {
		return nil, nil, fmt.Errorf("log: list %s: %w", l.dir, err)
	}
	txnFiles = make(map[int64]bool)
	for _, name := range names {
		b, kind, ok := segment.ParseFileName(name)
		switch {
		case ok && kind == segment.KindLog:
			bases = append(bases, b)
		case ok && kind == segment.KindTxnIndex:
			txnFiles[b] = true
		case ok && kind == segment.KindTemp:
			// Includes "<offset>.snapshot.tmp" and "<base>.txnindex.tmp"
			// left by an interrupted atomic write.
			if err := l.fs.Remove(l.fs.PathJoin(l.dir, name)); err != nil {
				return nil, nil, fmt.Errorf("log: remove leftover %s: %w", name, err)
			}
		}
	}
	if err := atomicfile.RemoveTemp(l.fs, l.fs.PathJoin(l.dir, OffsetsCheckpointFileName)); err != nil {
		return nil, nil, fmt.Errorf("log: %w", err)
	}
	slices.Sort(bases)
	return bases, txnFiles, nil
}

func (l *UnifiedLog) fileExists(name string) (bool, error) {
	_, err := l.fs.Stat(l.fs.PathJoin(l.dir, name))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	}
	return false, fmt.Errorf("log: stat %s: %w", name, err)
}

// recoverSegments is step 3 of Open. The producer state is rebuilt on the
// way (Kafka's recoverSegment): brought to the first recovered segment's
// base from the snapshots and the trusted segments below it, then each
// recovered batch is replayed, and each recovered segment gets a
// transaction index rebuilt from the aborted transactions its markers
// complete.
func (l *UnifiedLog) recoverSegments(recoveryPoint, segmentPoint, logStart int64, ev *events) error {
	segs := l.mu.segments
	first := 0
	for i, s := range segs {
		if s.BaseOffset() <= recoveryPoint {
			first = i
		}
	}
	// Resume inside the first segment at the segment recovery point when
	// the checkpoint names one there (docs/log.md): its producer
	// snapshot, index files and transaction index were durable before
	// the checkpoint was written.
	resume := int64(0)
	if segmentPoint > segs[first].BaseOffset() && segmentPoint <= recoveryPoint && segmentPoint >= logStart &&
		(first+1 == len(segs) || segmentPoint < segs[first+1].BaseOffset()) {
		resume = segmentPoint
	}
	pm := l.mu.producers
	firstBase := segs[first].BaseOffset()
	// The state at the first recovered offset, at: the batches of the
	// recovered segments are then all replayed, from the segment's base
	// even when the log start lies inside it (Kafka's LogSegment.recover
	// replays the whole segment): a log start advance keeps producers,
	// so a producer whose batches lie below the log start keeps its
	// state through a crash as it does in memory. Kafka:
	// rebuildProducerState(..., lastOffset = segment base) ends with
	// updateMapEndOffset(lastOffset), below the log start if need be.
	startProducers := func(at int64, segs []*segmentRef) error {
		loaded, err := l.reloadProducers(pm, segs, logStart, at)
		if err != nil {
			return err
		}
		if !mutation.Disabled(mutation.RecoverProducersFromSegmentBase) {
			pm.SetMapEndOffset(at)
		} else {
			pm.SetMapEndOffset(max(pm.MapEndOffset(), at))
		}
		if loaded == at || at != firstBase || (loaded < 0 && len(segs) == 0) ||
			mutation.Disabled(mutation.RecoveryFirstSnapshot) {
			return nil // a snapshot there, or the state from nothing
		}
		// No snapshot at the first recovered segment's base (its
		// roll's snapshot was lost in a crash, or never written): the
		// state there came from an older snapshot or a replay of the
		// segments below. Snapshot it, as Kafka's rebuildProducerState
		// does at the last segment bases: once the log start passes
		// into this segment, a reload deletes every snapshot below its
		// base, and the producers whose batches lie only below it
		// would be forgotten at the next restart. The batches below
		// are durable (at or below the recovery point).
		if err := takeSnapshot(pm, at).write(l); err != nil {
			return fmt.Errorf("log: %w", err)
		}
		return nil
	}
	if resume > 0 {
		if err := startProducers(resume, segs[:first+1]); err != nil {
			return err
		}
	} else if err := startProducers(segs[first].BaseOffset(), segs[:first]); err != nil {
		return err
	}
	var txn *producer.TxnIndex
	onBatch := func(b record.Batch) error {
		// Epochs are assigned from the batches that reach the log start
		// only. Below it a segment may keep deleted batches of another
		// lineage: a truncation below the log start (a follower whose
		// new leader's log ends there) cuts at a batch start and lowers
		// the log start to it, and the leader's batches from there on
		// may carry lower epochs than the deleted ones before them.
		// Recovery assigns only epochs above the latest (as Kafka's
		// LogSegment.recover), so a deleted batch's epoch would hide
		// theirs, and TruncateFromStart would then move it up to the
		// log start: a lineage the leader never wrote.
		epoch := b.PartitionLeaderEpoch()
		if b.LastOffset() < logStart {
			epoch = -1
		}
		if latest, ok := l.epochs.Latest(); epoch >= 0 && (!ok || epoch > latest.Epoch) {
			if _, err := l.epochs.AssignDeferred(epoch, b.BaseOffset()); err != nil {
				return err
			}
		}
		if b.LastOffset() >= pm.MapEndOffset() {
			l.replayBatch(pm, b, func(t AbortedTxn) {
				err := txn.Append(t)
				invariants.Assertf(err == nil, "rebuilt txn index append: %v", err)
			})
		}
		return nil
	}
	for i := first; i < len(segs); i++ {
		if i > first && !mutation.Disabled(mutation.RecoverySnapshots) {
			// Every batch below this segment is replayed: snapshot the
			// state at its base, as Kafka's recoverSegment does after
			// each segment, so that a crash during or after this
			// recovery does not replay the log again from the start.
			// The batches below are not fsynced yet, but a later
			// recovery that could find them shorter starts below this
			// base and deletes the snapshot (TruncateAndReload).
			if err := takeSnapshot(pm, segs[i].BaseOffset()).write(l); err != nil {
				return fmt.Errorf("log: %w", err)
			}
		}
		txn = &producer.TxnIndex{}
		// A segment with later ones must not have lost its end: those
		// would then follow a gap of lost offsets that reads skip.
		var lostEnd error
		if i+1 < len(segs) {
			if err := segs[i].CheckIndexBounds(); isCorruption(err) {
				lostEnd = err
			} else if err != nil {
				return err
			}
		}
		moved := &movedAside{}
		beforeCut := func(tail *segment.TailError) error {
			return l.moveAside(moved, segs[i], segs[i+1:], isCorruption(tail) || i+1 < len(segs))
		}
		from := int64(0)
		if i == first && resume > 0 {
			from = resume
			txn = truncatedTxnIndex(segs[i].txn, resume)
		}
		recovered, res, err := segs[i].RecoverWith(segment.RecoverOptions{OnBatch: onBatch, BeforeCut: beforeCut, From: from})
		if errors.Is(err, segment.ErrCannotResume) {
			l.logger.Warn("cannot resume recovery at the segment recovery point; recovering the whole segment",
				zap.Int64("base", segs[i].BaseOffset()), zap.Int64("segmentRecoveryPoint", resume), zap.Error(err))
			if err := startProducers(segs[first].BaseOffset(), segs[:first]); err != nil {
				return err
			}
			txn = &producer.TxnIndex{}
			recovered, res, err = segs[i].RecoverWith(segment.RecoverOptions{OnBatch: onBatch, BeforeCut: beforeCut})
		}
		if err != nil {
			return err
		}
		if i == first {
			l.counters.recoverySkipped.Store(res.ResumedAt)
		}
		cut := res.TruncatedBytes
		var tailErr error
		if res.Tail != nil {
			tailErr = res.Tail
		}
		if cut == 0 && lostEnd != nil {
			if err := l.moveAside(moved, nil, segs[i+1:], true); err != nil {
				return err
			}
			tailErr = lostEnd
		}
		if recovered != segs[i].Segment {
			// The old object only reads the replaced file now.
			_ = segs[i].Close()
		}
		// The file is rewritten (finishLoad) unless it holds exactly the
		// rebuilt entries.
		persisted := int64(-1)
		if segs[i].txnPersisted.Load() >= 0 && slices.Equal(segs[i].txn.Entries(), txn.Entries()) {
			persisted = segs[i].txnPersisted.Load()
		}
		segs[i] = newSegmentRef(recovered, txn, persisted)
		if tailErr == nil {
			continue
		}
		next, err := recovered.ReadNextOffset()
		if err != nil {
			return err
		}
		info := RecoveryTruncation{BaseOffset: recovered.BaseOffset(), Position: recovered.Size(),
			BytesRemoved: cut, Err: tailErr, MovedAside: moved.files, SegmentsMovedAside: moved.segments,
			LostFrom: next, LostTo: max(next, moved.end)}
		// The moves were made durable before the rewrite (moveAside
		// syncs the directory): a later segment that came back after a
		// crash would overlap the appends that replace it.
		l.mu.segments = segs[:i+1]
		if cut > 0 {
			l.counters.recoveryCuts.Add(1)
		}
		if isCorruption(tailErr) {
			l.counters.corruptionsFound.Add(1)
		}
		l.logger.Warn("recovery cut a segment tail", zap.Int64("base", info.BaseOffset),
			zap.Int64("position", info.Position), zap.Int64("bytes", cut),
			zap.Int("laterSegmentsMovedAside", info.SegmentsMovedAside),
			zap.Strings("movedAside", info.MovedAside),
			zap.Int64("lostFrom", info.LostFrom), zap.Int64("lostTo", info.LostTo), zap.Error(tailErr))
		ev.recovered = append(ev.recovered, info)
		return nil
	}
	l.mu.segments = segs
	return nil
}

// ensureStartLocked is step 4 of Open: an empty directory, or a log that
// ends below the checkpointed log start offset, becomes an empty log at
// the log start offset (emptied reports the latter).
func (l *UnifiedLog) ensureStartLocked(logStart int64, ev *events) (emptied bool, err error) {
	segs := l.mu.segments
	if len(segs) > 0 {
		leo, err := segs[len(segs)-1].ReadNextOffset()
		if err != nil {
			return false, err
		}
		if leo >= logStart {
			return false, nil
		}
		l.logger.Warn("log ends below its log start offset; starting empty",
			zap.Int64("logEndOffset", leo), zap.Int64("logStartOffset", logStart))
		for _, s := range segs {
			if err := s.Delete(); err != nil {
				return false, err
			}
			ev.deleted = append(ev.deleted, SegmentDeleteInfo{BaseOffset: s.BaseOffset(), Reason: "log-start"})
		}
		l.epochs.Clear()
		emptied = true
	}
	s, err := l.createSegment(logStart)
	if err != nil {
		return false, err
	}
	l.mu.segments = []*segmentRef{newSegmentRef(s, nil, 0)}
	l.mu.dirDirty = true
	return emptied, nil
}

// finishLoad sets the offsets (the recovery point, and the log start
// offset: the checkpointed one when remote storage is enabled, else at
// least the first segment's base, as in LogLoader), repairs the epoch
// cache, publishes the segments and removes the clean-shutdown
// marker (ownMarker: the log's own; a ManagedCleanShutdown caller
// removes its own).
func (l *UnifiedLog) finishLoad(clean, ownMarker, recovered bool, ckpt offsetsCheckpoint) error {
	segs := l.mu.segments
	leo, err := segs[len(segs)-1].ReadNextOffset()
	if err != nil {
		return err
	}
	first := segs[0].BaseOffset()
	logStart := ckpt.logStartOffset
	if !l.opts.RemoteStorageEnabled {
		logStart = max(logStart, first)
	}
	logStart = min(logStart, leo)
	l.logEndOffset.Store(leo)
	l.logStartOffset.Store(logStart)
	l.localLogStartOffset.Store(max(logStart, first))
	l.highWatermark.Store(logStart)
	if clean {
		l.mu.recoveryPoint = leo
	} else {
		l.mu.recoveryPoint = min(ckpt.recoveryPoint, leo)
	}
	// Keep the segment recovery point while it still names a position
	// inside a segment of this log; a recovery that ended the log below
	// it (or a log start above it) drops it, durably, before any append
	// could put other batches under it.
	l.mu.segmentPointPos = -1
	for _, s := range segs {
		if p := ckpt.segmentPoint; p > s.BaseOffset() && p <= leo && p >= logStart && p <= l.mu.recoveryPoint {
			l.mu.segmentPoint, l.mu.segmentPointBase = p, s.BaseOffset()
		}
	}
	if l.mu.segmentPoint != ckpt.segmentPoint {
		if err := writeOffsetsCheckpoint(l.fs, l.dir, l.offsetsCheckpointLocked()); err != nil {
			return err
		}
	}
	// From the start first: with logStart == leo, the other order would
	// move an older entry up to the LEO, where the next Open's
	// TruncateFromEnd drops it, so recovering twice would differ.
	l.epochs.TruncateFromStart(logStart)
	l.epochs.TruncateFromEnd(leo)
	if err := l.removeStraySnapshots(); err != nil {
		return err
	}
	if err := l.loadProducers(recovered, logStart, leo); err != nil {
		return err
	}
	l.publishLocked()
	if err := l.epochs.Flush(); err != nil {
		return fmt.Errorf("log: %w", err)
	}
	if ownMarker {
		if err := l.fs.Remove(l.fs.PathJoin(l.dir, CleanShutdownFileName)); err != nil {
			return fmt.Errorf("log: remove clean-shutdown marker: %w", err)
		}
		// Durable before the first write: a crash after this is unclean.
		if err := atomicfile.SyncDir(l.fs, l.dir); err != nil {
			return fmt.Errorf("log: %w", err)
		}
		l.mu.dirDirty = false
	}
	// Any other directory change of the load (a new log's first segment,
	// an emptied log's) stays in dirDirty for the first flush: nothing
	// beneath it is durable before that flush, and a crash before it
	// leaves a directory this load turns into the same log again.
	l.checkOffsetsLocked()
	return nil
}

// loadProducers is the last step of the producer state's load (Kafka's
// loadProducerState): after a recovery the state is already known up to
// the log end; otherwise it is loaded from the newest snapshot at or
// below the log end (Close writes one there) and the batches after it are
// replayed. Snapshots above the log end and below the log start are
// deleted, expired producers dropped, and rebuilt transaction indexes of
// recovered segments written.
func (l *UnifiedLog) loadProducers(recovered bool, logStart, leo int64) error {
	pm := l.mu.producers
	if recovered {
		// Recovery replayed every batch up to leo.
		pm.SetMapEndOffset(max(pm.MapEndOffset(), leo))
	}
	if _, err := l.reloadProducers(pm, l.mu.segments, logStart, leo); err != nil {
		return err
	}
	l.finishProducerRebuildLocked()
	pm.RemoveExpired(l.opts.nowMs(), l.opts.ProducerIDExpirationMs)
	for _, s := range l.mu.segments {
		if err := l.writeTxnIndex(s); err != nil {
			return err
		}
	}
	// A snapshot at the log end unless the newest one is there (Kafka's
	// rebuildProducerState ends with takeSnapshot at the log end): after
	// a recovery, the next crash then replays from here, not from the
	// last roll or the start.
	offsets, err := producer.ListSnapshotOffsets(l.fs, l.dir)
	if err != nil {
		return fmt.Errorf("log: %w", err)
	}
	newest := logStart
	if n := len(offsets); n > 0 {
		newest = offsets[n-1]
	}
	if leo > newest && !mutation.Disabled(mutation.RecoverySnapshots) {
		if err := takeSnapshot(pm, leo).write(l); err != nil {
			return fmt.Errorf("log: %w", err)
		}
	}
	return nil
}

// removeStraySnapshots deletes the producer snapshots that name no
// segment base, keeping the newest when it is at or above the active
// segment's base (the clean close's, or the last recovery's, at the log
// end) and the segment recovery point's, and then the batches files left
// without their snapshot. Kafka: ProducerStateManager.removeStraySnapshots
// in LogLoader.load.
func (l *UnifiedLog) removeStraySnapshots() error {
	bases := make([]int64, len(l.mu.segments))
	for i, s := range l.mu.segments {
		bases[i] = s.BaseOffset()
	}
	keep := int64(-1)
	if l.mu.segmentPoint > 0 {
		keep = l.mu.segmentPoint
	}
	removed, err := producer.RemoveStraySnapshots(l.fs, l.dir, bases, keep)
	if err != nil {
		return fmt.Errorf("log: %w", err)
	}
	if len(removed) > 0 {
		l.logger.Info("removed stray producer snapshots", zap.Int64s("offsets", removed))
	}
	if _, err := producer.RemoveStrayBatches(l.fs, l.dir); err != nil {
		return fmt.Errorf("log: %w", err)
	}
	return nil
}

// closeSegments releases every segment's handles after a failed Open.
func (l *UnifiedLog) closeSegments() {
	if v := l.view.Load(); v != nil {
		v.unref()
		return
	}
	for _, s := range l.mu.segments {
		_ = s.Close()
	}
}

// defaultSegmentPreallocateBytes is SegmentPreallocateBytes's default with
// an fsync policy by message count.
const defaultSegmentPreallocateBytes = 4 << 20

// segmentPreallocateBytes resolves Options.SegmentPreallocateBytes.
func segmentPreallocateBytes(o Options) int64 {
	switch {
	case o.SegmentPreallocateBytes != 0:
		return o.SegmentPreallocateBytes
	case o.FlushMessages > 0 || allocateOnly(o):
		return defaultSegmentPreallocateBytes
	}
	return -1
}

// allocateOnly reports whether the active segment's blocks are reserved
// by fallocate rather than written as zeros: by default, without an
// fsync policy by message count, on the operating system's file system.
// Measured on ext4: a 16 KiB write into blocks fallocate reserved costs
// about 0.7x one that extends the file (no delayed-allocation block
// reservation per write), while written zeros cost a second copy of
// every byte, which pays only when an fsync follows each append.
func allocateOnly(o Options) bool {
	return o.SegmentPreallocateBytes == 0 && o.FlushMessages <= 0 && o.osFS
}
