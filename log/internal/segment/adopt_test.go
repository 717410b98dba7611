package segment

import (
	"bytes"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tierlog/tierlog/internal/harness/countfs"
)

// TestRecoverLeavesIndexFiles: recovery installs the rebuilt index
// entries without writing or fsyncing anything when the index files hold
// a prefix of them (what a crash leaves when the last index write pointed
// at durable bytes), and the next flush appends the rest in place. Index
// files holding an entry recovery did not rebuild (here: the .log lost
// its last batch after its index entry was written) are left as found by
// recovery too, and the next flush replaces them: after it, each file
// holds exactly the segment's entries, as Kafka's format requires.
func TestRecoverLeavesIndexFiles(t *testing.T) {
	for _, tc := range []struct {
		name    string
		lostLog bool // the .log loses its last batch, its index entry stays
	}{{"prefix", false}, {"entry beyond the log", true}} {
		t.Run(tc.name, func(t *testing.T) {
			mem := newMemDir(t)
			opts := Options{IndexIntervalBytes: 1} // an entry per batch
			s, err := Create(mem, testDir, 0, 0, opts)
			if err != nil {
				t.Fatal(err)
			}
			data, ends := batchesOf(t, 0, 8, 100)
			if err := s.Append(7, data); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil { // index files written, fsynced
				t.Fatal(err)
			}
			logPath := mem.PathJoin(testDir, LogFileName(0))
			idxPath := mem.PathJoin(testDir, IndexFileName(0))
			if tc.lostLog {
				replaceFile(t, mem, logPath, data[:ends[len(ends)-2]])
			}
			before := readFileBytes(t, mem, idxPath)

			cfs := countfs.Wrap(mem)
			s, err = Open(cfs, testDir, 0, 0, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ns, res, err := s.Recover(nil)
			if err != nil || ns != s || res.TruncatedBytes != 0 {
				t.Fatalf("recover: %v, %+v", err, res)
			}
			if w, y := cfs.Writes.Load(), cfs.Syncs.Load(); w != 0 || y != 0 {
				t.Fatalf("recovery made %d writes and %d fsyncs, want none", w, y)
			}
			if got := readFileBytes(t, mem, idxPath); !bytes.Equal(got, before) {
				t.Fatalf("recovery changed the index file: %d bytes, were %d", len(got), len(before))
			}
			checkFiles := func(when string) {
				t.Helper()
				if err := s.Flush(); err != nil {
					t.Fatal(err)
				}
				for _, x := range []*index{&s.offsetIdx.index, &s.timeIdx.index} {
					x.mu.RLock()
					want := bytes.Clone(x.mu.entries)
					x.mu.RUnlock()
					if got := readFileBytes(t, mem, x.path); !bytes.Equal(got, want) {
						t.Fatalf("%s after %s: %x, want its entries %x", x.path, when, got, want)
					}
				}
			}
			checkFiles("the first flush")
			next, _ := s.ReadNextOffset()
			more, _ := batchesOf(t, next, next+2, 50)
			if err := s.Append(next+1, more); err != nil {
				t.Fatal(err)
			}
			checkFiles("an append and a flush")
		})
	}
}

// replaceFile replaces path with data, fsynced.
func replaceFile(t testing.TB, fs vfs.FS, path string, data []byte) {
	t.Helper()
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		t.Fatal(err)
	}
}
