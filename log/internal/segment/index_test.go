package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/tierlog/tierlog/internal/invariants"
)

func newTestOffsetIndex(base int64, maxBytes int) *offsetIndex {
	x := &offsetIndex{baseOffset: base}
	x.init("t.index", offsetEntrySize, maxBytes)
	x.install(nil, 0, false)
	return x
}

func newTestTimeIndex(base int64, maxBytes int) *timeIndex {
	x := &timeIndex{baseOffset: base}
	x.init("t.timeindex", timeEntrySize, maxBytes)
	x.install(nil, 0, false)
	return x
}

func TestOffsetIndexLookup(t *testing.T) {
	x := newTestOffsetIndex(100, 1024)
	for _, e := range [][2]int64{{105, 500}, {110, 1000}, {120, 2000}} {
		if err := x.append(e[0], e[1]); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ target, off, pos int64 }{
		{0, 100, 0}, {100, 100, 0}, {104, 100, 0}, {105, 105, 500}, {109, 105, 500},
		{110, 110, 1000}, {119, 110, 1000}, {120, 120, 2000}, {math.MaxInt64, 120, 2000},
	} {
		if off, pos := x.lookup(tc.target); off != tc.off || pos != tc.pos {
			t.Errorf("lookup(%d) = (%d, %d), want (%d, %d)", tc.target, off, pos, tc.off, tc.pos)
		}
	}
	if off, pos := newTestOffsetIndex(7, 64).lookup(100); off != 7 || pos != 0 {
		t.Errorf("empty lookup = (%d, %d), want (7, 0)", off, pos)
	}
	// Truncation keeps entries below the offset.
	for _, tc := range []struct {
		offset int64
		keep   int
	}{{100, 0}, {105, 0}, {106, 1}, {110, 1}, {111, 2}, {121, 3}} {
		if got := len(x.entriesBelow(tc.offset)) / offsetEntrySize; got != tc.keep {
			t.Errorf("entriesBelow(%d) keeps %d, want %d", tc.offset, got, tc.keep)
		}
	}
}

func TestOffsetIndexAppendRules(t *testing.T) {
	x := newTestOffsetIndex(0, 3*offsetEntrySize+5) // capacity 3 (rounded down)
	if x.capacity != 3 {
		t.Fatalf("capacity %d", x.capacity)
	}
	mustErr := func(err, want error) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Fatalf("err %v, want %v", err, want)
		}
	}
	if err := x.append(1, 10); err != nil {
		t.Fatal(err)
	}
	mustErr(x.append(1, 20), ErrIndexOrder) // equal offset
	mustErr(x.append(0, 20), ErrIndexOrder) // smaller offset
	mustErr(x.append(2, 10), ErrIndexOrder) // equal position
	mustErr(x.append(-1, 20), ErrOffsetOverflow)
	mustErr(x.append(math.MaxInt32+1, 20), ErrOffsetOverflow)
	if err := x.append(math.MaxInt32-1, 20); err != nil {
		t.Fatal(err)
	}
	if x.isFull() {
		t.Fatal("full at 2 of 3")
	}
	if err := x.append(math.MaxInt32, 30); err != nil {
		t.Fatal(err)
	}
	if !x.isFull() {
		t.Fatal("not full at 3 of 3")
	}
	mustErr(x.append(math.MaxInt32, 40), ErrIndexFull)
}

func TestTimeIndexRules(t *testing.T) {
	x := newTestTimeIndex(50, 3*timeEntrySize) // capacity 3, full at 2
	if ts, off := x.lookup(1000); ts != noTimestamp || off != 50 {
		t.Fatalf("empty lookup = (%d, %d)", ts, off)
	}
	// No timestamp on an empty index: nothing to record.
	if err := x.maybeAppend(noTimestamp, 50, false); err != nil || x.entriesCount() != 0 {
		t.Fatalf("append -1: %v, %d entries", err, x.entriesCount())
	}
	if err := x.maybeAppend(100, 52, false); err != nil {
		t.Fatal(err)
	}
	// Equal timestamp: skipped silently.
	if err := x.maybeAppend(100, 53, false); err != nil || x.entriesCount() != 1 {
		t.Fatalf("equal ts: %v, %d entries", err, x.entriesCount())
	}
	if err := x.maybeAppend(99, 54, false); !errors.Is(err, ErrIndexOrder) {
		t.Fatalf("older ts: %v", err)
	}
	if err := x.maybeAppend(200, 51, false); !errors.Is(err, ErrIndexOrder) {
		t.Fatalf("older offset: %v", err)
	}
	if x.isFull() {
		t.Fatal("full at 1")
	}
	if err := x.maybeAppend(200, 55, false); err != nil {
		t.Fatal(err)
	}
	if !x.isFull() {
		t.Fatal("not full at capacity-1")
	}
	if err := x.maybeAppend(300, 56, false); !errors.Is(err, ErrIndexFull) {
		t.Fatalf("append when full: %v", err)
	}
	// The reserved slot takes the final entry.
	if err := x.maybeAppend(300, 56, true); err != nil {
		t.Fatal(err)
	}
	if err := x.maybeAppend(400, 57, true); !errors.Is(err, ErrIndexFull) {
		t.Fatalf("append beyond capacity: %v", err)
	}
	for _, tc := range []struct{ ts, wantTs, wantOff int64 }{
		{99, noTimestamp, 50}, {100, 100, 52}, {199, 100, 52}, {200, 200, 55}, {1000, 300, 56},
	} {
		if ts, off := x.lookup(tc.ts); ts != tc.wantTs || off != tc.wantOff {
			t.Errorf("lookup(%d) = (%d, %d), want (%d, %d)", tc.ts, ts, off, tc.wantTs, tc.wantOff)
		}
	}
	if got := len(x.entriesBelow(55)) / timeEntrySize; got != 1 {
		t.Errorf("entriesBelow(55) keeps %d", got)
	}
}

func TestValidateIndexEntries(t *testing.T) {
	off := func(pairs ...int32) []byte {
		var b []byte
		for _, v := range pairs {
			b = binary.BigEndian.AppendUint32(b, uint32(v))
		}
		return b
	}
	for _, tc := range []struct {
		name string
		b    []byte
		ok   bool
	}{
		{"empty", nil, true},
		{"good", off(1, 10, 2, 20), true},
		{"offset not increasing", off(2, 10, 2, 20), false},
		{"position not increasing", off(1, 20, 2, 20), false},
		{"negative offset", off(-1, 10), false},
		{"position past the log", off(1, 10, 2, 1000), false},
		{"partial", off(1, 10)[:6], false},
	} {
		if got := validateOffsetEntries(tc.b, 1000); got != tc.ok {
			t.Errorf("%s: %t, want %t", tc.name, got, tc.ok)
		}
	}
	tim := func(ts int64, rel int32) []byte {
		return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(nil, uint64(ts)), uint32(rel))
	}
	cat := func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
	for _, tc := range []struct {
		name string
		b    []byte
		ok   bool
	}{
		{"good", cat(tim(5, 1), tim(6, 3)), true},
		{"older ts", cat(tim(6, 1), tim(5, 3)), false},
		{"older offset", cat(tim(5, 3), tim(6, 1)), false},
		{"negative offset", tim(5, -1), false},
	} {
		if got := validateTimeEntries(tc.b); got != tc.ok {
			t.Errorf("time %s: %t, want %t", tc.name, got, tc.ok)
		}
	}
}

// TestIndexFilesLoadedLazily: a reopened segment reads its index files on
// first use and holds no descriptor for them; corrupt files are discarded
// and rebuilt from the .log (same entries as the original); a torn
// trailing partial entry is dropped.
func TestIndexFilesLoadedLazily(t *testing.T) {
	fs := newMemDir(t)
	opts := Options{IndexIntervalBytes: 100}
	s, err := Create(fs, testDir, 0, 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	all, _ := batchesOf(t, 0, 30, 50)
	if err := s.Append(29, all); err != nil {
		t.Fatal(err)
	}
	want := formatIndexes(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	idxPath := fs.PathJoin(testDir, IndexFileName(0))
	timePath := fs.PathJoin(testDir, TimeIndexFileName(0))
	good, goodTime := readFileBytes(t, fs, idxPath), readFileBytes(t, fs, timePath)

	check := func(name string, damage func()) {
		t.Helper()
		writeAt(t, fs, idxPath, 0, good)
		writeAt(t, fs, timePath, 0, goodTime)
		damage()
		s, err := Open(fs, testDir, 0, 0, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if s.offsetIdx.loaded.Load() || s.timeIdx.loaded.Load() {
			t.Fatalf("%s: indexes loaded by Open", name)
		}
		res, err := s.Read(nil, 17, 1000, -1, false)
		if err != nil || !res.Found || res.BatchBaseOffset != 17 {
			t.Fatalf("%s: read(17) = %+v, %v", name, res, err)
		}
		if got := formatIndexes(t, s); got != want {
			t.Fatalf("%s: indexes\n%s\nwant\n%s", name, got, want)
		}
		if s.offsetIdx.w.file != nil || s.timeIdx.w.file != nil {
			t.Fatalf("%s: index handle held by a reader", name)
		}
	}
	check("intact", func() {})
	check("offsets out of order", func() { writeAt(t, fs, idxPath, 8, []byte{0, 0, 0, 0}) })
	check("position past the end", func() { writeAt(t, fs, idxPath, 4, []byte{0x7f, 0, 0, 0}) })
	check("time index out of order", func() { writeAt(t, fs, timePath, 0, []byte{0x7f}) })
	check("huge garbage file", func() { writeAt(t, fs, idxPath, 1<<20, []byte{1}) })
	check("missing files", func() {
		_ = fs.Remove(idxPath)
		_ = fs.Remove(timePath)
	})
	// A torn partial entry is dropped; the rest of the file is trusted.
	writeAt(t, fs, idxPath, 0, good)
	writeAt(t, fs, idxPath, int64(len(good)), []byte{1, 2, 3})
	s, err = Open(fs, testDir, 0, 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.loadOffsetIndex(); err != nil {
		t.Fatal(err)
	}
	if s.offsetIdx.mu.fileStale || s.offsetIdx.mu.fileLen != len(good) {
		t.Fatalf("torn entry: stale %t fileLen %d", s.offsetIdx.mu.fileStale, s.offsetIdx.mu.fileLen)
	}
	// The next write overwrites the partial entry.
	more, _ := batchesOf(t, 30, 40, 50)
	if err := s.Append(39, more); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if b := readFileBytes(t, fs, idxPath); len(b)%offsetEntrySize != 0 || !validateOffsetEntries(b, s.Size()) {
		t.Fatalf("index file after append: %d bytes, valid %t", len(b), validateOffsetEntries(b, s.Size()))
	}
	_ = s.Close()
}

func TestAppendErrors(t *testing.T) {
	fs := newMemDir(t)
	s, err := Create(fs, testDir, 100, 0, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := Create(fs, testDir, 100, 0, Options{}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("second create: %v", err)
	}
	b := buildBatch(t, batchSpec{base: 100, last: 101})
	var overflow *OffsetOverflowError
	if err := s.Append(100+math.MaxInt32+1, b); !errors.As(err, &overflow) || !errors.Is(err, ErrOffsetOverflow) {
		t.Fatalf("overflow: %v", err)
	}
	if err := s.Append(99, b); !errors.Is(err, ErrOffsetOverflow) {
		t.Fatalf("below base: %v", err)
	}
	if err := s.Append(101, b[:len(b)-1]); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("short batch: %v", err)
	}
	if err := s.Append(101, buildBatch(t, batchSpec{base: 100, last: 101})); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(101, buildBatch(t, batchSpec{base: 101, last: 101})); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("offset going back: %v", err)
	}
	if s.Size() != int64(len(b)) {
		t.Fatalf("size %d after failed appends", s.Size())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if err := s.Append(102, buildBatch(t, batchSpec{base: 102, last: 102})); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
	if _, err := s.Read(nil, 100, 100, -1, false); !errors.Is(err, ErrClosed) {
		t.Fatalf("read after close: %v", err)
	}
}

func TestTruncateAssertsBatchBoundary(t *testing.T) {
	if !invariants.Enabled {
		t.Skip("assertion compiled out")
	}
	fs := newMemDir(t)
	s, err := Create(fs, testDir, 0, 0, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Append(3, buildBatch(t, batchSpec{base: 0, last: 3})); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("TruncateTo(2) inside batch 0..3 did not panic")
		}
	}()
	_, _, _ = s.TruncateTo(2)
}

func TestParseFileName(t *testing.T) {
	for _, tc := range []struct {
		name string
		off  int64
		kind FileKind
		ok   bool
	}{
		{LogFileName(42), 42, KindLog, true},
		{IndexFileName(42), 42, KindIndex, true},
		{TimeIndexFileName(math.MaxInt64), math.MaxInt64, KindTimeIndex, true},
		{TxnIndexFileName(0), 0, KindTxnIndex, true},
		{SnapshotFileName(7), 7, KindSnapshot, true},
		{tempName(LogFileName(42)), 42, KindTemp, true},
		{tempName(IndexFileName(3)), 3, KindTemp, true},
		{"00000000000000000042.txt", 0, KindUnknown, false},
		{"0000000000000000042.log", 0, KindUnknown, false},
		{"99999999999999999999.log", 0, KindUnknown, false},
		{"leader-epoch-checkpoint", 0, KindUnknown, false},
		{"0000000000000000004a.log", 0, KindUnknown, false},
	} {
		off, kind, ok := ParseFileName(tc.name)
		if off != tc.off || kind != tc.kind || ok != tc.ok {
			t.Errorf("ParseFileName(%q) = %d, %s, %t; want %d, %s, %t", tc.name, off, kind, ok, tc.off, tc.kind, tc.ok)
		}
	}
	if LogFileName(42) != "00000000000000000042.log" {
		t.Fatal(LogFileName(42))
	}
}

func TestOptionsValidation(t *testing.T) {
	fs := newMemDir(t)
	for _, o := range []Options{
		{IndexIntervalBytes: -1}, {MaxIndexBytes: 11}, {MaxBatchBytes: 10}, {RollJitterMs: -1},
	} {
		if _, err := Create(fs, testDir, 0, 0, o); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%+v: %v", o, err)
		}
	}
	if _, err := Create(fs, testDir, -1, 0, Options{}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("negative base: %v", err)
	}
	if _, err := Open(fs, testDir, 5, 0, Options{}); err == nil {
		t.Error("open of a missing segment succeeded")
	}
}

// TestRemoveFilesKeepsReaders: after RemoveFiles the files are gone but
// the segment still reads (open handles), writes nothing on Close, and
// Delete of a superseded segment leaves the new segment's files alone.
func TestRemoveFilesKeepsReaders(t *testing.T) {
	fs := newMemDir(t)
	s, err := Create(fs, testDir, 0, 0, Options{IndexIntervalBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	all, _ := batchesOf(t, 0, 10, 20)
	if err := s.Append(9, all); err != nil {
		t.Fatal(err)
	}
	ns, _, err := s.TruncateTo(5)
	if err != nil || ns == s {
		t.Fatalf("truncate: %v", err)
	}
	if err := s.Delete(); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Stat(ns.Path()); err != nil {
		t.Fatalf("Delete of the old segment removed the new one's file: %v", err)
	}
	if err := ns.RemoveFiles(); err != nil {
		t.Fatal(err)
	}
	if names, _ := fs.List(testDir); len(names) != 0 {
		t.Fatalf("files left: %v", names)
	}
	if res, err := ns.Read(nil, 3, 1000, -1, false); err != nil || !res.Found || res.BatchBaseOffset != 3 {
		t.Fatalf("read after RemoveFiles: %+v, %v", res, err)
	}
	if err := ns.Close(); err != nil {
		t.Fatal(err)
	}
	if names, _ := fs.List(testDir); len(names) != 0 {
		t.Fatalf("Close recreated files: %v", names)
	}
}
