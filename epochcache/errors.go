package epochcache

import "github.com/tierlog/tierlog/internal/base"

// Errors returned by this package. Test for them with errors.Is. Any error
// leaving the package is one of these, wraps one of these, or is an I/O
// error from the vfs.FS wrapped with the operation and file path.
var (
	// ErrCorruption marks a checkpoint file that exists but cannot be
	// parsed. It is returned as a *CheckpointError naming the file and
	// line. It is never used for I/O failures, which keep their own error.
	ErrCorruption = base.ErrCorruption

	// ErrInvalidArgument is returned by Assign and AssignAll for a
	// negative epoch or start offset, and by Open for a nil vfs.FS or an
	// empty path. It signals a bug in the caller; nothing is changed.
	ErrInvalidArgument = base.ErrInvalidArgument
)
