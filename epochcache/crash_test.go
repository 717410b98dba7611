package epochcache

import (
	"errors"
	"github.com/tierlog/tierlog/internal/harness/crashtest"
	"github.com/tierlog/tierlog/internal/harness/testseed"
	iofs "io/fs"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestCrashAtEveryStep runs a fixed series of checkpoint writes (assigns
// and flushed truncations) and, after every mutating file operation, takes
// crash clones keeping 0%, 50% and 100% of the unsynced data. Each clone
// must open without error and hold either the list of the last completed
// write or, once the write in flight has renamed its temp file, that
// write's list: never a torn file, never an older list.
func TestCrashAtEveryStep(t *testing.T) {
	seed := testseed.Seed(t, 0x5eed)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))

	mem := vfs.NewCrashableMem()
	if err := mem.MkdirAll(testDir, 0o755); err != nil {
		t.Fatal(err)
	}
	syncDir(t, mem, "")

	var (
		durable     []Entry // the list of the last completed write
		inFlight    []Entry // the list the running write carries
		renamed     bool    // the running write has renamed its temp file
		crashPoints int
	)
	check := func(op, name string) {
		crashPoints++
		if op == "rename" {
			renamed = true
		}
		for _, pct := range []int{0, 50, 100} {
			clone := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rng})
			c, err := Open(clone, testPath)
			if err != nil {
				t.Fatalf("crash point %d after %s %s, %d%% unsynced kept: open: %v (seed %d)",
					crashPoints, op, name, pct, err, seed)
			}
			got := c.Entries()
			ok := slices.Equal(got, durable) || (renamed && slices.Equal(got, inFlight))
			if !ok {
				t.Fatalf("crash point %d after %s %s, %d%% unsynced kept: got %s, want %s or (after rename) %s (seed %d)",
					crashPoints, op, name, pct, FormatEntries(got), FormatEntries(durable),
					FormatEntries(inFlight), seed)
			}
		}
	}
	hfs := crashtest.AfterEach(mem, check)
	c, err := Open(hfs, testPath)
	if err != nil {
		t.Fatal(err)
	}
	model := New() // the same operations, in memory

	// step applies op to the model and to c; for a write it records the
	// list in flight, and the durable list once the write has returned.
	step := func(desc string, op func(c *Cache) error) {
		t.Helper()
		if err := op(model); err != nil {
			t.Fatalf("%s on the model: %v", desc, err)
		}
		inFlight, renamed = model.Entries(), false
		if err := op(c); err != nil {
			t.Fatalf("%s: %v", desc, err)
		}
		if c.Dirty() {
			t.Fatalf("%s: cache still dirty after a completed write", desc)
		}
		if got := c.Entries(); !slices.Equal(got, inFlight) {
			t.Fatalf("%s: cache %s, model %s", desc, FormatEntries(got), FormatEntries(inFlight))
		}
		durable = inFlight
	}
	assign := func(epoch int32, offset int64) func(*Cache) error {
		return func(c *Cache) error { _, err := c.Assign(epoch, offset); return err }
	}
	truncEndFlush := func(end int64) func(*Cache) error {
		return func(c *Cache) error { c.TruncateFromEnd(end); return c.Flush() }
	}
	truncStartFlush := func(start int64) func(*Cache) error {
		return func(c *Cache) error { c.TruncateFromStart(start); return c.Flush() }
	}

	step("assign 0@0", assign(0, 0))
	step("assign 1@10", assign(1, 10))
	step("assign 1@15 (no write)", assign(1, 15))
	step("assign 2@20", assign(2, 20))
	step("assign 3@30", assign(3, 30))
	step("truncate-from-end 25 + flush", truncEndFlush(25))
	step("assign 4@40", assign(4, 40))
	step("truncate-from-start 12 + flush", truncStartFlush(12))
	step("assign 3@35 (conflict)", assign(3, 35))
	step("assign-all 5@50 6@60", func(c *Cache) error {
		return c.AssignAll([]Entry{{5, 50}, {6, 60}})
	})
	step("truncate-from-end 60, assign 7@70 (carries it)", func(c *Cache) error {
		c.TruncateFromEnd(60)
		_, err := c.Assign(7, 70)
		return err
	})
	step("clear-and-flush", func(c *Cache) error { return c.ClearAndFlush() })
	for i := range int32(6) {
		step("assign", assign(8+i, 80+10*int64(i)))
	}
	step("truncate-from-start 105 + truncate-from-end 120 + flush", func(c *Cache) error {
		c.TruncateFromStart(105)
		c.TruncateFromEnd(120)
		return c.Flush()
	})

	// A truncation that is never flushed leaves the durable list as is.
	c.TruncateFromEnd(0)
	inFlight, renamed = nil, false
	check("unflushed truncate", testPath)

	if crashPoints <= 50 {
		t.Fatalf("only %d crash points, want > 50", crashPoints)
	}
	t.Logf("%d crash points, 3 clones each", crashPoints)
}

// TestCrashTornTempFile: a crash can leave a temp file with any prefix of
// its contents (or zeros); Open removes it and never reads it.
func TestCrashTornTempFile(t *testing.T) {
	e := newTestEnv(t)
	for _, content := range []string{"", "0\n3\n1 ", "\x00\x00\x00", "garbage"} {
		f, err := e.mem.Create(testPath+tmpSuffix, vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte(content)); err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
		c, err := Open(e.mem, testPath)
		if err != nil {
			t.Fatalf("temp file %q: %v", content, err)
		}
		if c.Len() != 0 {
			t.Fatalf("temp file %q: entries %s", content, c)
		}
		if _, err := e.mem.Stat(testPath + tmpSuffix); !errors.Is(err, iofs.ErrNotExist) {
			t.Fatalf("temp file %q not removed: %v", content, err)
		}
	}
}
