package logmanager

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tierlog/tierlog/internal/atomicfile"
	"github.com/tierlog/tierlog/internal/mutation"
	"github.com/tierlog/tierlog/log"
)

// fsyncWorkers bounds the fsyncs a directory's durable step runs at once
// when it fsyncs file by file: they wait on the disk, not the CPU, and a
// journaling file system commits concurrent ones together.
const fsyncWorkers = 16

// publishDeferred is the durable step of a directory's Close: the logs
// were closed by log.UnifiedLog.CloseDeferred, their files written but
// not durable and their replacements waiting in temp files. It makes the
// directory durable, then for each publish step publishes every log's
// replacements and makes the directory durable again. Only after it
// returns nil are the logs closed cleanly (the clean-shutdown marker may
// then be written). A failure leaves each log as a crash would: files
// old or new, every replacement whole.
func (m *Manager) publishDeferred(dir string, closes []*log.DeferredClose) error {
	logDirs := make([]string, len(closes))
	for i, d := range closes {
		logDirs[i] = d.Dir()
	}
	if err := m.makeDurable(dir, logDirs); err != nil {
		return err
	}
	for step := range log.PublishSteps {
		err := forEach(closes, m.opts.RecoveryThreadsPerDir, func(d *log.DeferredClose) error {
			return d.Publish(step)
		})
		if err != nil {
			return fmt.Errorf("logmanager: close %s: %w", dir, err)
		}
		if err := m.makeDurable(dir, logDirs); err != nil {
			return err
		}
	}
	return nil
}

// makeDurable makes durable every file and directory entry beneath dir
// that the logs in logDirs wrote: on the operating system's file system
// with one syncfs(2) of dir's file system (Linux 5.8 or later, which
// report a writeback error to it), else by an fsync of every file of
// each log directory, of the directory and of dir, fsyncWorkers at a
// time.
func (m *Manager) makeDurable(dir string, logDirs []string) error {
	if mutation.Disabled(mutation.ManagedCloseDurable) {
		return nil
	}
	var err error
	if m.fs == vfs.Default && syncfsReportsErrors() {
		err = syncFileSystem(dir)
	} else {
		workers := fsyncWorkers
		if m.opts.Serial {
			workers = 1
		}
		err = forEach(logDirs, workers, func(d string) error { return syncTree(m.fs, d) })
		if err == nil {
			err = atomicfile.SyncDir(m.fs, dir)
		}
	}
	if err != nil {
		return fmt.Errorf("logmanager: make %s durable: %w", dir, err)
	}
	return nil
}

// syncTree fsyncs every file of dir (not its subdirectories: a log has
// none it writes at close) and then dir.
func syncTree(fs vfs.FS, dir string) error {
	names, err := fs.List(dir)
	if err != nil {
		return fmt.Errorf("list %s: %w", dir, err)
	}
	slices.Sort(names) // the same order in every run (readdir's is arbitrary)
	for _, name := range names {
		path := fs.PathJoin(dir, name)
		fi, err := fs.Stat(path)
		if err != nil {
			return fmt.Errorf("stat %s: %w", path, err)
		}
		if fi.IsDir() {
			continue
		}
		f, err := fs.Open(path)
		if err != nil {
			return fmt.Errorf("open %s: %w", path, err)
		}
		if err := errors.Join(f.Sync(), f.Close()); err != nil {
			return fmt.Errorf("sync %s: %w", path, err)
		}
	}
	return atomicfile.SyncDir(fs, dir)
}

// forEach runs fn on every item, workers at a time (at least one), and
// returns the errors joined.
func forEach[T any](items []T, workers int, fn func(T) error) error {
	jobs := make(chan T)
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for range max(1, min(workers, len(items))) {
		wg.Go(func() {
			for it := range jobs {
				if err := fn(it); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for _, it := range items {
		jobs <- it
	}
	close(jobs)
	wg.Wait()
	return errors.Join(errs...)
}
