package log

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/atomicfile"
	"github.com/tierlog/tierlog/internal/harness/crashtest"
)

// TestDeleteIsCrashAtomic crashes before every file operation of Delete
// and checks that the clone, reopened at the log's directory, holds either
// the whole log (same offsets, epochs and bytes) or an empty new one,
// never a partly deleted log; RemoveDeletedDirs then removes any leftover.
func TestDeleteIsCrashAtomic(t *testing.T) {
	mem := newCrashDisk(t)
	rec := crashtest.New(1, func(int, string) error {
		return checkDeleteClone(mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0}))
	})
	l := openTestLog(t, unlinkEachFS{rec.Wrap(mem)}, Options{SegmentBytes: 400})
	appendRecords(t, l, 0, 10, 1_000)
	appendRecords(t, l, 1, 10, 1_000)
	require.NoError(t, l.Flush())
	rec.Arm(true)
	require.NoError(t, l.Delete())
	rec.Arm(false)
	require.NoError(t, rec.Err())
	require.Greater(t, rec.Checked(), 2)
	// After the Delete itself: no log, no leftover.
	names, err := mem.List("")
	require.NoError(t, err)
	require.Equal(t, []string{}, filterNonEmpty(names))
}

// unlinkEachFS removes a directory the way a real file system's
// RemoveAll does, one file at a time, and makes each removal durable at
// once (as a journaling file system may, without any fsync): a crash in
// the middle leaves some files gone and others not. MemFS alone removes a
// directory in one step, which would hide a partly deleted log.
type unlinkEachFS struct{ vfs.FS }

func (fs unlinkEachFS) RemoveAll(dir string) error {
	names, err := fs.List(dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := fs.Remove(fs.PathJoin(dir, n)); err != nil {
			return err
		}
		if err := atomicfile.SyncDir(fs.FS, dir); err != nil {
			return err
		}
	}
	if err := fs.Remove(dir); err != nil {
		return err
	}
	return atomicfile.SyncDir(fs.FS, fs.PathDir(dir))
}

func filterNonEmpty(names []string) []string {
	out := []string{}
	for _, n := range names {
		if n != "" {
			out = append(out, n)
		}
	}
	return out
}

// checkDeleteClone opens the log in a crash clone of a Delete.
func checkDeleteClone(clone *vfs.MemFS) error {
	if err := RemoveDeletedDirs(clone, ""); err != nil {
		return err
	}
	names, err := clone.List("")
	if err != nil {
		return err
	}
	for _, n := range names {
		if strings.HasSuffix(n, DeletedDirSuffix) {
			return fmt.Errorf("RemoveDeletedDirs left %s", n)
		}
	}
	if _, err := clone.Stat("p0"); err != nil {
		return nil // no log at all: a new Open creates an empty one
	}
	l, err := Open("p0", Options{FS: clone, SegmentIndexBytes: 4096, SegmentBytes: 400})
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer l.Close()
	switch leo := l.LogEndOffset(); {
	case leo == 0 && len(l.EpochEntries()) == 0:
		return nil // empty
	case leo == 20:
		if got := epochcache.FormatEntries(l.EpochEntries()); got != "0@0 1@10" {
			return fmt.Errorf("whole log with epochs %s", got)
		}
		for off := int64(0); off < 20; off++ {
			if _, err := l.Read(nil, off, 1, IsolationLogEnd, true); err != nil {
				return fmt.Errorf("read %d: %w", off, err)
			}
		}
		return nil
	default:
		return fmt.Errorf("partly deleted log: log start %d, end %d, epochs %v", l.LogStartOffset(), leo, l.EpochEntries())
	}
}
