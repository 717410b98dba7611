// Package crashtest is the shared part of the crash tests: a Recorder
// wraps a file system and, before every mutating operation (and at any
// other point a test names, such as an object put), runs the test's check
// of a crash image. The check typically takes a CrashClone of a
// vfs.NewCrashableMem, reopens the component on it and verifies the
// recovered state.
//
// The Recorder serializes the points (Pebble writes from its own
// goroutines), counts them, can check every n-th only, and keeps the first
// failure instead of calling t.Fatal, which must not run on goroutines
// other than the test's: the test reports Err at the end.
package crashtest

import (
	"fmt"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// Recorder runs a check at each crash point while armed.
type Recorder struct {
	check  func(point int, what string) error
	stride int

	mu      sync.Mutex
	armed   bool
	points  int
	checked int
	failure error
}

// New returns a disarmed Recorder that runs check at every stride-th crash
// point (stride < 1 means every one). point numbers the crash points from
// 1; what describes the operation about to run.
func New(stride int, check func(point int, what string) error) *Recorder {
	return &Recorder{check: check, stride: max(stride, 1)}
}

// Wrap returns fs with a crash point before every mutating operation.
func (r *Recorder) Wrap(fs vfs.FS) vfs.FS {
	return errorfs.Wrap(fs, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
			r.Point(fmt.Sprintf("%s %s", OpName(op.Kind), op.Path))
		}
		return nil
	}))
}

// Arm turns the crash points on or off.
func (r *Recorder) Arm(on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.armed = on
}

// Point is a crash point: if armed and no check failed yet, it counts the
// point and runs the check at every stride-th one.
func (r *Recorder) Point(what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.armed || r.failure != nil {
		return
	}
	r.points++
	if r.points%r.stride != 0 {
		return
	}
	r.checked++
	if err := r.check(r.points, what); err != nil {
		r.failure = fmt.Errorf("crash point %d (before %s): %w", r.points, what, err)
	}
}

// Err returns the first failed check.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failure
}

// Checked returns how many crash points were checked.
func (r *Recorder) Checked() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.checked
}

// OpName is the short name of a mutating file operation in a crash
// point's description ("create", "sync", "rename", ...; "write" for the
// writes themselves).
func OpName(k errorfs.OpKind) string {
	switch k {
	case errorfs.OpCreate, errorfs.OpReuseForWrite:
		return "create"
	case errorfs.OpLink:
		return "link"
	case errorfs.OpRemove, errorfs.OpRemoveAll:
		return "remove"
	case errorfs.OpRename:
		return "rename"
	case errorfs.OpMkdirAll:
		return "mkdir"
	case errorfs.OpLock:
		return "lock"
	case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo, errorfs.OpFileFlush:
		return "sync"
	case errorfs.OpFilePreallocate:
		return "preallocate"
	case errorfs.OpFileClose:
		return "close"
	}
	return "write"
}
