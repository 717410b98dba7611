package log

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tierlog/tierlog/internal/atomicfile"
	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/log/internal/producer"
)

// closeStage defers a closing log's durability to its caller
// (CloseDeferred): while active, the fsyncs of every file the log opened
// return at once, and the rename of a temp file "<path>.tmp" over <path>
// (internal/atomicfile's replace) is recorded instead of made. The files
// are then written but nothing is durable, and no replaced file shows new
// contents that may not be durable: DeferredClose.Publish makes the
// renames once the caller has made the temp files durable.
//
// A nil *closeStage is never active (logs opened before this existed, the
// wrappers of tests).
type closeStage struct {
	on atomic.Bool
	mu sync.Mutex
	// renames holds the targets whose temp file is to be renamed over
	// them. REQUIRES: mu held.
	renames map[string]struct{}

	// While loading (Open), the names of the one directory listed last
	// through the FS, until any change made through it: Open's steps
	// list the log's directory about seven times. REQUIRES: mu held.
	loading  atomic.Bool
	listDir  string
	listed   []string
	hasCache bool
}

// cachedList returns the cached names of dir, a copy.
func (s *closeStage) cachedList(dir string) ([]string, bool) {
	if s == nil || !s.loading.Load() {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.hasCache || s.listDir != dir {
		return nil, false
	}
	return slices.Clone(s.listed), true
}

// storeList caches a listing of dir while loading.
func (s *closeStage) storeList(dir string, names []string) {
	if s == nil || !s.loading.Load() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.listDir, s.listed, s.hasCache = dir, slices.Clone(names), true
}

// forgetList drops the cached listing: a change is being made.
func (s *closeStage) forgetList() {
	if s == nil || !s.loading.Load() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.listDir, s.listed, s.hasCache = "", nil, false
}

// listedAbsent reports whether name's directory is the cached one and
// name is not in it: a Remove or Stat of it need not ask the FS.
func (s *closeStage) listedAbsent(fs vfs.FS, name string) bool {
	if s == nil || !s.loading.Load() {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hasCache && s.listDir == fs.PathDir(name) && !slices.Contains(s.listed, fs.PathBase(name))
}

// endLoad stops the listing cache.
func (s *closeStage) endLoad() {
	s.forgetList()
	s.loading.Store(false)
}

func (s *closeStage) active() bool { return s != nil && s.on.Load() }

// defersRename records the rename of a temp file over its target while
// the stage is active; any other rename is made.
func (s *closeStage) defersRename(oldname, newname string) bool {
	if !s.active() || oldname != newname+atomicfile.TempSuffix {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.renames == nil {
		s.renames = map[string]struct{}{}
	}
	s.renames[newname] = struct{}{}
	return true
}

// dropRename forgets a recorded rename of a target or temp file being
// removed.
func (s *closeStage) dropRename(name string) {
	if !s.active() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.renames, name)
	delete(s.renames, strings.TrimSuffix(name, atomicfile.TempSuffix))
}

// PublishSteps is the number of DeferredClose.Publish steps; the caller
// makes the file system durable before the first and after each.
const PublishSteps = 3

// publishStep is the step in which the replace of the file named name is
// published, in the order the log's own commit points make them durable:
// every file a producer snapshot or the offsets checkpoint vouches for
// first (indexes, transaction indexes, leader-epoch checkpoint, producer
// batches files), then the producer snapshots (each the commit point of
// its batches file), then the offsets checkpoint (whose recovery point
// vouches for all of them).
func publishStep(name string) int {
	switch {
	case name == OffsetsCheckpointFileName:
		return 2
	case strings.HasSuffix(name, producer.SnapshotSuffix):
		return 1
	}
	return 0
}

// DeferredClose is a log closed by CloseDeferred whose files are written
// but not durable. See CloseDeferred.
type DeferredClose struct {
	fs      vfs.FS // without the stage
	dir     string
	renames [PublishSteps][]string // targets, sorted
}

// Dir returns the log's directory: every file the close wrote is in it.
func (d *DeferredClose) Dir() string { return d.dir }

// Publish renames the temp files of step (0 <= step < PublishSteps) over
// their targets. The caller must have made durable every file of Dir and
// the directory itself (an fsync of each, or Linux's syncfs(2)) before
// step 0, and again between steps: a crash then leaves each file's old or
// new contents, both complete, and never a file published before what it
// vouches for is durable. It makes nothing durable itself.
func (d *DeferredClose) Publish(step int) error {
	if step < 0 || step >= PublishSteps {
		return fmt.Errorf("log: publish step %d outside [0, %d): %w", step, PublishSteps, ErrInvalidArgument)
	}
	for _, path := range d.renames[step] {
		if err := d.fs.Rename(path+atomicfile.TempSuffix, path); err != nil {
			return fmt.Errorf("log: publish %s: %w", path, base.WrapIO(err))
		}
	}
	return nil
}

// CloseDeferred closes the log as Close does, for a caller that makes
// many logs durable at once (logmanager's Close: one syncfs(2) of the
// directory's file system, not ten fsyncs a log): it writes every file
// Close writes (the flush's and the close's: indexes, producer snapshot,
// transaction indexes, offsets and epoch checkpoints) but makes none of
// them durable, and replaces no file: the new contents wait in temp
// files. The caller then makes the directory durable and calls the
// result's Publish for each step, with the directory made durable again
// after each; only then is the log closed cleanly, and only then may the
// caller write its clean-shutdown marker. A crash before the end leaves a
// log the next Open recovers (no marker) with every record that was
// durable before CloseDeferred.
//
// It requires Options.ManagedCleanShutdown (ErrInvalidArgument without).
// On a failure it returns the error and no DeferredClose, as Close would;
// the log is closed either way, and a later Close returns the error.
// Flushes made while the log was open keep their own fsyncs: a caller
// acknowledged by one is never told a lie.
func (l *UnifiedLog) CloseDeferred() (*DeferredClose, error) {
	if !l.opts.ManagedCleanShutdown {
		return nil, fmt.Errorf("log: CloseDeferred without ManagedCleanShutdown: %w", ErrInvalidArgument)
	}
	l.mu.Lock()
	l.mu.closing = true
	l.mu.Unlock()
	l.background.Wait()
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	if l.mu.closed {
		err := l.mu.closeErr
		l.mu.Unlock()
		if err == nil {
			err = fmt.Errorf("log: CloseDeferred: %w", ErrClosed)
		}
		return nil, err
	}
	l.mu.Unlock()
	// From here every fsync of the log's files is the caller's, and so
	// is every replace: no Flush can run (flushMu held), and the log is
	// closed before flushMu is released.
	l.stage.on.Store(true)
	flushErr := l.flushFlushMuHeld()
	if err := l.closeFlushMuHeld(flushErr); err != nil {
		return nil, err
	}
	d := &DeferredClose{fs: l.fs.(ioFS).FS, dir: l.dir}
	l.stage.mu.Lock()
	for path := range l.stage.renames {
		step := publishStep(l.fs.PathBase(path))
		d.renames[step] = append(d.renames[step], path)
	}
	l.stage.renames = nil
	l.stage.mu.Unlock()
	for i := range d.renames {
		slices.Sort(d.renames[i])
	}
	return d, nil
}

// stagedDir is the directory handle an active stage's OpenDir returns:
// its only uses are Sync, deferred, and Close.
type stagedDir struct{ vfs.File }

func (stagedDir) Sync() error  { return nil }
func (stagedDir) Close() error { return nil }

// holds reports whether the log's file name holds exactly data, and no
// replacement of it waits in a deferred close: Close then need not write
// it again. Any error reading it answers false (the write reports it).
func (l *UnifiedLog) holds(name string, data []byte) bool {
	path := l.fs.PathJoin(l.dir, name)
	if l.stage.pending(path) {
		return false
	}
	f, err := l.fs.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() != int64(len(data)) {
		return false
	}
	buf := make([]byte, len(data)+1)
	n, err := io.ReadFull(f, buf)
	return errors.Is(err, io.ErrUnexpectedEOF) && n == len(data) && bytes.Equal(buf[:n], data) ||
		err == io.EOF && len(data) == 0
}

// pending reports whether a replacement of path waits in the stage.
func (s *closeStage) pending(path string) bool {
	if !s.active() {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.renames[path]
	return ok
}
