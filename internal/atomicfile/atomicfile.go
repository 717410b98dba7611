// Package atomicfile replaces small files atomically through a pebble
// vfs.FS: the one mechanism every tierlog checkpoint uses (the
// leader-epoch checkpoint, the log's offset checkpoints, and later the
// producer snapshots).
//
// # Commit point
//
// Write(fs, path, data):
//
//  1. create <path>.tmp (replacing a leftover one), write data, fsync, close;
//  2. rename <path>.tmp over <path>;
//  3. fsync the directory holding path. Commit point.
//
// A crash before step 2 leaves the old file and perhaps a torn temp file,
// which readers must ignore and RemoveTemp deletes. A crash between 2
// and 3 leaves the old or the new file, both complete. After step 3 the
// new contents survive.
//
// Errors are returned wrapped with the operation and path and without a
// package prefix ("create p/x.tmp: ..."): callers add their own.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TempSuffix is appended to a path to name the temporary file a Write
// goes through.
const TempSuffix = ".tmp"

// Write replaces the file at path with data; see the package comment for
// the steps and the commit point. On failure it removes the temp file on
// a best-effort basis and returns the first error.
func Write(fsys vfs.FS, path string, data []byte) (err error) {
	tmp := path + TempSuffix
	f, err := fsys.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	renamed := false
	defer func() {
		if err != nil && !renamed {
			_ = fsys.Remove(tmp) // best effort; RemoveTemp cleans up too
		}
	}()
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("sync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err := fsys.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename %s to %s: %w", tmp, path, err)
	}
	renamed = true
	return SyncDir(fsys, fsys.PathDir(path))
}

// SyncDir fsyncs a directory, making the creations, renames and removals
// of its entries durable.
func SyncDir(fsys vfs.FS, dir string) error {
	d, err := fsys.OpenDir(dir)
	if err != nil {
		return fmt.Errorf("open directory %s: %w", dir, err)
	}
	if err := d.Sync(); err != nil {
		_ = d.Close()
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	if err := d.Close(); err != nil {
		return fmt.Errorf("close directory %s: %w", dir, err)
	}
	return nil
}

// RemoveTemp removes <path>.tmp if an interrupted Write left it behind.
// A missing temp file is not an error.
func RemoveTemp(fsys vfs.FS, path string) error {
	tmp := path + TempSuffix
	if err := fsys.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", tmp, err)
	}
	return nil
}
