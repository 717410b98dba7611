//go:build linux

package segment

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tierlog/tierlog/internal/harness/countfs"
	"github.com/tierlog/tierlog/internal/harness/testseed"
	"github.com/tierlog/tierlog/log/record"
)

// twinSegments creates the same segment twice: mapped, on the real file
// system under a pread counter, and read with pread, on MemFS. Every
// append goes to both, so every read must give the same answer.
type twinSegments struct {
	mapped, pread *Segment
	fs            *countfs.FS
	next          int64
}

func newTwins(t *testing.T, opts Options) *twinSegments {
	t.Helper()
	fs := countfs.Wrap(vfs.Default)
	mo := opts
	mo.MapReads = true
	m, err := Create(fs, t.TempDir(), 0, 0, mo)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Create(newMemDir(t), testDir, 0, 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close(); _ = p.Close() })
	return &twinSegments{mapped: m, pread: p, fs: fs}
}

// appendRandom appends one batch of 1 to 32 records of up to 4 KiB each.
func (tw *twinSegments) appendRandom(t *testing.T, rng *rand.Rand) {
	t.Helper()
	n := 1 + rng.Int64N(32)
	b := buildBatch(t, batchSpec{base: tw.next, last: tw.next + n - 1, valueSize: rng.IntN(4096)})
	for _, s := range []*Segment{tw.mapped, tw.pread} {
		if err := s.Append(tw.next+n-1, bytes.Clone(b)); err != nil {
			t.Fatal(err)
		}
	}
	tw.next += n
}

// compare runs one random read of each kind on both segments and fails
// if the answers differ.
func (tw *twinSegments) compare(t *testing.T, rng *rand.Rand, dm, dp *[]byte) {
	t.Helper()
	o := rng.Int64N(tw.next + 2)
	maxSize := []int{0, 1, rng.IntN(64 << 10), 1 << 20}[rng.IntN(4)]
	maxPos := int64(-1)
	if rng.IntN(4) == 0 {
		maxPos = rng.Int64N(tw.mapped.Size() + 1)
	}
	minOne := rng.IntN(2) == 0
	rm, errm := tw.mapped.Read(*dm, o, maxSize, maxPos, minOne)
	rp, errp := tw.pread.Read(*dp, o, maxSize, maxPos, minOne)
	if (errm == nil) != (errp == nil) || rm.Found != rp.Found || rm.Position != rp.Position ||
		rm.BatchBaseOffset != rp.BatchBaseOffset || !bytes.Equal(rm.Data, rp.Data) {
		t.Fatalf("Read(%d, %d, %d, %t): mapped %d bytes at %d base %d found %t (%v); pread %d bytes at %d base %d found %t (%v)",
			o, maxSize, maxPos, minOne, len(rm.Data), rm.Position, rm.BatchBaseOffset, rm.Found, errm,
			len(rp.Data), rp.Position, rp.BatchBaseOffset, rp.Found, errp)
	}
	*dm, *dp = rm.Data[:0], rp.Data[:0]

	bound := int64(math.MaxInt64)
	if rng.IntN(2) == 0 {
		bound = rng.Int64N(tw.next + 2)
	}
	sm, errm := tw.mapped.Slice(o, maxSize, bound, minOne)
	sp, errp := tw.pread.Slice(o, maxSize, bound, minOne)
	if (errm == nil) != (errp == nil) || sm != sp {
		t.Fatalf("Slice(%d, %d, %d, %t): mapped %+v (%v), pread %+v (%v)", o, maxSize, bound, minOne, sm, errm, sp, errp)
	}
	if sm.Size > 0 {
		got := tw.mapped.Mapped(sm.Position, sm.Size)
		want := make([]byte, sp.Size)
		if _, err := tw.pread.File().ReadAt(want, sp.Position); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("Mapped(%d, %d) differs from the pread of the same range", sm.Position, sm.Size)
		}
	}
	tm, fm, errm := tw.mapped.FindOffsetByTimestamp(o, 0)
	tp, fp, errp := tw.pread.FindOffsetByTimestamp(o, 0)
	if tm != tp || fm != fp || (errm == nil) != (errp == nil) {
		t.Fatalf("FindOffsetByTimestamp(%d): mapped %d %t (%v), pread %d %t (%v)", o, tm, fm, errm, tp, fp, errp)
	}
}

// TestMappedReadsEqualPreadReads: reads through the mapping (Read,
// Slice with Mapped, FindOffsetByTimestamp) return exactly what pread
// reads of the same batches return, at random offsets, sizes and bounds,
// while the segment grows past several mapping lengths (each growth
// maps again) and after it rolls (its zero tail cut) and reopens. With
// every read copied from the mapping (no size limit, cold chunks too), no
// read of the mapped segment issues a pread; with the default policy,
// large reads and reads of chunks not yet warm use pread and the answers
// are the same.
func TestMappedReadsEqualPreadReads(t *testing.T) {
	t.Run("all-mapped", func(t *testing.T) {
		defer func(n int, cold bool) { mapCopyMaxBytes, coldReadsPread = n, cold }(mapCopyMaxBytes, coldReadsPread)
		mapCopyMaxBytes, coldReadsPread = math.MaxInt, false
		testMappedReadsEqualPreadReads(t, true)
	})
	t.Run("default", func(t *testing.T) { testMappedReadsEqualPreadReads(t, false) })
}

func testMappedReadsEqualPreadReads(t *testing.T, noPreads bool) {
	rng := rand.New(rand.NewPCG(testseed.Seed(t, 1), 2))
	for _, opts := range []Options{
		{},
		{IndexIntervalBytes: 1, PreallocateBytes: 1 << 20},
		{IndexIntervalBytes: 64 << 10},
	} {
		tw := newTwins(t, opts)
		var dm, dp []byte
		lengths := map[int]bool{}
		for tw.mapped.Size() < 5<<20 {
			tw.appendRandom(t, rng)
			for range 3 {
				tw.compare(t, rng, &dm, &dp)
			}
			if cur := tw.mapped.mm.cur.Load(); cur != nil {
				lengths[len(cur.data)] = true
			}
		}
		if n := tw.fs.ReadAts.Load(); noPreads && n != 0 {
			t.Fatalf("options %+v: %d preads by reads of the mapped segment, want 0", opts, n)
		} else if !noPreads && n == 0 {
			t.Fatalf("options %+v: no pread, though reads of up to 1 MiB were made", opts)
		}
		if len(lengths) < 3 {
			t.Fatalf("options %+v: mapping lengths %v: the segment did not grow past two mappings", opts, lengths)
		}
		for _, s := range []*Segment{tw.mapped, tw.pread} {
			if err := s.OnBecomeInactive(); err != nil {
				t.Fatal(err)
			}
		}
		for range 200 {
			tw.compare(t, rng, &dm, &dp)
		}
		// Reopened from disk: the indexes come from their files.
		dir := tw.mapped.dir
		if err := tw.mapped.Close(); err != nil {
			t.Fatal(err)
		}
		m, err := Open(tw.fs, dir, 0, 0, Options{MapReads: true, IndexIntervalBytes: opts.IndexIntervalBytes})
		if err != nil {
			t.Fatal(err)
		}
		tw.mapped = m
		tw.compare(t, rng, &dm, &dp) // loads the indexes
		before := tw.fs.ReadAts.Load()
		for range 200 {
			tw.compare(t, rng, &dm, &dp)
		}
		if n := tw.fs.ReadAts.Load() - before; noPreads && n != 0 {
			t.Fatalf("reopened: %d preads, want 0", n)
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMappingOutlivesRemovalAndTruncation: a slice of the mapping stays
// valid, holding the bytes it had, after the segment's files are removed
// (retention), after a truncation replaced them with a new file that is
// then written over, and until Close, which unmaps.
func TestMappingOutlivesRemovalAndTruncation(t *testing.T) {
	dir := t.TempDir()
	s, err := Create(vfs.Default, dir, 0, 0, Options{MapReads: true, PreallocateBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	var batches [][]byte
	for i := range int64(20) {
		b := buildBatch(t, batchSpec{base: i * 4, last: i*4 + 3, valueSize: 3000})
		batches = append(batches, bytes.Clone(b))
		if err := s.Append(i*4+3, b); err != nil {
			t.Fatal(err)
		}
	}
	sl, err := s.Slice(40, 1<<20, math.MaxInt64, true)
	if err != nil || !sl.Found {
		t.Fatal(sl, err)
	}
	held := s.Mapped(sl.Position, sl.Size)
	want := bytes.Join(batches[10:], nil)
	if held == nil || !bytes.Equal(held, want) {
		t.Fatalf("Mapped: %d bytes, want the %d bytes of batches 10..19", len(held), len(want))
	}

	// Truncation below the held range: a new file, written over with
	// other batches at the same positions.
	ns, removed, err := s.TruncateTo(20)
	if err != nil || removed == 0 {
		t.Fatal(removed, err)
	}
	for i := int64(5); i < 20; i++ {
		if err := ns.Append(i*4+3, buildBatch(t, batchSpec{base: i * 4, last: i*4 + 3, valueSize: 2900})); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(held, want) {
		t.Fatal("held slice changed after the truncation and new appends")
	}
	// The old object still reads its own (old) file through the mapping.
	if res, err := s.Read(nil, 40, 1, -1, true); err != nil || !bytes.Equal(res.Data, batches[10]) {
		t.Fatalf("old segment read after truncation: %v", err)
	}
	// Removal of the new segment's files (retention) while its mapping
	// is held.
	nsl := ns.Mapped(0, ns.Size())
	nwant := bytes.Clone(nsl)
	if err := ns.RemoveFiles(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ns.Path()); !os.IsNotExist(err) {
		t.Fatalf("file still there after RemoveFiles: %v", err)
	}
	if !bytes.Equal(nsl, nwant) || !bytes.Equal(held, want) {
		t.Fatal("held slices changed after RemoveFiles")
	}
	for _, seg := range []*Segment{s, ns} {
		if !seg.IsMapped() {
			t.Fatal("segment not mapped before Close")
		}
		if err := seg.Close(); err != nil {
			t.Fatal(err)
		}
		if seg.IsMapped() || seg.Mapped(0, 1) != nil {
			t.Fatal("mapping still there after Close")
		}
	}
}

// TestMappedReadOfShrunkFileIsAnError: a file cut under the mapping by
// someone else (the log never shortens a file below its size) makes the
// read fault; the fault is an I/O error, not a crash.
func TestMappedReadOfShrunkFileIsAnError(t *testing.T) {
	defer func(cold bool) { coldReadsPread = cold }(coldReadsPread)
	coldReadsPread = false // read through the mapping, not pread
	s, err := Create(vfs.Default, t.TempDir(), 0, 0, Options{MapReads: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range int64(64) {
		if err := s.Append(i, buildBatch(t, batchSpec{base: i, last: i, valueSize: 8000})); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := s.Read(nil, 60, 1, -1, true); err != nil || !res.Found {
		t.Fatal(res.Found, err)
	}
	if !s.IsMapped() {
		t.Fatal("not mapped")
	}
	if err := os.Truncate(s.Path(), 4096); err != nil {
		t.Fatal(err)
	}
	res, err := s.Read(nil, 60, 1, -1, true)
	if err == nil {
		t.Fatalf("read of a page past the end of the file: %d bytes, no error", len(res.Data))
	}
	t.Logf("error: %v", err)
}

// TestMappingOff: without MapReads, on MemFS (no descriptor), and when
// the process's mapping budget is used up, reads use pread and Mapped is
// nil.
func TestMappingOff(t *testing.T) {
	fill := func(s *Segment) {
		for i := range int64(8) {
			if err := s.Append(i, buildBatch(t, batchSpec{base: i, last: i, valueSize: 100})); err != nil {
				t.Fatal(err)
			}
		}
		res, err := s.Read(nil, 5, 1, -1, true)
		if err != nil || res.BatchBaseOffset != 5 {
			t.Fatal(res.BatchBaseOffset, err)
		}
		if s.IsMapped() || s.Mapped(0, 1) != nil {
			t.Fatal("mapped")
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	s, err := Create(vfs.Default, t.TempDir(), 0, 0, Options{})
	if err != nil {
		t.Fatal(err)
	}
	fill(s)
	if s, err = Create(newMemDir(t), testDir, 0, 0, Options{MapReads: true}); err != nil {
		t.Fatal(err)
	}
	fill(s)

	mapBudget.once.Do(func() { mapBudget.limit = maxMappings() })
	saved := mapBudget.used.Swap(mapBudget.limit)
	defer mapBudget.used.Add(saved - mapBudget.limit)
	if s, err = Create(vfs.Default, t.TempDir(), 0, 0, Options{MapReads: true}); err != nil {
		t.Fatal(err)
	}
	fill(s)
}

// TestMappedConcurrentReadersAndWriter: readers read through the mapping
// (and pread, for chunks not yet warm) while the writer appends past
// several mapping lengths and the warmer touches the chunks they read
// again; every batch a reader gets below the next offset it saw is whole
// and valid; the segment then closes while the warmer may still hold
// chunks of it. Run under -race.
func TestMappedConcurrentReadersAndWriter(t *testing.T) {
	s, err := Create(vfs.Default, t.TempDir(), 0, 0, Options{MapReads: true, PreallocateBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	touches := warmTouches.Load()
	var done atomic.Bool
	var wg sync.WaitGroup
	errc := make(chan error, 4)
	for r := range 3 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 3))
			var dst []byte
			for !done.Load() {
				next, err := s.ReadNextOffset()
				if err != nil || next == 0 {
					continue
				}
				o := rng.Int64N(next)
				res, err := s.Read(dst, o, 1, -1, true)
				if err == nil {
					var b record.Batch
					if b, err = record.ReadBatch(res.Data); err == nil {
						err = b.Validate()
					}
					if err == nil && (b.BaseOffset() > o || b.LastOffset() < o) {
						err = errorf("batch [%d, %d]", b.BaseOffset(), b.LastOffset())
					}
				}
				if err != nil {
					select {
					case errc <- errorf("read(%d) below next %d: %v", o, next, err):
					default:
					}
					return
				}
				dst = res.Data[:0]
			}
		})
	}
	for i := range int64(600) {
		if err := s.Append(i, buildBatch(t, batchSpec{base: i, last: i, valueSize: 10000})); err != nil {
			t.Fatal(err)
		}
	}
	done.Store(true)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if cur := s.mm.cur.Load(); cur == nil || len(cur.data) < 4<<20 || len(s.mm.mu.old) < 2 {
		t.Fatal("the mapping did not grow")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	warmer.wait()
	if warmTouches.Load() == touches {
		t.Fatal("the warmer touched no chunk: the readers never read a chunk twice")
	}
}

// TestRecoverWalksTheMapping: a mapped segment's recovery reads its
// batches from the mapping (no pread) and finds what a pread recovery
// of the same bytes finds; a file shortened under the mapping by
// someone else makes the recovery fail with an I/O error, not a crash.
func TestRecoverWalksTheMapping(t *testing.T) {
	tw := newTwins(t, Options{})
	rng := rand.New(rand.NewPCG(testseed.Seed(t, 1), 3))
	for range 200 {
		tw.appendRandom(t, rng)
	}
	before := tw.fs.ReadAts.Load()
	mr, mres, err := tw.mapped.Recover(nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := tw.fs.ReadAts.Load() - before; n != 0 {
		t.Fatalf("recovery of a mapped segment issued %d preads, want 0", n)
	}
	pr, pres, err := tw.pread.Recover(nil)
	if err != nil {
		t.Fatal(err)
	}
	if mres != pres || mres.ValidBytes != tw.mapped.Size() || mres.TruncatedBytes != 0 {
		t.Fatalf("mapped recovery %+v, pread recovery %+v, size %d", mres, pres, tw.mapped.Size())
	}
	t.Cleanup(func() { _ = mr.Close(); _ = pr.Close() })

	if err := os.Truncate(mr.Path(), 4096); err != nil {
		t.Fatal(err)
	}
	_, res, err := mr.Recover(nil)
	if err == nil || errors.Is(err, ErrCorruption) {
		// Corruption would make the log cut the segment: a fault is an
		// I/O error, which stops the open and changes nothing.
		t.Fatalf("recovery over a shortened file: %+v, error %v, want an I/O error", res, err)
	}
	t.Logf("error: %v", err)
}
