package segment

import (
	"bytes"
	"fmt"
	"github.com/tierlog/tierlog/internal/harness/crashtest"
	"github.com/tierlog/tierlog/internal/harness/testseed"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tierlog/tierlog/log/record"
)

// crashModel is what a crash may leave of the .log: after Open + Recover,
// either a batch-aligned prefix of model at least durable bytes long, or,
// when exact is set, exactly one of the listed contents.
type crashModel struct {
	model   []byte   // every byte appended to the live segment
	ends    []int64  // batch end positions in model
	durable int64    // bytes fsynced
	exact   [][]byte // during a truncation or recovery: the only allowed contents
}

// TestCrashAtEveryStep runs appends and flushes, a TruncateTo, more
// appends, and a Recover of a garbage tail, and after every mutating file
// operation takes crash clones keeping 0% and 50% of the unsynced data.
// Each clone must Open and Recover, and hold a valid prefix that contains
// everything flushed (for truncation and recovery: exactly the old or the
// new content, never a mix), readable through the rebuilt indexes.
func TestCrashAtEveryStep(t *testing.T) {
	seed := testseed.Seed(t, 0x5e6)
	rng := rand.New(rand.NewPCG(seed, 0x5e6))
	opts := Options{IndexIntervalBytes: 300}
	mem := newMemDir(t)
	if err := syncDir(mem, ""); err != nil {
		t.Fatal(err)
	}
	logPath := mem.PathJoin(testDir, LogFileName(0))
	var m crashModel
	crashPoints := 0
	check := func(op, name string) {
		crashPoints++
		for _, pct := range []int{0, 50} {
			clone := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rng})
			if err := checkCrashClone(t, clone, opts, &m); err != nil {
				t.Fatalf("crash point %d after %s %s, %d%% unsynced kept: %v (seed %d)",
					crashPoints, op, name, pct, err, seed)
			}
		}
	}
	hfs := crashtest.AfterEach(mem, check)

	s, err := Create(hfs, testDir, 0, 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	appendN := func(n int) {
		t.Helper()
		next, _ := s.ReadNextOffset()
		var buf []byte
		for i := range n {
			o := next + int64(i)
			b := buildBatch(t, batchSpec{base: o, last: o + int64(rng.IntN(3)), valueSize: rng.IntN(200)})
			rb, _ := record.ReadBatch(b)
			next = rb.NextOffset()
			buf = append(buf, b...)
			m.model = append(m.model, b...)
			m.ends = append(m.ends, int64(len(m.model)))
		}
		if err := s.Append(next-1, buf); err != nil {
			t.Fatal(err)
		}
	}
	flush := func() {
		t.Helper()
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
		m.durable = int64(len(m.model))
	}
	for i := range 12 {
		appendN(1 + i%3)
		if i%3 == 2 {
			flush()
		}
	}
	flush()

	// Truncation: the old content is durable; a crash leaves it or the
	// truncated one.
	cutIdx := len(m.ends) / 2
	cut := m.ends[cutIdx-1]
	rb, _ := record.ReadBatch(m.model[cut:])
	old := bytes.Clone(m.model)
	m.exact = [][]byte{old, old[:cut]}
	ns, removed, err := s.TruncateTo(rb.BaseOffset())
	if err != nil || removed != int64(len(old))-cut {
		t.Fatalf("truncate: removed %d, %v", removed, err)
	}
	m.exact = nil
	m.model, m.ends, m.durable = m.model[:cut], m.ends[:cutIdx], cut
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = ns
	for i := range 6 {
		appendN(2)
		if i%2 == 1 {
			flush()
		}
	}

	// Recovery of a garbage tail: the live file gets garbage (durable),
	// the segment is reopened and recovered. A crash leaves the old file
	// or the cut one; either recovers to the same valid prefix.
	flush()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	valid := bytes.Clone(m.model)
	writeAt(t, mem, logPath, int64(len(valid)), bytes.Repeat([]byte{0xEE}, 700))
	m.exact = [][]byte{valid}
	s, err = Open(hfs, testDir, 0, 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	ns, res, err := s.Recover(nil)
	if err != nil || res.TruncatedBytes != 700 || res.Tail == nil || res.Tail.Torn() {
		t.Fatalf("recover: %+v, %v", res, err)
	}
	_ = s.Close()
	_ = ns.Close()
	if crashPoints < 60 {
		t.Fatalf("only %d crash points", crashPoints)
	}
	t.Logf("%d crash points, 2 clones each", crashPoints)
}

// checkCrashClone opens and recovers the segment in clone and checks it
// against the model.
func checkCrashClone(t *testing.T, clone vfs.FS, opts Options, m *crashModel) error {
	s, err := Open(clone, testDir, 0, 0, opts)
	if err != nil {
		if isNotExist(err) && m.durable == 0 && m.exact == nil {
			return nil // created, never flushed: the file may vanish
		}
		return fmt.Errorf("open: %w", err)
	}
	defer s.Close()
	ns, _, err := s.Recover(nil)
	if err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	if ns != s {
		defer ns.Close()
	}
	data := readFileBytes(t, clone, ns.Path())
	if int64(len(data)) != ns.Size() {
		return fmt.Errorf("file has %d bytes, segment says %d", len(data), ns.Size())
	}
	if m.exact != nil {
		ok := false
		for _, want := range m.exact {
			ok = ok || bytes.Equal(data, want)
		}
		if !ok {
			return fmt.Errorf("recovered %d bytes, want one of the exact contents", len(data))
		}
	} else {
		if int64(len(data)) < m.durable {
			return fmt.Errorf("recovered %d bytes, %d were flushed", len(data), m.durable)
		}
		if !bytes.Equal(data, m.model[:min(len(data), len(m.model))]) || len(data) > len(m.model) {
			return fmt.Errorf("recovered %d bytes are not a prefix of the %d appended", len(data), len(m.model))
		}
	}
	if err := checkReadable(ns, data); err != nil {
		return err
	}
	return checkIndexFilesAfterFlush(t, clone, ns)
}

// checkIndexFilesAfterFlush flushes a recovered segment and checks that
// each index file then holds exactly the segment's entries, Kafka's
// format: recovery leaves the files as it found them (see adoptFile), so
// the first index write must append in place only to a file that holds a
// prefix of the entries, and replace any other.
func checkIndexFilesAfterFlush(t testing.TB, fs vfs.FS, s *Segment) error {
	if err := s.Flush(); err != nil {
		return fmt.Errorf("flush after recovery: %w", err)
	}
	for _, x := range []*index{&s.offsetIdx.index, &s.timeIdx.index} {
		x.mu.RLock()
		want := bytes.Clone(x.mu.entries)
		x.mu.RUnlock()
		if got := readFileBytes(t, fs, x.path); !bytes.Equal(got, want) {
			return fmt.Errorf("%s after recovery and flush: %d bytes, want the %d of its entries", x.path, len(got), len(want))
		}
	}
	return nil
}

// checkReadable reads every batch of data through the segment's indexes.
func checkReadable(s *Segment, data []byte) error {
	for pos := 0; pos < len(data); {
		b, err := record.ReadBatch(data[pos:])
		if err != nil {
			return fmt.Errorf("recovered data does not frame at %d: %v", pos, err)
		}
		res, err := s.Read(nil, b.LastOffset(), 1, -1, true)
		if err != nil || !res.Found || res.Position != int64(pos) || !bytes.Equal(res.Data, b.Bytes()) {
			return fmt.Errorf("read(%d) = %+v, %v; want the batch at %d", b.LastOffset(), res.Position, err, pos)
		}
		pos += b.Size()
	}
	if next, err := s.ReadNextOffset(); err != nil || (len(data) == 0 && next != 0) {
		return fmt.Errorf("next offset %d, %v", next, err)
	}
	return nil
}
