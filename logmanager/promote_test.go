package logmanager

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/remote"
)

// TestPromoteFutureInPlace: the future log becomes the current log
// without being closed (the same *log.UnifiedLog, writable), with the old
// log's high watermark; the old log is renamed for deletion and the
// checkpoints rewritten; the next Open renames the promoted directory into
// place and drops its marker.
func TestPromoteFutureInPlace(t *testing.T) {
	fs, c := vfs.NewMem(), newClock()
	m := openT(t, testOptions(fs, c, "/a", "/b"))
	tp := remote.TopicIDPartition{TopicID: remote.UUID{3}, Topic: "t", Partition: 0}
	cur := getOrCreate(t, m, tp, "/a")
	appendN(t, cur, 3)
	cur.UpdateHighWatermark(2)
	fut, err := m.CreateFuture(tp, "/b")
	require.NoError(t, err)
	appendN(t, fut, 3)

	_, err = m.PromoteFutureInPlace(tpOf("u", 0))
	require.ErrorIs(t, err, ErrNotFound)
	promoted, err := m.PromoteFutureInPlace(tp)
	require.NoError(t, err)
	require.Same(t, fut, promoted)
	got, err := m.Get(tp)
	require.NoError(t, err)
	require.Same(t, fut, got)
	_, err = m.GetFuture(tp)
	require.ErrorIs(t, err, ErrNotFound)
	require.Equal(t, int64(2), promoted.HighWatermark())
	require.True(t, exists(fs, fut.Dir()+"/"+PromotedFutureFile))
	require.False(t, exists(fs, "/a/t-0"))
	require.Equal(t, "0\n0\n", readString(t, fs, "/a/"+HighWatermarkCheckpointFile))
	require.Equal(t, "0\n1\nt 0 2\n", readString(t, fs, "/b/"+HighWatermarkCheckpointFile))
	require.Equal(t, 1, m.Metrics().PendingDeletes)
	require.Equal(t, []PartitionInfo{{Partition: tp, Dir: "/b", Path: fut.Dir()}}, m.Partitions())
	appendN(t, promoted, 1) // still open and writable
	promoted.UpdateHighWatermark(4)
	_, err = m.PromoteFutureInPlace(tp)
	require.ErrorIs(t, err, ErrNotFound, "no future log any more")
	require.NoError(t, m.Close())

	m = openT(t, testOptions(fs, c, "/a", "/b"))
	require.Equal(t, "/b/t-0 future=false log-start=0 hw=4 leo=4\n", describe(m))
	require.False(t, exists(fs, "/b/t-0/"+PromotedFutureFile))
	for _, name := range listDir(t, fs, "/b") {
		require.NotContains(t, name, FutureDirSuffix)
	}
	l, err := m.Get(tp)
	require.NoError(t, err)
	require.Equal(t, tp, m.Partitions()[0].Partition, "topic id kept")
	appendN(t, l, 1)
	require.NoError(t, m.Close())
}

// TestPromoteFutureInPlaceOldLogLeft: the old log's deletion fails after
// the commit point (its directory goes offline, the promoted log stays
// current); the next Open finds both copies, deletes the old one and
// renames the promoted one into place, instead of refusing a duplicate.
func TestPromoteFutureInPlaceOldLogLeft(t *testing.T) {
	mem, c := vfs.NewMem(), newClock()
	var failRename sync.Map
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind == errorfs.OpRename {
			if _, ok := failRename.Load(op.Path); ok {
				return fmt.Errorf("injected: %w", errorfs.ErrInjected)
			}
		}
		return nil
	}))
	o := testOptions(fs, c, "/a", "/b")
	m := openT(t, o)
	tp := tpOf("t", 0)
	appendN(t, getOrCreate(t, m, tp, "/a"), 3)
	fut, err := m.CreateFuture(tp, "/b")
	require.NoError(t, err)
	appendN(t, fut, 5)
	failRename.Store("/a/t-0", true)
	promoted, err := m.PromoteFutureInPlace(tp)
	require.ErrorIs(t, err, ErrLogDirOffline)
	require.Same(t, fut, promoted)
	got, err := m.Get(tp)
	require.NoError(t, err, "the promoted log stays current")
	require.Same(t, fut, got)
	require.Contains(t, m.OfflineDirs(), "/a")
	require.NoError(t, m.Close())
	require.True(t, exists(mem, "/a/t-0"), "the old log is still there")

	m = openT(t, testOptions(mem, c, "/a", "/b"))
	require.Equal(t, "/b/t-0 future=false log-start=0 hw=0 leo=5\n", describe(m))
	require.False(t, exists(mem, "/a/t-0"))
	require.Equal(t, 1, m.Metrics().PendingDeletes)
	require.NoError(t, m.Close())
	m = openT(t, testOptions(mem, c, "/a", "/b"))
	require.Equal(t, "/b/t-0 future=false log-start=0 hw=0 leo=5\n", describe(m))
	require.NoError(t, m.Close())
}

// TestCrashDuringPromoteFutureInPlace cuts the power before every
// mutating file operation of two promotions in place, from /a to /b and
// back to /a, each followed by a Close and an Open that finishes it:
// every image opens (never a duplicate) with one current log, and the
// images never go back to an older state once a later one was seen (the
// second promotion's marker outranks the first's).
func TestCrashDuringPromoteFutureInPlace(t *testing.T) {
	mem, c := vfs.NewCrashableMem(), newClock()
	type image struct {
		fs *vfs.MemFS
		op string
	}
	var (
		mu     sync.Mutex
		images []image
		armed  bool
	)
	arm := func(on bool) {
		mu.Lock()
		defer mu.Unlock()
		armed = on
	}
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		mu.Lock()
		defer mu.Unlock()
		if armed && op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
			images = append(images, image{mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0}), fmt.Sprintf("%v %s", op.Kind, op.Path)})
		}
		return nil
	}))
	o := testOptions(fs, c, "/a", "/b")
	tp := tpOf("t", 0)
	move := func(m *Manager, dir string, n int) {
		fut, err := m.CreateFuture(tp, dir)
		require.NoError(t, err)
		appendN(t, fut, n)
		require.NoError(t, fut.Flush())
	}
	m := openT(t, o)
	cur := getOrCreate(t, m, tp, "/a")
	appendN(t, cur, 3)
	require.NoError(t, cur.Flush())
	move(m, "/b", 5)
	arm(true)
	_, err := m.PromoteFutureInPlace(tp)
	require.NoError(t, err)
	arm(false)
	cur, err = m.Get(tp)
	require.NoError(t, err)
	appendN(t, cur, 2)
	require.NoError(t, cur.Flush())
	move(m, "/a", 8)
	arm(true)
	_, err = m.PromoteFutureInPlace(tp)
	require.NoError(t, err)
	require.NoError(t, m.Close())
	m = openT(t, o)
	require.NoError(t, m.Close())
	arm(false)
	require.Greater(t, len(images), 10)

	states := []string{"/a current 3; /b future 5", "/b current 5", "/b current 7; /a future 8", "/a current 8"}
	last := 0
	for i, img := range images {
		m, err := Open(t.Context(), testOptions(img.fs, newClock(), "/a", "/b"))
		require.NoError(t, err, "image %d before %s", i, img.op)
		var parts []string
		for _, p := range m.Partitions() {
			l, err := m.Get(tp)
			kind := "current"
			if p.Future {
				l, err = m.GetFuture(tp)
				kind = "future"
			}
			require.NoError(t, err)
			if !p.Future {
				require.Equal(t, p.Dir+"/t-0", p.Path, "image %d before %s: renamed into place", i, img.op)
			}
			parts = append(parts, fmt.Sprintf("%s %s %d", p.Dir, kind, l.LogEndOffset()))
		}
		got := strings.Join(parts, "; ")
		at := slices.Index(states, got)
		require.GreaterOrEqual(t, at, last, "image %d before %s: %q", i, img.op, got)
		last = at
		require.NoError(t, m.Close())
	}
	require.Equal(t, len(states)-1, last)
}

// TestPromoteFutureAfterPromotionInPlace: PromoteFuture refuses a current
// log promoted in place (the renamed future log would lose to its marker
// after a crash between the renames) until the manager reopens.
func TestPromoteFutureAfterPromotionInPlace(t *testing.T) {
	fs, c := vfs.NewMem(), newClock()
	o := testOptions(fs, c, "/a", "/b")
	m := openT(t, o)
	tp := tpOf("t", 0)
	getOrCreate(t, m, tp, "/a")
	_, err := m.CreateFuture(tp, "/b")
	require.NoError(t, err)
	_, err = m.PromoteFutureInPlace(tp)
	require.NoError(t, err)
	_, err = m.CreateFuture(tp, "/a")
	require.NoError(t, err)
	_, err = m.PromoteFuture(tp)
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.NoError(t, m.Close())
	m = openT(t, o)
	_, err = m.PromoteFuture(tp)
	require.NoError(t, err)
	require.Equal(t, "/a/t-0 future=false log-start=0 hw=0 leo=0\n", describe(m))
	require.NoError(t, m.Close())
}
