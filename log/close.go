package log

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tierlog/tierlog/internal/atomicfile"
	"github.com/tierlog/tierlog/log/internal/producer"
)

// Close flushes the log, writes its checkpoints and the clean-shutdown
// marker, and releases its files. The marker is the commit point of a
// clean shutdown: the next Open trusts the segments and skips recovery
// only if it exists. After a write failure (the log refuses writes) Close
// writes no marker, so the next Open recovers, and returns the failure.
// Every method called after Close returns ErrClosed; Close itself is
// idempotent.
func (l *UnifiedLog) Close() error {
	flushErr := l.Flush()
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	if l.mu.closed {
		l.mu.Unlock()
		return nil
	}
	stickyErr := l.mu.err
	l.mu.closed = true
	ckpt := l.offsetsCheckpointLocked()
	// The producer state at the log end, for the next Open to load
	// instead of replaying the log.
	leo := l.logEndOffset.Load()
	l.mu.producers.SetMapEndOffset(leo)
	snap := pendingSnapshot{offset: leo, data: l.mu.producers.Snapshot(nil)}
	l.mu.Unlock()

	var err error
	if stickyErr == nil && flushErr == nil {
		err = l.writeCleanShutdown(ckpt, snap)
	} else {
		err = errors.Join(stickyErr, flushErr)
	}
	// Release the log's reference to the current view: the segments'
	// handles close once the last reader is done with them.
	l.released.Store(true)
	l.view.Load().unref()
	return err
}

// writeCleanShutdown persists the indexes, the producer snapshot, the
// offsets, the epochs and the marker, in that order: the marker must only exist once everything it vouches for
// is durable.
func (l *UnifiedLog) writeCleanShutdown(ckpt offsetsCheckpoint, snap pendingSnapshot) error {
	// The active segment's indexes are written and fsynced here, not by
	// the segment's Close after the marker, so that a failure is reported
	// and the marker never vouches for index files that were not written.
	// Likewise every transaction index (Open trusts them after a clean
	// shutdown) and the producer snapshot at the log end.
	v := l.view.Load()
	if err := v.active().OnBecomeInactive(); err != nil {
		return fmt.Errorf("log: %w", err)
	}
	for _, s := range v.segments {
		if err := l.writeTxnIndex(s); err != nil {
			return err
		}
	}
	if err := producer.WriteSnapshotFile(l.fs, l.dir, snap.offset, snap.data); err != nil {
		return fmt.Errorf("log: %w", err)
	}
	if err := writeOffsetsCheckpoint(l.fs, l.dir, ckpt); err != nil {
		return err
	}
	if err := l.epochs.Flush(); err != nil {
		return fmt.Errorf("log: %w", err)
	}
	path := l.fs.PathJoin(l.dir, CleanShutdownFileName)
	f, err := l.fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("log: create %s: %w", path, err)
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		return fmt.Errorf("log: sync %s: %w", path, err)
	}
	if err := atomicfile.SyncDir(l.fs, l.dir); err != nil {
		return fmt.Errorf("log: %w", err)
	}
	return nil
}

// Delete closes the log without flushing and removes its directory with
// everything in it. Every method called afterwards returns ErrClosed.
func (l *UnifiedLog) Delete() error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	wasClosed := l.mu.closed
	l.mu.closed = true
	l.mu.Unlock()
	if !wasClosed {
		l.released.Store(true)
		l.view.Load().unref()
	}
	if err := l.fs.RemoveAll(l.dir); err != nil {
		return fmt.Errorf("log: delete %s: %w", l.dir, err)
	}
	return nil
}
