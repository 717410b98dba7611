package log

import (
	"errors"
	"fmt"
	"os"

	"github.com/tierlog/tierlog/internal/atomicfile"
)

// createDir makes the log's directory if it is missing, durably: the
// directories it creates are fsynced into their parents, so that a log
// opened (and written and flushed) before a crash still exists after it.
// Without the parent's fsync a new partition's directory entry, and every
// flushed byte beneath it, may vanish with the crash.
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
	for i := len(missing) - 1; i >= 0; i-- {
		if err := atomicfile.SyncDir(l.fs, l.fs.PathDir(missing[i])); err != nil {
			return fmt.Errorf("log: sync the parent of new directory %s: %w", missing[i], err)
		}
	}
	return nil
}
