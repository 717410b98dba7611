package segment

import (
	"bytes"
	"math"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tierlog/tierlog/internal/harness/countfs"
)

// preadSegment fills a segment on a counting FS with n batches of count
// records of valueSize bytes each, and reopens it from disk when reopen
// (the indexes then come from their files).
func preadSegment(t *testing.T, n, count, valueSize int, reopen bool) (*Segment, *countfs.FS, [][]byte) {
	t.Helper()
	fs := countfs.Wrap(vfs.NewMem())
	if err := fs.MkdirAll(testDir, 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := Create(fs, testDir, 0, 0, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var batches [][]byte
	for i := range n {
		base := int64(i * count)
		b := buildBatch(t, batchSpec{base: base, last: base + int64(count) - 1, valueSize: valueSize})
		batches = append(batches, bytes.Clone(b))
		if err := s.Append(base+int64(count)-1, b); err != nil {
			t.Fatal(err)
		}
	}
	if reopen {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if s, err = Open(fs, testDir, 0, 0, Options{}); err != nil {
			t.Fatal(err)
		}
		// Load the indexes, which costs reads of their own.
		if _, _, _, err := s.TranslateOffset(0); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, fs, batches
}

// TestReadPreadCount counts the preads of a point read (Read of maxSize 1
// with minOneMessage: Kafka's answer is the batch holding the offset) at
// every offset of a segment: one, whether the batch holding the offset is
// indexed or not (the batches between two close entries come in one
// read), but two for a large first batch; never the three of a floor
// lookup plus header scan.
// Each read must return what the header scan returns.
func TestReadPreadCount(t *testing.T) {
	for _, tc := range []struct {
		name             string
		batches, records int
		valueSize        int
		reopen           bool
		// maxIndexed and maxUnindexed bound the preads of a read whose
		// batch is indexed, resp. not.
		maxIndexed, maxUnindexed int64
	}{
		// 16 KiB batches (every batch but the first is indexed).
		{name: "batch=16KiB", batches: 40, records: 16, valueSize: 1000, maxIndexed: 1, maxUnindexed: 1},
		{name: "batch=16KiB/reopened", batches: 40, records: 16, valueSize: 1000, reopen: true, maxIndexed: 1, maxUnindexed: 1},
		// 1 KiB batches: about one in five is indexed.
		{name: "batch=1KiB", batches: 200, records: 4, valueSize: 240, maxIndexed: 1, maxUnindexed: 1},
		// 100 KiB batches: the first is too large to read with the second.
		{name: "batch=100KiB", batches: 6, records: 100, valueSize: 1000, maxIndexed: 1, maxUnindexed: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, fs, batches := preadSegment(t, tc.batches, tc.records, tc.valueSize, tc.reopen)
			entries, _, err := s.IndexBytes()
			if err != nil {
				t.Fatal(err)
			}
			indexed := map[int64]bool{} // last offsets of indexed batches
			for i := 0; i+offsetEntrySize <= len(entries); i += offsetEntrySize {
				indexed[be32(entries[i:])] = true
			}
			if len(indexed) == 0 {
				t.Fatal("no index entries")
			}
			var dst, want []byte
			hist := map[int64]int{}
			for i, b := range batches {
				last := int64((i+1)*tc.records - 1)
				for o := int64(i * tc.records); o <= last; o++ {
					before := fs.ReadAts.Load()
					res, err := s.Read(dst, o, 1, -1, true)
					got := fs.ReadAts.Load() - before
					if err != nil || !res.Found || !bytes.Equal(res.Data, b) {
						t.Fatalf("Read(%d) = %d bytes, found %t, %v; want batch %d (%d bytes)", o, len(res.Data), res.Found, err, i, len(b))
					}
					limit := tc.maxUnindexed
					if indexed[last] {
						limit = tc.maxIndexed
					}
					if got > limit {
						t.Fatalf("Read(%d) in batch %d (indexed %t): %d preads, want <= %d", o, i, indexed[last], got, limit)
					}
					hist[got]++
					// The reference: the floor lookup and header scan.
					ref, err := s.readScanned(want, readRequest{target: o, maxSize: 1, maxPosition: s.Size(), end: s.Size(), minOne: true})
					if err != nil || !bytes.Equal(ref.Data, res.Data) || ref.Position != res.Position || ref.BatchBaseOffset != res.BatchBaseOffset {
						t.Fatalf("Read(%d) = pos %d base %d, the scan says pos %d base %d (%v)", o, res.Position, res.BatchBaseOffset, ref.Position, ref.BatchBaseOffset, err)
					}
					dst, want = res.Data[:0], ref.Data[:0]
				}
			}
			t.Logf("preads per read: %v", hist)
		})
	}
}

// TestTranslateAndSlicePreadCount: positioning alone (TranslateOffset,
// and Slice for a sendfile-style broker) reads one header for an indexed
// batch, and Slice a second one for a bound inside the segment.
func TestTranslateAndSlicePreadCount(t *testing.T) {
	const records = 16
	s, fs, batches := preadSegment(t, 40, records, 1000, false)
	pos := int64(0)
	for i, b := range batches {
		o := int64(i*records + records/2)
		before := fs.ReadAts.Load()
		p, base, found, err := s.TranslateOffset(o)
		if n := fs.ReadAts.Load() - before; i > 0 && n != 1 {
			t.Fatalf("TranslateOffset(%d): %d preads, want 1", o, n)
		}
		if err != nil || !found || p != pos || base != int64(i*records) {
			t.Fatalf("TranslateOffset(%d) = %d, %d, %t, %v; want %d, %d", o, p, base, found, err, pos, i*records)
		}
		before = fs.ReadAts.Load()
		sl, err := s.Slice(o, 1, math.MaxInt64, true)
		if n := fs.ReadAts.Load() - before; i > 0 && n != 1 {
			t.Fatalf("Slice(%d): %d preads, want 1", o, n)
		}
		if err != nil || !sl.Found || sl.Position != pos || sl.Size != int64(len(b)) || sl.BatchBaseOffset != int64(i*records) {
			t.Fatalf("Slice(%d) = %+v, %v; want position %d size %d", o, sl, err, pos, len(b))
		}
		// The bytes Slice names are the batch.
		got := make([]byte, sl.Size)
		if _, err := s.File().ReadAt(got, sl.Position); err != nil || !bytes.Equal(got, b) {
			t.Fatalf("Slice(%d): bytes at %d differ from the batch (%v)", o, sl.Position, err)
		}
		pos += int64(len(b))
	}
	// A bound: the range stops before the batch holding it, whole
	// batches only up to the size limit.
	before := fs.ReadAts.Load()
	sl, err := s.Slice(5*records, 1<<20, 9*records+3, false)
	if n := fs.ReadAts.Load() - before; n != 2 {
		t.Fatalf("Slice with a bound: %d preads, want 2", n)
	}
	var want int64
	for _, b := range batches[5:9] {
		want += int64(len(b))
	}
	if err != nil || sl.Size != want || sl.BatchBaseOffset != 5*records {
		t.Fatalf("Slice with a bound = %+v, %v; want size %d", sl, err, want)
	}
	// A bound at the start: nothing to send.
	if sl, err := s.Slice(5*records+1, 1<<20, 5*records+2, true); err != nil || !sl.Found || sl.Size != 0 {
		t.Fatalf("Slice with the bound in the first batch = %+v, %v; want found, size 0", sl, err)
	}
	// Past the end: not found.
	if sl, err := s.Slice(int64(len(batches)*records), 1, math.MaxInt64, true); err != nil || sl.Found {
		t.Fatalf("Slice past the end = %+v, %v; want not found", sl, err)
	}
}
