package logmanager

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote"
)

const testNowMs = 1_700_000_000_000

// clock is a manual clock.
type clock struct{ now time.Time }

func newClock() *clock                   { return &clock{now: time.UnixMilli(testNowMs)} }
func (c *clock) Now() time.Time          { return c.now }
func (c *clock) Advance(d time.Duration) { c.now = c.now.Add(d) }

func testOptions(fs vfs.FS, c *clock, dirs ...string) Options {
	return Options{Dirs: dirs, FS: fs, Now: c.Now, NoBackgroundTasks: true,
		Log: log.Options{SegmentIndexBytes: 4096, SegmentBytes: 1 << 16}}
}

func tpOf(topic string, p int32) remote.TopicIDPartition {
	return remote.TopicIDPartition{Topic: topic, Partition: p}
}

func openT(t testing.TB, o Options) *Manager {
	t.Helper()
	m, err := Open(t.Context(), o)
	require.NoError(t, err)
	return m
}

// appendN appends n one-record batches.
func appendN(t testing.TB, l *log.UnifiedLog, n int) {
	t.Helper()
	for range n {
		_, err := l.AppendAsLeader(oneBatch(t), 0, log.OriginClient)
		require.NoError(t, err)
	}
}

func oneBatch(t testing.TB) []byte {
	b := record.NewBuilder(record.DefaultBuilderOptions())
	b.Add(testNowMs, nil, []byte("value"))
	buf, err := b.Build()
	require.NoError(t, err)
	return buf
}

func getOrCreate(t testing.TB, m *Manager, tp remote.TopicIDPartition, dir string) *log.UnifiedLog {
	t.Helper()
	l, err := m.GetOrCreate(tp, dir)
	require.NoError(t, err)
	return l
}

func readString(t testing.TB, fs vfs.FS, path string) string {
	t.Helper()
	f, err := fs.Open(path)
	require.NoError(t, err)
	defer f.Close()
	b, err := io.ReadAll(f)
	require.NoError(t, err)
	return string(b)
}

func writeString(t testing.TB, fs vfs.FS, path, s string) {
	t.Helper()
	require.NoError(t, fs.MkdirAll(fs.PathDir(path), 0o755))
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	require.NoError(t, err)
	_, err = f.Write([]byte(s))
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
}

func exists(fs vfs.FS, path string) bool {
	_, err := fs.Stat(path)
	return err == nil
}

// describe is the manager's state as text: one line per log.
func describe(m *Manager) string {
	var b strings.Builder
	for _, p := range m.Partitions() {
		l, err := m.Get(p.Partition)
		if p.Future {
			l, err = m.GetFuture(p.Partition)
		}
		if err != nil {
			fmt.Fprintf(&b, "%s error: %v\n", p.Path, err)
			continue
		}
		o := l.Offsets()
		fmt.Fprintf(&b, "%s future=%t log-start=%d hw=%d leo=%d\n", p.Path, p.Future, o.LogStartOffset, o.HighWatermark, o.LogEndOffset)
	}
	return b.String()
}

// listDir lists a directory's entries, sorted by the FS.
func listDir(t testing.TB, fs vfs.FS, dir string) []string {
	t.Helper()
	names, err := fs.List(dir)
	require.NoError(t, err)
	return names
}
