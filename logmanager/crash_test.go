package logmanager

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
)

// crashImage is the file system as a power cut before one mutating
// operation would leave it, with what was acknowledged by then.
type crashImage struct {
	fs    *vfs.MemFS
	op    string
	acked int64
}

// TestCrashDuringOpenAndClose cuts the power before every mutating file
// operation of a clean Open (the directory markers taken), appends,
// flushes, and Close (the logs closed without markers of their own, the
// checkpoints, the directory markers), then a second Open and Close. On
// every image, Open must succeed and each log must hold every
// acknowledged record (flushed, or closed by a Close that returned) and
// nothing but valid records in order, whether its directory's marker says
// clean or not.
func TestCrashDuringOpenAndClose(t *testing.T) {
	mem := vfs.NewCrashableMem()
	c := newClock()
	parts := []struct {
		topic string
		dir   string
	}{{"a", "/a"}, {"b", "/a"}, {"c", "/b"}, {"d", "/b"}}
	o := testOptions(mem, c, "/a", "/b")
	m := openT(t, o)
	for _, p := range parts {
		appendStamped(t, getOrCreate(t, m, tpOf(p.topic, 0), p.dir), 0, 0, 5)
	}
	require.NoError(t, m.Close())

	var (
		mu     sync.Mutex
		images []crashImage
		acked  atomic.Int64
		armed  atomic.Bool
		rng    = rand.New(rand.NewPCG(7, 7))
	)
	acked.Store(5)
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if !armed.Load() || op.Kind.ReadOrWrite() != errorfs.OpIsWrite {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		pct := []int{0, 50, 100}[rng.IntN(3)]
		images = append(images, crashImage{fs: mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rng}),
			op: fmt.Sprintf("%v %s (unsynced %d%%)", op.Kind, op.Path, pct), acked: acked.Load()})
		return nil
	}))
	o.FS = fs
	armed.Store(true)
	m = openT(t, o)
	for _, p := range parts {
		l, err := m.Get(tpOf(p.topic, 0))
		require.NoError(t, err)
		appendStamped(t, l, 1, 5, 3)
		require.NoError(t, l.Flush())
	}
	acked.Store(8)
	for _, p := range parts {
		l, err := m.Get(tpOf(p.topic, 0))
		require.NoError(t, err)
		appendStamped(t, l, 2, 8, 2)
		l.UpdateHighWatermark(10)
	}
	require.NoError(t, m.RunTask(TaskHighWatermarkCheckpoint))
	require.NoError(t, m.Close())
	acked.Store(10)
	m = openT(t, o)
	require.NoError(t, m.Close())
	armed.Store(false)
	require.Greater(t, len(images), 50)
	t.Logf("%d crash images", len(images))

	for i, img := range images {
		m, err := Open(t.Context(), testOptions(img.fs, newClock(), "/a", "/b"))
		require.NoError(t, err, "image %d before %s", i, img.op)
		for _, p := range parts {
			l, err := m.Get(tpOf(p.topic, 0))
			require.NoError(t, err, "image %d before %s", i, img.op)
			if err := checkStamped(l, img.acked); err != nil {
				t.Fatalf("image %d before %s: %s-0: %v", i, img.op, p.topic, err)
			}
		}
		require.NoError(t, m.Close())
	}
}

// appendStamped appends n one-record batches in leader epoch epoch whose
// timestamps say their offsets, from offset from.
func appendStamped(t *testing.T, l *log.UnifiedLog, epoch int32, from int64, n int) {
	t.Helper()
	require.Equal(t, from, l.LogEndOffset())
	for i := range int64(n) {
		b := record.NewBuilder(record.DefaultBuilderOptions())
		b.Add(testNowMs+from+i, nil, []byte("value"))
		buf, err := b.Build()
		require.NoError(t, err)
		_, err = l.AppendAsLeader(buf, epoch, log.OriginClient)
		require.NoError(t, err)
	}
}

// checkStamped reads the whole log: at least acked records, at most the
// 10 appended, each valid and at its offset, and the epoch cache naming
// each batch's leader epoch.
func checkStamped(l *log.UnifiedLog, acked int64) error {
	leo := l.LogEndOffset()
	if leo < acked || leo > 10 {
		return fmt.Errorf("log end %d, acknowledged %d", leo, acked)
	}
	if hw := l.HighWatermark(); hw > leo {
		return fmt.Errorf("high watermark %d above log end %d", hw, leo)
	}
	for off := int64(0); off < leo; {
		info, err := l.Read(nil, off, 1<<20, log.IsolationLogEnd, true)
		if err != nil {
			return fmt.Errorf("read at %d: %w", off, err)
		}
		sc := record.NewScanner(info.Records, record.ScannerOptions{})
		n := 0
		for sc.Next() {
			b := sc.Batch()
			if err := b.Validate(); err != nil {
				return fmt.Errorf("batch at %d: %w", b.BaseOffset(), err)
			}
			if b.BaseOffset() != off || b.MaxTimestamp() != testNowMs+off {
				return fmt.Errorf("batch at %d (timestamp %d) where %d was expected", b.BaseOffset(), b.MaxTimestamp(), off)
			}
			if e, ok := l.EpochForOffset(off); !ok || e != b.PartitionLeaderEpoch() {
				return fmt.Errorf("epoch cache says %d (%t) at %d, the batch %d (cache %v)", e, ok, off, b.PartitionLeaderEpoch(), l.EpochEntries())
			}
			off++
			n++
		}
		if err := sc.Err(); err != nil {
			return fmt.Errorf("read at %d: %w", off, err)
		}
		if n == 0 {
			return fmt.Errorf("nothing read at %d below the log end %d", off, leo)
		}
	}
	return nil
}

// TestCloseMarkerAfterDurable cuts the power before every mutating file
// operation of a Close whose logs hold unflushed records (their closes
// deferred, made durable together per directory). On every image where a
// directory's clean-shutdown marker exists, each of its logs must open
// clean and hold every record appended before Close: the marker vouches
// for them. Without it, each must hold the flushed records. A Close that
// wrote the marker before the data was durable fails here.
func TestCloseMarkerAfterDurable(t *testing.T) {
	mem := vfs.NewCrashableMem()
	const parts = 6
	var (
		mu     sync.Mutex
		images []crashImage
		armed  atomic.Bool
		rng    = rand.New(rand.NewPCG(3, 5))
	)
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if !armed.Load() || op.Kind.ReadOrWrite() != errorfs.OpIsWrite {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		pct := []int{0, 50}[rng.IntN(2)]
		images = append(images, crashImage{fs: mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rng}),
			op: fmt.Sprintf("%v %s (unsynced %d%%)", op.Kind, op.Path, pct)})
		return nil
	}))
	o := testOptions(fs, newClock(), "/a", "/b")
	o.RecoveryThreadsPerDir = 2
	m := openT(t, o)
	for p := range parts {
		l := getOrCreate(t, m, tpOf("t", int32(p)), []string{"/a", "/b"}[p%2])
		appendStamped(t, l, 0, 0, 5)
		require.NoError(t, l.Flush())
		appendStamped(t, l, 1, 5, 5) // unflushed: only the Close makes them durable
	}
	armed.Store(true)
	require.NoError(t, m.Close())
	armed.Store(false)
	// The Close's last image has the markers; so does a crash after it.
	images = append(images, crashImage{fs: mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0}), op: "after Close"})
	marked := 0
	for i, img := range images {
		clean := map[string]bool{}
		for _, d := range []string{"/a", "/b"} {
			clean[d] = exists(img.fs, img.fs.PathJoin(d, CleanShutdownFile))
		}
		m, err := Open(t.Context(), testOptions(img.fs, newClock(), "/a", "/b"))
		require.NoError(t, err, "image %d before %s", i, img.op)
		for p := range parts {
			d := []string{"/a", "/b"}[p%2]
			want := int64(5)
			if clean[d] {
				want = 10
				marked++
			}
			l, err := m.Get(tpOf("t", int32(p)))
			require.NoError(t, err, "image %d before %s", i, img.op)
			if err := checkStamped(l, want); err != nil {
				t.Fatalf("image %d before %s: t-%d in %s (marker %t): %v", i, img.op, p, d, clean[d], err)
			}
		}
		require.NoError(t, m.Close())
	}
	require.Positive(t, marked, "no image had a marker")
	t.Logf("%d crash images, %d logs under a marker", len(images), marked)
}
