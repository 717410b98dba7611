package log

import (
	"bytes"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"github.com/tierlog/tierlog/internal/harness/crashtest"
	"github.com/tierlog/tierlog/log/internal/segment"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// growFS gives .log files a Truncate that is lost (a truncate that never
// reaches the disk), so the log preallocates them (it does only files it
// can trim) and every crash image and every clean close leaves the zero
// tail on disk: the harshest case for recovery.
type growFS struct {
	vfs.FS
	truncates atomic.Int64
}

type growFile struct {
	vfs.File
	fs *growFS
}

func (f growFile) Truncate(int64) error {
	f.fs.truncates.Add(1)
	return nil
}

func (fs *growFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return growFile{File: f, fs: fs}, nil
}

func (fs *growFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	return fs.wrap(name, f, err)
}

func (fs *growFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, c, opts...)
	return fs.wrap(name, f, err)
}

// TestPreallocatedZeroTailCrash appends fsynced batches to a log whose
// active segment is preallocated on growFS, takes a crash image after
// every file operation, and opens each image: the zero tail never becomes
// records (the log end offset is that of the acknowledged batches, or one
// more batch if the crash hit after its fsync), never hides one (every
// acknowledged batch reads back byte for byte), and is not damage (no
// recovery cut, no corruption counted). Then, on each image: an append,
// a clean close (the zero tail stays, its truncate lost) and a clean open,
// whose tail verification accepts the zero tail.
func TestPreallocatedZeroTailCrash(t *testing.T) {
	mem := newCrashDisk(t)
	type image struct {
		fs    *vfs.MemFS
		acked int // batches whose Append had returned
	}
	var images []image
	acked := 0
	gfs := &growFS{FS: crashtest.AfterEach(mem, func(op, name string) {
		images = append(images, image{mem.CrashClone(vfs.CrashCloneCfg{}), acked})
	})}
	o := Options{FlushMessages: 1, SegmentBytes: 1 << 20, SegmentPreallocateBytes: 4096}
	l := openTestLog(t, gfs, o)
	const batches = 12
	var want [][]byte // each batch as stored (offsets stamped)
	for i := range batches {
		b := buildBatches(t, 1, 3, 300, 1_000_000, 0, -1)
		_, err := l.AppendAsLeader(b, 0, OriginClient)
		require.NoError(t, err)
		want = append(want, bytes.Clone(b)) // stamped in place
		acked = i + 1
	}
	require.NoError(t, l.Close())
	require.Positive(t, gfs.truncates.Load(), "the log never trimmed")
	images = append(images, image{mem.CrashClone(vfs.CrashCloneCfg{}), acked})

	zeroTails := 0
	for n, img := range images {
		if st, err := img.fs.Stat("p0/" + segment.LogFileName(0)); err == nil {
			var data int64
			for _, b := range want {
				data += int64(len(b))
			}
			if st.Size() > data {
				zeroTails++
			}
		}
		check := func(l *UnifiedLog, extra int) int {
			t.Helper()
			leo := l.LogEndOffset()
			got := int(leo / 3)
			require.Equal(t, int64(got*3), leo, "image %d: log end offset %d inside a batch", n, leo)
			require.GreaterOrEqual(t, got, img.acked, "image %d: an acknowledged batch is missing", n)
			require.LessOrEqual(t, got, img.acked+1+extra, "image %d: records beyond what was written", n)
			for i := 0; i < min(got, batches); i++ {
				info, err := l.Read(nil, int64(i*3), 1, IsolationLogEnd, true)
				require.NoError(t, err)
				if i < len(want) && i < got-extra {
					require.True(t, bytes.Equal(info.Records, want[i]), "image %d: batch %d differs", n, i)
				}
			}
			m := l.Metrics()
			require.Zero(t, m.RecoveryCuts, "image %d: a zero tail was cut as damage", n)
			require.Zero(t, m.CorruptionsFound, "image %d: a zero tail counted as corruption", n)
			return got
		}
		// The image as the disk holds it: no growFS, the zeros visible.
		l, err := Open("p0", Options{FS: img.fs, FlushMessages: 1, SegmentBytes: 1 << 20})
		if err != nil && img.acked == 0 {
			continue // the crash hit before the log's directory existed
		}
		require.NoError(t, err, "image %d", n)
		got := check(l, 0)
		// Append over the zeros, close cleanly, reopen: the tail
		// verification of the clean open accepts the zero tail.
		_, err = l.AppendAsLeader(buildBatches(t, 1, 3, 300, 1_000_000, 0, -1), 0, OriginClient)
		require.NoError(t, err)
		require.NoError(t, l.Close())
		core, logs := observer.New(zap.WarnLevel)
		l, err = Open("p0", Options{FS: img.fs, FlushMessages: 1, SegmentBytes: 1 << 20, Logger: zap.New(core)})
		require.NoError(t, err, "image %d: clean open", n)
		for _, e := range logs.All() {
			t.Errorf("image %d: clean open: %s %v", n, e.Message, e.ContextMap())
		}
		require.Equal(t, int64(got+1)*3, l.LogEndOffset(), "image %d: clean open", n)
		check(l, 1)
		require.NoError(t, l.Close())
	}
	t.Logf("%d crash images, %d with a zero tail", len(images), zeroTails)
	require.Positive(t, zeroTails, "no image had a zero tail: the test tests nothing")
}
