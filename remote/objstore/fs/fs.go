// Package fs is an objstore.Store that keeps objects as files under a root
// directory: the embedded default, used by the examples and by anyone
// without S3.
//
// # Layout
//
// Each key segment but the last is a directory, the last a file. Segments
// are escaped (escape in escape.go): a-z, 0-9, '-', '_' and a non-leading
// '.' stay, every other byte (upper case included, for case-insensitive
// file systems) becomes %XX, and directory names end in '~'. So the key
// "a" (a file) and the keys "a/..." (a directory) can both exist, no key
// can name a path outside the root ("..", "." and empty segments are
// invalid keys, and a leading '.' is escaped), and escaped names never
// start with '.', which is kept for temp files.
//
//	<root>/
//	  .tmp-1234567               a Put in flight (List skips it; Open removes it)
//	  orders-3~/                 the prefix "orders-3/"
//	    00000000000000000000.log the key "orders-3/00000000000000000000.log"
//	  %4Frders~/                 the prefix "Orders/"
//
// A segment whose escaped name exceeds 255 bytes is an invalid key here
// (ErrInvalidKey), although S3 would take it.
//
// # Put: steps and commit point
//
//  1. Write the body to a temp file in the root, fsync it, close it. A
//     body longer than the 1 MiB copy buffer is read one buffer ahead of
//     the write, on a second goroutine (writeAll in pipe.go).
//  2. Create the missing parent directories, fsyncing each one's parent.
//  3. Without IfNoneMatch: rename the temp file over the target. With
//     IfNoneMatch: link(2) it to the target, which fails if the target
//     exists (atomic, no race window), then remove the temp name. On a
//     file system without hard links the fallback is "stat, then rename",
//     whose window between the two steps lets a concurrent Put of the same
//     key be overwritten; this is documented, not hidden.
//  4. fsync the target's directory. Commit point.
//
// A crash before step 3 leaves a temp file and no object; Open removes
// temp files older than the process (all of them with
// Options.RemoveAllTemps). A crash between 3 and 4 leaves the old state or
// the whole new object, never a torn one.
//
// Delete unlinks the file, fsyncs its directory, and then removes the
// directories it leaves empty (best effort; a Put that loses its
// directory to such a cleanup recreates it and retries).
//
// # Listing
//
// List walks the directories on the path of the prefix in key order (a
// directory "a~" sorts as "a/"), skipping subtrees that lie wholly at or
// before startAfter. A page costs a directory read of each directory on
// the path to the next keys, so very flat, very large prefixes list in
// time proportional to their size per page. Files that are not escaped
// names (written by someone else) are skipped.
//
// File I/O uses the os package directly: these files are the object
// store's, not the log's, and go through no vfs.FS. Tests run on
// t.TempDir().
package fs

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tierlog/tierlog/remote/objstore"
)

// processStart separates temp files of an earlier process from those of
// this one.
var processStart = time.Now()

// copyBufs holds the buffers Put copies bodies through: 1 MiB, so a
// 64 MiB segment is 64 writes.
var copyBufs = sync.Pool{New: func() any {
	b := make([]byte, 1<<20)
	return &b
}}

// maxDirRetries bounds how often a Put recreates directories that a
// concurrent Delete's cleanup removed under it.
const maxDirRetries = 100

// Options configure a Store. The zero value is the safe default.
type Options struct {
	// NoSync skips every fsync. Default false. For tests and benchmarks
	// only: a crash may then lose objects that Put reported stored.
	NoSync bool
	// RemoveAllTemps makes Open remove every temp file in the root, not
	// only those older than this process. Default false. Set it when no
	// other Store in this process or another uses the root.
	RemoveAllTemps bool
}

// Store keeps objects as files under a root directory.
type Store struct {
	root   string
	opts   Options
	closed atomic.Bool
	paths  pathCache
}

var _ objstore.Store = (*Store)(nil)

// Open returns a Store on root, creating the directory if needed, and
// removes leftover temp files (see Options.RemoveAllTemps).
func Open(root string, opts Options) (*Store, error) {
	root = filepath.Clean(root)
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("objstore/fs: open %s: %w", root, err)
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("objstore/fs: open %s: %w", root, err)
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), tempPrefix) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		if opts.RemoveAllTemps || info.ModTime().Before(processStart) {
			if err := os.Remove(filepath.Join(root, e.Name())); err != nil && !errors.Is(err, iofs.ErrNotExist) {
				return nil, fmt.Errorf("objstore/fs: open %s: removing temp file: %w", root, err)
			}
		}
	}
	return &Store{root: root, opts: opts}, nil
}

// Root returns the root directory.
func (s *Store) Root() string { return s.root }

// Close makes every later call fail with objstore.ErrClosed.
func (s *Store) Close() error {
	s.closed.Store(true)
	return nil
}

// begin checks what every call checks first.
func (s *Store) begin(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.closed.Load() {
		return objstore.ErrClosed
	}
	return nil
}

// path returns the file of a key, validating it.
func (s *Store) path(key string) (string, error) {
	if p, ok := s.paths.get(key); ok {
		return p, nil
	}
	if err := objstore.ValidateKey(key); err != nil {
		return "", err
	}
	p, err := joinPath(s.root, key)
	if err == nil {
		s.paths.put(key, p)
	}
	return p, err
}

// Put implements objstore.Store.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64, opts objstore.PutOptions) error {
	return objstore.NewOpError(objstore.OpPut, key, s.put(ctx, key, r, size, opts))
}

func (s *Store) put(ctx context.Context, key string, r io.Reader, size int64, opts objstore.PutOptions) (err error) {
	target, err := s.path(key)
	if err != nil {
		return err
	}
	if size < 0 {
		return fmt.Errorf("%w: size %d", objstore.ErrInvalidArgument, size)
	}
	if err := s.begin(ctx); err != nil {
		return err
	}
	tmp, err := s.writeTemp(ctx, r, size)
	if err != nil {
		return err
	}
	defer func() {
		// After a link or a failure the temp name is garbage.
		if rmErr := os.Remove(tmp); rmErr != nil && !errors.Is(rmErr, iofs.ErrNotExist) && err == nil {
			err = rmErr
		}
	}()
	if err := ctx.Err(); err != nil {
		return err
	}
	// A concurrent Delete may remove a directory this Put just created
	// (its empty-directory cleanup); the rename or link then fails with
	// ENOENT and the directories are made again.
	for attempt := 0; ; attempt++ {
		err = s.mkdirs(target)
		if err == nil {
			err = s.install(tmp, target, opts.IfNoneMatch)
		}
		if errors.Is(err, iofs.ErrNotExist) && attempt < maxDirRetries {
			continue
		}
		if err != nil {
			return err
		}
		break
	}
	return s.syncDir(filepath.Dir(target))
}

// writeTemp writes exactly size bytes of r to a new, synced temp file in
// the root and returns its path.
func (s *Store) writeTemp(ctx context.Context, r io.Reader, size int64) (_ string, err error) {
	f, err := os.CreateTemp(s.root, tempPrefix+"*")
	if err != nil {
		return "", err
	}
	path := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(path)
		}
	}()
	if err := writeAll(f, objstore.NewExactReader(ctx, r, size), size); err != nil {
		return "", err
	}
	if !s.opts.NoSync {
		if err := f.Sync(); err != nil {
			return "", err
		}
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	return path, nil
}

// install makes the synced temp file the object.
func (s *Store) install(tmp, target string, ifNoneMatch bool) error {
	if !ifNoneMatch {
		return os.Rename(tmp, target)
	}
	err := os.Link(tmp, target)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, iofs.ErrExist):
		return objstore.ErrPreconditionFailed
	case errors.Is(err, iofs.ErrNotExist):
		return err // the directory vanished; the caller retries
	}
	// No hard links here (some FUSE and network file systems): check,
	// then rename. A concurrent Put of the same key between the two
	// steps is overwritten: the race window the package comment names.
	if _, statErr := os.Lstat(target); statErr == nil {
		return objstore.ErrPreconditionFailed
	} else if !errors.Is(statErr, iofs.ErrNotExist) {
		return statErr
	}
	return os.Rename(tmp, target)
}

// mkdirs creates the directories between the root and target's file,
// fsyncing the parent of each one it creates.
func (s *Store) mkdirs(target string) error {
	rel, err := filepath.Rel(s.root, filepath.Dir(target))
	if err != nil || rel == "." {
		return err
	}
	dir := s.root
	for name := range strings.SplitSeq(rel, string(filepath.Separator)) {
		parent := dir
		dir = filepath.Join(dir, name)
		err := os.Mkdir(dir, 0o755)
		switch {
		case errors.Is(err, iofs.ErrExist):
			continue
		case err != nil:
			return err
		}
		if err := s.syncDir(parent); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) syncDir(dir string) error {
	if s.opts.NoSync {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// Get implements objstore.Store.
func (s *Store) Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	body, err := s.get(ctx, key, offset, length)
	if err != nil {
		return nil, objstore.NewOpError(objstore.OpGet, key, err)
	}
	return body, nil
}

func (s *Store) get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	path, err := s.path(key)
	if err != nil {
		return nil, err
	}
	if err := objstore.ValidateRangeArgs(offset, length); err != nil {
		return nil, err
	}
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, notExist(err)
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	n, err := objstore.ValidateRange(offset, length, info.Size())
	if err != nil {
		f.Close()
		return nil, err
	}
	return objstore.NewExactBody(ctx, &fileRange{SectionReader: io.NewSectionReader(f, offset, n), f: f}, n), nil
}

type fileRange struct {
	*io.SectionReader
	f *os.File
}

func (r *fileRange) Close() error { return r.f.Close() }

// notExist maps the os error of a missing file to objstore.ErrNotExist.
func notExist(err error) error {
	if errors.Is(err, iofs.ErrNotExist) {
		return fmt.Errorf("%w (%v)", objstore.ErrNotExist, err)
	}
	return err
}

// Stat implements objstore.Store.
func (s *Store) Stat(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	info, err := s.stat(ctx, key)
	return info, objstore.NewOpError(objstore.OpStat, key, err)
}

func (s *Store) stat(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	path, err := s.path(key)
	if err != nil {
		return objstore.ObjectInfo{}, err
	}
	if err := s.begin(ctx); err != nil {
		return objstore.ObjectInfo{}, err
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return objstore.ObjectInfo{}, notExist(err)
	}
	if !fi.Mode().IsRegular() {
		return objstore.ObjectInfo{}, objstore.ErrNotExist
	}
	return objstore.ObjectInfo{Key: key, Size: fi.Size(), ModTime: fi.ModTime()}, nil
}

// Delete implements objstore.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	return objstore.NewOpError(objstore.OpDelete, key, s.delete(ctx, key))
}

func (s *Store) delete(ctx context.Context, key string) error {
	path, err := s.path(key)
	if err != nil {
		return err
	}
	if err := s.begin(ctx); err != nil {
		return err
	}
	if err := os.Remove(path); err != nil {
		if errors.Is(err, iofs.ErrNotExist) {
			return nil
		}
		return err
	}
	dir := filepath.Dir(path)
	if err := s.syncDir(dir); err != nil {
		return err
	}
	// Best effort: remove the directories the delete left empty. rmdir
	// fails on a non-empty directory, which ends the walk.
	for dir != s.root && strings.HasPrefix(dir, s.root) {
		if os.Remove(dir) != nil {
			break
		}
		dir = filepath.Dir(dir)
	}
	return nil
}

// List implements objstore.Store.
func (s *Store) List(ctx context.Context, prefix, startAfter string, limit int) ([]objstore.ObjectInfo, string, error) {
	page, next, err := s.list(ctx, prefix, startAfter, limit)
	if err != nil {
		return nil, "", objstore.NewOpError(objstore.OpList, prefix, err)
	}
	return page, next, nil
}

func (s *Store) list(ctx context.Context, prefix, startAfter string, limit int) ([]objstore.ObjectInfo, string, error) {
	if err := objstore.ValidatePrefix(prefix); err != nil {
		return nil, "", err
	}
	if limit <= 0 {
		limit = objstore.DefaultListLimit
	}
	if err := s.begin(ctx); err != nil {
		return nil, "", err
	}
	// Start in the directory of the prefix's complete segments.
	dir, keyPrefix := s.root, ""
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		keyPrefix = prefix[:i+1]
		for seg := range strings.SplitSeq(prefix[:i], "/") {
			if seg == "" || seg == "." || seg == ".." {
				return nil, "", nil // no valid key has such a segment
			}
			dir = filepath.Join(dir, escape(seg)+dirSuffix)
		}
	}
	w := walker{ctx: ctx, prefix: prefix, startAfter: startAfter, want: limit + 1}
	if err := w.walk(dir, keyPrefix); err != nil {
		return nil, "", err
	}
	if len(w.found) <= limit {
		return w.found, "", nil
	}
	page := w.found[:limit:limit]
	return page, page[limit-1].Key, nil
}

// walker collects up to want objects in key order.
type walker struct {
	ctx        context.Context
	prefix     string
	startAfter string
	want       int
	found      []objstore.ObjectInfo
}

type dirItem struct {
	sortKey string // the key (file) or key prefix ending in '/' (directory)
	name    string
	isDir   bool
}

func (w *walker) walk(dir, keyPrefix string) error {
	if err := w.ctx.Err(); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, iofs.ErrNotExist) {
		return nil // no such prefix, or removed by a concurrent Delete
	}
	if err != nil {
		return err
	}
	items := make([]dirItem, 0, len(entries))
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue // temp files
		}
		if base, ok := strings.CutSuffix(name, dirSuffix); ok {
			if seg, ok := unescape(base); ok && e.IsDir() {
				items = append(items, dirItem{sortKey: keyPrefix + seg + "/", name: name, isDir: true})
			}
		} else if seg, ok := unescape(name); ok && e.Type().IsRegular() {
			items = append(items, dirItem{sortKey: keyPrefix + seg, name: name})
		}
	}
	slices.SortFunc(items, func(a, b dirItem) int { return strings.Compare(a.sortKey, b.sortKey) })
	for _, it := range items {
		if it.isDir {
			p := it.sortKey
			if !strings.HasPrefix(p, w.prefix) && !strings.HasPrefix(w.prefix, p) {
				continue
			}
			// Every key below p starts with p; if startAfter sorts at
			// or after p without starting with it, all of them are at
			// or before startAfter.
			if p <= w.startAfter && !strings.HasPrefix(w.startAfter, p) {
				continue
			}
			if err := w.walk(filepath.Join(dir, it.name), p); err != nil {
				return err
			}
		} else {
			key := it.sortKey
			if !strings.HasPrefix(key, w.prefix) || key <= w.startAfter {
				continue
			}
			info, err := os.Lstat(filepath.Join(dir, it.name))
			if errors.Is(err, iofs.ErrNotExist) {
				continue // deleted meanwhile
			}
			if err != nil {
				return err
			}
			w.found = append(w.found, objstore.ObjectInfo{Key: key, Size: info.Size(), ModTime: info.ModTime()})
		}
		if len(w.found) >= w.want {
			return nil
		}
	}
	return nil
}
