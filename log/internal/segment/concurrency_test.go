package segment

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

// TestConcurrentReadersAndWriter: readers call Read, TranslateOffset,
// FindOffsetByTimestamp and the timestamp accessors while the writer
// appends (growing both indexes) and flushes. Every offset below the next
// offset a reader saw must be readable. Run under -race.
func TestConcurrentReadersAndWriter(t *testing.T) {
	fs := newMemDir(t)
	s, err := Create(fs, testDir, 1000, 0, Options{IndexIntervalBytes: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const batches = 1500
	var done atomic.Bool
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	fail := func(format string, args ...any) {
		select {
		case errc <- errorf(format, args...):
		default:
		}
	}
	for r := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 1))
			var dst []byte
			for !done.Load() {
				next, err := s.ReadNextOffset()
				if err != nil {
					fail("next offset: %v", err)
					return
				}
				if next == 1000 {
					continue
				}
				o := 1000 + rng.Int64N(next-1000)
				res, err := s.Read(dst, o, 200, -1, true)
				if err != nil || !res.Found || res.BatchBaseOffset != o {
					fail("read(%d) below next %d: %+v, %v", o, next, res.BatchBaseOffset, err)
					return
				}
				dst = res.Data
				// Timestamps are the offsets: the first record at or
				// after ts=o is o.
				got, found, err := s.FindOffsetByTimestamp(o, 1000)
				if err != nil || !found || got != o {
					fail("find-ts(%d) = %d, %t, %v", o, got, found, err)
					return
				}
				if ts := s.LargestTimestamp(); ts < o {
					fail("largest timestamp %d below %d", ts, o)
					return
				}
			}
		}()
	}
	for i := range int64(batches) {
		o := 1000 + i
		if err := s.Append(o, buildBatch(t, batchSpec{base: o, last: o, valueSize: 10})); err != nil {
			t.Fatal(err)
		}
		if i%100 == 99 {
			if err := s.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	done.Store(true)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if n := s.offsetIdx.entriesCount(); n < batches/2 {
		t.Fatalf("only %d index entries", n)
	}
}
