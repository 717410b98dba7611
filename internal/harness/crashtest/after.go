package crashtest

import "github.com/cockroachdb/pebble/v2/vfs"

// AfterEach returns fs calling after(op, name) once each mutating file
// operation (create, open for writing, write, sync, close, rename,
// remove, and a directory's sync through OpenDir) has returned, so a test
// can take a CrashClone after every step. The Recorder checks before each
// operation instead; the two see the same states but for the one after
// the last operation.
func AfterEach(fs vfs.FS, after func(op, name string)) vfs.FS {
	return &afterFS{FS: fs, after: after}
}

type afterFS struct {
	vfs.FS
	after func(op, name string)
}

func (fs *afterFS) wrap(f vfs.File, name string) vfs.File {
	return &afterFile{File: f, fs: fs, name: name}
}

func (fs *afterFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	if err != nil {
		return nil, err
	}
	fs.after("create", name)
	return fs.wrap(f, name), nil
}

func (fs *afterFS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, category, opts...)
	if err != nil {
		return nil, err
	}
	fs.after("open-rw", name)
	return fs.wrap(f, name), nil
}

func (fs *afterFS) OpenDir(name string) (vfs.File, error) {
	f, err := fs.FS.OpenDir(name)
	if err != nil {
		return nil, err
	}
	return fs.wrap(f, name), nil
}

func (fs *afterFS) Rename(oldname, newname string) error {
	err := fs.FS.Rename(oldname, newname)
	fs.after("rename", newname)
	return err
}

func (fs *afterFS) Remove(name string) error {
	err := fs.FS.Remove(name)
	fs.after("remove", name)
	return err
}

type afterFile struct {
	vfs.File
	fs   *afterFS
	name string
}

func (f *afterFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	f.fs.after("write", f.name)
	return n, err
}

func (f *afterFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	f.fs.after("write-at", f.name)
	return n, err
}

func (f *afterFile) Sync() error {
	err := f.File.Sync()
	f.fs.after("sync", f.name)
	return err
}

func (f *afterFile) SyncData() error {
	err := f.File.SyncData()
	f.fs.after("sync-data", f.name)
	return err
}

func (f *afterFile) Close() error {
	err := f.File.Close()
	f.fs.after("close", f.name)
	return err
}
