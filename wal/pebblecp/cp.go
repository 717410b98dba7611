// Package pebblecp is the embedded wal.ControlPlane: one Pebble database
// on a vfs.FS (the logs' own, so the crash tests cover it).
//
// # Durability and atomicity
//
// Every mutating call builds one indexed Pebble batch (reads during the
// call see its own writes) and commits it with pebble.Sync: the commit
// point is the fsync of Pebble's WAL holding that batch. A crash before it
// leaves nothing of the call, after it all of it, so each call is
// crash-atomic; a call that returns nil is durable.
//
// # Concurrency
//
// One mutex, writeMu, serialises the mutating calls and is held across
// their fsync: offsets are assigned from the high watermark read under it,
// so two commits can never interleave. CommitFile calls that arrive while
// a commit is being written wait in a queue (package
// internal/groupcommit: the writer queue of LevelDB and Pebble): the
// first caller to find no leader leads, takes up to maxCommitGroup calls
// from the head of the queue (its own first), and writes them as one
// group: one update, each call a step decided in arrival order on a copy
// of the rows the group has so far (so offsets are assigned exactly as
// one call after the other would), one Pebble batch, one synced commit. A
// CommitFiles is one entry of the queue: its requests are consecutive
// steps of one group, in list order. It answers each call with its own
// result or error, then hands the lead to the new head of the queue. A
// step that fails (a reused or reaped key, an offset overflow, a row it
// cannot read) is answered with its error and leaves nothing in the
// batch; the others go on. The commit point of every call of a group is
// the one fsync of the group's batch: a crash before it leaves none of
// them, after it all of them, and a failed commit fails them all (and
// every later write, until the plane is reopened: writeErr). Reads (FindBatches, ListOffsets, LogInfo,
// ProducerStates, FilesToDelete, IsSafeToDeleteObject) never take
// writeMu: they read a Pebble snapshot (one consistent state) under mu
// held for reading, which only Close takes for writing, so readers never
// wait for an fsync.
//
// Lock order: ControlPlane.writeMu -> ControlPlane.mu; the commit
// queue's lock is never held with another. None is held while calling
// out of the package.
//
// The key and value layout is in keys.go and codec.go.
package pebblecp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap"

	"github.com/tierlog/tierlog/internal/groupcommit"
	"github.com/tierlog/tierlog/wal"
)

// Options configures a ControlPlane. The zero value is valid.
type Options struct {
	// Now is the clock: commit times (LOG_APPEND_TIME), deletion marks and
	// reservations. Default time.Now.
	Now func() time.Time
	// Logger receives Pebble's log lines. Default zap.NewNop().
	Logger *zap.Logger
	// PebbleOptions, if non-nil, is copied and used to open the database
	// (its FS is overwritten). Default: Pebble's defaults.
	PebbleOptions *pebble.Options
	// ReadOnly opens an existing database without writing to it (Pebble's
	// Options.ReadOnly), for inspection tools: reads work, every mutating
	// call fails, and a directory without a database is an error instead
	// of a new one. Default false.
	ReadOnly bool
	// StepFault, if non-nil, is asked at the end of every CommitFile's
	// step of a group commit, once its batches were accepted, with the
	// request's object key: an error it returns fails that commit there,
	// as a failed read or write of the control plane's own store inside
	// the step would, and the group's other commits go on. For
	// fault-injecting harnesses (the cluster simulation); default nil.
	StepFault func(objectKey string) error
}

// ControlPlane is the embedded wal.ControlPlane.
type ControlPlane struct {
	now func() time.Time
	// stepFault is Options.StepFault.
	stepFault func(objectKey string) error

	// commits is the CommitFile queue (commit.go).
	commits groupcommit.Queue[[]*commitCall]

	// writeMu serialises mutating calls; held across the Pebble commit.
	writeMu sync.Mutex
	// writeErr is sticky: after a failed commit the disk may or may not
	// hold the change, so later writes fail until the plane is reopened.
	// Guarded by writeMu.
	writeErr error

	mu struct {
		sync.RWMutex
		// db is nil after Close. Replaced only with mu held for writing.
		db *pebble.DB
	}
}

var _ wal.ControlPlane = (*ControlPlane)(nil)

// Open opens (creating if needed) the control plane's database in dir on
// fs.
func Open(fs vfs.FS, dir string, opts Options) (*ControlPlane, error) {
	if fs == nil {
		return nil, fmt.Errorf("%w: pebblecp: nil vfs.FS", wal.ErrInvalidArgument)
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	logger := opts.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	po := &pebble.Options{}
	if opts.PebbleOptions != nil {
		*po = *opts.PebbleOptions
	}
	po.FS = fs
	po.ReadOnly = po.ReadOnly || opts.ReadOnly
	if po.Logger == nil && po.LoggerAndTracer == nil {
		po.Logger = pebbleLogger{logger.Sugar().With(zap.String("component", "pebble"))}
	}
	if po.ReadOnly {
		// Pebble creates a database in an empty directory even when
		// read-only; an inspector must find one, not make one.
		if desc, err := pebble.Peek(dir, fs); err != nil || !desc.Exists {
			return nil, fmt.Errorf("%w: pebblecp: %s holds no control-plane database", wal.ErrInvalidArgument, dir)
		}
	}
	db, err := pebble.Open(dir, po)
	if err != nil {
		return nil, fmt.Errorf("pebblecp: open %s: %w", dir, err)
	}
	if err := ensureVersion(db, po.ReadOnly); err != nil {
		_ = db.Close()
		return nil, err
	}
	cp := &ControlPlane{now: now, stepFault: opts.StepFault}
	cp.mu.db = db
	return cp, nil
}

// ensureVersion checks the format version key, writing it in a new
// database and upgrading an older version to formatVersion (nothing
// else changes: version-1 rows stay as they are and decode with an
// unknown binding, version-2 rows are of one batch each). A read-only
// open reads every version and writes nothing.
func ensureVersion(db *pebble.DB, readOnly bool) error {
	v, closer, err := db.Get([]byte(keyVersion))
	if errors.Is(err, pebble.ErrNotFound) && readOnly {
		return &CorruptionError{Key: []byte(keyVersion), Reason: "no format version"}
	}
	if errors.Is(err, pebble.ErrNotFound) {
		return writeVersion(db)
	}
	if err != nil {
		return fmt.Errorf("pebblecp: read format version: %w", err)
	}
	v = append([]byte(nil), v...) // valid only until closer.Close
	_ = closer.Close()
	version := uint32(0)
	if len(v) == 4 {
		version = binary.BigEndian.Uint32(v)
	}
	older := version == formatVersionBefore || version == formatVersionBindings
	switch {
	case len(v) != 4 || (version != formatVersion && !older):
		return &CorruptionError{Key: []byte(keyVersion),
			Reason: fmt.Sprintf("format version %x, want %d to %d", v, formatVersionBefore, formatVersion)}
	case older && !readOnly:
		return writeVersion(db)
	}
	return nil
}

func writeVersion(db *pebble.DB) error {
	if err := db.Set([]byte(keyVersion), binary.BigEndian.AppendUint32(nil, formatVersion), pebble.Sync); err != nil {
		return fmt.Errorf("pebblecp: write format version: %w", err)
	}
	return nil
}

// closed reports whether Close ran.
func (cp *ControlPlane) closed() bool {
	cp.mu.RLock()
	defer cp.mu.RUnlock()
	return cp.mu.db == nil
}

// Close closes the database. Everything acknowledged is already durable.
func (cp *ControlPlane) Close() error {
	cp.writeMu.Lock()
	defer cp.writeMu.Unlock()
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.mu.db == nil {
		return wal.ErrClosed
	}
	db := cp.mu.db
	cp.mu.db = nil
	if err := db.Close(); err != nil {
		return fmt.Errorf("pebblecp: close: %w", err)
	}
	return nil
}

// updateEach answers reqs one at a time inside one update, so that a
// call's answers commit together; an error from answer (not a
// per-request answer, which it returns in its result) aborts them all.
func updateEach[Q, R any](ctx context.Context, cp *ControlPlane, reqs []Q, answer func(tx *txn, q Q) (R, error)) ([]R, error) {
	return answerEach(func(fn func(*txn) error) error { return cp.update(ctx, fn) }, reqs, answer)
}

// viewEach answers reqs one at a time from one snapshot; an error from
// answer fails the whole call.
func viewEach[Q, R any](ctx context.Context, cp *ControlPlane, reqs []Q, answer func(r pebble.Reader, q Q) (R, error)) ([]R, error) {
	return answerEach(func(fn func(pebble.Reader) error) error { return cp.view(ctx, fn) }, reqs, answer)
}

// answerEach runs answer on every request inside one call of in (an
// update or a view) and collects the results in request order.
func answerEach[T, Q, R any](in func(func(T) error) error, reqs []Q, answer func(T, Q) (R, error)) ([]R, error) {
	out := make([]R, len(reqs))
	err := in(func(t T) error {
		for i, q := range reqs {
			res, err := answer(t, q)
			if err != nil {
				return err
			}
			out[i] = res
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// update runs fn on a fresh transaction under writeMu and commits it with
// pebble.Sync if fn succeeds.
func (cp *ControlPlane) update(ctx context.Context, fn func(tx *txn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	cp.writeMu.Lock()
	defer cp.writeMu.Unlock()
	cp.mu.RLock()
	db := cp.mu.db
	cp.mu.RUnlock()
	if db == nil {
		return wal.ErrClosed
	}
	if cp.writeErr != nil {
		return cp.writeErr
	}
	tx := newTxn(db.NewIndexedBatch(), cp.now())
	tx.db = db
	defer tx.b.Close()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.flush(); err != nil {
		return err
	}
	if tx.b.Empty() {
		return nil
	}
	// The commit point: the fsync of Pebble's WAL holding this batch.
	if err := tx.b.Commit(pebble.Sync); err != nil {
		cp.writeErr = fmt.Errorf("pebblecp: commit (the control plane refuses writes until reopened): %w", err)
		return cp.writeErr
	}
	return nil
}

// view runs fn on a snapshot under mu held for reading.
func (cp *ControlPlane) view(ctx context.Context, fn func(r pebble.Reader) error) error {
	return cp.read(ctx, func(db *pebble.DB) error {
		snap := db.NewSnapshot()
		defer snap.Close()
		return fn(snap)
	})
}

// viewKey runs fn, a read of one key, on the database itself: one Get
// is consistent on its own, and a snapshot (linked into the DB's list
// under its mutex, unlinked at Close) costs twice the Get
// (BenchmarkLogInfo). Reads of several keys that must agree use view.
func (cp *ControlPlane) viewKey(ctx context.Context, fn func(r pebble.Reader) error) error {
	return cp.read(ctx, func(db *pebble.DB) error { return fn(db) })
}

// read runs fn on the open database under mu held for reading.
func (cp *ControlPlane) read(ctx context.Context, fn func(db *pebble.DB) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	cp.mu.RLock()
	defer cp.mu.RUnlock()
	if cp.mu.db == nil {
		return wal.ErrClosed
	}
	return fn(cp.mu.db)
}

// pebbleLogger routes Pebble's log lines to zap. Fatalf panics as
// Pebble's own default logger exits: Pebble calls it only for states it
// cannot continue from.
type pebbleLogger struct{ s *zap.SugaredLogger }

func (l pebbleLogger) Infof(format string, args ...any)  { l.s.Infof(format, args...) }
func (l pebbleLogger) Errorf(format string, args ...any) { l.s.Errorf(format, args...) }
func (l pebbleLogger) Fatalf(format string, args ...any) {
	l.s.Errorf(format, args...)
	panic(fmt.Sprintf(format, args...))
}
