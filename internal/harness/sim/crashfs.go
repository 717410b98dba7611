package sim

import (
	"errors"
	"fmt"
	"github.com/tierlog/tierlog/internal/harness/crashtest"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// ErrCrashed is what every mutating file operation of a broker returns
// from the crash point of an armed cut on (cutPoint): the process is
// dead, nothing it does reaches the disk any more.
var ErrCrashed = errors.New("sim: broker crashed at this file operation")

// cutPoint is a crash at an arbitrary file operation (the crash tests'
// loop of internal/harness/crashtest, drawn at random instead of tried
// at every point): once armed on a broker's disk, the ops-th mutating
// operation that reaches it (a create, write, sync, rename, remove,
// close, directory creation: errorfs's OpIsWrite kinds) does not run;
// the disk's crash image is taken just before it, and every mutating
// operation from then on fails with ErrCrashed. The step that hit it
// then ends with the broker crashed on that image (Cluster.finishCuts):
// whatever the broker was doing, an append, a roll, a retention
// deletion, a clean shutdown's close (logmanager's managed close) or a
// recovery at its restart, stops there. Counting goes on while the
// broker is down, so a cut armed on a stopped broker falls in its
// restart (op 1: a power loss while it was down, before its recovery
// touched the disk).
//
// Only the operations of one log directory (the partition's, and its
// parent directories) count and fail; the other directory holds no log
// of the partition, only a move's future log. The brokers' log managers
// run serially (logmanager.Options.Serial: one directory, one log, one
// fsync at a time, in order), so the operations reach the cut in the
// same order in every run of a seed, a restart's recovery included.
type cutPoint struct {
	fs  *vfs.MemFS // the disk it is armed on (a new disk disarms it)
	dir string     // the log directory whose operations count
	// unsyncedPercent and rng make the crash image (crashImage; the rng
	// is seeded when armed, from the step, the broker and ops).
	unsyncedPercent int
	rng             *rand.Rand

	mu struct {
		sync.Mutex
		left  int // mutating operations before the crash point
		image *vfs.MemFS
		what  string
	}
}

// armed reports whether the cut will still fire on b's disk (armed on
// it and not yet reached).
func (p *cutPoint) armed(b *Broker) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.image == nil && p.mu.left > 0 && p.fs == b.fs
}

// inject is the errorfs injector of a broker's disk.
func (p *cutPoint) inject(op errorfs.Op) error {
	if op.Kind.ReadOrWrite() != errorfs.OpIsWrite || !p.within(op.Path) {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.image != nil {
		return ErrCrashed
	}
	if p.mu.left--; p.mu.left > 0 {
		return nil
	}
	p.mu.image = crashImage(p.fs, p.unsyncedPercent, p.rng)
	p.mu.what = fmt.Sprintf("%s %s", crashtest.OpName(op.Kind), op.Path)
	return ErrCrashed
}

// within reports whether path is p's directory, beneath it or one of
// its parents.
func (p *cutPoint) within(path string) bool {
	return path == p.dir || strings.HasPrefix(path, p.dir+"/") || path == "/" || strings.HasPrefix(p.dir, path+"/")
}

// fired returns the crash image and the operation it cut before (nil
// while not reached).
func (p *cutPoint) fired() (*vfs.MemFS, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.image, p.mu.what
}

// disk is the file system the broker's log manager opens: its MemFS,
// behind the broker's cut point when one is armed on it. Directory
// listings are sorted (MemFS lists in map order, which would make the
// order of a close's fsyncs, and so what a cut leaves, differ between
// runs of a seed; a real readdir order is arbitrary too).
func (b *Broker) disk() vfs.FS {
	return errorfs.Wrap(sortedListFS{b.fs}, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if p := b.cut; p != nil && p.fs == b.fs {
			return p.inject(op)
		}
		return nil
	}))
}

// ArmCrash arms a crash of broker id (running or down) before the ops-th
// mutating file operation its disk sees from now on, keeping
// unsyncedPercent (0 to 100) of the data not yet synced: a power loss or
// a killed process at an arbitrary point of what the broker does next.
// It takes a step of its own; the crash happens in the step that reaches
// the point.
func (c *Cluster) ArmCrash(id int32, ops, unsyncedPercent int) error {
	return c.do("arm-crash", id, func() (string, error) {
		c.rec.note("ops", ops)
		c.rec.note("unsynced", unsyncedPercent)
		b := c.Broker(id)
		if b == nil {
			return "", notApplicable("no broker %d", id)
		}
		if b.cut != nil && b.cut.fs == b.fs {
			return "", notApplicable("broker %d has a crash armed", id)
		}
		if ops < 1 {
			return "", notApplicable("crash point %d", ops)
		}
		dir := logDirs[0]
		if l := b.Log(); l != nil {
			dir = b.logDirOf(l)
		}
		p := &cutPoint{fs: b.fs, dir: dir, unsyncedPercent: unsyncedPercent,
			rng: rand.New(rand.NewPCG(uint64(c.step), uint64(id)<<32|uint64(ops)))}
		p.mu.left = ops
		b.cut = p
		return fmt.Sprintf("crash before file operation %d, unsynced kept %d%%", ops, unsyncedPercent), nil
	})
}

// finishCuts ends the step for every broker whose cut point fired: it is
// down on the crash image (a running one is abandoned as Crash abandons
// it, and fenced; one that crashed in its restart never registered).
// A fencing can make another broker's cut fire (the election it causes
// makes that broker write its epoch checkpoint), so it goes round until
// no fired cut is left: a broker never stays up on a log its crash
// failed.
// REQUIRES: called by do after the step's action, with up the brokers
// that ran when the step began.
func (c *Cluster) finishCuts(up map[int32]bool) error {
	var errs []error
	for again := true; again; {
		again = false
		for _, b := range c.brokers {
			if c.finishCut(b, up, &errs) {
				again = true
			}
		}
	}
	return errors.Join(errs...)
}

// finishCut is finishCuts for broker b; it reports whether b's cut had
// fired.
func (c *Cluster) finishCut(b *Broker, up map[int32]bool, errs *[]error) bool {
	p := b.cut
	if p == nil || p.fs != b.fs {
		return false
	}
	img, what := p.fired()
	if img == nil {
		return false
	}
	b.cut = nil
	if b.up {
		_ = b.mgr.Close()
	} else if b.prodMarks != nil && b.prodMarks.fs == b.fs {
		// A crash during its restart (the recovery): the next
		// restart must still know the producers.
		b.prodMarks.fs = img
	}
	b.up, b.fs, b.logs, b.moving = false, img, nil, false
	b.forgetRole()
	delete(c.ctrl.cleanStop, b.ID)
	c.trace.detail("b%d crashed before %s (unsynced kept %d%%)", b.ID, what, p.unsyncedPercent)
	if up[b.ID] {
		*errs = append(*errs, c.fenceBroker(b.ID))
	}
	return true
}

// armedBrokers reports which brokers run and whether any has a cut
// point armed (do's input to finishCuts).
func (c *Cluster) armedBrokers() (up map[int32]bool, armed bool) {
	for _, b := range c.brokers {
		if b.cut != nil && b.cut.fs == b.fs {
			armed = true
		}
	}
	if !armed {
		return nil, false
	}
	up = map[int32]bool{}
	for _, b := range c.brokers {
		up[b.ID] = b.up
	}
	return up, true
}

// sortedListFS lists directories in name order.
type sortedListFS struct{ vfs.FS }

func (fs sortedListFS) List(dir string) ([]string, error) {
	names, err := fs.FS.List(dir)
	slices.Sort(names)
	return names, err
}

// crashImage is fs after a power loss now: what was synced, and each
// item written since with probability unsyncedPercent/100, the same
// image for the same rng in every run.
//
// MemFS.CrashClone draws per data block and per directory entry, but in
// Go's map order, so with a share between 0 and 100 one rng gives
// another image in every run; at 0 and 100 it draws nothing that
// matters, and its images are taken as they are (100: every write and
// new entry kept, and, as MemFS models a directory not synced since, an
// unlink undone). Between them, the kept items are made durable on fs
// first: an fsync of each file and directory drawn, walked in name order
// so that the draws fall on the same items in every run, and the image
// is then fs's synced state. fs is the dead process's disk, which
// nothing reads after the crash, so the extra fsyncs change nothing a
// run sees. A file's data and a directory's entries are kept whole or
// not at all (torn writes are not modelled), a kept directory keeps its
// unlinks too, and a file replaced by a rename into a directory not
// kept comes back with its synced data only.
func crashImage(fs *vfs.MemFS, unsyncedPercent int, rng *rand.Rand) *vfs.MemFS {
	if unsyncedPercent <= 0 || unsyncedPercent >= 100 {
		return fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: min(unsyncedPercent, 100), RNG: rng})
	}
	keepUnsynced(fs, "/", unsyncedPercent, rng)
	return fs.CrashClone(vfs.CrashCloneCfg{})
}

// keepUnsynced fsyncs dir with probability percent/100, then walks its
// entries in name order: each file is fsynced with that probability,
// each subdirectory walked the same way. A file or directory that
// cannot be opened or listed is left as it is (a crash may lose what
// was not synced of it).
func keepUnsynced(fs *vfs.MemFS, dir string, percent int, rng *rand.Rand) {
	keep := func() bool { return rng.IntN(100) < percent }
	fsync := func(f vfs.File, err error) {
		if err == nil {
			_ = errors.Join(f.Sync(), f.Close())
		}
	}
	if keep() {
		fsync(fs.OpenDir(dir))
	}
	names, err := fs.List(dir)
	if err != nil {
		return
	}
	slices.Sort(names)
	for _, name := range names {
		path := fs.PathJoin(dir, name)
		fi, err := fs.Stat(path)
		switch {
		case err != nil:
		case fi.IsDir():
			keepUnsynced(fs, path, percent, rng)
		case keep():
			fsync(fs.Open(path))
		}
	}
}
