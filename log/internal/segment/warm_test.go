package segment

import (
	"bytes"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tierlog/tierlog/internal/harness/countfs"
)

// warmSegment returns a mapped segment on a counting vfs.Default holding
// 64 batches of about 16 KiB (1 MiB, 16 chunks), offsets 0 to 63.
func warmSegment(t *testing.T) (*Segment, *countfs.FS) {
	t.Helper()
	fs := countfs.Wrap(vfs.Default)
	s, err := Create(fs, t.TempDir(), 0, 0, Options{MapReads: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	for i := range int64(64) {
		if err := s.Append(i, buildBatch(t, batchSpec{base: i, last: i, valueSize: 16 << 10})); err != nil {
			t.Fatal(err)
		}
	}
	return s, fs
}

// readCountingPreads reads offset o (the whole batch) and returns the
// bytes and the preads the read issued.
func readCountingPreads(t *testing.T, s *Segment, fs *countfs.FS, o int64) ([]byte, int64) {
	t.Helper()
	before := fs.ReadAts.Load()
	res, err := s.Read(nil, o, 1, -1, true)
	if err != nil || !res.Found || len(res.Data) == 0 {
		t.Fatalf("read %d: found %t, %d bytes, %v", o, res.Found, len(res.Data), err)
	}
	return res.Data, fs.ReadAts.Load() - before
}

// chunkOf returns the chunk holding the start of the batch of offset o.
func chunkOf(t *testing.T, s *Segment, o int64) int64 {
	t.Helper()
	pos, _, found, err := s.TranslateOffset(o)
	if err != nil || !found {
		t.Fatalf("translate %d: found %t, %v", o, found, err)
	}
	return pos / warmChunkBytes
}

// TestColdReadsPreadUntilWarm: the first and second reads of a chunk of
// the mapping use pread (its pages were never touched through the
// mapping), the second hands the chunk to the warmer, and once the warmer
// has touched it, reads copy from the mapping (no pread) and return the
// same bytes.
func TestColdReadsPreadUntilWarm(t *testing.T) {
	s, fs := warmSegment(t)
	first, n := readCountingPreads(t, s, fs, 20)
	if n == 0 {
		t.Fatal("first read of a cold chunk: no pread, want the read to avoid the mapping")
	}
	if !s.IsMapped() {
		t.Fatal("not mapped after a read")
	}
	if _, n := readCountingPreads(t, s, fs, 20); n == 0 {
		t.Fatal("second read of the chunk: no pread before the warmer ran")
	}
	warmer.wait()
	m := s.mm.cur.Load()
	pos, _, _, err := s.TranslateOffset(20)
	if err != nil {
		t.Fatal(err)
	}
	for c := pos / warmChunkBytes; c*warmChunkBytes < pos+int64(len(first)); c++ {
		if got := m.state(c); got != chunkWarm {
			t.Fatalf("chunk %d after two reads and the warmer: state %d, want warm", c, got)
		}
	}
	third, n := readCountingPreads(t, s, fs, 20)
	if n != 0 {
		t.Fatalf("read of a warm chunk: %d preads, want 0 (a copy from the mapping)", n)
	}
	if !bytes.Equal(first, third) {
		t.Fatal("the warm read differs from the pread")
	}
}

// TestTailChunkNeverWarms: the chunk the segment is still filling is
// never handed to the warmer, however often it is read (pages appended
// after the warmer's pass would be untouched), so reads at the tail
// always use pread; once appends fill the chunk, its reads warm it.
func TestTailChunkNeverWarms(t *testing.T) {
	s, fs := warmSegment(t)
	// Fill up to just below a chunk boundary, so the tail chunk is partial.
	size := s.Size()
	tail := size / warmChunkBytes
	for range 5 {
		if _, n := readCountingPreads(t, s, fs, 63); n == 0 {
			t.Fatal("read at the tail: no pread")
		}
	}
	warmer.wait()
	m := s.mm.cur.Load()
	if size%warmChunkBytes != 0 {
		if got := m.state(tail); got != chunkCold {
			t.Fatalf("tail chunk %d (size %d) after 5 reads: state %d, want cold", tail, size, got)
		}
	}
	for i := int64(64); s.Size() < (tail+2)*warmChunkBytes; i++ {
		if err := s.Append(i, buildBatch(t, batchSpec{base: i, last: i, valueSize: 16 << 10})); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		readCountingPreads(t, s, fs, 63)
	}
	warmer.wait()
	if _, n := readCountingPreads(t, s, fs, 63); n != 0 {
		t.Fatalf("read of the filled chunk after two reads and the warmer: %d preads, want 0", n)
	}
}

// TestWarmerSkipsClosedSegment: a chunk queued for the warmer whose
// segment closes (its mappings unmapped) before the warmer reaches it is
// not touched: the warmer checks under the mapping mutex, so it never
// reads an unmapped range (which would crash the process).
func TestWarmerSkipsClosedSegment(t *testing.T) {
	s, fs := warmSegment(t)
	readCountingPreads(t, s, fs, 1)
	m := s.mm.cur.Load()
	c := int64(10) // never read: queue it by hand
	if !m.advance(c, chunkCold, chunkQueued) {
		t.Fatalf("chunk %d, never read: state %d, want cold", c, m.state(c))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	before := warmTouches.Load()
	s.warmChunk(m, c)
	if n := warmTouches.Load() - before; n != 0 {
		t.Fatalf("the warmer touched %d chunks of a closed segment's unmapped range", n)
	}
	if got := m.state(c); got != chunkQueued {
		t.Fatalf("chunk of a closed segment: state %d, want queued (untouched)", got)
	}
}

// TestGrowthKeepsSeenChunks: a longer mapping starts with the chunks read
// in the older one seen (not warm: its page table entries are new), so
// one more read queues them.
func TestGrowthKeepsSeenChunks(t *testing.T) {
	s, fs := warmSegment(t)
	readCountingPreads(t, s, fs, 1)
	readCountingPreads(t, s, fs, 1)
	warmer.wait()
	old := s.mm.cur.Load()
	if old.state(0) != chunkWarm {
		t.Fatalf("chunk 0: state %d, want warm", old.state(0))
	}
	for i := int64(64); s.Size() <= int64(len(old.data)); i++ {
		if err := s.Append(i, buildBatch(t, batchSpec{base: i, last: i, valueSize: 16 << 10})); err != nil {
			t.Fatal(err)
		}
	}
	readCountingPreads(t, s, fs, s.nextOffset.Load()-1) // grows the mapping
	m := s.mm.cur.Load()
	if m == old {
		t.Fatal("the mapping did not grow")
	}
	if got := m.state(0); got != chunkSeen {
		t.Fatalf("chunk 0 in the longer mapping: state %d, want seen", got)
	}
	if got := m.state(10); got != chunkCold {
		t.Fatalf("chunk 10, never read: state %d, want cold", got)
	}
	readCountingPreads(t, s, fs, 1)
	warmer.wait()
	if _, n := readCountingPreads(t, s, fs, 1); n != 0 {
		t.Fatalf("read after the longer mapping warmed: %d preads, want 0", n)
	}
}

// TestOnePassWarmsNothing: reading batches once each, in any order,
// reads each whole page once: nothing is handed to the warmer (a consumer
// reading on, or a first pass, costs no touching); reading a batch again
// queues its chunk. (The batches in the segment's first 64 KiB are left
// out: Read reads them from the segment's start, readBetween, so their
// reads re-read the first pages.)
func TestOnePassWarmsNothing(t *testing.T) {
	s, fs := warmSegment(t)
	for _, o := range []int64{7, 13, 60, 30, 31, 12, 5, 8, 6, 9, 10, 11, 29, 32} {
		readCountingPreads(t, s, fs, o)
	}
	m := s.mm.cur.Load()
	for c := int64(1); c < int64(len(m.data)/warmChunkBytes); c++ {
		if st := m.state(c); st > chunkSeen {
			t.Fatalf("chunk %d after one read of each batch: state %d, want cold or seen", c, st)
		}
	}
	readCountingPreads(t, s, fs, 31)
	if st := m.state(chunkOf(t, s, 31)); st < chunkQueued {
		t.Fatalf("chunk of batch 31 read twice: state %d, want queued or warm", st)
	}
	warmer.wait()
}

// TestAppendGrowsMappingAhead: once the appends fill three quarters of a
// read segment's mapping, the writer maps it twice as long, so a reader
// at the tail never maps; a segment no reader mapped is not mapped by
// appends.
func TestAppendGrowsMappingAhead(t *testing.T) {
	s, fs := warmSegment(t) // 1 MiB of batches
	if s.IsMapped() {
		t.Fatal("mapped before any read")
	}
	readCountingPreads(t, s, fs, 0)
	m := s.mm.cur.Load()
	for i := int64(64); s.Size() <= int64(len(m.data))/4*3; i++ {
		if cur := s.mm.cur.Load(); cur != m {
			t.Fatalf("grown at size %d, before three quarters of %d", s.Size(), len(m.data))
		}
		if err := s.Append(i, buildBatch(t, batchSpec{base: i, last: i, valueSize: 16 << 10})); err != nil {
			t.Fatal(err)
		}
	}
	if cur := s.mm.cur.Load(); len(cur.data) != 2*len(m.data) {
		t.Fatalf("size %d past three quarters of the %d-byte mapping: current mapping %d bytes, want %d",
			s.Size(), len(m.data), len(cur.data), 2*len(m.data))
	}
}
