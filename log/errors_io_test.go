package log

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"
)

// ioKinds lists the narrow I/O sentinels; a classified error matches at
// most one of them.
var ioKinds = []error{ErrNotFound, ErrPermission, ErrNoSpace, ErrIsDir, ErrNotDir}

// requireIOKind checks that err is an I/O error of exactly the kind want
// (nil: of no narrow kind), and not corruption.
func requireIOKind(t *testing.T, err error, want error) {
	t.Helper()
	require.ErrorIs(t, err, ErrIO)
	require.NotErrorIs(t, err, ErrCorruption)
	for _, k := range ioKinds {
		require.Equal(t, k == want, errors.Is(err, k), "kind %v for %v", k, err)
	}
	var ioe *IOError
	require.ErrorAs(t, err, &ioe)
}

// errnoOnce returns an injector that, once armed, fails every operation
// of kind (OpFileSync: any of the sync calls) on a path ending in suffix
// with errno, as the kernel would.
func errnoOnce(armed *atomic.Bool, kind errorfs.OpKind, suffix string, errno syscall.Errno) errorfs.Injector {
	return errorfs.InjectorFunc(func(op errorfs.Op) error {
		sameKind := op.Kind == kind ||
			kind == errorfs.OpFileSync && (op.Kind == errorfs.OpFileSyncData || op.Kind == errorfs.OpFileSyncTo)
		if armed.Load() && sameKind && strings.HasSuffix(op.Path, suffix) {
			return &fs.PathError{Op: "inject", Path: op.Path, Err: errno}
		}
		return nil
	})
}

// TestIOErrorsTyped: I/O failures come back classified, so that errors.Is
// tells a full disk from a permission problem from a missing file, and a
// failed write takes the log offline with the same typed error.
func TestIOErrorsTyped(t *testing.T) {
	for _, tc := range []struct {
		name  string
		kind  errorfs.OpKind
		path  string
		errno syscall.Errno
		want  error
	}{
		{"disk-full-on-write", errorfs.OpFileWriteAt, ".log", syscall.ENOSPC, ErrNoSpace},
		{"quota-on-write", errorfs.OpFileWriteAt, ".log", syscall.EDQUOT, ErrNoSpace},
		{"permission-on-write", errorfs.OpFileWriteAt, ".log", syscall.EACCES, ErrPermission},
		{"read-only-fs", errorfs.OpFileWriteAt, ".log", syscall.EROFS, ErrPermission},
		{"io-error-on-write", errorfs.OpFileWriteAt, ".log", syscall.EIO, nil},
		{"disk-full-on-sync", errorfs.OpFileSync, ".log", syscall.ENOSPC, ErrNoSpace},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var armed atomic.Bool
			efs := errorfs.Wrap(vfs.NewMem(), errnoOnce(&armed, tc.kind, tc.path, tc.errno))
			l := openTestLog(t, efs, Options{})
			defer l.Close()
			appendRecords(t, l, 0, 1, validateNowMs)
			armed.Store(true)
			_, err := l.AppendAsLeader(buildBatches(t, 1, 1, 10, validateNowMs, 0, -1), 0, OriginClient)
			if err == nil {
				err = l.Flush()
			}
			requireIOKind(t, err, tc.want)
			require.ErrorIs(t, err, tc.errno, "the errno stays reachable")
			// Offline: the next write fails the same way, with the
			// fault gone.
			armed.Store(false)
			_, err = l.AppendAsLeader(buildBatches(t, 1, 1, 10, validateNowMs, 0, -1), 0, OriginClient)
			requireIOKind(t, err, tc.want)
		})
	}
	t.Run("injected-error-stays-io", func(t *testing.T) {
		inj := errorfs.ErrInjected.If(errorfs.And(errorfs.Writes, errorfs.PathMatch("p0/*.log")))
		var armed atomic.Bool
		efs := errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
			if !armed.Load() {
				return nil
			}
			return inj.MaybeError(op)
		}))
		l := openTestLog(t, efs, Options{})
		defer l.Close()
		armed.Store(true)
		_, err := l.AppendAsLeader(buildBatches(t, 1, 1, 10, validateNowMs, 0, -1), 0, OriginClient)
		requireIOKind(t, err, nil)
		require.True(t, isInjected(err), "the injected error stays reachable: %v", err)
	})
	t.Run("directory-vanished", func(t *testing.T) {
		mem := vfs.NewMem()
		l := openTestLog(t, mem, Options{})
		defer l.Close()
		appendRecords(t, l, 0, 1, validateNowMs)
		require.NoError(t, mem.RemoveAll("p0"))
		err := l.Roll()
		requireIOKind(t, err, ErrNotFound)
		require.ErrorIs(t, err, fs.ErrNotExist)
	})
	t.Run("partition-directory-is-a-file", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "p0")
		f, err := vfs.Default.Create(dir, vfs.WriteCategoryUnspecified)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		_, err = Open(dir, Options{})
		requireIOKind(t, err, ErrNotDir)
	})
	t.Run("segment-file-is-a-directory", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "p0")
		require.NoError(t, vfs.Default.MkdirAll(filepath.Join(dir, "00000000000000000000.log"), 0o755))
		_, err := Open(dir, Options{})
		requireIOKind(t, err, ErrIsDir)
	})
}
