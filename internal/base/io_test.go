package base

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"syscall"
	"testing"
)

// TestWrapIO: each errno maps to one kind; end-of-file markers pass
// through unchanged (callers compare them by identity); wrapping twice
// keeps one layer.
func TestWrapIO(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want error
	}{
		{&fs.PathError{Op: "open", Path: "x", Err: syscall.ENOENT}, ErrNotFound},
		{fs.ErrNotExist, ErrNotFound},
		{&fs.PathError{Op: "open", Path: "x", Err: syscall.EACCES}, ErrPermission},
		{&fs.PathError{Op: "open", Path: "x", Err: syscall.EPERM}, ErrPermission},
		{&fs.PathError{Op: "write", Path: "x", Err: syscall.EROFS}, ErrPermission},
		{&fs.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}, ErrNoSpace},
		{&fs.PathError{Op: "write", Path: "x", Err: syscall.EDQUOT}, ErrNoSpace},
		{&fs.PathError{Op: "open", Path: "x", Err: syscall.EISDIR}, ErrIsDir},
		{&fs.PathError{Op: "mkdir", Path: "x", Err: syscall.ENOTDIR}, ErrNotDir},
		{&fs.PathError{Op: "read", Path: "x", Err: syscall.EIO}, nil},
		{errors.New("injected"), nil},
	} {
		got := WrapIO(tc.err)
		if !errors.Is(got, ErrIO) || !errors.Is(got, tc.err) {
			t.Errorf("%v: not ErrIO or lost the cause: %v", tc.err, got)
		}
		for _, k := range []error{ErrNotFound, ErrPermission, ErrNoSpace, ErrIsDir, ErrNotDir} {
			if errors.Is(got, k) != (k == tc.want) {
				t.Errorf("%v: errors.Is(%v) = %v", tc.err, k, !(k == tc.want))
			}
		}
		if errors.Is(got, ErrCorruption) || got.Error() != tc.err.Error() {
			t.Errorf("%v: corruption or changed text: %v", tc.err, got)
		}
		var ioe *IOError
		if again := WrapIO(fmt.Errorf("ctx: %w", got)); !errors.As(again, &ioe) || ioe.Err != tc.err {
			t.Errorf("%v: rewrapped to %v", tc.err, again)
		}
	}
	for _, e := range []error{nil, io.EOF, io.ErrUnexpectedEOF} {
		if got := WrapIO(e); got != e {
			t.Errorf("WrapIO(%v) = %v, want it unchanged", e, got)
		}
	}
}
