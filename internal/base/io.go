package base

import (
	"errors"
	"io"
	"io/fs"
	"syscall"
)

// Sentinels for I/O failures, so that errors.Is can tell an operator's
// causes apart. Every error a file system returns to a tierlog component
// is wrapped in an *IOError that unwraps to ErrIO, to at most one of the
// narrower sentinels, and to the original error (an *fs.PathError, a
// syscall.Errno, an injected test error), which errors.Is and errors.As
// still reach. None of them is ErrCorruption: bytes that read back wrong
// are corruption, a read that fails is I/O.
var (
	// ErrIO marks every failure of the file system itself.
	ErrIO = errors.New("tierlog: I/O error")

	// ErrNotFound: a file or directory that should exist does not
	// (ENOENT, fs.ErrNotExist).
	ErrNotFound = errors.New("tierlog: file not found")

	// ErrPermission: the process may not read or write the file (EACCES,
	// EPERM, EROFS, fs.ErrPermission).
	ErrPermission = errors.New("tierlog: permission denied")

	// ErrNoSpace: the device or the quota is full (ENOSPC, EDQUOT).
	ErrNoSpace = errors.New("tierlog: no space left on device")

	// ErrIsDir: a directory stands where a file should be (EISDIR).
	ErrIsDir = errors.New("tierlog: is a directory")

	// ErrNotDir: a file stands where a directory should be (ENOTDIR, or
	// a path component that is a file).
	ErrNotDir = errors.New("tierlog: not a directory")
)

// IOError is an error returned by a file system, classified. Its message
// is the original error's, so wrapping changes no text.
type IOError struct {
	// Kind is ErrNotFound, ErrPermission, ErrNoSpace, ErrIsDir, ErrNotDir
	// or nil (another failure, for example one injected by a test).
	Kind error
	// Err is the file system's error.
	Err error
}

func (e *IOError) Error() string { return e.Err.Error() }

// Unwrap returns ErrIO, the kind if any, and the original error.
func (e *IOError) Unwrap() []error {
	if e.Kind != nil {
		return []error{ErrIO, e.Kind, e.Err}
	}
	return []error{ErrIO, e.Err}
}

// WrapIO classifies an error a file system returned. It returns nil for
// nil, and io.EOF and io.ErrUnexpectedEOF unchanged: they report where a
// file ends, not a failure, and callers compare them by identity. An
// error that is already an *IOError is returned as is.
func WrapIO(err error) error {
	if err == nil || err == io.EOF || err == io.ErrUnexpectedEOF {
		return err
	}
	var ioe *IOError
	if errors.As(err, &ioe) {
		return err
	}
	return &IOError{Kind: ioKind(err), Err: err}
}

// ioKind maps an error to its narrow sentinel. The fs sentinels come
// first: syscall.Errno matches them for ENOENT, EACCES and EPERM, and
// in-memory file systems return them directly.
func ioKind(err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return ErrNotFound
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS):
		return ErrPermission
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return ErrNoSpace
	case errors.Is(err, syscall.EISDIR):
		return ErrIsDir
	case errors.Is(err, syscall.ENOTDIR):
		return ErrNotDir
	}
	return nil
}
