package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/internal/atomicfile"
	"github.com/tierlog/tierlog/internal/harness/crashtest"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/remote/objstore/mem"
)

// TestCopyAndExpirationCrash crashes a leader at every step of tiering:
// the copy (metadata started, each object put, metadata finished), the
// local deletion of copied segments, and the expiration (delete started,
// objects deleted, delete finished). The log and the metadata share one
// crashable MemFS; the object store is remote and keeps what it was told.
// Before every mutating file operation and every object put or delete,
// the file system (nothing unsynced kept) and the store are cloned, and
// the clone is recovered the way a restarted broker does: open the log
// and the metadata, become leader, run the copy and expiration tasks once.
// The recovered partition must
//
//   - serve every acknowledged record at or above its log start, locally
//     or through the remote read path, byte for byte (local data is never
//     deleted before its copy is durably finished);
//   - have its log start at or below what expiration was allowed to reach;
//   - hold no unfinished copy or deletion, and no object that its
//     metadata does not name (nothing orphaned).
func TestCopyAndExpirationCrash(t *testing.T) {
	stride := 1
	if testing.Short() {
		stride = 2
	}
	c := newCrashTiering(t, stride)
	c.run()
	require.NoError(t, c.rec.Err())
	t.Logf("%d crash points checked", c.rec.Checked())
	require.Greater(t, c.rec.Checked(), 20/stride)
}

const (
	crashSegments   = 5
	crashPerSegment = 4
	crashStartMs    = 1_000_000
	// Segment i holds records stamped crashStartMs + i*1000. Retention of
	// 2500 ms at expireAtMs expires segments 0 and 1 only.
	crashRetentionMs = 2_500
	expireAtMs       = crashStartMs + 4_000
)

type crashTiering struct {
	t     *testing.T
	mem   *vfs.MemFS
	store *mem.Mem
	nowMs atomic.Int64
	rec   *crashtest.Recorder
	phase atomic.Value // string: the step crashed in, for messages
	// batches holds every acknowledged batch: base offset -> bytes.
	batches map[int64][]byte
	order   []int64
	// expireTo is the highest log start expiration may reach.
	expireTo int64
}

func newCrashTiering(t *testing.T, stride int) *crashTiering {
	c := &crashTiering{t: t, mem: vfs.NewCrashableMem(), store: mem.New(mem.Options{}),
		batches: map[int64][]byte{}}
	c.nowMs.Store(crashStartMs)
	c.phase.Store("setup")
	c.rec = crashtest.New(stride, func(_ int, _ string) error {
		clone := c.mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
		store, err := cloneMem(c.store)
		if err == nil {
			err = c.recover(clone, store)
		}
		if err != nil {
			return fmt.Errorf("in the %s: %w", c.phase.Load(), err)
		}
		return nil
	})
	require.NoError(t, c.mem.MkdirAll("p0", 0o755))
	for _, d := range []string{"", "p0"} {
		require.NoError(t, atomicfile.SyncDir(c.mem, d))
	}
	return c
}

func (c *crashTiering) fs() vfs.FS { return c.rec.Wrap(c.mem) }

func (c *crashTiering) logOptions(fs vfs.FS) log.Options {
	return log.Options{
		FS: fs, RemoteStorageEnabled: true, RetentionMs: crashRetentionMs, LocalRetentionMs: 1,
		SegmentIndexBytes: 4096, IndexIntervalBytes: 64,
		Now: func() time.Time { return time.UnixMilli(c.nowMs.Load()) },
	}
}

func (c *crashTiering) metaOptions() MetadataOptions {
	// Small memtables keep Pebble's work, and the crash points, small.
	return MetadataOptions{PebbleOptions: &pebble.Options{MemTableSize: 1 << 20}}
}

func (c *crashTiering) run() {
	t := c.t
	ctx := context.Background()
	fs := c.fs()
	l, err := log.Open("p0", c.logOptions(fs))
	require.NoError(t, err)
	defer l.Close()
	meta, err := Open(fs, "meta", c.metaOptions())
	require.NoError(t, err)
	defer meta.Close()

	for i := range crashSegments {
		for range crashPerSegment {
			b := record.NewBuilder(record.DefaultBuilderOptions())
			b.Add(crashStartMs+int64(i)*1000, nil, []byte(fmt.Sprintf("record-%d", l.LogEndOffset())))
			batch, err := b.Build()
			require.NoError(t, err)
			info, err := l.AppendAsLeader(batch, int32(i/2), log.OriginClient)
			require.NoError(t, err)
			c.order = append(c.order, info.FirstOffset)
		}
		require.NoError(t, l.Roll())
	}
	l.UpdateHighWatermark(l.LogEndOffset())
	require.NoError(t, l.Flush())
	for _, off := range c.order {
		fd, err := l.Read(nil, off, 1, log.IsolationLogEnd, true)
		require.NoError(t, err)
		c.batches[off] = bytes.Clone(fd.Records)
	}
	c.expireTo = 2 * crashPerSegment

	storage, err := NewStorageManager(crashStore{c.store, c}, StorageOptions{ChunkSize: 128})
	require.NoError(t, err)
	mgr, err := NewManager(meta, storage, ManagerOptions{TaskInterval: -1,
		Now: func() time.Time { return time.UnixMilli(c.nowMs.Load()) }})
	require.NoError(t, err)
	defer mgr.Close()
	tp := testPartition(0)
	require.NoError(t, mgr.OnLeadershipChange([]Partition{{TopicIDPartition: tp, Log: l}}, nil))

	c.setPhase("copy", true)
	require.NoError(t, runErr(mgr.RunCopy(ctx, tp)))
	c.setPhase("local retention", true)
	c.nowMs.Add(10)
	_, err = l.DeleteOldSegments()
	require.NoError(t, err)
	require.Greater(t, l.LocalLogStartOffset(), int64(0))
	c.setPhase("expiration", true)
	c.nowMs.Store(expireAtMs)
	require.NoError(t, runErr(mgr.RunExpiration(ctx, tp)))
	require.EqualValues(t, c.expireTo, l.LogStartOffset())
	c.setPhase("done", true)
	c.crashPoint("end")
	c.setPhase("done", false)
}

func (c *crashTiering) setPhase(phase string, armed bool) {
	c.phase.Store(phase)
	c.rec.Arm(armed)
}

// crashStore gives a crash point before every object put and delete.
type crashStore struct {
	*mem.Mem
	c *crashTiering
}

func (s crashStore) Put(ctx context.Context, key string, r io.Reader, size int64, o objstore.PutOptions) error {
	s.c.crashPoint("put " + key)
	return s.Mem.Put(ctx, key, r, size, o)
}

func (s crashStore) PutMultipart(ctx context.Context, key string, r io.ReaderAt, size int64, o objstore.MultipartOptions) error {
	s.c.crashPoint("put (multipart) " + key)
	return s.Mem.PutMultipart(ctx, key, r, size, o)
}

func (s crashStore) Delete(ctx context.Context, key string) error {
	s.c.crashPoint("delete " + key)
	return s.Mem.Delete(ctx, key)
}

func (c *crashTiering) crashPoint(what string) { c.rec.Point(what) }

func cloneMem(src *mem.Mem) (*mem.Mem, error) {
	ctx := context.Background()
	dst := mem.New(mem.Options{})
	for _, k := range src.Keys() {
		data, err := objstore.ReadAll(ctx, src, k)
		if err != nil {
			return nil, err
		}
		if err := dst.Put(ctx, k, bytes.NewReader(data), int64(len(data)), objstore.PutOptions{}); err != nil {
			return nil, err
		}
	}
	return dst, nil
}

// recover restarts the partition on the clone and checks it.
func (c *crashTiering) recover(fs vfs.FS, store *mem.Mem) (err error) {
	ctx := context.Background()
	l, err := log.Open("p0", c.logOptions(fs))
	if err != nil {
		return fmt.Errorf("open log: %w", err)
	}
	defer func() { err = errors.Join(err, l.Close()) }()
	// The high watermark is not durable; a single-replica leader gets it
	// back at once (every record is replicated to the whole ISR).
	l.UpdateHighWatermark(l.LogEndOffset())
	meta, err := Open(fs, "meta", c.metaOptions())
	if err != nil {
		return fmt.Errorf("open metadata: %w", err)
	}
	defer func() { err = errors.Join(err, meta.Close()) }()
	storage, err := NewStorageManager(store, StorageOptions{ChunkSize: 128})
	if err != nil {
		return err
	}
	mgr, err := NewManager(meta, storage, ManagerOptions{TaskInterval: -1,
		Now: func() time.Time { return time.UnixMilli(c.nowMs.Load()) }})
	if err != nil {
		return err
	}
	defer mgr.Close()
	tp := testPartition(0)
	if err := mgr.OnLeadershipChange([]Partition{{TopicIDPartition: tp, Log: l}}, nil); err != nil {
		return err
	}
	if err := runErr(mgr.RunCopy(ctx, tp)); err != nil {
		return fmt.Errorf("copy after restart: %w", err)
	}
	if err := runErr(mgr.RunExpiration(ctx, tp)); err != nil {
		return fmt.Errorf("expiration after restart: %w", err)
	}
	state := fmt.Sprintf("log start %d, local log start %d, log end %d, highest remote %d",
		l.LogStartOffset(), l.LocalLogStartOffset(), l.LogEndOffset(), l.HighestOffsetInRemoteStorage())
	if l.LogStartOffset() > c.expireTo {
		return fmt.Errorf("log start beyond what expiration may reach (%d): %s", c.expireTo, state)
	}
	if l.LogEndOffset() != int64(len(c.order)) {
		return fmt.Errorf("log end %d, want %d: %s", l.LogEndOffset(), len(c.order), state)
	}
	for _, off := range c.order {
		if off < l.LogStartOffset() {
			continue
		}
		var got []byte
		if off < l.LocalLogStartOffset() {
			res, err := mgr.Read(ctx, tp, off, 1, log.IsolationLogEnd, true)
			if err != nil {
				return fmt.Errorf("remote read of %d: %w (%s)", off, err, state)
			}
			got = res.Records
		} else {
			fd, err := l.Read(nil, off, 1, log.IsolationLogEnd, true)
			if err != nil {
				return fmt.Errorf("local read of %d: %w (%s)", off, err, state)
			}
			got = fd.Records
		}
		if !bytes.Equal(got, c.batches[off]) {
			return fmt.Errorf("offset %d reads back different bytes (%s)", off, state)
		}
	}
	segs, err := meta.ListSegments(tp)
	if err != nil {
		return err
	}
	known := map[SegmentID]bool{}
	for _, s := range segs {
		if s.State != CopySegmentFinished {
			return fmt.Errorf("segment [%d,%d] left in %s after the restart's tasks", s.StartOffset, s.EndOffset, s.State)
		}
		known[s.SegmentID] = true
	}
	orphans, err := storage.DeleteOrphans(ctx, tp, func(id SegmentID) bool { return known[id] })
	if err != nil {
		return err
	}
	if len(orphans) > 0 {
		var keys []string
		for _, o := range orphans {
			keys = append(keys, o.String())
		}
		return fmt.Errorf("orphaned objects of %s (%s)", strings.Join(keys, ", "), state)
	}
	return nil
}
