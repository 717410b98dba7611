package segment

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tierlog/tierlog/log/record"
)

const testDir = "p0"

// batchSpec describes a test batch: offsets [base, last], every record
// with timestamp ts (or its own offset when ts is unset), values of
// valueSize bytes, or sized so the whole batch is exactly size bytes.
type batchSpec struct {
	base, last int64
	ts         *int64
	valueSize  int
	size       int
}

// buildBatch builds the batch a spec describes.
func buildBatch(t testing.TB, sp batchSpec) []byte {
	t.Helper()
	build := func(valueSize int) []byte {
		opts := record.DefaultBuilderOptions()
		opts.BaseOffset = sp.base
		b := record.NewBuilder(opts)
		value := make([]byte, valueSize)
		for i := range value {
			value[i] = byte('a' + i%26)
		}
		for o := sp.base; o <= sp.last; o++ {
			ts := o
			if sp.ts != nil {
				ts = *sp.ts
			}
			b.Add(ts, nil, value)
		}
		buf, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		return buf
	}
	if sp.size == 0 {
		return build(sp.valueSize)
	}
	// Adjust the value size until the batch has the requested size; the
	// varint of the record length may jump by a byte, so iterate.
	v := max(sp.size-record.HeaderSize-16, 0)
	for range 8 {
		buf := build(v)
		if len(buf) == sp.size {
			return buf
		}
		v += sp.size - len(buf)
		if v < 0 {
			break
		}
	}
	t.Fatalf("cannot build a batch of exactly %d bytes", sp.size)
	return nil
}

// parseBatchLine parses "50..53 ts=1000 value-size=10 size=1000".
func parseBatchLine(t testing.TB, line string) batchSpec {
	t.Helper()
	fields := strings.Fields(line)
	var sp batchSpec
	lo, hi, ok := strings.Cut(fields[0], "..")
	var err error
	if sp.base, err = strconv.ParseInt(lo, 10, 64); err != nil {
		t.Fatalf("bad batch %q: %v", line, err)
	}
	sp.last = sp.base
	if ok {
		if sp.last, err = strconv.ParseInt(hi, 10, 64); err != nil {
			t.Fatalf("bad batch %q: %v", line, err)
		}
	}
	for _, f := range fields[1:] {
		k, v, _ := strings.Cut(f, "=")
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("bad batch %q: %v", line, err)
		}
		switch k {
		case "ts":
			sp.ts = &n
		case "value-size":
			sp.valueSize = int(n)
		case "size":
			sp.size = int(n)
		default:
			t.Fatalf("bad batch field %q", f)
		}
	}
	return sp
}

// batchesOf builds consecutive single-record batches for offsets
// [from, to), each with a value of valueSize bytes.
func batchesOf(t testing.TB, from, to int64, valueSize int) (all []byte, ends []int64) {
	for o := from; o < to; o++ {
		all = append(all, buildBatch(t, batchSpec{base: o, last: o, valueSize: valueSize})...)
		ends = append(ends, int64(len(all)))
	}
	return all, ends
}

// describeBatches frames data and describes each batch as
// "base..last@pos"; a partial batch at the end is "+N partial bytes".
func describeBatches(data []byte, pos int64) string {
	var parts []string
	for len(data) > 0 {
		b, err := record.ReadBatch(data)
		if err != nil {
			parts = append(parts, fmt.Sprintf("+%d partial bytes", len(data)))
			break
		}
		parts = append(parts, fmt.Sprintf("%s@%d", rangeString(b.BaseOffset(), b.LastOffset()), pos))
		pos += int64(b.Size())
		data = data[b.Size():]
	}
	if len(parts) == 0 {
		return "(none)"
	}
	return strings.Join(parts, " ")
}

func rangeString(base, last int64) string {
	if base == last {
		return strconv.FormatInt(base, 10)
	}
	return fmt.Sprintf("%d..%d", base, last)
}

// formatIndexes prints both indexes' entries.
func formatIndexes(t testing.TB, s *Segment) string {
	t.Helper()
	if err := s.loadOffsetIndex(); err != nil {
		return "error: " + err.Error()
	}
	if err := s.loadTimeIndex(); err != nil {
		return "error: " + err.Error()
	}
	var b strings.Builder
	b.WriteString("offset index:")
	s.offsetIdx.mu.RLock()
	for i := 0; i < len(s.offsetIdx.mu.entries); i += offsetEntrySize {
		e := s.offsetIdx.mu.entries[i:]
		fmt.Fprintf(&b, " (%d, %d)", s.baseOffset+be32(e), be32(e[4:]))
	}
	s.offsetIdx.mu.RUnlock()
	b.WriteString("\ntime index:")
	s.timeIdx.mu.RLock()
	for i := 0; i < len(s.timeIdx.mu.entries); i += timeEntrySize {
		e := s.timeIdx.mu.entries[i:]
		fmt.Fprintf(&b, " (%d, %d)", be64(e), s.baseOffset+be32(e[8:]))
	}
	s.timeIdx.mu.RUnlock()
	return b.String()
}

// readFileBytes returns a file's contents, or nil if it does not exist.
func readFileBytes(t testing.TB, fs vfs.FS, path string) []byte {
	t.Helper()
	f, err := fs.Open(path)
	if err != nil {
		if isNotExist(err) {
			return nil
		}
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, st.Size())
	if _, err := f.ReadAt(buf, 0); err != nil && len(buf) > 0 {
		t.Fatal(err)
	}
	return buf
}

// writeAt overwrites path at pos with p, outside the segment (corruption,
// garbage tails), and fsyncs it.
func writeAt(t testing.TB, fs vfs.FS, path string, pos int64, p []byte) {
	t.Helper()
	f, err := fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(p, pos); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// newMemDir returns a MemFS holding the test directory.
func newMemDir(t testing.TB) *vfs.MemFS {
	t.Helper()
	fs := vfs.NewCrashableMem()
	if err := fs.MkdirAll(testDir, 0o755); err != nil {
		t.Fatal(err)
	}
	return fs
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }
