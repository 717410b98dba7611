package segment

import (
	"encoding/binary"
	"errors"
	"testing"
)

// fuzzLog is the .log the index fuzz targets put arbitrary index files
// beside: 12 single-record batches, offsets [100, 112), timestamps equal
// to the offsets.
func fuzzLog(t testing.TB) []byte {
	all, _ := batchesOf(t, 100, 112, 20)
	return all
}

// checkIndexedSegment opens the segment at base 100 with the given index
// files (nil: absent) beside fuzzLog and checks that every lookup answers
// as the .log alone says: reads, offset translation, timestamp search, the
// next offset. An index file is a hint: whatever its bytes, a lookup is
// right or fails with ErrCorruption (the index claims the .log lost
// bytes), never a panic. The one exception is the time index, whose
// entries are not checked against the .log: a wrong one may make a
// timestamp search answer a later record at or above the timestamp.
func checkIndexedSegment(t *testing.T, offsetIndex, timeIndex []byte) {
	fs := newMemDir(t)
	data := fuzzLog(t)
	write := func(name string, b []byte) {
		if b != nil {
			writeAt(t, fs, fs.PathJoin(testDir, name), 0, b)
		}
	}
	write(LogFileName(100), data)
	write(IndexFileName(100), offsetIndex)
	write(TimeIndexFileName(100), timeIndex)
	s, err := Open(fs, testDir, 100, 0, Options{IndexIntervalBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ok := func(err error) bool {
		if err != nil && !errors.Is(err, ErrCorruption) {
			t.Fatalf("untyped error %v", err)
		}
		return err == nil
	}
	for o := int64(90); o <= 113; o++ {
		res, err := s.Read(nil, o, 1<<20, -1, true)
		if !ok(err) {
			continue
		}
		if want := o >= 90 && o < 112; res.Found != want {
			t.Fatalf("read %d: found %v", o, res.Found)
		}
		if res.Found && res.BatchBaseOffset != max(o, 100) {
			t.Fatalf("read %d: batch %d", o, res.BatchBaseOffset)
		}
		if res.Found && string(res.Data) != string(data[res.Position:]) {
			t.Fatalf("read %d: data from %d is not the .log's", o, res.Position)
		}
	}
	for ts := int64(95); ts <= 113; ts++ {
		r, found, err := s.FindByTimestamp(ts, 100)
		if !ok(err) {
			continue
		}
		// A wrong time index can only make the answer later: a record
		// at or above ts all the same (timestamps equal offsets here).
		exact := timeIndex == nil
		if found != (ts < 112) || (found && exact && r.Offset != max(ts, 100)) ||
			(found && (r.Timestamp < ts || r.Offset != r.Timestamp || r.Offset < 100)) {
			t.Fatalf("find ts %d: %v %+v", ts, found, r)
		}
	}
	if n, err := s.ReadNextOffset(); ok(err) && n != 112 {
		t.Fatalf("next offset %d", n)
	}
}

// FuzzOffsetIndexFile: arbitrary bytes as a segment's .index file.
func FuzzOffsetIndexFile(f *testing.F) {
	entry := func(rel, pos uint32) []byte {
		return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, rel), pos)
	}
	var good []byte
	_, ends := batchesOf(f, 100, 112, 20)
	for i := 1; i < len(ends); i++ {
		good = append(good, entry(uint32(i), uint32(ends[i-1]))...)
	}
	f.Add([]byte(nil))
	f.Add(good)
	f.Add(good[:len(good)-3])                         // torn last entry
	f.Add(append(entry(5, 10), entry(3, 20)...))      // out of order
	f.Add(append(good, entry(20, 1<<20)...))          // beyond the .log
	f.Add(entry(0xffffffff, 0xffffffff))              // negative fields
	f.Add(append(entry(2, uint32(ends[3])), good...)) // out of order
	f.Add(entry(2, uint32(ends[5])))                  // points at a later batch
	f.Add(entry(8, uint32(ends[1])))                  // points at an earlier batch
	f.Add(entry(3, uint32(ends[2]+7)))                // points inside a batch
	f.Add([]byte("0000\x00\x00\x04\x00"))             // last entry near the end: no whole header there
	f.Fuzz(func(t *testing.T, idx []byte) {
		if len(idx) > 1<<12 {
			return
		}
		checkIndexedSegment(t, idx, nil)
	})
}

// FuzzTimeIndexFile: arbitrary bytes as a segment's .timeindex file.
func FuzzTimeIndexFile(f *testing.F) {
	entry := func(ts int64, rel uint32) []byte {
		return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(nil, uint64(ts)), rel)
	}
	var good []byte
	for i := int64(1); i < 12; i++ {
		good = append(good, entry(100+i, uint32(i))...)
	}
	f.Add([]byte(nil))
	f.Add(good)
	f.Add(good[:len(good)-5])
	f.Add(append(entry(110, 10), entry(105, 5)...)) // timestamps going back
	f.Add(entry(-1, 0xffffffff))
	f.Add(entry(200, 50)) // beyond the segment's offsets
	f.Add([]byte("\x00\x00\x00\x00\x00\x00\x0000000"))
	f.Fuzz(func(t *testing.T, idx []byte) {
		if len(idx) > 1<<12 {
			return
		}
		checkIndexedSegment(t, nil, idx)
	})
}

// TestTimeIndexEntryBeyondSegment: a time-index entry for an offset past
// the segment's records is ignored, so a timestamp search still finds the
// first record at or above the timestamp (not the last record).
func TestTimeIndexEntryBeyondSegment(t *testing.T) {
	fs := newMemDir(t)
	writeAt(t, fs, fs.PathJoin(testDir, LogFileName(100)), 0, fuzzLog(t))
	entry := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(nil, 48), 1<<20)
	writeAt(t, fs, fs.PathJoin(testDir, TimeIndexFileName(100)), 0, entry)
	s, err := Open(fs, testDir, 100, 0, Options{IndexIntervalBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, found, err := s.FindByTimestamp(95, 100)
	if err != nil || !found || r.Offset != 100 {
		t.Fatalf("find ts 95: %v %v %+v", err, found, r)
	}
}
