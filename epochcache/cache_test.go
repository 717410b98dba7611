package epochcache

import (
	"errors"
	"fmt"
	"github.com/tierlog/tierlog/internal/harness/crashtest"
	"github.com/tierlog/tierlog/internal/harness/testseed"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"github.com/tierlog/tierlog/internal/base"
)

func TestErrors(t *testing.T) {
	_, err := Open(nil, testPath)
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, err = Open(vfs.NewMem(), "")
	require.ErrorIs(t, err, ErrInvalidArgument)

	c := New()
	changed, err := c.Assign(-1, 0)
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.False(t, changed)
	_, err = c.Assign(0, -2)
	require.ErrorIs(t, err, base.ErrInvalidArgument)
	// AssignAll validates the whole list before changing anything.
	require.ErrorIs(t, c.AssignAll([]Entry{{1, 1}, {2, -1}}), ErrInvalidArgument)
	require.Equal(t, 0, c.Len())

	mem := vfs.NewMem()
	require.NoError(t, mem.MkdirAll(testDir, 0o755))
	f, err := mem.Create(testPath, vfs.WriteCategoryUnspecified)
	require.NoError(t, err)
	_, err = f.Write([]byte("0\n2\n1 5\n2 6 7\n"))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	_, err = Open(mem, testPath)
	require.ErrorIs(t, err, ErrCorruption)
	var ce *CheckpointError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, CheckpointError{Path: testPath, Line: 4, Reason: ce.Reason}, *ce)
}

// TestZeroAllocQueries checks what the benchmarks report: the hot queries
// do not allocate.
func TestZeroAllocQueries(t *testing.T) {
	c := New()
	for i := range int32(100) {
		_, err := c.Assign(2*i, 10*int64(i))
		require.NoError(t, err)
	}
	var sink int64
	allocs := testing.AllocsPerRun(100, func() {
		ans := c.EndOffsetFor(37, 2000)
		e, o := ans.Epoch, ans.EndOffset
		sink += int64(e) + o
		ep, _ := c.EpochForOffset(555)
		sink += int64(ep)
		l, _ := c.Latest()
		sink += l.StartOffset
	})
	require.Zero(t, allocs)
	_ = sink
}

// naive is a direct, linear transcription of the rules of Kafka's
// LeaderEpochFileCache (assign, endOffsetFor, epochForOffset and the two
// truncations), used as an
// oracle for the binary-search implementation.
type naive struct{ entries []Entry }

func (n *naive) assign(e Entry) {
	if k := len(n.entries); k > 0 {
		l := n.entries[k-1]
		if e.Epoch == l.Epoch && e.StartOffset >= l.StartOffset {
			return
		}
	}
	for k := len(n.entries) - 1; k >= 0; k-- {
		if n.entries[k].Epoch >= e.Epoch || n.entries[k].StartOffset >= e.StartOffset {
			n.entries = n.entries[:k]
			continue
		}
		break
	}
	n.entries = append(n.entries, e)
}

func (n *naive) endOffsetFor(epoch int32, leo int64) (int32, int64) {
	if epoch == base.UndefinedEpoch {
		return -1, -1
	}
	if k := len(n.entries); k > 0 && n.entries[k-1].Epoch == epoch {
		return epoch, leo
	}
	var floor, higher *Entry
	for i := range n.entries {
		e := &n.entries[i]
		if e.Epoch <= epoch {
			floor = e
		} else if higher == nil {
			higher = e
		}
	}
	switch {
	case higher == nil:
		return -1, -1
	case floor == nil:
		return epoch, higher.StartOffset
	default:
		return floor.Epoch, higher.StartOffset
	}
}

func (n *naive) epochForOffset(o int64) (int32, bool) {
	for i, e := range n.entries {
		if e.StartOffset == o {
			return e.Epoch, true
		}
		if e.StartOffset > o {
			if i == 0 {
				return -1, false
			}
			return n.entries[i-1].Epoch, true
		}
	}
	if len(n.entries) == 0 {
		return -1, false
	}
	return n.entries[len(n.entries)-1].Epoch, true
}

func (n *naive) truncateFromEnd(end int64) {
	if end < 0 {
		return
	}
	var kept []Entry
	for _, e := range n.entries {
		if e.StartOffset < end {
			kept = append(kept, e)
		}
	}
	n.entries = kept
}

func (n *naive) truncateFromStart(start int64) {
	if start < 0 {
		return
	}
	var kept []Entry
	var last *Entry
	for i := range n.entries {
		if n.entries[i].StartOffset <= start {
			last = &n.entries[i]
		} else {
			kept = append(kept, n.entries[i])
		}
	}
	if last != nil {
		kept = append([]Entry{{last.Epoch, start}}, kept...)
	}
	n.entries = kept
}

// TestAgainstNaiveModel runs seeded random operation sequences on a Cache
// and on the naive oracle and compares entries and query answers after
// every operation; a checkpoint-backed cache reopened at the end must hold
// the same entries.
func TestAgainstNaiveModel(t *testing.T) {
	seed := testseed.Seed(t, 1)
	rng := rand.New(rand.NewPCG(seed, 1))
	for round := range 20 {
		mem := vfs.NewMem()
		require.NoError(t, mem.MkdirAll(testDir, 0o755))
		c, err := Open(mem, testPath)
		require.NoError(t, err)
		var n naive
		for step := range 200 {
			desc := ""
			switch r := rng.IntN(10); {
			case r < 6:
				e := Entry{Epoch: rng.Int32N(20), StartOffset: rng.Int64N(100)}
				desc = "assign " + e.String()
				n.assign(e)
				_, err := c.Assign(e.Epoch, e.StartOffset)
				require.NoError(t, err)
			case r < 8:
				end := rng.Int64N(110) - 1
				desc = fmt.Sprintf("truncate-from-end %d", end)
				n.truncateFromEnd(end)
				c.TruncateFromEnd(end)
			default:
				start := rng.Int64N(110) - 1
				desc = fmt.Sprintf("truncate-from-start %d", start)
				n.truncateFromStart(start)
				c.TruncateFromStart(start)
			}
			where := fmt.Sprintf("seed %d round %d step %d (%s)", seed, round, step, desc)
			require.Equal(t, FormatEntries(n.entries), c.String(), where)
			for range 5 {
				epoch := rng.Int32N(22) - 1
				leo := int64(100 + rng.IntN(10))
				we, wo := n.endOffsetFor(epoch, leo)
				ans := c.EndOffsetFor(epoch, leo)
				ge, gof := ans.Epoch, ans.EndOffset
				require.Equal(t, [2]int64{int64(we), wo}, [2]int64{int64(ge), gof},
					"%s: endOffsetFor(%d, %d)", where, epoch, leo)
				o := rng.Int64N(120)
				wEp, wOK := n.epochForOffset(o)
				gEp, gOK := c.EpochForOffset(o)
				require.Equal(t, wOK, gOK, "%s: epochForOffset(%d)", where, o)
				require.Equal(t, wEp, gEp, "%s: epochForOffset(%d)", where, o)
			}
		}
		require.NoError(t, c.Flush())
		reopened, err := Open(mem, testPath)
		require.NoError(t, err)
		require.Equal(t, c.String(), reopened.String())
	}
}

// TestConcurrentReaders runs readers against a writer that assigns,
// truncates and flushes; readers must always see a valid, strictly
// increasing list and consistent answers. Run it with -race.
func TestConcurrentReaders(t *testing.T) {
	mem := vfs.NewMem()
	require.NoError(t, mem.MkdirAll(testDir, 0o755))
	c, err := Open(mem, testPath)
	require.NoError(t, err)

	const writes = 400
	var wg sync.WaitGroup
	done := make(chan struct{})
	errs := make(chan error, 8)
	for r := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 2))
			for {
				select {
				case <-done:
					return
				default:
				}
				entries := c.Entries()
				for i := 1; i < len(entries); i++ {
					if entries[i-1].Epoch >= entries[i].Epoch || entries[i-1].StartOffset >= entries[i].StartOffset {
						errs <- fmt.Errorf("reader saw %s", FormatEntries(entries))
						return
					}
				}
				const leo = 1 << 40
				requested := rng.Int32N(writes + 2)
				ans := c.EndOffsetFor(requested, leo)
				epoch, end := ans.Epoch, ans.EndOffset
				if (epoch == -1) != (end == -1) || epoch > requested || end > leo {
					errs <- fmt.Errorf("endOffsetFor(%d) = (%d,%d)", requested, epoch, end)
					return
				}
				if epoch, ok := c.EpochForOffset(rng.Int64N(10 * writes)); ok && epoch < 0 {
					errs <- fmt.Errorf("epochForOffset returned epoch %d", epoch)
					return
				}
				if l, ok := c.Latest(); ok && (l.Epoch < 0 || l.StartOffset < 0) {
					errs <- fmt.Errorf("latest %s", l)
					return
				}
			}
		}()
	}
	for i := range int32(writes) {
		if _, err := c.Assign(i, 10*int64(i)); err != nil {
			t.Fatal(err)
		}
		switch i % 10 {
		case 5:
			c.TruncateFromEnd(10*int64(i) - 15)
			require.NoError(t, c.Flush())
		case 7:
			c.TruncateFromStart(10*int64(i) - 40)
		case 9:
			// Concurrent writers: the checkpoint must still end up with
			// the final list.
			var wwg sync.WaitGroup
			for range 2 {
				wwg.Add(1)
				go func() { defer wwg.Done(); _ = c.Flush() }()
			}
			wwg.Wait()
		}
	}
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	require.NoError(t, c.Flush())
	reopened, err := Open(mem, testPath)
	require.NoError(t, err)
	require.Equal(t, c.String(), reopened.String())
}

// TestConcurrentWritesNeverReorder: many goroutines assign and flush at
// once; afterwards the file must hold exactly the final in-memory list
// (an older snapshot never overwrites a newer one).
func TestConcurrentWritesNeverReorder(t *testing.T) {
	mem := vfs.NewMem()
	require.NoError(t, mem.MkdirAll(testDir, 0o755))
	c, err := Open(mem, testPath)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				epoch := int32(i*4 + g)
				if _, err := c.Assign(epoch, int64(epoch)*3); err != nil {
					t.Error(err)
					return
				}
				if i%7 == 0 {
					c.TruncateFromStart(int64(epoch))
					if err := c.Flush(); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	require.False(t, c.Dirty(), "every change was followed by a completed write")
	reopened, err := Open(mem, testPath)
	require.NoError(t, err)
	require.Equal(t, c.String(), reopened.String())
}

// FuzzParseCheckpoint: parsing never panics, and a successfully parsed
// file, normalised and re-encoded, parses back to the same list.
func FuzzParseCheckpoint(f *testing.F) {
	for _, s := range []string{"", "0\n", "0\n0\n", "0\n1\n3 8\n", "0\n2\n0 1\n", "1\n", "0\n2\n1 5\r\n2\t6",
		"0\n3\n3 8\n2 10\n4 12\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := parseCheckpoint("fuzz", data)
		if err != nil {
			if !errors.Is(err, ErrCorruption) {
				t.Fatalf("error %v is not ErrCorruption", err)
			}
			return
		}
		var normalised []Entry
		for _, e := range entries {
			normalised, _ = assignEntry(normalised, e)
		}
		checkEntries(normalised)
		again, err := parseCheckpoint("fuzz", appendCheckpoint(nil, normalised))
		if err != nil || !slices.Equal(again, normalised) {
			t.Fatalf("re-parse: %v, %v != %v", err, again, normalised)
		}
	})
}

// TestReadersDoNotWaitForIO blocks a checkpoint write inside its fsync and
// checks that queries and in-memory mutations still complete.
func TestReadersDoNotWaitForIO(t *testing.T) {
	mem := vfs.NewMem()
	require.NoError(t, mem.MkdirAll(testDir, 0o755))
	entered := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	hfs := crashtest.AfterEach(mem, func(op, name string) {
		if op == "sync" && name == testPath+tmpSuffix {
			once.Do(func() { close(entered); <-release })
		}
	})
	c, err := Open(hfs, testPath)
	require.NoError(t, err)
	writeDone := make(chan error)
	go func() {
		_, err := c.Assign(1, 10)
		writeDone <- err
	}()
	<-entered // the write holds flushMu and is inside its fsync

	queries := make(chan string)
	go func() {
		ans := c.EndOffsetFor(1, 20)
		e, o := ans.Epoch, ans.EndOffset
		ep, _ := c.EpochForOffset(15)
		c.TruncateFromStart(12)
		queries <- fmt.Sprintf("(%d,%d) %d %s dirty=%t", e, o, ep, c, c.Dirty())
	}()
	select {
	case got := <-queries:
		require.Equal(t, "(1,20) 1 1@12 dirty=true", got)
	case <-time.After(10 * time.Second):
		t.Fatal("queries blocked behind a checkpoint write")
	}
	close(release)
	require.NoError(t, <-writeDone)
	require.NoError(t, c.Flush())
	require.False(t, c.Dirty())
}

// EpochForOffsetIn answers over a list as the cache answers over its
// entries: the epoch of the last entry starting at or below the offset.
func TestEpochForOffsetIn(t *testing.T) {
	entries := []Entry{{Epoch: 0, StartOffset: 10}, {Epoch: 2, StartOffset: 50}, {Epoch: 5, StartOffset: 80}}
	c := New()
	require.NoError(t, c.AssignAll(entries))
	for _, off := range []int64{0, 9, 10, 49, 50, 79, 80, 1000} {
		e, ok := EpochForOffsetIn(entries, off)
		ce, cok := c.EpochForOffset(off)
		require.Equal(t, []any{ce, cok}, []any{e, ok}, "offset %d", off)
	}
	e, ok := EpochForOffsetIn(entries, 9)
	require.False(t, ok)
	require.EqualValues(t, -1, e)
	_, ok = EpochForOffsetIn(nil, 0)
	require.False(t, ok)
}
