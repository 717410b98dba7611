package logmanager

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap"

	"github.com/tierlog/tierlog/internal/atomicfile"
	"github.com/tierlog/tierlog/internal/mutation"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/remote"
)

// managed is one log the manager holds.
type managed struct {
	// tp carries the topic id of partition.metadata (zero: none stored).
	tp     remote.TopicIDPartition
	dir    string // the log directory
	path   string // the partition's directory in it
	future bool
	log    *log.UnifiedLog
	// promotedGen is the generation of a current log promoted in place
	// (PromoteFutureInPlace), still in its marked future directory; 0:
	// none.
	promotedGen int
}

func (e *managed) info() PartitionInfo {
	return PartitionInfo{Partition: e.tp, Dir: e.dir, Path: e.path, Future: e.future}
}

// PartitionInfo describes one log the manager holds.
type PartitionInfo struct {
	// Partition carries the topic id stored in partition.metadata, zero
	// when none was ever given.
	Partition remote.TopicIDPartition
	Dir       string // the log directory
	Path      string // the partition's directory
	Future    bool   // the future log of a directory move
}

// pendingDelete is a renamed directory waiting for FileDeleteDelay.
type pendingDelete struct {
	dir, path string
	due       time.Time
}

// Manager holds the partitions' logs of a broker's log directories
// (Kafka: LogManager). See the package comment.
//
// Lock order: Manager.opMu -> Manager.mu -> log.UnifiedLog's locks. mu is
// never held across a log's I/O; opMu is held across the operations that
// create, rename, delete or close logs and across checkpoint writes, so
// that they apply one at a time and a checkpoint never lists a log that
// is gone.
type Manager struct {
	opts   Options
	fs     vfs.FS
	logger *zap.Logger

	opMu sync.Mutex
	mu   struct {
		sync.Mutex
		current map[key]*managed
		future  map[key]*managed
		// offline maps each failed directory to its cause; offlineParts
		// and offlineFutures the partitions that were in one.
		offline        map[string]error
		offlineParts   map[key]string
		offlineFutures map[key]string
		deletes        []pendingDelete
		closed         bool
	}

	counters counters
	stop     chan struct{}
	tasks    sync.WaitGroup
}

// Open opens every log in every directory of opts.Dirs (Kafka:
// LogManager.loadLogs):
//
//  1. each directory is created if missing; its
//     replication-offset-checkpoint is read (a damaged one takes the
//     directory offline, as in Kafka), and its recovery-point and
//     log-start checkpoints are checked (a damaged one is logged and
//     counted: the logs' own checkpoints are authoritative);
//  2. its entries are classified: "<topic>-<partition>" is a log,
//     "<...>.<id>-future" a future log, "<...>-delete" and log.Delete's
//     ".deleted" directories are removed in the background after
//     FileDeleteDelay, anything else is a stray, logged and left alone;
//  3. a partition found in two directories fails Open with a
//     *DuplicateLogError before any log is opened;
//  4. the logs are opened, RecoveryThreadsPerDir at a time per directory
//     (all directories at once), each log's high watermark restored from
//     the checkpoint and clamped to [log start, log end]; a log that
//     fails to open takes its directory offline (its other logs closed);
//  5. checkpoints that named partitions no longer present are rewritten,
//     and the background tasks start.
//
// Open fails only for bad options, duplicates, ctx, or when every
// directory is offline.
func Open(ctx context.Context, opts Options) (*Manager, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	m := &Manager{opts: opts, fs: opts.FS, logger: opts.Logger, stop: make(chan struct{})}
	m.mu.current = map[key]*managed{}
	m.mu.future = map[key]*managed{}
	m.mu.offline = map[string]error{}
	m.mu.offlineParts = map[key]string{}
	m.mu.offlineFutures = map[key]string{}
	start := time.Now()
	if err := m.load(ctx); err != nil {
		m.closeAllQuietly()
		return nil, err
	}
	m.counters.openNanos.Store(int64(time.Since(start)))
	if !opts.NoBackgroundTasks {
		m.startTasks()
	}
	return m, nil
}

// dirScan is what step 1 and 2 of Open found in one directory.
type dirScan struct {
	dir     string
	hw      map[key]int64
	entries []scanEntry
	err     error // the directory is offline
	stale   bool  // a checkpoint names a partition not present
	// clean: the directory's clean-shutdown marker vouched for its logs
	// (removed durably before the first of them is opened).
	clean bool
}

type scanEntry struct {
	name string
	kind dirKind
	k    key
	// promoted: the generation in the PromotedFutureFile of a future log
	// directory, which makes it the partition's current log (kind
	// kindCurrent; finishPromotions); 0: none.
	promoted int
}

func (m *Manager) scanDir(d string) dirScan {
	s := dirScan{dir: d}
	if s.err = m.createDir(d); s.err != nil {
		return s
	}
	// The partitions first: if the directory fails below, they are known
	// as offline rather than unknown (GetOrCreate must not create them
	// in another directory).
	if s.err = m.listDir(&s); s.err != nil {
		return s
	}
	if s.hw, s.err = readCheckpoint(m.fs, d, HighWatermarkCheckpointFile); s.err != nil {
		return s
	}
	if s.clean, s.err = m.takeCleanShutdownMarker(d); s.err != nil {
		return s
	}
	for _, name := range []string{RecoveryPointCheckpointFile, LogStartOffsetCheckpointFile} {
		if _, err := readCheckpoint(m.fs, d, name); err != nil {
			// Kafka resets these to 0 and the first segment's base; the
			// logs keep their own offsets checkpoint, which is what they
			// recover from, so the file is only rewritten.
			m.counters.checkpointReadErrors.Add(1)
			s.stale = true
			m.logger.Warn("damaged checkpoint ignored; rewritten from the logs' own checkpoints",
				zap.String("dir", d), zap.String("file", name), zap.Error(err))
		}
	}
	return s
}

// listDir classifies the entries of s.dir into s.entries.
func (m *Manager) listDir(s *dirScan) error {
	names, err := m.fs.List(s.dir)
	if err != nil {
		return fmt.Errorf("logmanager: list %s: %w", s.dir, err)
	}
	slices.Sort(names)
	for _, name := range names {
		kind, k := classify(name)
		if kind == kindCurrent || kind == kindFuture {
			// Recorded before the Stat: a failure below still knows it.
			s.entries = append(s.entries, scanEntry{name: name, kind: kind, k: k})
		}
		fi, err := m.fs.Stat(m.fs.PathJoin(s.dir, name))
		if err != nil {
			return fmt.Errorf("logmanager: stat %s: %w", m.fs.PathJoin(s.dir, name), err)
		}
		switch {
		case !fi.IsDir():
			if kind == kindCurrent || kind == kindFuture {
				s.entries = s.entries[:len(s.entries)-1]
			}
		case kind == kindStray:
			m.counters.strays.Add(1)
			m.logger.Warn("stray directory in a log directory left alone", zap.String("dir", s.dir), zap.String("name", name))
		case kind == kindDelete:
			s.entries = append(s.entries, scanEntry{name: name, kind: kind, k: k})
		case kind == kindFuture:
			gen, err := m.readPromotedFuture(m.fs.PathJoin(s.dir, name))
			if err != nil {
				return err
			}
			if gen > 0 {
				s.entries[len(s.entries)-1] = scanEntry{name: name, kind: kindCurrent, k: k, promoted: gen}
			}
		}
	}
	return nil
}

// createDir creates a missing log directory and makes it durable in its
// parent (Kafka: createAndValidateLogDirs flushes the parent), so that
// the logs' own fsyncs, which reach only their partition directories,
// are not lost with it.
func (m *Manager) createDir(d string) error {
	if _, err := m.fs.Stat(d); err == nil {
		return nil
	} else if !errors.Is(err, iofs.ErrNotExist) {
		return fmt.Errorf("logmanager: stat %s: %w", d, err)
	}
	if err := m.fs.MkdirAll(d, 0o755); err != nil {
		return fmt.Errorf("logmanager: create %s: %w", d, err)
	}
	for p := d; m.fs.PathDir(p) != p && !mutation.Disabled(mutation.LogDirParentSync); p = m.fs.PathDir(p) {
		if err := atomicfile.SyncDir(m.fs, m.fs.PathDir(p)); err != nil {
			return fmt.Errorf("logmanager: create %s: %w", d, err)
		}
	}
	return nil
}

// takeCleanShutdownMarker reports whether dir's clean-shutdown marker
// exists and removes it durably: before any log of dir is opened, so a
// crash from then on (during Open, or later) is seen as unclean by every
// log of the directory. Kafka removes its marker once the logs are
// loaded; removing it first costs a recovery after a crash during Open
// only, and never trusts a log that Open touched.
func (m *Manager) takeCleanShutdownMarker(dir string) (bool, error) {
	path := m.fs.PathJoin(dir, CleanShutdownFile)
	if err := atomicfile.RemoveTemp(m.fs, path); err != nil {
		return false, fmt.Errorf("logmanager: %w", err)
	}
	if _, err := m.fs.Stat(path); errors.Is(err, iofs.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("logmanager: stat %s: %w", path, err)
	}
	if err := m.fs.Remove(path); err != nil {
		return false, fmt.Errorf("logmanager: remove %s: %w", path, err)
	}
	if err := atomicfile.SyncDir(m.fs, dir); err != nil {
		return false, fmt.Errorf("logmanager: remove %s: %w", path, err)
	}
	return true, nil
}

// writeCleanShutdownMarker is the commit point of dir's clean shutdown:
// written (atomically, durably) only after every log of dir closed
// cleanly and the checkpoints were written.
func (m *Manager) writeCleanShutdownMarker(dir string) error {
	if err := atomicfile.Write(m.fs, m.fs.PathJoin(dir, CleanShutdownFile), nil); err != nil {
		return m.failDir(dir, fmt.Errorf("logmanager: write %s: %w", CleanShutdownFile, err))
	}
	return nil
}

func (m *Manager) load(ctx context.Context) error {
	scans := make([]dirScan, len(m.opts.Dirs))
	m.forEachDir(func(i int) { scans[i] = m.scanDir(m.opts.Dirs[i]) })
	m.finishPromotions(scans)
	// Duplicates, before any log is opened.
	for _, future := range []bool{false, true} {
		where := map[key][]string{}
		for _, s := range scans {
			for _, e := range s.entries {
				if s.err == nil && (e.kind == kindFuture) == future && e.kind != kindDelete {
					where[e.k] = append(where[e.k], m.fs.PathJoin(s.dir, e.name))
				}
			}
		}
		for k, paths := range where {
			if len(paths) > 1 {
				return &DuplicateLogError{Topic: k.topic, Partition: k.partition, Future: future, Paths: paths}
			}
		}
	}
	now := m.opts.Now()
	for _, s := range scans {
		if s.err != nil {
			m.failDir(s.dir, s.err)
			m.markOffline(&s)
			continue
		}
		for _, e := range s.entries {
			if e.kind == kindDelete {
				m.mu.deletes = append(m.mu.deletes, pendingDelete{dir: s.dir, path: m.fs.PathJoin(s.dir, e.name), due: now.Add(m.opts.FileDeleteDelay)})
			}
		}
	}
	m.forEachDir(func(i int) { m.openDir(ctx, &scans[i]) })
	if err := ctx.Err(); err != nil {
		return err
	}
	var offline []error
	for _, s := range scans {
		if s.err != nil {
			offline = append(offline, &DirOfflineError{Dir: s.dir, Cause: s.err})
			continue
		}
		if s.stale {
			m.opMu.Lock()
			m.writeDirCheckpointsOpLocked(s.dir, allCheckpoints)
			m.opMu.Unlock()
		}
	}
	if len(offline) == len(scans) {
		return fmt.Errorf("logmanager: every log directory is offline: %w", errors.Join(offline...))
	}
	return nil
}

// forEachDir runs fn with the index of every directory of Dirs: at once,
// or one after another in Dirs order with Options.Serial.
func (m *Manager) forEachDir(fn func(i int)) {
	if m.opts.Serial {
		for i := range m.opts.Dirs {
			fn(i)
		}
		return
	}
	var wg sync.WaitGroup
	for i := range m.opts.Dirs {
		wg.Go(func() { fn(i) })
	}
	wg.Wait()
}

// openDir is step 4 of Open for one directory.
func (m *Manager) openDir(ctx context.Context, s *dirScan) {
	if s.err != nil {
		return
	}
	jobs := make(chan scanEntry)
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	for range m.opts.RecoveryThreadsPerDir {
		wg.Go(func() {
			for e := range jobs {
				if failed.Load() != nil || ctx.Err() != nil {
					continue
				}
				if err := m.openLog(s, e); err != nil {
					failed.CompareAndSwap(nil, &err)
				}
			}
		})
	}
	present := map[key]bool{}
	for _, e := range s.entries {
		if e.kind == kindDelete {
			continue
		}
		present[e.k] = present[e.k] || e.kind == kindCurrent
		jobs <- e
	}
	close(jobs)
	wg.Wait()
	if p := failed.Load(); p != nil {
		s.err = *p
		m.failDir(s.dir, s.err)
		m.markOffline(s)
		return
	}
	for k := range s.hw {
		if !present[k] {
			s.stale = true // a deletion's rewrite did not happen: drop the entry
		}
	}
}

// markOffline records the partitions of a directory that failed at Open
// as offline, the ones never opened included.
func (m *Manager) markOffline(s *dirScan) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range s.entries {
		switch e.kind {
		case kindCurrent:
			m.mu.offlineParts[e.k] = s.dir
		case kindFuture:
			m.mu.offlineFutures[e.k] = s.dir
		}
	}
}

// openLog opens one log found by Open.
func (m *Manager) openLog(s *dirScan, e scanEntry) error {
	path := m.fs.PathJoin(s.dir, e.name)
	id, err := readPartitionMetadata(m.fs, path)
	if err != nil {
		return err
	}
	tp := remote.TopicIDPartition{TopicID: id, Topic: e.k.topic, Partition: e.k.partition}
	o := m.logOptions(tp)
	o.CleanShutdown = s.clean
	l, err := log.Open(path, o)
	if err != nil {
		return fmt.Errorf("logmanager: open %s: %w", path, err)
	}
	if hw, ok := s.hw[e.k]; ok {
		l.UpdateHighWatermark(hw) // clamped to [log start, log end]
	}
	ent := &managed{tp: tp, dir: s.dir, path: path, future: e.kind == kindFuture, log: l}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, offline := m.mu.offline[s.dir]; offline {
		_ = l.Close()
		return nil
	}
	if ent.future {
		m.mu.future[e.k] = ent
	} else {
		m.mu.current[e.k] = ent
	}
	return nil
}

// closeAllQuietly closes every log after a failed Open.
func (m *Manager) closeAllQuietly() {
	m.mu.Lock()
	var all []*managed
	for _, e := range m.mu.current {
		all = append(all, e)
	}
	for _, e := range m.mu.future {
		all = append(all, e)
	}
	m.mu.current, m.mu.future = map[key]*managed{}, map[key]*managed{}
	m.mu.closed = true
	m.mu.Unlock()
	for _, e := range all {
		_ = e.log.Close()
	}
}

// lookupLocked returns the log of k, or the error for its absence.
// REQUIRES: m.mu held.
func (m *Manager) lookupLocked(tp remote.TopicIDPartition, future bool) (*managed, error) {
	if m.mu.closed {
		return nil, ErrClosed
	}
	k := keyOf(tp)
	logs, offline := m.mu.current, m.mu.offlineParts
	if future {
		logs, offline = m.mu.future, m.mu.offlineFutures
	}
	if e := logs[k]; e != nil {
		if tp.TopicID != (remote.UUID{}) && e.tp.TopicID != (remote.UUID{}) && tp.TopicID != e.tp.TopicID {
			return nil, &InconsistentTopicIDError{Topic: k.topic, Partition: k.partition, Stored: e.tp.TopicID, Requested: tp.TopicID}
		}
		return e, nil
	}
	if d, ok := offline[k]; ok {
		return nil, &DirOfflineError{Dir: d, Partition: tp, Cause: m.mu.offline[d]}
	}
	return nil, fmt.Errorf("logmanager: %s: %w", k, ErrNotFound)
}

// Get returns the partition's current log: ErrNotFound if there is none,
// a *DirOfflineError if its directory failed, an
// *InconsistentTopicIDError if tp's topic id (when not zero) differs from
// the stored one.
func (m *Manager) Get(tp remote.TopicIDPartition) (*log.UnifiedLog, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, err := m.lookupLocked(tp, false)
	if err != nil {
		return nil, err
	}
	return e.log, nil
}

// GetFuture returns the partition's future log, with Get's errors.
func (m *Manager) GetFuture(tp remote.TopicIDPartition) (*log.UnifiedLog, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, err := m.lookupLocked(tp, true)
	if err != nil {
		return nil, err
	}
	return e.log, nil
}

// GetOrCreate returns the partition's current log, creating an empty one
// if there is none (Kafka: LogManager.getOrCreateLog): in dir, or when dir
// is "" in the online directory holding the fewest logs (Kafka's
// nextLogDirs). A topic id in tp is stored in the new log's
// partition.metadata, or in an existing log's that has none. A partition
// of an offline directory gets a *DirOfflineError: it is not recreated
// elsewhere.
func (m *Manager) GetOrCreate(tp remote.TopicIDPartition, dir string) (*log.UnifiedLog, error) {
	l, err := m.Get(tp)
	switch {
	case err == nil && !m.needsTopicID(tp):
		return l, nil
	case err != nil && !errors.Is(err, ErrNotFound):
		return nil, err
	}
	if p := validTopic(tp.Topic); p != "" || tp.Partition < 0 {
		return nil, fmt.Errorf("logmanager: %s-%d: %s: %w", tp.Topic, tp.Partition, cmp.Or(p, "negative partition"), ErrInvalidArgument)
	}
	m.opMu.Lock()
	defer m.opMu.Unlock()
	m.mu.Lock()
	e, err := m.lookupLocked(tp, false)
	if err == nil || !errors.Is(err, ErrNotFound) {
		m.mu.Unlock()
		if err != nil {
			return nil, err
		}
		return e.log, m.maybeStoreTopicIDOpLocked(e, tp.TopicID)
	}
	dir, err = m.chooseDirLocked(dir, "")
	m.mu.Unlock()
	if err != nil {
		return nil, err
	}
	e, err = m.createOpLocked(tp, dir, keyOf(tp).String(), false)
	if err != nil {
		return nil, err
	}
	return e.log, nil
}

// needsTopicID reports whether tp names a topic id its log lacks.
func (m *Manager) needsTopicID(tp remote.TopicIDPartition) bool {
	if tp.TopicID == (remote.UUID{}) {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.mu.current[keyOf(tp)]
	return e != nil && e.tp.TopicID == (remote.UUID{})
}

// maybeStoreTopicIDOpLocked stores id in e's partition.metadata if e has
// none. REQUIRES: m.opMu held.
func (m *Manager) maybeStoreTopicIDOpLocked(e *managed, id remote.UUID) error {
	if id == (remote.UUID{}) || e.tp.TopicID != (remote.UUID{}) {
		return nil
	}
	if err := writePartitionMetadata(m.fs, e.path, id); err != nil {
		return m.failDir(e.dir, err)
	}
	m.mu.Lock()
	e.tp.TopicID = id
	m.mu.Unlock()
	return nil
}

// chooseDirLocked checks an asked-for directory, or picks the online one
// with the fewest logs other than not. REQUIRES: m.mu held.
func (m *Manager) chooseDirLocked(dir, not string) (string, error) {
	if dir != "" {
		if !slices.Contains(m.opts.Dirs, dir) {
			return "", fmt.Errorf("logmanager: %q is not a log directory: %w", dir, ErrInvalidArgument)
		}
		if cause, off := m.mu.offline[dir]; off {
			return "", &DirOfflineError{Dir: dir, Cause: cause}
		}
		return dir, nil
	}
	var online []string
	for _, d := range m.opts.Dirs {
		if _, off := m.mu.offline[d]; !off && d != not {
			online = append(online, d)
		}
	}
	if len(online) == 1 {
		return online[0], nil // no counting: it is O(logs) per creation
	}
	count := map[string]int{}
	for _, e := range m.mu.current {
		count[e.dir]++
	}
	for _, e := range m.mu.future {
		count[e.dir]++
	}
	best := ""
	for _, d := range m.opts.Dirs {
		if _, off := m.mu.offline[d]; off || d == not {
			continue
		}
		if best == "" || count[d] < count[best] {
			best = d
		}
	}
	if best == "" {
		return "", &DirOfflineError{Dir: "(all)", Cause: errors.New("no online log directory")}
	}
	return best, nil
}

// createOpLocked opens a new log in dir/name and registers it.
// REQUIRES: m.opMu held.
func (m *Manager) createOpLocked(tp remote.TopicIDPartition, dir, name string, future bool) (*managed, error) {
	path := m.fs.PathJoin(dir, name)
	l, err := log.Open(path, m.logOptions(tp))
	if err != nil {
		err = fmt.Errorf("logmanager: create %s: %w", path, err)
		if errors.Is(err, log.ErrIO) {
			return nil, m.failDir(dir, err)
		}
		return nil, err
	}
	if tp.TopicID != (remote.UUID{}) {
		if err := writePartitionMetadata(m.fs, path, tp.TopicID); err != nil {
			_ = l.Close()
			return nil, m.failDir(dir, err)
		}
	}
	e := &managed{tp: tp, dir: dir, path: path, future: future, log: l}
	m.mu.Lock()
	defer m.mu.Unlock()
	if cause, off := m.mu.offline[dir]; off {
		_ = l.Close()
		return nil, &DirOfflineError{Dir: dir, Partition: tp, Cause: cause}
	}
	if future {
		m.mu.future[keyOf(tp)] = e
	} else {
		m.mu.current[keyOf(tp)] = e
	}
	m.counters.created.Add(1)
	return e, nil
}

// Delete deletes the partition's current log and its future log if any
// (Kafka: LogManager.asyncDelete): each is closed, its directory renamed
// to "<topic>-<partition>.<id>-delete" and the rename made durable (the
// commit point: a crash after it leaves no log for the partition), then
// the directory's checkpoints are rewritten without it; the renamed
// directory is removed after FileDeleteDelay. ErrNotFound if there is no
// log.
func (m *Manager) Delete(tp remote.TopicIDPartition) error {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	m.mu.Lock()
	e, err := m.lookupLocked(tp, false)
	if err != nil {
		m.mu.Unlock()
		return err
	}
	f := m.mu.future[e.key()]
	m.mu.Unlock()
	if f != nil {
		// The future first: a crash between the two leaves the current
		// log, never a future log without one.
		if err := m.deleteOpLocked(f); err != nil {
			return err
		}
	}
	return m.deleteOpLocked(e)
}

func (e *managed) key() key { return keyOf(e.tp) }

// DeleteFuture deletes the partition's future log (a cancelled move), as
// Delete does. Without one it does nothing.
func (m *Manager) DeleteFuture(tp remote.TopicIDPartition) error {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	m.mu.Lock()
	e, err := m.lookupLocked(tp, true)
	m.mu.Unlock()
	if errors.Is(err, ErrNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	return m.deleteOpLocked(e)
}

// deleteOpLocked removes e from the books, closes it, renames its
// directory for deletion and rewrites its directory's checkpoints.
// REQUIRES: m.opMu held.
func (m *Manager) deleteOpLocked(e *managed) error {
	m.mu.Lock()
	if e.future {
		delete(m.mu.future, e.key())
	} else if m.mu.current[e.key()] == e {
		// (PromoteFutureInPlace put the promoted log there first.)
		delete(m.mu.current, e.key())
	}
	m.mu.Unlock()
	if err := e.log.Close(); err != nil {
		// Its data is being deleted: a failed flush loses nothing wanted.
		m.logger.Warn("close of a deleted log failed", zapPartition(e.tp), zap.Error(err))
	}
	gone := m.fs.PathJoin(e.dir, suffixedName(e.key(), DeleteDirSuffix))
	if err := m.fs.Rename(e.path, gone); err != nil {
		return m.failDir(e.dir, fmt.Errorf("logmanager: delete %s: %w", e.path, err))
	}
	if err := atomicfile.SyncDir(m.fs, e.dir); err != nil {
		return m.failDir(e.dir, fmt.Errorf("logmanager: delete %s: %w", e.path, err))
	}
	m.mu.Lock()
	m.mu.deletes = append(m.mu.deletes, pendingDelete{dir: e.dir, path: gone, due: m.opts.Now().Add(m.opts.FileDeleteDelay)})
	m.mu.Unlock()
	m.counters.deleted.Add(1)
	if mutation.Disabled(mutation.DeleteRewritesCheckpoints) {
		return nil
	}
	return m.writeDirCheckpointsOpLocked(e.dir, allCheckpoints)
}

// CreateFuture creates the future log of a move of the partition's
// current log into dir (Kafka: getOrCreateLog with isFuture), named
// "<topic>-<partition>.<id>-future", or returns the one there. A future
// log in another directory is an ErrFutureExists (DeleteFuture first).
func (m *Manager) CreateFuture(tp remote.TopicIDPartition, dir string) (*log.UnifiedLog, error) {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	m.mu.Lock()
	cur, err := m.lookupLocked(tp, false)
	if err != nil {
		m.mu.Unlock()
		return nil, err
	}
	if f := m.mu.future[cur.key()]; f != nil {
		m.mu.Unlock()
		if f.dir == dir {
			return f.log, nil
		}
		return nil, fmt.Errorf("logmanager: %s: future log in %s: %w", cur.key(), f.dir, ErrFutureExists)
	}
	if dir == cur.dir {
		m.mu.Unlock()
		return nil, fmt.Errorf("logmanager: %s is already in %s: %w", cur.key(), dir, ErrInvalidArgument)
	}
	dir, err = m.chooseDirLocked(dir, cur.dir)
	id := cur.tp
	m.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if tp.TopicID != (remote.UUID{}) {
		id.TopicID = tp.TopicID
	}
	e, err := m.createOpLocked(id, dir, suffixedName(cur.key(), FutureDirSuffix), true)
	if err != nil {
		return nil, err
	}
	return e.log, nil
}

// PromoteFuture makes the partition's future log its current log (Kafka:
// LogManager.replaceCurrentWithFutureLog) and returns it. The caller has
// stopped every writer of both logs and checked that the future log
// caught up. Steps: the future log is closed and its directory renamed to
// "<topic>-<partition>" in its log directory and made durable (the commit
// point), the current log is closed and renamed for deletion, the
// promoted log is reopened (a clean open) with the old log's high
// watermark, and both directories' checkpoints are rewritten. A crash
// between the two renames leaves the partition in both directories, which
// the next Open refuses (*DuplicateLogError), as Kafka does: nothing is
// lost, an operator deletes one copy.
//
// The *log.UnifiedLog values of both logs are closed afterwards; use the
// returned one. A current log promoted in place (PromoteFutureInPlace) is
// not promoted over until the manager reopens: ErrInvalidArgument.
func (m *Manager) PromoteFuture(tp remote.TopicIDPartition) (*log.UnifiedLog, error) {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	cur, fut, err := m.currentAndFuture(tp)
	if err != nil {
		return nil, err
	}
	if cur.promotedGen > 0 {
		// Its marker would outrank the renamed future log at the next
		// Open after a crash between the two renames.
		return nil, fmt.Errorf("logmanager: %s was promoted in place: PromoteFutureInPlace, or PromoteFuture after the manager reopened: %w",
			cur.key(), ErrInvalidArgument)
	}
	k := cur.key()
	hw := cur.log.HighWatermark()
	if err := fut.log.Close(); err != nil {
		if errors.Is(err, log.ErrIO) {
			return nil, m.failDir(fut.dir, err)
		}
		return nil, err
	}
	promoted := m.fs.PathJoin(fut.dir, k.String())
	if err := m.fs.Rename(fut.path, promoted); err != nil {
		return nil, m.failDir(fut.dir, fmt.Errorf("logmanager: promote %s: %w", fut.path, err))
	}
	if err := atomicfile.SyncDir(m.fs, fut.dir); err != nil {
		return nil, m.failDir(fut.dir, fmt.Errorf("logmanager: promote %s: %w", fut.path, err))
	}
	m.mu.Lock()
	delete(m.mu.future, k)
	m.mu.Unlock()
	// The old log goes; a failure here takes its directory offline and
	// leaves the promoted copy current.
	delErr := m.deleteOpLocked(cur)
	tp = fut.tp
	if tp.TopicID == (remote.UUID{}) {
		tp.TopicID = cur.tp.TopicID
	}
	o := m.logOptions(tp)
	o.CleanShutdown = true // closed cleanly above
	l, err := log.Open(promoted, o)
	if err != nil {
		return nil, errors.Join(delErr, m.failDir(fut.dir, fmt.Errorf("logmanager: reopen promoted %s: %w", promoted, err)))
	}
	l.UpdateHighWatermark(hw)
	m.mu.Lock()
	m.mu.current[k] = &managed{tp: tp, dir: fut.dir, path: promoted, log: l}
	m.mu.Unlock()
	m.counters.promoted.Add(1)
	return l, errors.Join(delErr, m.writeDirCheckpointsOpLocked(fut.dir, allCheckpoints))
}

// Partitions lists the logs held, current and future, sorted by
// topic, partition and then current before future.
func (m *Manager) Partitions() []PartitionInfo {
	m.mu.Lock()
	out := make([]PartitionInfo, 0, len(m.mu.current)+len(m.mu.future))
	for _, e := range m.mu.current {
		out = append(out, e.info())
	}
	for _, e := range m.mu.future {
		out = append(out, e.info())
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b PartitionInfo) int {
		return cmp.Or(cmp.Compare(a.Partition.Topic, b.Partition.Topic), cmp.Compare(a.Partition.Partition, b.Partition.Partition),
			cmpBool(a.Future, b.Future))
	})
	return out
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

// OfflineDirs returns the offline directories and their causes.
func (m *Manager) OfflineDirs() map[string]error {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]error, len(m.mu.offline))
	for d, err := range m.mu.offline {
		out[d] = err
	}
	return out
}

// ReportError is how the broker reports an error a log returned to it
// (an append, a read): an I/O error (errors.Is(err, log.ErrIO)) takes
// the log's directory offline with every log in it, and ReportError
// returns true. Other errors are left to the caller. Kafka:
// LogDirFailureChannel.maybeAddOfflineLogDir.
func (m *Manager) ReportError(l *log.UnifiedLog, err error) bool {
	if l == nil || !errors.Is(err, log.ErrIO) {
		return false
	}
	dir := m.fs.PathDir(l.Dir())
	if !slices.Contains(m.opts.Dirs, dir) {
		return false
	}
	_ = m.failDir(dir, err)
	return true
}

// failDir takes dir offline: its logs leave the books (Get answers
// ErrLogDirOffline for them), are closed, and OnDirOffline is called. It
// returns the *DirOfflineError for cause. Callable with or without
// m.opMu held; it takes only m.mu.
func (m *Manager) failDir(dir string, cause error) error {
	offErr := &DirOfflineError{Dir: dir, Cause: cause}
	m.mu.Lock()
	if _, already := m.mu.offline[dir]; already {
		m.mu.Unlock()
		return offErr
	}
	m.mu.offline[dir] = cause
	var gone []*managed
	for k, e := range m.mu.current {
		if e.dir == dir {
			gone = append(gone, e)
			delete(m.mu.current, k)
			m.mu.offlineParts[k] = dir
		}
	}
	for k, e := range m.mu.future {
		if e.dir == dir {
			gone = append(gone, e)
			delete(m.mu.future, k)
			m.mu.offlineFutures[k] = dir
		}
	}
	m.mu.deletes = slices.DeleteFunc(m.mu.deletes, func(p pendingDelete) bool { return p.dir == dir })
	m.mu.Unlock()
	m.counters.offlineDirs.Add(1)
	m.logger.Error("log directory offline", zap.String("dir", dir), zap.Int("logs", len(gone)), zap.Error(cause))
	failure := DirFailure{Dir: dir, Cause: cause}
	for _, e := range gone {
		// A log of a failed disk: close releases its handles; a clean
		// marker is written only if its flush succeeds.
		_ = e.log.Close()
		failure.Partitions = append(failure.Partitions, e.info())
	}
	slices.SortFunc(failure.Partitions, func(a, b PartitionInfo) int {
		return cmp.Or(cmp.Compare(a.Partition.Topic, b.Partition.Topic), cmp.Compare(a.Partition.Partition, b.Partition.Partition))
	})
	if m.opts.OnDirOffline != nil {
		m.opts.OnDirOffline(failure)
	}
	return offErr
}

// Close stops the background tasks, closes every log (each directory's
// RecoveryThreadsPerDir at a time, the directories at once (in order with
// Options.Serial); deferred, and
// made durable together per directory: see the package comment's "Clean
// shutdown") and then writes each online directory's checkpoints, with
// the recovery point of each cleanly closed log at its log end, and its
// clean-shutdown marker (Kafka: LogManager.shutdown). It
// returns the logs' and the writes' errors joined; a directory whose log
// failed with an I/O error goes offline and gets no checkpoint. Close is
// idempotent.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.mu.closed {
		m.mu.Unlock()
		return nil
	}
	m.mu.closed = true
	m.mu.Unlock()
	close(m.stop)
	m.tasks.Wait()
	m.opMu.Lock()
	defer m.opMu.Unlock()
	byDir := map[string][]*managed{}
	m.mu.Lock()
	for _, e := range m.mu.current {
		byDir[e.dir] = append(byDir[e.dir], e)
	}
	for _, e := range m.mu.future {
		byDir[e.dir] = append(byDir[e.dir], e)
	}
	m.mu.Unlock()
	var (
		errsMu  sync.Mutex
		errs    []error
		entries = make([]dirEntries, len(m.opts.Dirs))
		failed  = map[string]bool{}
	)
	m.forEachDir(func(i int) {
		dir := m.opts.Dirs[i]
		logs, ok := byDir[dir]
		if !ok {
			return
		}
		// In path order (the maps' order is Go's, a new one every run).
		slices.SortFunc(logs, func(a, b *managed) int { return strings.Compare(a.path, b.path) })
		err := m.closeDir(dir, logs, &entries[i])
		errsMu.Lock()
		defer errsMu.Unlock()
		errs = append(errs, err)
		if err != nil {
			failed[dir] = true
		}
	})
	for i, dir := range m.opts.Dirs {
		if m.isOffline(dir) {
			continue
		}
		err := m.writeEntriesOpLocked(dir, entries[i], allCheckpoints)
		errs = append(errs, err)
		if err == nil && !failed[dir] {
			errs = append(errs, m.writeCleanShutdownMarker(dir))
		}
	}
	m.mu.Lock()
	m.mu.current, m.mu.future = map[key]*managed{}, map[key]*managed{}
	m.mu.Unlock()
	return errors.Join(errs...)
}

// closeDir closes the logs of one directory with a pool of
// RecoveryThreadsPerDir workers and collects their checkpoint entries.
// The logs close deferred (log.UnifiedLog.CloseDeferred: no fsync of
// their own), and publishDeferred then makes them all durable together:
// a few syncfs(2) calls for the directory instead of about ten fsyncs per
// log. A log that failed to close is not published; its directory gets no
// marker (Close sees the error).
func (m *Manager) closeDir(dir string, logs []*managed, de *dirEntries) error {
	var (
		mu     sync.Mutex
		closes []*log.DeferredClose
	)
	err := forEach(logs, m.opts.RecoveryThreadsPerDir, func(e *managed) error {
		ent := snapshotEntries(e)
		d, err := e.log.CloseDeferred()
		if err == nil {
			ent.recoveryPoint.Offset = ent.logEnd // flushed at publishDeferred
		}
		mu.Lock()
		de.add(ent)
		if d != nil {
			closes = append(closes, d)
		}
		mu.Unlock()
		if err != nil {
			if errors.Is(err, log.ErrIO) {
				_ = m.failDir(dir, err)
			}
			return fmt.Errorf("logmanager: close %s: %w", e.path, err)
		}
		return nil
	})
	if m.isOffline(dir) {
		return err
	}
	if perr := m.publishDeferred(dir, closes); perr != nil {
		return errors.Join(err, m.failDir(dir, perr))
	}
	return err
}

func (m *Manager) isOffline(dir string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, off := m.mu.offline[dir]
	return off
}

// currentAndFuture looks up tp's current and future logs under mu (the
// two promotions' first step). REQUIRES: opMu held.
func (m *Manager) currentAndFuture(tp remote.TopicIDPartition) (cur, fut *managed, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, err = m.lookupLocked(tp, false); err != nil {
		return nil, nil, err
	}
	if fut, err = m.lookupLocked(tp, true); err != nil {
		return nil, nil, err
	}
	return cur, fut, nil
}
