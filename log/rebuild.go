package log

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/atomicfile"
	"github.com/tierlog/tierlog/internal/invariants"
	"github.com/tierlog/tierlog/internal/mutation"
	"github.com/tierlog/tierlog/log/internal/producer"
)

// RemoteRestore is the state a rebuild from remote storage installs in a
// log (Kafka: the end of TierStateMachine.buildRemoteLogAuxState, from
// truncateFullyAndStartAt to the producer snapshot; see docs/rebuild.md
// for the upstream and the phase-2 variants).
type RemoteRestore struct {
	// NextOffset is where the local log restarts: the new log end offset,
	// local log start offset and high watermark. Upstream it is the
	// remote segment's end offset + 1; in phase 2 the seal.
	NextOffset int64
	// LogStartOffset is the leader's log start offset (from the fetch
	// response), at most NextOffset. Negative: NextOffset.
	LogStartOffset int64
	// Epochs are the leader-epoch entries to restore, strictly increasing
	// in epoch and start offset, each starting below NextOffset (an entry
	// at or above it has no record in the rebuilt log and would be
	// dropped on the next Open). Entries below LogStartOffset are moved up
	// to it, as Open would (epochcache TruncateFromStart).
	Epochs []epochcache.Entry
	// ProducerSnapshot is the producer snapshot at NextOffset (Kafka
	// .snapshot bytes); nil leaves the producer state empty there.
	ProducerSnapshot []byte
	// ProducerBatches is the producer batches file that goes with
	// ProducerSnapshot (tierlog's .producerbatches bytes, as
	// ProducerSnapshotWithBatches returns them and the remote copy
	// uploads them): every producer's whole dedup window, so that after
	// the rebuild a retry of any batch of the window is answered as a
	// duplicate with its original offset. nil (a segment copied without
	// it) restores Kafka's window: each producer's last batch only, and a
	// retry of an older batch is out of order. Bytes that do not decode
	// (CRC) or that disagree with the snapshot are refused with an error
	// wrapping ErrCorruption before anything changes; a file that names
	// another snapshot (its snapshot CRC differs) is ignored.
	ProducerBatches []byte
}

// TruncateFullyAndRestore replaces the whole log with an empty log at
// r.NextOffset that carries the auxiliary state of the records below it:
// log start r.LogStartOffset, the leader-epoch entries r.Epochs and the
// producer snapshot r.ProducerSnapshot. It is TruncateFullyAndStartAt
// followed by the epoch assignment and the snapshot load of a rebuild from
// remote storage, made crash-atomic: a crash leaves either the old log, or
// an empty log at a log start below r.NextOffset with no epochs (a
// follower fetching there is sent to remote storage again and redoes the
// rebuild), or the whole new state; never the new log end with missing
// epochs or a missing snapshot. Steps (DESIGN.md 8.1):
//
//  1. delete the producer snapshot files and remove every segment, newest
//     first, then fsync the directory;
//  2. write the offsets checkpoint (log start, recovery point NextOffset);
//  3. write the epoch checkpoint with exactly the restored entries;
//  4. write the producer snapshot file at NextOffset (its batches file
//     first, when r.ProducerBatches holds one);
//  5. create the empty segment at NextOffset and fsync the directory:
//     the commit point (Open finds a segment at NextOffset only after
//     steps 1 to 4 are durable).
//
// It counts as a truncation and keeps the highest offset in remote
// storage (as TruncateFullyAndStartAt). Remote storage must be enabled:
// the log start stays below the local log start. Invalid arguments
// (ErrInvalidArgument) and snapshot bytes that do not decode
// (ErrCorruption) are refused before anything changes; an I/O failure
// makes the log refuse writes until it is reopened.
func (l *UnifiedLog) TruncateFullyAndRestore(r RemoteRestore) error {
	epochs, err := l.validateRestore(&r)
	if err != nil {
		return err
	}
	return l.countedTruncation(func(ev *events) error { return l.restoreLocked(r, epochs, ev) })
}

// validateRestore checks r and returns the entries to write: r.Epochs
// moved up to the log start offset as Open's repair would move them.
func (l *UnifiedLog) validateRestore(r *RemoteRestore) ([]epochcache.Entry, error) {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("log: restore at %d: %s: %w", r.NextOffset, fmt.Sprintf(format, args...), ErrInvalidArgument)
	}
	if !l.opts.RemoteStorageEnabled {
		return nil, invalid("remote storage is not enabled")
	}
	if r.NextOffset < 0 {
		return nil, invalid("negative offset")
	}
	if r.LogStartOffset < 0 {
		r.LogStartOffset = r.NextOffset
	}
	if r.LogStartOffset > r.NextOffset {
		return nil, invalid("log start offset %d above it", r.LogStartOffset)
	}
	for i, e := range r.Epochs {
		switch {
		case e.Epoch < 0 || e.StartOffset < 0:
			return nil, invalid("negative epoch entry %d@%d", e.Epoch, e.StartOffset)
		case e.StartOffset >= r.NextOffset:
			return nil, invalid("epoch entry %d@%d not below it", e.Epoch, e.StartOffset)
		case i > 0 && (e.Epoch <= r.Epochs[i-1].Epoch || e.StartOffset <= r.Epochs[i-1].StartOffset):
			return nil, invalid("epoch entries not strictly increasing at %d@%d", e.Epoch, e.StartOffset)
		}
	}
	if r.ProducerBatches != nil && r.ProducerSnapshot == nil {
		return nil, invalid("producer batches without a producer snapshot")
	}
	if r.ProducerBatches != nil && mutation.Disabled(mutation.RemoteProducerWindow) {
		r.ProducerBatches = nil
	}
	if r.ProducerSnapshot != nil {
		// Loaded into a scratch state: the bytes must decode and be
		// consistent (no producer twice, windows that agree with the
		// snapshot), so the real load cannot fail after the old log is
		// gone.
		use, err := producer.NewManager(producer.Options{}).LoadSnapshotWithBatches(r.ProducerSnapshot, r.ProducerBatches, r.NextOffset)
		if err != nil {
			return nil, fmt.Errorf("log: restore at %d: producer snapshot: %w", r.NextOffset, err)
		}
		if use != producer.BatchesLoaded {
			// Absent, or naming another snapshot: Kafka's window.
			r.ProducerBatches = nil
		}
	}
	c := epochcache.New()
	if err := c.AssignAll(r.Epochs); err != nil {
		return nil, fmt.Errorf("log: restore at %d: %w", r.NextOffset, err)
	}
	c.TruncateFromStart(r.LogStartOffset)
	return c.Entries(), nil
}

// restoreLocked runs the steps of TruncateFullyAndRestore's comment. The
// view readers see is replaced only at the end: until then they keep
// reading the old segments through their open handles.
//
// Like every truncation it fsyncs under mu (see truncate.go): the
// segments, the epoch cache, the producer state and the truncation count
// change in one critical section.
//
// REQUIRES: l.mu and l.flushMu held.
func (l *UnifiedLog) restoreLocked(r RemoteRestore, epochs []epochcache.Entry, ev *events) error {
	n := r.NextOffset
	// Step 1. Newest first: if a file system persists only some of the
	// removals, what survives is a prefix of the old log, which Open
	// reads as a log truncated from the end.
	l.mu.pendingSnapshots = nil
	if _, err := producer.DeleteSnapshotsAbove(l.fs, l.dir, -1); err != nil {
		return l.failLocked(err)
	}
	old := l.mu.segments
	for i := len(old) - 1; i >= 0; i-- {
		if err := l.removeSegmentLocked(old[i], "truncation", ev); err != nil {
			return l.failLocked(err)
		}
	}
	if err := atomicfile.SyncDir(l.fs, l.dir); err != nil {
		return l.failLocked(err)
	}
	// Steps 2 to 4. Until step 5 the directory holds no segment, which
	// Open turns into an empty log at the checkpointed log start (old or
	// new), below n: the epoch checkpoint is then repaired to empty
	// (TruncateFromEnd(log start)) and a snapshot at n is above the log
	// end and deleted.
	l.mu.segmentPoint = 0
	if err := writeOffsetsCheckpoint(l.fs, l.dir, offsetsCheckpoint{logStartOffset: r.LogStartOffset, recoveryPoint: n}); err != nil {
		return l.failLocked(err)
	}
	if len(epochs) == 0 {
		// AssignAll writes nothing for an empty list: the old checkpoint
		// must not survive under the new log.
		if err := l.epochs.ClearAndFlush(); err != nil {
			return l.failLocked(err)
		}
	} else {
		l.epochs.Clear()
		if err := l.epochs.AssignAll(epochs); err != nil {
			return l.failLocked(err)
		}
	}
	pm := l.mu.producers
	pm.TruncateFullyAndStartAt(n)
	if r.ProducerSnapshot != nil {
		// vfs.File.Write may modify its input: write copies. With a
		// batches file, the pair as the log writes its own snapshots
		// (the snapshot's rename commits it), so a restart keeps the
		// windows too.
		var err error
		if r.ProducerBatches != nil {
			err = producer.WriteSnapshotFiles(l.fs, l.dir, n, bytes.Clone(r.ProducerSnapshot), bytes.Clone(r.ProducerBatches))
		} else {
			err = producer.WriteSnapshotFile(l.fs, l.dir, n, bytes.Clone(r.ProducerSnapshot))
		}
		if err != nil {
			return l.failLocked(err)
		}
		_, err = pm.LoadSnapshotWithBatches(r.ProducerSnapshot, r.ProducerBatches, n)
		invariants.Assertf(err == nil, "snapshot loaded in validateRestore fails: %v", err)
		if err != nil {
			return l.failLocked(err)
		}
	}
	// Step 5: the commit point.
	seg, err := l.createSegmentOverOrphans(n, nil)
	if err != nil {
		return l.failLocked(err)
	}
	if err := atomicfile.SyncDir(l.fs, l.dir); err != nil {
		_ = seg.Close()
		return l.failLocked(err)
	}
	l.mu.segments = []*segmentRef{newSegmentRef(seg, nil, 0)}
	l.mu.dirDirty = false
	l.logEndOffset.Store(n)
	l.logStartOffset.Store(r.LogStartOffset)
	l.localLogStartOffset.Store(n)
	l.mu.recoveryPoint = n
	l.mu.unflushedRecords, l.mu.firstUnflushedMs = 0, 0
	l.storeHighWatermarkLocked(n)
	l.finishProducerRebuildLocked()
	// Open drops expired producers after loading a snapshot; so does the
	// live log, so that a restart shows the same state.
	pm.RemoveExpired(l.opts.nowMs(), l.opts.ProducerIDExpirationMs)
	l.refreshFirstUnstableOffsetLocked()
	// The new segment and the offsets that describe it, in one store.
	l.publishLocked()
	l.checkOffsetsLocked()
	invariants.Assertf(slices.Equal(l.epochs.Entries(), epochs), "restored epochs %v, want %v", l.epochs.Entries(), epochs)
	return nil
}
