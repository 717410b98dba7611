package log

import (
	"io"
	iofs "io/fs"
	"os"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tierlog/tierlog/internal/base"
)

// I/O errors. Every error the log's vfs.FS returns, from the log or from
// the segments, indexes, checkpoints and snapshots it keeps, unwraps to
// ErrIO and to at most one of the narrower sentinels below, and still to
// the file system's own error (so errors.Is(err, fs.ErrNotExist) and an
// injected test error keep working). A failed write or fsync takes the log
// offline: every later write returns the same error until it is reopened.
var (
	// ErrIO marks a failure of the file system, never corruption.
	ErrIO = base.ErrIO
	// ErrNotFound: a file or directory the log needs does not exist.
	ErrNotFound = base.ErrNotFound
	// ErrPermission: the process may not read or write a file of the
	// log (EACCES, EPERM, a read-only file system).
	ErrPermission = base.ErrPermission
	// ErrNoSpace: the disk or the quota is full (ENOSPC, EDQUOT).
	ErrNoSpace = base.ErrNoSpace
	// ErrIsDir: a directory stands where a file of the log should be.
	ErrIsDir = base.ErrIsDir
	// ErrNotDir: a file stands where a directory should be (for example
	// the partition directory itself).
	ErrNotDir = base.ErrNotDir
)

// IOError is a file system error, classified; errors.As finds it.
type IOError = base.IOError

// ioFS wraps the log's vfs.FS so that every error it or its files return
// is classified (base.WrapIO) at the one place all I/O passes through,
// whichever package below the log made the call.
type ioFS struct {
	vfs.FS
	// barrier, when set, runs before the first fsync of any file opened
	// through this FS (dir.go: the deferred fsyncs of the directories a
	// new log created).
	barrier *dirBarrier
	// stage, when set and active, defers the fsyncs and the temp-file
	// renames of the files opened through this FS (close_deferred.go).
	stage *closeStage
}

// classifyingFS returns fs wrapped in an ioFS, once.
func classifyingFS(fs vfs.FS) vfs.FS {
	if _, ok := fs.(ioFS); ok {
		return fs
	}
	return ioFS{FS: fs}
}

func (f ioFS) Unwrap() vfs.FS { return f.FS }

func (f ioFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f.stage.forgetList()
	return f.wrapFile(f.FS.Create(name, category))
}

func (f ioFS) Link(oldname, newname string) error {
	f.stage.forgetList()
	return base.WrapIO(f.FS.Link(oldname, newname))
}

func (f ioFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	return f.wrapFile(f.FS.Open(name, opts...))
}

func (f ioFS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f.stage.forgetList()
	return f.wrapFile(f.FS.OpenReadWrite(name, category, opts...))
}

func (f ioFS) OpenDir(name string) (vfs.File, error) {
	if f.stage.active() {
		return stagedDir{}, nil // opened to be fsynced only
	}
	return f.wrapFile(f.FS.OpenDir(name))
}

func (f ioFS) Remove(name string) error {
	if f.stage.listedAbsent(f.FS, name) {
		return base.WrapIO(&os.PathError{Op: "remove", Path: name, Err: iofs.ErrNotExist})
	}
	f.stage.forgetList()
	f.stage.dropRename(name)
	return base.WrapIO(f.FS.Remove(name))
}

func (f ioFS) RemoveAll(name string) error {
	f.stage.forgetList()
	return base.WrapIO(f.FS.RemoveAll(name))
}

func (f ioFS) Rename(oldname, newname string) error {
	f.stage.forgetList()
	if f.stage.defersRename(oldname, newname) {
		return nil
	}
	return base.WrapIO(f.FS.Rename(oldname, newname))
}

func (f ioFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f.stage.forgetList()
	return f.wrapFile(f.FS.ReuseForWrite(oldname, newname, category))
}

func (f ioFS) MkdirAll(dir string, perm os.FileMode) error {
	f.stage.forgetList()
	return base.WrapIO(f.FS.MkdirAll(dir, perm))
}

func (f ioFS) Lock(name string) (io.Closer, error) {
	c, err := f.FS.Lock(name)
	return c, base.WrapIO(err)
}

func (f ioFS) List(dir string) ([]string, error) {
	if names, ok := f.stage.cachedList(dir); ok {
		return names, nil
	}
	names, err := f.FS.List(dir)
	if err == nil {
		f.stage.storeList(dir, names)
	}
	return names, base.WrapIO(err)
}

func (f ioFS) Stat(name string) (vfs.FileInfo, error) {
	if f.stage.listedAbsent(f.FS, name) {
		return nil, base.WrapIO(&os.PathError{Op: "stat", Path: name, Err: iofs.ErrNotExist})
	}
	fi, err := f.FS.Stat(name)
	return fi, base.WrapIO(err)
}

func (f ioFS) GetDiskUsage(path string) (vfs.DiskUsage, error) {
	u, err := f.FS.GetDiskUsage(path)
	return u, base.WrapIO(err)
}

func (f ioFS) wrapFile(file vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, base.WrapIO(err)
	}
	if _, ok := file.(truncater); ok {
		return ioTruncFile{ioFile{file, f.barrier, f.stage}}, nil
	}
	return ioFile{file, f.barrier, f.stage}, nil
}

// truncater is the optional capability of a file to change its size
// (os.File.Truncate, which vfs.Default's files have); the segment uses it
// to release preallocated space.
type truncater interface{ Truncate(size int64) error }

// ioTruncFile is ioFile for a file with Truncate, which it passes
// through: the wrapper must not hide the capability, nor claim it for a
// file without it.
type ioTruncFile struct{ ioFile }

func (f ioTruncFile) Truncate(size int64) error {
	return base.WrapIO(f.File.(truncater).Truncate(size))
}

// ioFile classifies the errors of one file.
type ioFile struct {
	vfs.File
	barrier *dirBarrier
	stage   *closeStage
}

func (f ioFile) Close() error { return base.WrapIO(f.File.Close()) }

func (f ioFile) Read(p []byte) (int, error) {
	n, err := f.File.Read(p)
	return n, base.WrapIO(err)
}

func (f ioFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	return n, base.WrapIO(err)
}

func (f ioFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	return n, base.WrapIO(err)
}

func (f ioFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	return n, base.WrapIO(err)
}

func (f ioFile) Preallocate(offset, length int64) error {
	return base.WrapIO(f.File.Preallocate(offset, length))
}

func (f ioFile) Stat() (vfs.FileInfo, error) {
	fi, err := f.File.Stat()
	return fi, base.WrapIO(err)
}

func (f ioFile) Sync() error {
	if f.stage.active() {
		return nil
	}
	if err := f.barrier.wait(); err != nil {
		return err
	}
	return base.WrapIO(f.File.Sync())
}

func (f ioFile) SyncData() error {
	if f.stage.active() {
		return nil
	}
	if err := f.barrier.wait(); err != nil {
		return err
	}
	return base.WrapIO(f.File.SyncData())
}

func (f ioFile) SyncTo(length int64) (bool, error) {
	if f.stage.active() {
		return false, nil
	}
	if err := f.barrier.wait(); err != nil {
		return false, err
	}
	full, err := f.File.SyncTo(length)
	return full, base.WrapIO(err)
}

func (f ioFile) Prefetch(offset, length int64) error {
	return base.WrapIO(f.File.Prefetch(offset, length))
}
