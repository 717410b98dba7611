package log

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tierlog/tierlog/internal/atomicfile"
)

// createDir makes the log's directory if it is missing. The directories
// it creates must be fsynced into their parents before anything beneath
// them is durable (without it a new partition's directory entry, and
// every flushed byte beneath it, may vanish with a crash), but not
// sooner: nothing in a new log is durable before its first fsync, since
// every commit point of the log is one. So the parents' fsyncs are
// deferred to a barrier that runs before the first fsync of any file
// the log opens (the first flush, a checkpoint write, Close), and a new
// partition's Open and first append pay no directory fsync.
func (l *UnifiedLog) createDir() error {
	// The missing levels, deepest first.
	var missing []string
	for d := l.dir; ; {
		if _, err := l.fs.Stat(d); err == nil {
			break
		} else if !errors.Is(err, os.ErrNotExist) && !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("log: stat %s: %w", d, err)
		}
		missing = append(missing, d)
		parent := l.fs.PathDir(d)
		if parent == d {
			break
		}
		d = parent
	}
	if len(missing) == 0 {
		return nil
	}
	if err := l.fs.MkdirAll(l.dir, 0o755); err != nil {
		return fmt.Errorf("log: create %s: %w", l.dir, err)
	}
	b := &dirBarrier{fs: l.fs}
	for i := len(missing) - 1; i >= 0; i-- {
		b.dirs = append(b.dirs, missing[i])
	}
	l.fs = withBarrier(l.fs, b)
	return nil
}

// withBarrier returns fs (an ioFS) whose files run b before their first
// fsync.
func withBarrier(fs vfs.FS, b *dirBarrier) vfs.FS {
	io, ok := fs.(ioFS)
	if !ok {
		io = ioFS{FS: fs}
	}
	io.barrier = b
	return io
}

// withStage returns fs (an ioFS) whose files defer to s
// (close_deferred.go).
func withStage(fs vfs.FS, s *closeStage) vfs.FS {
	io, ok := fs.(ioFS)
	if !ok {
		io = ioFS{FS: fs}
	}
	io.stage = s
	return io
}

// dirBarrier holds the directories a log created, to be fsynced into
// their parents (shallowest first) once, before the first fsync beneath
// them. A failed fsync is returned to the fsync that waited for it,
// which fails as any fsync does, and is retried by the next.
type dirBarrier struct {
	fs   vfs.FS // without the barrier
	dirs []string
	mu   sync.Mutex
	done atomic.Bool
}

// wait runs the directory fsyncs if they have not run; concurrent
// callers wait for the first. A nil barrier does nothing.
func (b *dirBarrier) wait() error {
	if b == nil || b.done.Load() {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done.Load() {
		return nil
	}
	for len(b.dirs) > 0 {
		if err := atomicfile.SyncDir(b.fs, b.fs.PathDir(b.dirs[0])); err != nil {
			return fmt.Errorf("log: sync the parent of new directory %s: %w", b.dirs[0], err)
		}
		b.dirs = b.dirs[1:]
	}
	b.done.Store(true)
	return nil
}
