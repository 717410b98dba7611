package log

import (
	"bytes"
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

// This file wires the producer state (package log/internal/producer) into
// the log: the first unstable offset, the transaction indexes, the
// snapshot queue and the replays that rebuild the state from segments.
// DESIGN.md section 5.2 lists the commit points, section 6 the locks.

// AbortedTxn is an aborted transaction a read with IsolationCommitted
// returns: the producer's records in [FirstOffset, LastOffset] are not to
// be delivered (LastOffset is the ABORT marker). Kafka: AbortedTransaction
// of a FetchResponse, plus the index's last stable offset.
type AbortedTxn = producer.AbortedTxn

// ProducerState is one producer's state: epoch, coordinator epoch, last
// timestamp, open transaction and most recent batches (the dedup window).
// Kafka: DescribeProducers' ProducerState.
type ProducerState = producer.ProducerStateEntry

// BatchMetadata is one batch of a producer's dedup window.
type BatchMetadata = producer.BatchMetadata

// pendingSnapshot is a producer snapshot taken at a roll and not yet
// written: the state at offset (the new segment's base), in Kafka's
// format (data) and the batches file that goes with it (batches: every
// producer's whole dedup window, see producer.LoadSnapshotWithBatches).
type pendingSnapshot struct {
	offset  int64
	data    []byte
	batches []byte
}

// takeSnapshot returns the snapshot of pm at offset, which becomes its
// map end offset.
//
// REQUIRES: l.mu held for the log's own Manager (or Open, before the log
// is shared).
func takeSnapshot(pm *producer.Manager, offset int64) pendingSnapshot {
	pm.SetMapEndOffset(offset)
	snap, batches := pm.SnapshotWithBatches()
	return pendingSnapshot{offset: offset, data: snap, batches: batches}
}

// write writes the snapshot and its batches file (batches file first;
// the snapshot's rename is the commit point of the pair). Copies:
// vfs.File.Write may modify its input, and ProducerSnapshot may read the
// queued bytes meanwhile.
func (p pendingSnapshot) write(l *UnifiedLog) error {
	return producer.WriteSnapshotFiles(l.fs, l.dir, p.offset, bytes.Clone(p.data), bytes.Clone(p.batches))
}

// FirstUnstableOffset returns the first offset of the oldest transaction
// that is open or whose marker may not be replicated yet (never below the
// log start offset), and false if there is none. Kafka:
// firstUnstableOffset.
func (l *UnifiedLog) FirstUnstableOffset() (int64, bool) {
	fuo := l.Offsets().FirstUnstableOffset
	return fuo, fuo >= 0
}

// ActiveProducers returns the state of every producer the log holds
// state for, by producer id. Kafka: activeProducers (DescribeProducers).
func (l *UnifiedLog) ActiveProducers() []ProducerState {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.producers.ActiveProducers()
}

// OngoingTransaction is a transaction open in the partition: its
// producer's data batches are in the log, its marker is not. Kafka:
// TxnMetadata, with the producer's state that DescribeProducers reports
// beside it (KIP-664): what a broker needs to write the abort marker of a
// transaction left open by a crashed producer or coordinator.
type OngoingTransaction struct {
	ProducerID int64
	// ProducerEpoch is the producer's current epoch: an abort marker
	// for this transaction must carry it (an older one is fenced with
	// ErrInvalidProducerEpoch).
	ProducerEpoch int16
	// CoordinatorEpoch is the coordinator epoch of the producer's last
	// marker, -1 if it never wrote one; a marker from an older
	// coordinator epoch is refused (ErrTransactionCoordinatorFenced).
	CoordinatorEpoch int32
	// FirstOffset is the base offset of the transaction's first batch in
	// this partition (inclusive): the last stable offset stays at or
	// below it until the transaction ends.
	FirstOffset int64
	// LastTimestamp is the MaxTimestamp of the producer's last data
	// batch or the timestamp of its last marker, in milliseconds: how
	// long the transaction has been idle (Kafka's find-hanging tool
	// compares it with the transaction timeout).
	LastTimestamp int64
}

// OngoingTransactions returns the open transactions, oldest (lowest
// first offset) first.
func (l *UnifiedLog) OngoingTransactions() []OngoingTransaction {
	l.mu.Lock()
	defer l.mu.Unlock()
	txns := l.mu.producers.OngoingTxns()
	out := make([]OngoingTransaction, 0, len(txns))
	for _, t := range txns {
		o := OngoingTransaction{ProducerID: t.ProducerID, FirstOffset: t.FirstOffset,
			ProducerEpoch: -1, CoordinatorEpoch: -1, LastTimestamp: -1}
		// Every open transaction has its producer's entry: expiration
		// keeps a producer with an open transaction.
		if e, ok := l.mu.producers.LastEntry(t.ProducerID); ok {
			o.ProducerEpoch, o.CoordinatorEpoch, o.LastTimestamp = e.ProducerEpoch, e.CoordinatorEpoch, e.LastTimestamp
		}
		out = append(out, o)
	}
	return out
}

// RemoveExpiredProducers drops the producers idle for at least
// Options.ProducerIDExpirationMs that have no open transaction and
// returns how many it dropped. A broker calls it periodically (Kafka:
// the producer-expiration task, producer.id.expiration.check.interval.ms).
func (l *UnifiedLog) RemoveExpiredProducers() (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkWritableLocked(); err != nil {
		return 0, err
	}
	return l.mu.producers.RemoveExpired(l.opts.nowMs(), l.opts.ProducerIDExpirationMs), nil
}

// ProducerSnapshot returns the bytes of the producer snapshot taken at
// offset (a segment boundary: snapshots are taken at every roll and on
// clean close), as the remote copy task uploads them with the segment
// that ends there. A snapshot queued at a roll and not yet written is
// returned from memory. A missing snapshot is an error wrapping
// fs.ErrNotExist.
func (l *UnifiedLog) ProducerSnapshot(offset int64) ([]byte, error) {
	l.mu.Lock()
	if err := l.checkWritableLocked(); errors.Is(err, ErrClosed) {
		l.mu.Unlock()
		return nil, err
	}
	for _, p := range l.mu.pendingSnapshots {
		if p.offset == offset {
			data := bytes.Clone(p.data)
			l.mu.Unlock()
			return data, nil
		}
	}
	l.mu.Unlock()
	data, err := producer.ReadSnapshotFile(l.fs, l.dir, offset)
	if err != nil {
		return nil, fmt.Errorf("log: %w", err)
	}
	return data, nil
}

// ProducerSnapshotWithBatches returns the bytes of the producer snapshot
// taken at offset, as ProducerSnapshot does, and those of the batches file
// that goes with it (tierlog's .producerbatches: every producer's whole
// dedup window), which the remote copy task uploads beside the snapshot so
// that a rebuild from remote storage restores the windows
// (RemoteRestore.ProducerBatches). batches is nil when the snapshot has
// no batches file (one loaded from remote storage without it). The two
// files are read one after the other: a batches file rewritten in between
// names another snapshot (its snapshot CRC), and a load ignores it.
func (l *UnifiedLog) ProducerSnapshotWithBatches(offset int64) (snap, batches []byte, err error) {
	l.mu.Lock()
	if err := l.checkWritableLocked(); errors.Is(err, ErrClosed) {
		l.mu.Unlock()
		return nil, nil, err
	}
	for _, p := range l.mu.pendingSnapshots {
		if p.offset == offset {
			snap, batches = bytes.Clone(p.data), bytes.Clone(p.batches)
			l.mu.Unlock()
			return snap, batches, nil
		}
	}
	l.mu.Unlock()
	snap, err = producer.ReadSnapshotFile(l.fs, l.dir, offset)
	if err != nil {
		return nil, nil, fmt.Errorf("log: %w", err)
	}
	batches, err = producer.ReadBatchesFile(l.fs, l.dir, offset)
	if err != nil {
		return nil, nil, fmt.Errorf("log: %w", err)
	}
	return snap, batches, nil
}

// LoadProducerSnapshot replaces the producer state with the snapshot in
// data, taken at offset (LogStartOffset <= offset <= LogEndOffset), as a
// rebuild from remote storage does after TruncateFullyAndStartAt(offset).
// The snapshot is written as the log's snapshot file at offset first
// (atomically), then loaded; the batches of [offset, LogEndOffset) are
// replayed over it and snapshots above offset are deleted. Bytes that do
// not decode are refused with an error wrapping ErrCorruption and change
// nothing. The bytes are Kafka's snapshot, which holds each producer's
// last batch only: until the producer's next batches fill its window
// again, a retry of an older batch is out of order (Kafka's behaviour; a
// snapshot the log writes itself keeps the whole window beside it, in a
// .producerbatches file, which the remote copy uploads and
// TruncateFullyAndRestore loads: RemoteRestore.ProducerBatches).
func (l *UnifiedLog) LoadProducerSnapshot(data []byte, offset int64) error {
	if _, err := producer.DecodeSnapshot(data); err != nil {
		return fmt.Errorf("log: load producer snapshot at %d: %w", offset, err)
	}
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	err := l.checkWritableLocked()
	if err == nil && (offset < l.logStartOffset.Load() || offset > l.logEndOffset.Load()) {
		err = fmt.Errorf("log: load producer snapshot at %d outside [%d, %d]: %w",
			offset, l.logStartOffset.Load(), l.logEndOffset.Load(), ErrInvalidArgument)
	}
	l.mu.Unlock()
	if err != nil {
		return err
	}
	// The file first (flushMu held: no flush or truncation writes or
	// deletes snapshots meanwhile), so that a crash after the load finds
	// it, after the data of rolled segments (rollsync.go). vfs.File.Write
	// may modify its input: write a copy.
	if err := l.syncRolledFlushMuHeld(); err != nil {
		return err
	}
	if err := producer.WriteSnapshotFile(l.fs, l.dir, offset, bytes.Clone(data)); err != nil {
		return l.fail(err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkWritableLocked(); err != nil {
		return err
	}
	l.dropPendingSnapshotsAboveLocked(offset)
	if _, err := producer.DeleteSnapshotsAbove(l.fs, l.dir, offset); err != nil {
		return l.failLocked(err)
	}
	pm := l.mu.producers
	if err := pm.LoadSnapshot(data, offset); err != nil {
		return fmt.Errorf("log: load producer snapshot at %d: %w", offset, err)
	}
	if err := l.replayProducers(pm, l.mu.segments, pm.MapEndOffset(), l.logEndOffset.Load(), nil); err != nil {
		return l.failLocked(err)
	}
	l.finishProducerRebuildLocked()
	l.publishOffsetsLocked()
	return nil
}

// refreshFirstUnstableOffsetLocked publishes the producer state's first
// unstable offset, clamped to the log start offset (Kafka does the same:
// a transaction whose start retention removed is unstable from the log
// start on).
//
// REQUIRES: l.mu held.
func (l *UnifiedLog) refreshFirstUnstableOffsetLocked() {
	fuo, ok := l.mu.producers.FirstUnstableOffset()
	if !ok {
		l.firstUnstableOffset.Store(base.UndefinedOffset)
		return
	}
	l.firstUnstableOffset.Store(max(fuo, l.logStartOffset.Load()))
}

// storeHighWatermarkLocked stores hw and lets the producer state forget
// the completed transactions below it, in one critical section, so that
// LastStableOffset never pairs a new high watermark with a stale first
// unstable offset that is higher than the true one.
//
// REQUIRES: l.mu held.
func (l *UnifiedLog) storeHighWatermarkLocked(hw int64) {
	l.highWatermark.Store(hw)
	l.mu.producers.OnHighWatermarkUpdated(hw)
	l.refreshFirstUnstableOffsetLocked()
}

// finishProducerRebuildLocked ends every rebuild of the producer state
// (open, truncation, snapshot load): the state is known up to the log end
// offset, the log start rule applies (OnLogStartOffsetIncremented: see
// maybeIncrementLogStartOffsetLocked), and the completed transactions below
// the high watermark are stable.
//
// REQUIRES: l.mu held.
func (l *UnifiedLog) finishProducerRebuildLocked() {
	pm := l.mu.producers
	pm.SetMapEndOffset(max(pm.MapEndOffset(), l.logEndOffset.Load()))
	pm.OnLogStartOffsetIncremented(l.logStartOffset.Load())
	pm.OnHighWatermarkUpdated(l.highWatermark.Load())
	l.refreshFirstUnstableOffsetLocked()
}

// reportSnapshotLoad logs the snapshots a load found corrupt (and
// deleted).
func (l *UnifiedLog) reportSnapshotLoad(res producer.SnapshotLoad) {
	for _, c := range res.Corrupt {
		l.counters.corruptionsFound.Add(1)
		l.logger.Error("deleted a corrupt producer snapshot; rebuilding the state from the log",
			zap.Int64("offset", c.Offset), zap.Error(c.Err))
	}
}

// reloadProducers brings pm to the state of the log [logStart, end)
// from the snapshots and the segments segs: Kafka's truncateAndReload plus
// the replay of the batches after the snapshot. Without a snapshot the
// state is rebuilt from the base of the segment holding the log start
// (snapshotFloor), as a recovery of that segment does. It returns the
// offset of the snapshot it loaded, -1 if none.
//
// REQUIRES: l.mu held (or Open, before the log is shared).
func (l *UnifiedLog) reloadProducers(pm *producer.Manager, segs []*segmentRef, logStart, end int64) (int64, error) {
	// The floor from every segment of the log: segs may end below the
	// segment holding the log start (a recovery's trusted prefix).
	floor := snapshotFloor(l.mu.segments, logStart)
	if !mutation.Disabled(mutation.RecoveryPointSnapshotKept) {
		// Nor above the segment a crash would recover from (the one
		// holding the recovery point, which lags the log start when
		// the log start was raised and nothing was flushed since): that
		// recovery starts from the snapshot at its base, and without
		// it the producers whose batches lie only below that segment
		// would be forgotten. Retention deletes it with its segment.
		floor = min(floor, floorBase(l.mu.segments, l.mu.recoveryPoint))
	}
	res, err := pm.TruncateAndReload(l.fs, l.dir, floor, logStart, end)
	if err != nil {
		return -1, fmt.Errorf("log: reload producer state: %w", err)
	}
	l.reportSnapshotLoad(res)
	loaded := int64(-1)
	if res.Loaded {
		loaded = res.Offset
	}
	return loaded, l.replayProducers(pm, segs, pm.MapEndOffset(), end, nil)
}

// replayProducers replays into pm every batch of segs that ends at or
// above from and starts below to, reading the segments in bounded chunks.
// onAborted, if not nil, receives each aborted transaction with the base
// of the segment holding its marker.
func (l *UnifiedLog) replayProducers(pm *producer.Manager, segs []*segmentRef, from, to int64,
	onAborted func(segBase int64, t AbortedTxn)) error {
	const chunk = 1 << 20
	var buf []byte
	for i, s := range segs {
		if s.BaseOffset() >= to {
			break
		}
		if i+1 < len(segs) && segs[i+1].BaseOffset() <= from {
			continue
		}
		off := max(from, s.BaseOffset())
		for off < to {
			res, err := s.Read(buf[:0], off, chunk, -1, true)
			if err != nil {
				return err
			}
			if !res.Found || len(res.Data) == 0 {
				break
			}
			buf = res.Data
			progressed := false
			for rest := res.Data; len(rest) >= record.LogOverhead; {
				b, err := record.ReadBatch(rest)
				if err != nil {
					break // the chunk ends inside a batch: read on from off
				}
				rest = rest[b.Size():]
				if b.BaseOffset() >= to {
					off = to
					break
				}
				if b.LastOffset() >= from {
					l.replayBatch(pm, b, func(t AbortedTxn) {
						if onAborted != nil {
							onAborted(s.BaseOffset(), t)
						}
					})
				}
				off = b.NextOffset()
				progressed = true
			}
			if !progressed {
				break
			}
		}
	}
	return nil
}

// replayBatch applies one batch read back from the log. A batch the state
// cannot apply (a malformed transaction marker that passed its CRC) is
// logged and skipped: the log holds it, so the state moves past it.
func (l *UnifiedLog) replayBatch(pm *producer.Manager, b record.Batch, onAborted func(AbortedTxn)) {
	completed, err := pm.Replay(b)
	if err != nil {
		l.logger.Error("producer state skips a batch it cannot replay",
			zap.Int64("baseOffset", b.BaseOffset()), zap.Error(err))
		pm.SetMapEndOffset(max(pm.MapEndOffset(), b.NextOffset()))
		return
	}
	for _, c := range completed {
		if c.IsAborted {
			onAborted(c.AbortedTxn())
		}
	}
}

// dropPendingSnapshotsAboveLocked forgets queued snapshots above offset
// (a truncation below them).
//
// REQUIRES: l.mu and l.flushMu held (writePendingSnapshots relies on the
// queue changing only at its end while it writes).
func (l *UnifiedLog) dropPendingSnapshotsAboveLocked(offset int64) {
	l.mu.pendingSnapshots = slices.DeleteFunc(l.mu.pendingSnapshots, func(p pendingSnapshot) bool {
		return p.offset > offset
	})
}

// writePendingSnapshots writes the snapshots queued by rolls. Called
// after an operation that rolled, with l.mu not held.
func (l *UnifiedLog) writePendingSnapshots() error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	snaps := slices.Clone(l.mu.pendingSnapshots)
	l.mu.Unlock()
	return l.writeSnapshotsFlushMuHeld(snaps)
}

// writeSnapshotsFlushMuHeld writes snaps, a prefix of the queue copied
// under l.mu, and removes them from the queue. flushMu keeps truncations
// (which drop queued snapshots and delete snapshot files) out until the
// files are written; appends only add to the end of the queue.
//
// REQUIRES: l.flushMu held, l.mu not held.
func (l *UnifiedLog) writeSnapshotsFlushMuHeld(snaps []pendingSnapshot) error {
	if len(snaps) == 0 {
		return nil
	}
	// The snapshot's directory fsync makes the rolled-to segment durable:
	// the rolled segment's data first (rollsync.go).
	if err := l.syncRolledFlushMuHeld(); err != nil {
		return err
	}
	for _, p := range snaps {
		if err := p.write(l); err != nil {
			return l.fail(err)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.mu.pendingSnapshots
	if len(q) >= len(snaps) && q[0].offset == snaps[0].offset {
		l.mu.pendingSnapshots = append(q[:0], q[len(snaps):]...)
	}
	return nil
}

// snapshotFloor is the offset below which producer snapshots are of no
// use: the base of the segment holding the log start offset (logStart
// itself when no segment holds it). The snapshot at that base is kept
// when the log start rises inside the segment (DeleteRecords): a
// recovery of the segment rebuilds its producer state from there,
// replaying the whole segment as Kafka's LogSegment.recover does, so that
// producers whose batches lie below the log start keep their state after
// a crash as they do in memory (the log start advance keeps producers).
func snapshotFloor(segs []*segmentRef, logStart int64) int64 {
	floor := logStart
	if mutation.Disabled(mutation.SnapshotFloor) {
		return floor
	}
	for _, s := range segs {
		if s.BaseOffset() > logStart {
			break
		}
		floor = s.BaseOffset()
	}
	return floor
}

// floorBase is the base of the segment of segs holding offset, the first
// segment's when offset lies below it (math.MaxInt64 without segments).
func floorBase(segs []*segmentRef, offset int64) int64 {
	if len(segs) == 0 {
		return math.MaxInt64
	}
	base := segs[0].BaseOffset()
	for _, s := range segs[1:] {
		if s.BaseOffset() > offset {
			break
		}
		base = s.BaseOffset()
	}
	return base
}

// deleteSnapshotsBelow removes the snapshot files below offset (a
// snapshotFloor), outside l.mu. Best effort: a failure is logged, and a
// snapshot below the floor is never loaded (TruncateAndReload deletes
// it).
func (l *UnifiedLog) deleteSnapshotsBelow(offset int64) {
	if _, err := producer.DeleteSnapshotsBelow(l.fs, l.dir, offset); err != nil {
		l.logger.Warn("could not delete producer snapshots below the log start offset",
			zap.Int64("logStartOffset", offset), zap.Error(err))
	}
}

// writeTxnIndex writes s's transaction index file if it differs from
// what the file holds (atomic replace: temp, fsync, rename, directory
// fsync). The caller holds l.flushMu or the log is closed, so no
// truncation replaces the entries meanwhile. Appends may still add
// entries to the active segment's index (under l.mu): the file gets the
// entries encoded at the start and txnPersisted their count, so the next
// call writes the later ones.
func (l *UnifiedLog) writeTxnIndex(s *segmentRef) error {
	data := s.txn.AppendEncoded(nil, 0)
	n := int64(len(data) / producer.AbortedTxnSize)
	if s.txnPersisted.Load() == n {
		return nil
	}
	path := l.fs.PathJoin(l.dir, segment.TxnIndexFileName(s.BaseOffset()))
	if err := atomicfile.Write(l.fs, path, data); err != nil {
		return fmt.Errorf("log: write %s: %w", path, err)
	}
	s.txnPersisted.Store(n)
	return nil
}

// readTxnIndex loads the transaction index file of the segment at base.
// A missing file is an empty index; a corrupt one is returned as an
// error wrapping ErrCorruption (Open then recovers the segment, which
// rebuilds it).
func (l *UnifiedLog) readTxnIndex(segBase int64) (*producer.TxnIndex, error) {
	path := l.fs.PathJoin(l.dir, segment.TxnIndexFileName(segBase))
	f, err := l.fs.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &producer.TxnIndex{}, nil
	} else if err != nil {
		return nil, fmt.Errorf("log: open %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("log: stat %s: %w", path, err)
	}
	data := make([]byte, st.Size())
	if _, err := f.ReadAt(data, 0); err != nil && len(data) > 0 {
		return nil, fmt.Errorf("log: read %s: %w", path, err)
	}
	ti, err := producer.ParseTxnIndex(data, segBase)
	if err != nil {
		return nil, fmt.Errorf("log: %s: %w", path, err)
	}
	return ti, nil
}

// truncatedTxnIndex returns a copy of ti without the entries whose marker
// is at or above offset. A copy, so that readers of older views keep the
// index they started with.
func truncatedTxnIndex(ti *producer.TxnIndex, offset int64) *producer.TxnIndex {
	nt := &producer.TxnIndex{}
	for _, t := range ti.Entries() {
		if t.LastOffset < offset {
			err := nt.Append(t)
			invariants.Assertf(err == nil, "copying an ordered txn index: %v", err)
		}
	}
	return nt
}
