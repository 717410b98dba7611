// Package countfs wraps a vfs.FS and counts the system calls the files it
// opens would make: preads (ReadAt), writes, fsyncs and preallocations.
// Tests assert on the counts, which unlike timings do not depend on the
// machine's load.
package countfs

import (
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// FS is a vfs.FS whose files count their calls. The zero value is not
// usable: build one with Wrap.
type FS struct {
	vfs.FS
	// ReadAts, Writes, Syncs and Preallocates count the calls on every
	// file opened through FS (Write and WriteAt count as writes, Sync,
	// SyncData and SyncTo as syncs; a directory opened with OpenDir is
	// a file too).
	ReadAts, Writes, Syncs, Preallocates atomic.Int64
}

// Wrap returns an FS over fs.
func Wrap(fs vfs.FS) *FS { return &FS{FS: fs} }

var _ vfs.FS = (*FS)(nil)

type file struct {
	vfs.File
	fs *FS
}

func (f file) ReadAt(p []byte, off int64) (int, error) {
	f.fs.ReadAts.Add(1)
	return f.File.ReadAt(p, off)
}

func (f file) Write(p []byte) (int, error) {
	f.fs.Writes.Add(1)
	return f.File.Write(p)
}

func (f file) WriteAt(p []byte, off int64) (int, error) {
	f.fs.Writes.Add(1)
	return f.File.WriteAt(p, off)
}

func (f file) Sync() error {
	f.fs.Syncs.Add(1)
	return f.File.Sync()
}

func (f file) SyncData() error {
	f.fs.Syncs.Add(1)
	return f.File.SyncData()
}

func (f file) SyncTo(length int64) (bool, error) {
	f.fs.Syncs.Add(1)
	return f.File.SyncTo(length)
}

func (f file) Preallocate(offset, length int64) error {
	f.fs.Preallocates.Add(1)
	return f.File.Preallocate(offset, length)
}

func (fs *FS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return file{File: f, fs: fs}, nil
}

// Create implements vfs.FS.
func (fs *FS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return fs.wrap(fs.FS.Create(name, c))
}

// Open implements vfs.FS.
func (fs *FS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	return fs.wrap(fs.FS.Open(name, opts...))
}

// OpenReadWrite implements vfs.FS.
func (fs *FS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	return fs.wrap(fs.FS.OpenReadWrite(name, c, opts...))
}

// ReuseForWrite implements vfs.FS.
func (fs *FS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return fs.wrap(fs.FS.ReuseForWrite(oldname, newname, c))
}

// Unwrap implements vfs.FS.
// OpenDir wraps the directory too: a directory fsync counts as a sync.
func (fs *FS) OpenDir(name string) (vfs.File, error) { return fs.wrap(fs.FS.OpenDir(name)) }

func (fs *FS) Unwrap() vfs.FS { return fs.FS }
