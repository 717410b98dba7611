package log

import (
	"errors"

	"fmt"
	iofs "io/fs"
	"strings"
	"sync/atomic"
	"time"

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
// idempotent (with ManagedCleanShutdown a later Close returns the first
// one's error again).
func (l *UnifiedLog) Close() error {
	l.mu.Lock()
	l.mu.closing = true
	l.mu.Unlock()
	l.background.Wait()
	flushErr := l.Flush()
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	return l.closeFlushMuHeld(flushErr)
}

// closeFlushMuHeld is Close after its flush, which returned flushErr.
//
// REQUIRES: l.flushMu held.
func (l *UnifiedLog) closeFlushMuHeld(flushErr error) error {
	l.mu.Lock()
	if l.mu.closed {
		// A managed marker's owner must not take a second Close for a
		// clean one.
		err := l.mu.closeErr
		l.mu.Unlock()
		return err
	}
	stickyErr := l.mu.err
	l.mu.closed = true
	ckpt := l.offsetsCheckpointLocked()
	// The producer state at the log end, for the next Open to load
	// instead of replaying the log.
	snap := takeSnapshot(l.mu.producers, l.logEndOffset.Load())
	l.mu.Unlock()

	var err error
	if stickyErr == nil && flushErr == nil {
		err = l.writeCleanShutdown(ckpt, snap)
	} else {
		err = errors.Join(stickyErr, flushErr)
	}
	if err != nil && l.opts.ManagedCleanShutdown {
		l.mu.Lock()
		l.mu.closeErr = err
		l.mu.Unlock()
	}
	// Release the log's reference to the current view: the segments'
	// handles close once the last reader is done with them.
	l.released.Store(true)
	l.wakeAll() // after released: waiters then see ErrClosed
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
	if err := l.syncRolledFlushMuHeld(); err != nil { // rollsync.go
		return err
	}
	v := l.view.Load()
	if err := v.active().OnBecomeInactive(); err != nil {
		return fmt.Errorf("log: %w", err)
	}
	for _, s := range v.segments {
		if err := l.writeTxnIndex(s); err != nil {
			return err
		}
	}
	// The snapshot and the checkpoint are written only when they differ
	// from the files there (durable: every write of them is), as after a
	// clean open with no write since: Kafka's takeSnapshot likewise skips
	// a snapshot at the offset of the last one.
	if !l.holds(producer.SnapshotFileName(snap.offset), snap.data) || !l.holds(producer.BatchesFileName(snap.offset), snap.batches) {
		if err := snap.write(l); err != nil {
			return fmt.Errorf("log: %w", err)
		}
	}
	if !l.holds(OffsetsCheckpointFileName, ckpt.encode()) {
		if err := writeOffsetsCheckpoint(l.fs, l.dir, ckpt); err != nil {
			return err
		}
	}
	if err := l.epochs.Flush(); err != nil {
		return fmt.Errorf("log: %w", err)
	}
	if !l.opts.ManagedCleanShutdown {
		path := l.fs.PathJoin(l.dir, CleanShutdownFileName)
		f, err := l.fs.Create(path, vfs.WriteCategoryUnspecified)
		if err != nil {
			return fmt.Errorf("log: create %s: %w", path, err)
		}
		if err := errors.Join(f.Sync(), f.Close()); err != nil {
			return fmt.Errorf("log: sync %s: %w", path, err)
		}
	}
	// With a managed marker, this fsync still makes durable the index
	// files OnBecomeInactive may have created (a CloseDeferred's caller
	// makes the directory durable).
	if l.stage.active() {
		return nil
	}
	if err := atomicfile.SyncDir(l.fs, l.dir); err != nil {
		return fmt.Errorf("log: %w", err)
	}
	return nil
}

// DeletedDirSuffix ends the name a deleted log's directory is renamed to
// before its files are removed (Kafka's "-delete" directories).
const DeletedDirSuffix = ".deleted"

// Delete closes the log without flushing and removes its directory with
// everything in it. Every method called afterwards returns ErrClosed.
//
// The removal is crash-atomic: the directory is first renamed to
// "<dir>.<nanos>-<seq>.deleted" and the parent directory fsynced (the commit
// point), and only then are the files removed. A crash before the rename
// leaves the whole log; after it, no log at dir (a new Open creates an
// empty one) and a leftover directory that RemoveDeletedDirs deletes. A
// partly deleted log, with some segments gone and others not, is never
// left at dir: a recreate (github.com/aiven/inkless/pull/857) relies on
// it.
func (l *UnifiedLog) Delete() error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	wasClosed := l.mu.closed
	l.mu.closed = true
	l.mu.Unlock()
	if !wasClosed {
		l.released.Store(true)
		l.wakeAll()
		l.view.Load().unref()
	}
	if _, err := l.fs.Stat(l.dir); errors.Is(err, iofs.ErrNotExist) {
		return nil // deleted already (Delete is idempotent)
	}
	gone := fmt.Sprintf("%s.%d-%d%s", l.dir, time.Now().UnixNano(), deleteSeq.Add(1), DeletedDirSuffix)
	if err := l.fs.Rename(l.dir, gone); err != nil {
		return fmt.Errorf("log: delete %s: %w", l.dir, err)
	}
	if err := atomicfile.SyncDir(l.fs, l.fs.PathDir(l.dir)); err != nil {
		return fmt.Errorf("log: delete %s: %w", l.dir, err)
	}
	if err := l.fs.RemoveAll(gone); err != nil {
		return fmt.Errorf("log: delete %s (renamed to %s): %w", l.dir, gone, err)
	}
	return nil
}

// deleteSeq makes the renamed directories of Deletes in one process
// unique even when the clock does not move between them.
var deleteSeq atomic.Uint64

// RemoveDeletedDirs removes what crashed Deletes left in parent: the
// directories whose names end in DeletedDirSuffix. A broker calls it at
// startup for each log directory, before it opens logs.
func RemoveDeletedDirs(fs vfs.FS, parent string) error {
	names, err := fs.List(parent)
	if err != nil {
		return fmt.Errorf("log: list %s: %w", parent, err)
	}
	var errs []error
	for _, n := range names {
		if strings.HasSuffix(n, DeletedDirSuffix) {
			if err := fs.RemoveAll(fs.PathJoin(parent, n)); err != nil {
				errs = append(errs, fmt.Errorf("log: remove %s: %w", n, err))
			}
		}
	}
	return errors.Join(errs...)
}
