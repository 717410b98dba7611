package epochcache

import (
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// TestDataDriven runs the scenario files under testdata. Each file starts
// with a fresh crashable in-memory FS holding the directory "data" (synced)
// and no cache; `open` opens one on data/leader-epoch-checkpoint.
//
// Commands (errors are printed as output, never fatal):
//
//	open [in-memory]              open the cache (or a New one); prints entries
//	reopen                        drop the cache without flushing and Open again
//	crash [unsynced=N] [seed=S]   CrashClone the FS (N% of unsynced data kept), reopen
//	assign epoch=E offset=O       prints "changed: ..." or "unchanged: ..."
//	assign-all E@O E@O ...
//	truncate-from-end offset=O
//	truncate-from-start offset=O
//	end-offset-for epoch=(E,...) leo=L
//	epoch-for-offset offset=(O,...)
//	entries | entries-in-range start=S end=E | len | dirty
//	latest | earliest | epoch-entry epoch=E | previous [epoch=E] | next epoch=E
//	flush | clear | clear-and-flush
//	cat [tmp]                     the checkpoint (or temp file) bytes, quoted
//	ls                            the files in data/
//	write-file [tmp]              write the input (a Go-quoted string) raw
//	inject-errors                 errorfs DSL from the input; empty input: none
//	remove-dir                    delete data/ and everything in it
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		if isFuzzCorpus(path) {
			return // go test -fuzz's inputs live under testdata/fuzz
		}
		e := newTestEnv(t)
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return e.handle(t, d)
		})
	})
}

const (
	testDir  = "data"
	testPath = "data/" + CheckpointFileName
)

type testEnv struct {
	mem   *vfs.MemFS
	inj   switchableInjector
	fs    vfs.FS
	cache *Cache
}

// switchableInjector lets a scenario turn error injection on and off
// while the wrapped FS stays the same.
type switchableInjector struct{ inner errorfs.Injector }

func (s *switchableInjector) String() string {
	if s.inner == nil {
		return "none"
	}
	return s.inner.String()
}

func (s *switchableInjector) MaybeError(op errorfs.Op) error {
	if s.inner == nil {
		return nil
	}
	return s.inner.MaybeError(op)
}

func newTestEnv(t testing.TB) *testEnv {
	mem := vfs.NewCrashableMem()
	if err := mem.MkdirAll(testDir, 0o755); err != nil {
		t.Fatal(err)
	}
	syncDir(t, mem, "")
	e := &testEnv{mem: mem}
	e.fs = errorfs.Wrap(mem, &e.inj)
	return e
}

// syncDir fsyncs a directory of a MemFS so that its entries survive a
// CrashClone.
func syncDir(t testing.TB, fs vfs.FS, dir string) {
	d, err := fs.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
}

func (e *testEnv) open(inMemory bool) string {
	if inMemory {
		e.cache = New()
		return FormatEntries(e.cache.Entries())
	}
	c, err := Open(e.fs, testPath)
	if err != nil {
		e.cache = nil
		return "error: " + err.Error()
	}
	e.cache = c
	out := FormatEntries(c.Entries())
	if c.Dirty() {
		out += "\ndirty"
	}
	return out
}

func (e *testEnv) handle(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "open":
		return e.open(d.HasArg("in-memory"))
	case "reopen":
		return e.open(false)
	case "crash":
		unsynced, seed := 0, uint64(1)
		d.MaybeScanArgs(t, "unsynced", &unsynced)
		d.MaybeScanArgs(t, "seed", &seed)
		e.mem = e.mem.CrashClone(vfs.CrashCloneCfg{
			UnsyncedDataPercent: unsynced,
			RNG:                 rand.New(rand.NewPCG(seed, seed)),
		})
		e.fs = errorfs.Wrap(e.mem, &e.inj)
		return e.open(false)
	case "write-file":
		return e.writeFile(d)
	case "cat":
		name := testPath
		if d.HasArg("tmp") {
			name += tmpSuffix
		}
		return catFile(e.mem, name)
	case "ls":
		names, err := e.mem.List(testDir)
		if err != nil {
			return "error: " + err.Error()
		}
		slices.Sort(names)
		if len(names) == 0 {
			return "(no files)"
		}
		return strings.Join(names, "\n")
	case "inject-errors":
		in := strings.TrimSpace(d.Input)
		if in == "" {
			e.inj.inner = nil
			return "none"
		}
		inj, err := errorfs.ParseDSL(in)
		if err != nil {
			return "error: " + err.Error()
		}
		e.inj.inner = inj
		return inj.String()
	case "remove-dir":
		if err := e.mem.RemoveAll(testDir); err != nil {
			return "error: " + err.Error()
		}
		return "ok"
	}
	if e.cache == nil {
		return "error: no cache; run open first"
	}
	return e.handleCache(t, d)
}

func (e *testEnv) handleCache(t *testing.T, d *datadriven.TestData) string {
	c := e.cache
	switch d.Cmd {
	case "assign":
		var epoch int32
		var offset int64
		d.ScanArgs(t, "epoch", &epoch)
		d.ScanArgs(t, "offset", &offset)
		assign := c.Assign
		if d.HasArg("deferred") {
			assign = c.AssignDeferred
		}
		changed, err := assign(epoch, offset)
		return changeResult(c, changed, err)
	case "assign-all":
		entries := make([]Entry, 0, len(d.CmdArgs))
		for _, arg := range d.CmdArgs {
			entry, err := parseEntry(arg.Key)
			if err != nil {
				d.Fatalf(t, "%v", err)
			}
			entries = append(entries, entry)
		}
		if err := c.AssignAll(entries); err != nil {
			return "error: " + err.Error() + "\nentries: " + c.String()
		}
		return "ok: " + c.String()
	case "truncate-from-end":
		var offset int64
		d.ScanArgs(t, "offset", &offset)
		return changeResult(c, c.TruncateFromEnd(offset), nil)
	case "truncate-from-start":
		var offset int64
		d.ScanArgs(t, "offset", &offset)
		return changeResult(c, c.TruncateFromStart(offset), nil)
	case "end-offset-for":
		var leo int64
		d.ScanArgs(t, "leo", &leo)
		arg, _ := d.Arg("epoch")
		var sb strings.Builder
		for i := range arg.Vals {
			var epoch int32
			arg.Scan(t, i, &epoch)
			ans := c.EndOffsetFor(epoch, leo)
			gotEpoch, end := ans.Epoch, ans.EndOffset
			fmt.Fprintf(&sb, "endOffsetFor(%d, %d) = (%d,%d)\n", epoch, leo, gotEpoch, end)
		}
		return sb.String()
	case "epoch-for-offset":
		arg, _ := d.Arg("offset")
		var sb strings.Builder
		for i := range arg.Vals {
			var offset int64
			arg.Scan(t, i, &offset)
			if epoch, ok := c.EpochForOffset(offset); ok {
				fmt.Fprintf(&sb, "epochForOffset(%d) = %d\n", offset, epoch)
			} else {
				fmt.Fprintf(&sb, "epochForOffset(%d) = none (%d)\n", offset, epoch)
			}
		}
		return sb.String()
	case "entries":
		return c.String()
	case "entries-in-range":
		var start, end int64
		d.ScanArgs(t, "start", &start)
		d.ScanArgs(t, "end", &end)
		return FormatEntries(c.EntriesInRange(start, end))
	case "len":
		return strconv.Itoa(c.Len())
	case "dirty":
		return strconv.FormatBool(c.Dirty())
	case "latest":
		return entryResult(c.Latest())
	case "earliest":
		return entryResult(c.Earliest())
	case "epoch-entry":
		var epoch int32
		d.ScanArgs(t, "epoch", &epoch)
		return entryResult(c.EpochEntry(epoch))
	case "previous":
		if !d.HasArg("epoch") {
			epoch, ok := c.PreviousEpoch()
			if !ok {
				return fmt.Sprintf("none (%d)", epoch)
			}
			return strconv.Itoa(int(epoch))
		}
		var epoch int32
		d.ScanArgs(t, "epoch", &epoch)
		return entryResult(c.Previous(epoch))
	case "next":
		var epoch int32
		d.ScanArgs(t, "epoch", &epoch)
		return entryResult(c.Next(epoch))
	case "flush":
		if err := c.Flush(); err != nil {
			return "error: " + err.Error()
		}
		return "ok"
	case "clear":
		c.Clear()
		return c.String()
	case "clear-and-flush":
		if err := c.ClearAndFlush(); err != nil {
			return "error: " + err.Error() + "\nentries: " + c.String()
		}
		return "ok: " + c.String()
	default:
		d.Fatalf(t, "unknown command %q", d.Cmd)
		return ""
	}
}

func changeResult(c *Cache, changed bool, err error) string {
	var out string
	if changed {
		out = "changed: " + c.String()
	} else {
		out = "unchanged: " + c.String()
	}
	if err != nil {
		out = "error: " + err.Error() + "\n" + out
	}
	return out
}

func entryResult(e Entry, ok bool) string {
	if !ok {
		return fmt.Sprintf("none (%s)", e)
	}
	return e.String()
}

// parseEntry parses "epoch@offset".
func parseEntry(s string) (Entry, error) {
	epochStr, offsetStr, ok := strings.Cut(s, "@")
	if !ok {
		return Entry{}, fmt.Errorf("entry %q: want epoch@offset", s)
	}
	epoch, err := strconv.ParseInt(epochStr, 10, 32)
	if err != nil {
		return Entry{}, fmt.Errorf("entry %q: %v", s, err)
	}
	offset, err := strconv.ParseInt(offsetStr, 10, 64)
	if err != nil {
		return Entry{}, fmt.Errorf("entry %q: %v", s, err)
	}
	return Entry{Epoch: int32(epoch), StartOffset: offset}, nil
}

func (e *testEnv) writeFile(d *datadriven.TestData) string {
	content, err := strconv.Unquote(strings.TrimSpace(d.Input))
	if err != nil {
		return fmt.Sprintf("error: input must be a Go-quoted string: %v", err)
	}
	name := testPath
	if d.HasArg("tmp") {
		name += tmpSuffix
	}
	f, err := e.mem.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		return "error: " + err.Error()
	}
	defer f.Close()
	if _, err := f.Write([]byte(content)); err != nil {
		return "error: " + err.Error()
	}
	if err := f.Sync(); err != nil {
		return "error: " + err.Error()
	}
	return fmt.Sprintf("wrote %d bytes", len(content))
}

func catFile(fs vfs.FS, name string) string {
	f, err := fs.Open(name)
	if err != nil {
		return "(no file)"
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return "error: " + err.Error()
	}
	return strconv.Quote(string(data))
}

// isFuzzCorpus reports whether path is a fuzz input (testdata/fuzz/FuzzX/...)
// rather than a scenario file.
func isFuzzCorpus(path string) bool {
	return strings.Contains(filepath.ToSlash(path), "testdata/fuzz/")
}
