package segment

import (
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// faultScenario runs a segment's whole life on fs: create, appends,
// flushes, reads, a truncation, a reopen and a recovery. It returns the
// first error.
func faultScenario(t *testing.T, fs vfs.FS) (err error) {
	opts := Options{IndexIntervalBytes: 200}
	var s *Segment
	defer func() {
		if s != nil {
			err = errors.Join(err, s.Close())
		}
	}()
	step := func(e error) error { return e }
	if s, err = Create(fs, testDir, 0, 0, opts); err != nil {
		return step(err)
	}
	for i := range int64(4) {
		b, _ := batchesOf(t, i*5, i*5+5, 100)
		if err := s.Append(i*5+4, b); err != nil {
			return err
		}
		if err := s.Flush(); err != nil {
			return err
		}
	}
	for _, o := range []int64{0, 7, 19} {
		if _, err := s.Read(nil, o, 500, -1, true); err != nil {
			return err
		}
	}
	if _, _, err := s.FindOffsetByTimestamp(12, 0); err != nil {
		return err
	}
	ns, _, err := s.TruncateTo(15)
	if err != nil {
		return err
	}
	if ns != s {
		if err := s.Close(); err != nil {
			return err
		}
		s = ns
	}
	if err := s.OnBecomeInactive(); err != nil {
		return err
	}
	if err := s.Close(); err != nil {
		s = nil
		return err
	}
	if s, err = Open(fs, testDir, 0, 0, opts); err != nil {
		s = nil
		return err
	}
	if _, err := s.Read(nil, 12, 500, -1, true); err != nil {
		return err
	}
	ns, _, err = s.Recover(nil)
	if err != nil {
		return err
	}
	if ns != s {
		_ = s.Close()
		s = ns
	}
	b, _ := batchesOf(t, 15, 17, 100)
	if err := s.Append(16, b); err != nil {
		return err
	}
	return s.Flush()
}

// notPreallocate excludes Preallocate from injection: its errors are
// ignored on purpose (it is advisory; see index.reserve).
type notPreallocate struct{}

func (notPreallocate) String() string { return "(Not Preallocate)" }
func (notPreallocate) Evaluate(op errorfs.Op) bool {
	return op.Kind != errorfs.OpFilePreallocate
}

// TestFaultInjection injects an error at every read and every write
// operation of faultScenario in turn. Each run must return the injected
// error, wrapped (never lost, never a panic), and the files it leaves must
// still open and recover.
func TestFaultInjection(t *testing.T) {
	for _, kind := range []string{"Writes", "Reads"} {
		t.Run(kind, func(t *testing.T) {
			injected := 0
			for n := 0; ; n++ {
				mem := newMemDir(t)
				kindPred := errorfs.Reads
				if kind == "Writes" {
					kindPred = errorfs.And(errorfs.Writes, notPreallocate{})
				}
				inj := errorfs.ErrInjected.If(errorfs.And(kindPred, errorfs.OnIndex(int32(n))))
				counter := &errorfs.Counter{Injector: inj}
				err := faultScenario(t, errorfs.Wrap(mem, counter))
				if counter.Load() == 0 {
					if err != nil {
						t.Fatalf("op %d: no injection, yet %v", n, err)
					}
					t.Logf("%d %s injected", injected, kind)
					return
				}
				injected++
				if !isInjected(err) {
					t.Fatalf("op %d: injected error not returned, got %v", n, err)
				}
				if err.Error() == errorfs.ErrInjected.Error() {
					t.Fatalf("op %d: error not wrapped with context: %v", n, err)
				}
				// Whatever the failure left, a fresh open recovers it.
				if _, serr := mem.Stat(mem.PathJoin(testDir, LogFileName(0))); serr != nil {
					continue // failed before the .log existed
				}
				s, err := Open(mem, testDir, 0, 0, Options{IndexIntervalBytes: 200})
				if err != nil {
					t.Fatalf("op %d: reopen: %v", n, err)
				}
				ns, _, err := s.Recover(nil)
				if err != nil {
					t.Fatalf("op %d: recover after fault: %v", n, err)
				}
				_ = s.Close()
				_ = ns.Close()
			}
		})
	}
}

// TestStickyWriteError: after a failed .log write or fsync, every later
// write returns the same error; reads still work.
func TestStickyWriteError(t *testing.T) {
	mem := newMemDir(t)
	inj, err := errorfs.ParseDSL(`(ErrInjected (And Writes (PathMatch "p0/*.log") (OnIndex 2)))`)
	if err != nil {
		t.Fatal(err)
	}
	fs := errorfs.Wrap(mem, inj)
	// OnIndex counts write operations, and a preallocation is one.
	s, err := Create(fs, testDir, 0, 0, Options{PreallocateBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b, _ := batchesOf(t, 0, 2, 10)
	if err := s.Append(1, b); err != nil {
		t.Fatal(err)
	}
	b, _ = batchesOf(t, 2, 3, 10)
	err1 := s.Append(2, b)
	if !isInjected(err1) {
		t.Fatalf("append: %v", err1)
	}
	b, _ = batchesOf(t, 2, 3, 10)
	if err := s.Append(2, b); err != err1 {
		t.Fatalf("second append: %v, want the sticky %v", err, err1)
	}
	if err := s.Flush(); err != err1 {
		t.Fatalf("flush: %v, want the sticky %v", err, err1)
	}
	if res, err := s.Read(nil, 1, 1000, -1, false); err != nil || !res.Found {
		t.Fatalf("read after a failed write: %+v, %v", res, err)
	}
	if s.Size() == 0 || s.Size() > 200 {
		t.Fatalf("size %d", s.Size())
	}
}

// isInjected reports whether err carries errorfs's injected error. The
// injector returns a copy of ErrInjected with its predicate set, wrapped
// with a stack, so errors.Is against ErrInjected itself fails; match the
// label instead.
func isInjected(err error) bool {
	var le errorfs.LabelledError
	return errors.As(err, &le) && le.Label == errorfs.ErrInjected.Label
}
