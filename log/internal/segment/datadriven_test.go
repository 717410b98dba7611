package segment

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tierlog/tierlog/log/record"
)

// TestDataDriven runs the scenario files in testdata. Commands:
//
//	create base=N [interval=N] [max-index-bytes=N] [created=MS] [jitter=MS]
//	append                      one Append call; input: one batch per line,
//	                            "base[..last] [ts=T] [value-size=N] [size=N]"
//	read offset=N [max-bytes=N] [max-pos=N] [min-one]
//	translate offset=N
//	index                       both indexes' entries
//	lookup offset=N | ts=N      one index lookup
//	truncate offset=N [unaligned]
//	recover
//	should-roll segment-bytes=N segment-ms=N max-ts=N max-offset=N incoming=N now=N
//	corrupt pos=N len=N         overwrite the .log with garbage (0xEE), behind the segment's back
//	reopen [created=MS]         Close, then Open the files again
//	flush | inactive | close | delete
//	state                       size, next offset, timestamps
//	find-ts ts=N [start=N]
//	files                       the directory listing with sizes
//	batches                     every batch of the .log with its position
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		if isFuzzCorpus(path) {
			return // go test -fuzz's inputs live under testdata/fuzz
		}
		e := &ddEnv{fs: newMemDir(t)}
		defer e.close()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return e.handle(t, d)
		})
	})
}

type ddEnv struct {
	fs   *vfs.MemFS
	seg  *Segment
	base int64
	opts Options
}

func (e *ddEnv) close() {
	if e.seg != nil {
		_ = e.seg.Close()
	}
}

func intArg(t *testing.T, d *datadriven.TestData, key string, def int64) int64 {
	v := def
	d.MaybeScanArgs(t, key, &v)
	return v
}

func (e *ddEnv) handle(t *testing.T, d *datadriven.TestData) string {
	if e.seg == nil && d.Cmd != "create" {
		return "no segment: create first"
	}
	switch d.Cmd {
	case "create":
		e.close()
		e.base = intArg(t, d, "base", 0)
		e.opts = Options{
			IndexIntervalBytes: int(intArg(t, d, "interval", 0)),
			MaxIndexBytes:      int(intArg(t, d, "max-index-bytes", 0)),
			RollJitterMs:       intArg(t, d, "jitter", 0),
		}
		s, err := Create(e.fs, testDir, e.base, intArg(t, d, "created", 0), e.opts)
		if err != nil {
			return "error: " + err.Error()
		}
		e.seg = s
		return e.state()
	case "append":
		return e.append(t, d)
	case "read":
		return e.read(t, d)
	case "translate":
		pos, base, found, err := e.seg.TranslateOffset(intArg(t, d, "offset", 0))
		switch {
		case err != nil:
			return "error: " + err.Error()
		case !found:
			return "not found"
		}
		return fmt.Sprintf("batch base=%d pos=%d", base, pos)
	case "index":
		return formatIndexes(t, e.seg)
	case "lookup":
		return e.lookup(t, d)
	case "truncate":
		// unaligned: an offset inside a batch, which TruncateTo asserts
		// against under invariants; go around the assertion to show
		// what happens without it.
		ns, removed, err := e.seg.truncateTo(intArg(t, d, "offset", 0), !d.HasArg("unaligned"))
		if err != nil {
			return "error: " + err.Error()
		}
		same := ns == e.seg
		if !same {
			if err := e.seg.Close(); err != nil {
				return "close old: " + err.Error()
			}
			e.seg = ns
		}
		return fmt.Sprintf("removed %d bytes (same segment: %t)\n%s", removed, same, e.state())
	case "recover":
		return e.recover()
	case "should-roll":
		return fmt.Sprint(e.seg.ShouldRoll(RollParams{
			MaxSegmentBytes:     intArg(t, d, "segment-bytes", 1<<30),
			MaxSegmentMs:        intArg(t, d, "segment-ms", 7*24*3600*1000),
			MaxTimestampInBatch: intArg(t, d, "max-ts", 0),
			MaxOffsetInBatch:    intArg(t, d, "max-offset", e.base),
			IncomingBytes:       int(intArg(t, d, "incoming", 0)),
			NowMs:               intArg(t, d, "now", 0),
		}))
	case "corrupt":
		garbage := bytes.Repeat([]byte{0xEE}, int(intArg(t, d, "len", 1)))
		writeAt(t, e.fs, e.seg.Path(), intArg(t, d, "pos", 0), garbage)
		return fmt.Sprintf("file size %d", len(readFileBytes(t, e.fs, e.seg.Path())))
	case "reopen":
		if err := e.seg.Close(); err != nil {
			return "close: " + err.Error()
		}
		s, err := Open(e.fs, testDir, e.base, intArg(t, d, "created", 0), e.opts)
		if err != nil {
			return "error: " + err.Error()
		}
		e.seg = s
		return e.state()
	case "flush", "inactive", "close", "delete":
		return e.lifecycle(d.Cmd)
	case "state":
		return e.state()
	case "find-ts":
		r, found, err := e.seg.FindByTimestamp(intArg(t, d, "ts", 0), intArg(t, d, "start", e.base))
		switch {
		case err != nil:
			return "error: " + err.Error()
		case !found:
			return "not found"
		}
		return fmt.Sprintf("offset=%d ts=%d", r.Offset, r.Timestamp)
	case "files":
		return e.files(t)
	case "batches":
		return describeBatches(readFileBytes(t, e.fs, e.seg.Path()), 0)
	}
	return "unknown command " + d.Cmd
}

func (e *ddEnv) state() string {
	next, err := e.seg.ReadNextOffset()
	if err != nil {
		return "error: " + err.Error()
	}
	ts, off := e.seg.MaxTimestampAndOffset()
	first, ok := e.seg.FirstBatchTimestamp()
	firstStr := "none"
	if ok {
		firstStr = fmt.Sprint(first)
	}
	return fmt.Sprintf("size=%d next=%d max-ts=%d@%d first-ts=%s largest-ts=%d",
		e.seg.Size(), next, ts, off, firstStr, e.seg.LargestTimestamp())
}

func (e *ddEnv) append(t *testing.T, d *datadriven.TestData) string {
	var buf []byte
	var descs []string
	largest := e.base
	pos := e.seg.Size()
	for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
		sp := parseBatchLine(t, line)
		b := buildBatch(t, sp)
		descs = append(descs, fmt.Sprintf("%s@%d(%dB)", rangeString(sp.base, sp.last), pos, len(b)))
		pos += int64(len(b))
		buf = append(buf, b...)
		largest = sp.last
	}
	if d.HasArg("largest") {
		d.ScanArgs(t, "largest", &largest)
	}
	if err := e.seg.Append(largest, buf); err != nil {
		return "error: " + err.Error()
	}
	return strings.Join(descs, " ") + "\n" + e.state()
}

func (e *ddEnv) read(t *testing.T, d *datadriven.TestData) string {
	res, err := e.seg.Read(nil, intArg(t, d, "offset", 0), int(intArg(t, d, "max-bytes", 1<<20)),
		intArg(t, d, "max-pos", -1), d.HasArg("min-one"))
	switch {
	case err != nil:
		return "error: " + err.Error()
	case !res.Found:
		return "nil"
	}
	return fmt.Sprintf("batch-base=%d pos=%d bytes=%d: %s", res.BatchBaseOffset, res.Position,
		len(res.Data), describeBatches(res.Data, res.Position))
}

func (e *ddEnv) lookup(t *testing.T, d *datadriven.TestData) string {
	if d.HasArg("ts") {
		if err := e.seg.loadTimeIndex(); err != nil {
			return "error: " + err.Error()
		}
		ts, off := e.seg.timeIdx.lookup(intArg(t, d, "ts", 0))
		return fmt.Sprintf("(%d, %d)", ts, off)
	}
	if err := e.seg.loadOffsetIndex(); err != nil {
		return "error: " + err.Error()
	}
	off, pos := e.seg.offsetIdx.lookup(intArg(t, d, "offset", 0))
	return fmt.Sprintf("(%d, %d)", off, pos)
}

func (e *ddEnv) recover() string {
	var seen []string
	ns, res, err := e.seg.Recover(func(b record.Batch) error {
		seen = append(seen, rangeString(b.BaseOffset(), b.LastOffset()))
		return nil
	})
	if err != nil {
		return "error: " + err.Error()
	}
	same := ns == e.seg
	if !same {
		if err := e.seg.Close(); err != nil {
			return "close old: " + err.Error()
		}
		e.seg = ns
	}
	tail := "none"
	if res.Tail != nil {
		kind := "corrupt"
		if res.Tail.Torn() {
			kind = "torn"
		}
		tail = fmt.Sprintf("%s@%d", kind, res.Tail.Pos)
	}
	if len(seen) > 12 {
		seen = append(seen[:5:5], fmt.Sprintf("... (%d batches) ...", len(seen)-10), strings.Join(seen[len(seen)-5:], " "))
	}
	return fmt.Sprintf("valid=%d truncated=%d tail=%s (same segment: %t)\nbatches: %s\n%s",
		res.ValidBytes, res.TruncatedBytes, tail, same, strings.Join(seen, " "), e.state())
}

func (e *ddEnv) lifecycle(cmd string) string {
	var err error
	switch cmd {
	case "flush":
		err = e.seg.Flush()
	case "inactive":
		err = e.seg.OnBecomeInactive()
	case "close":
		err = e.seg.Close()
	case "delete":
		err = e.seg.Delete()
	}
	if err != nil {
		return "error: " + err.Error()
	}
	if errors.Is(e.seg.Flush(), ErrClosed) {
		return "ok (closed)"
	}
	return "ok"
}

func (e *ddEnv) files(t *testing.T) string {
	names, err := e.fs.List(testDir)
	if err != nil {
		return "error: " + err.Error()
	}
	slices.Sort(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "%s %d\n", n, len(readFileBytes(t, e.fs, e.fs.PathJoin(testDir, n))))
	}
	return strings.TrimSpace(b.String())
}

// isFuzzCorpus reports whether path is a fuzz input (testdata/fuzz/FuzzX/...)
// rather than a scenario file.
func isFuzzCorpus(path string) bool {
	return strings.Contains(filepath.ToSlash(path), "testdata/fuzz/")
}
