package remote

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/remote/objstore/mem"
)

// mgrEnv is a Manager over Pebble metadata and a StorageManager on an
// in-memory store, with the tasks driven by hand.
type mgrEnv struct {
	t       *testing.T
	fs      vfs.FS
	meta    *MetadataManager
	store   objstore.Store
	storage *StorageManager
	hooks   *hookStorage
	mgr     *Manager
	nowMs   atomic.Int64
}

// hookStorage runs hooks around the data plane's calls.
type hookStorage struct {
	SegmentStorage
	beforeCopy   func(m *SegmentMetadata) error
	beforeDelete func(m *SegmentMetadata) error
	copies       atomic.Int64
	deletes      atomic.Int64
}

func (h *hookStorage) CopySegment(ctx context.Context, m *SegmentMetadata, d SegmentData) ([]byte, error) {
	h.copies.Add(1)
	if h.beforeCopy != nil {
		if err := h.beforeCopy(m); err != nil {
			return nil, err
		}
	}
	return h.SegmentStorage.CopySegment(ctx, m, d)
}

func (h *hookStorage) DeleteSegment(ctx context.Context, m *SegmentMetadata) error {
	h.deletes.Add(1)
	if h.beforeDelete != nil {
		if err := h.beforeDelete(m); err != nil {
			return err
		}
	}
	return h.SegmentStorage.DeleteSegment(ctx, m)
}

func newMgrEnv(t *testing.T, store objstore.Store) *mgrEnv {
	t.Helper()
	e := &mgrEnv{t: t, fs: vfs.NewMem()}
	e.nowMs.Store(1_000_000)
	var err error
	e.meta, err = Open(e.fs, "meta", MetadataOptions{})
	require.NoError(t, err)
	if store == nil {
		store = mem.New(mem.Options{})
	}
	e.store = store
	e.storage, err = NewStorageManager(store, StorageOptions{ChunkSize: 512})
	require.NoError(t, err)
	e.hooks = &hookStorage{SegmentStorage: e.storage}
	e.mgr, err = NewManager(e.meta, e.hooks, ManagerOptions{
		BrokerID: 1, TaskInterval: -1, Now: func() time.Time { return time.UnixMilli(e.nowMs.Load()) },
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, e.mgr.Close())
		require.NoError(t, e.meta.Close())
	})
	return e
}

// openLog opens a remote-enabled log in dir on the env's FS.
func (e *mgrEnv) openLog(dir string, o log.Options) *log.UnifiedLog {
	e.t.Helper()
	o.FS = e.fs
	o.RemoteStorageEnabled = true
	o.Now = func() time.Time { return time.UnixMilli(e.nowMs.Load()) }
	if o.SegmentIndexBytes == 0 {
		o.SegmentIndexBytes = 4096
	}
	if o.IndexIntervalBytes == 0 {
		o.IndexIntervalBytes = 64
	}
	l, err := log.Open(dir, o)
	require.NoError(e.t, err)
	e.t.Cleanup(func() { _ = l.Close() })
	return l
}

// appendSegments appends n records per segment, one per batch, in epoch,
// rolling after each segment, and commits them.
func appendSegments(t *testing.T, l *log.UnifiedLog, epoch int32, segments, n int) {
	t.Helper()
	for range segments {
		for range n {
			opts := record.DefaultBuilderOptions()
			b := record.NewBuilder(opts)
			b.Add(1_000_000, []byte("k"), []byte(fmt.Sprintf("value-%d", l.LogEndOffset())))
			batch, err := b.Build()
			require.NoError(t, err)
			_, err = l.AppendAsLeader(batch, epoch, log.OriginClient)
			require.NoError(t, err)
		}
		require.NoError(t, l.Roll())
	}
	l.UpdateHighWatermark(l.LogEndOffset())
}

func finished(t *testing.T, meta *MetadataManager, tp TopicIDPartition) []SegmentMetadata {
	t.Helper()
	all, err := meta.ListSegments(tp)
	require.NoError(t, err)
	var out []SegmentMetadata
	for _, s := range all {
		if s.State == CopySegmentFinished {
			out = append(out, s)
		}
	}
	return out
}

func spans(segs []SegmentMetadata) string {
	s := ""
	for _, m := range segs {
		s += fmt.Sprintf("[%d,%d]%s ", m.StartOffset, m.EndOffset, epochcache.FormatEntries(m.SegmentLeaderEpochs))
	}
	return s
}

// TestCopyTaskCopiesRolledSegmentsBelowLSO: the copy task uploads every
// rolled segment below the last stable offset, never the active one, and
// installs the highest copied offset. A second run copies
// nothing new.
func TestCopyTaskCopiesRolledSegmentsBelowLSO(t *testing.T) {
	e := newMgrEnv(t, nil)
	tp := testPartition(0)
	l := e.openLog("p0", log.Options{})
	appendSegments(t, l, 0, 3, 5)
	require.NoError(t, e.mgr.OnLeadershipChange([]Partition{{TopicIDPartition: tp, Log: l}}, nil))
	require.NoError(t, runErr(e.mgr.RunCopy(context.Background(), tp)))
	require.Equal(t, "[0,4]0@0 [5,9]0@5 [10,14]0@10 ", spans(finished(t, e.meta, tp)))
	require.EqualValues(t, 14, l.HighestOffsetInRemoteStorage())
	require.NoError(t, runErr(e.mgr.RunCopy(context.Background(), tp)))
	require.EqualValues(t, 3, e.hooks.copies.Load())
	met := e.mgr.Metrics()
	require.EqualValues(t, 3, met.SegmentsCopied)
	require.Zero(t, met.Partitions[tp].CopyLagSegments)
}

// TestFailedCopyDeletesTheDanglingSegment: the upload fails; the
// STARTED metadata is moved to DELETE_STARTED and DELETE_FINISHED, the
// data deleted once, the failure counted, and the highest remote offset
// unchanged.
func TestFailedCopyDeletesTheDanglingSegment(t *testing.T) {
	e := newMgrEnv(t, nil)
	tp := testPartition(0)
	l := e.openLog("p0", log.Options{})
	appendSegments(t, l, 0, 2, 5)
	boom := errors.New("upload refused")
	e.hooks.beforeCopy = func(*SegmentMetadata) error { return boom }
	var events []string
	e.mgr.opts.Listener.CopyStart = func(CopyInfo) { events = append(events, "start") }
	e.mgr.opts.Listener.CopyError = func(_ CopyInfo, err error) { events = append(events, "error") }
	require.NoError(t, e.mgr.OnLeadershipChange([]Partition{{TopicIDPartition: tp, Log: l}}, nil))
	err := runErr(e.mgr.RunCopy(context.Background(), tp))
	require.ErrorIs(t, err, boom)
	all, err := e.meta.ListSegments(tp)
	require.NoError(t, err)
	require.Empty(t, all, "the dangling copy is DELETE_SEGMENT_FINISHED (forgotten)")
	require.EqualValues(t, 1, e.hooks.copies.Load())
	require.EqualValues(t, 1, e.hooks.deletes.Load())
	require.EqualValues(t, 1, e.mgr.Metrics().CopyErrors)
	require.EqualValues(t, base.UndefinedOffset, l.HighestOffsetInRemoteStorage())
	require.Equal(t, []string{"start", "error"}, events)
}

// truncatingLog runs a hook inside one of the log's reads, as a
// truncation racing with a task would.
type truncatingLog struct {
	*log.UnifiedLog
	afterEndOffset func()
}

func (l *truncatingLog) EndOffsetForEpoch(epoch int32) epochcache.EpochEndOffset {
	ans := l.UnifiedLog.EndOffsetForEpoch(epoch)
	if f := l.afterEndOffset; f != nil {
		l.afterEndOffset = nil
		f()
	}
	return ans
}

// TestFollowerTaskInstallsHighestRemoteOffsetWithTruncationCountFromBeforeTheLookup
// (the truncation fence of https://github.com/aiven/inkless/pull/857): the
// follower's log truncates while the task computes the highest remote
// offset from the old epoch cache. The install carries the count read
// before the lookup and is dropped; the next run installs the offset of the
// truncated log.
func TestFollowerTaskInstallsHighestRemoteOffsetWithTruncationCountFromBeforeTheLookup(t *testing.T) {
	e := newMgrEnv(t, nil)
	tp := testPartition(0)
	// The leader tiered [0,99] in epoch 0 and [100,149] in epoch 1.
	e.addFinished(tp, 0, 99, []epochcache.Entry{{Epoch: 0, StartOffset: 0}})
	e.addFinished(tp, 100, 149, []epochcache.Entry{{Epoch: 1, StartOffset: 100}})
	// The follower holds [0,100) in epoch 0 and [100,150) in epoch 1.
	inner := e.openLog("p0", log.Options{})
	appendSegments(t, inner, 0, 1, 100)
	appendSegments(t, inner, 1, 1, 50)
	l := &truncatingLog{UnifiedLog: inner}
	require.NoError(t, e.mgr.OnLeadershipChange(nil, []Partition{{TopicIDPartition: tp, Log: l}}))
	l.afterEndOffset = func() {
		// The follower finds that its epoch 1 diverged and cuts it.
		_, err := inner.TruncateTo(100)
		require.NoError(t, err)
	}
	res, err := e.mgr.RunFollower(context.Background(), tp)
	require.NoError(t, err)
	require.Equal(t, FollowerResult{HighestRemoteOffset: 149, Dropped: true}, res)
	require.EqualValues(t, base.UndefinedOffset, inner.HighestOffsetInRemoteStorage(),
		"149 was computed before the truncation to 100: dropped")
	res, err = e.mgr.RunFollower(context.Background(), tp)
	require.NoError(t, err)
	require.Equal(t, FollowerResult{HighestRemoteOffset: 99}, res)
	require.EqualValues(t, 99, inner.HighestOffsetInRemoteStorage())
}

// addFinished records a finished remote segment (metadata only).
func (e *mgrEnv) addFinished(tp TopicIDPartition, start, end int64, epochs []epochcache.Entry) SegmentMetadata {
	e.t.Helper()
	m := SegmentMetadata{
		SegmentID: NewSegmentID(tp), StartOffset: start, EndOffset: end, SegmentLeaderEpochs: epochs,
		SizeBytes: end - start + 1, State: CopySegmentFinished, TxnIndexEmpty: true,
	}
	require.NoError(e.t, e.meta.RegisterCopiedSegment(context.Background(), m))
	return m
}

// TestCopyTaskFindsCopiedOffsetAgainAfterTruncationDuringUpload (the
// truncation fence of https://github.com/aiven/inkless/pull/857): the
// leader loses leadership during the upload of [10,19] and truncates to 15;
// a new epoch writes 15..29. The install of 19 is dropped, and the next run
// derives the copied offset again (14, capped by the log's end of epoch 0)
// and uploads the records that replaced the discarded tail instead of
// resuming after 19.
func TestCopyTaskFindsCopiedOffsetAgainAfterTruncationDuringUpload(t *testing.T) {
	e := newMgrEnv(t, nil)
	tp := testPartition(0)
	l := e.openLog("p0", log.Options{})
	appendSegments(t, l, 0, 3, 10) // [0,10) [10,20) [20,30), active at 30
	e.hooks.beforeCopy = func(m *SegmentMetadata) error {
		if m.StartOffset == 10 {
			_, err := l.TruncateTo(15)
			require.NoError(t, err)
		}
		return nil
	}
	require.NoError(t, e.mgr.OnLeadershipChange([]Partition{{TopicIDPartition: tp, Log: l}}, nil))
	res, err := e.mgr.RunCopy(context.Background(), tp)
	require.NoError(t, err)
	require.Equal(t, CopyTruncated, res.Stop, "%s", res)
	require.Equal(t, "[0,9]0@0 [10,19]0@10 ", spans(res.Copied), "both uploads committed; the second one's install dropped")
	require.EqualValues(t, -1, res.CopiedOffset, "derived again by the next run")
	require.EqualValues(t, 9, l.HighestOffsetInRemoteStorage(), "19 was uploaded under the old count: dropped")
	require.Equal(t, "[0,9]0@0 [10,19]0@10 ", spans(finished(t, e.meta, tp)))

	e.hooks.beforeCopy = nil
	appendSegments(t, l, 1, 1, 15) // 15..29 in epoch 1, then roll
	res, err = e.mgr.RunCopy(context.Background(), tp)
	require.NoError(t, err)
	require.Equal(t, CopyCaughtUp, res.Stop, "%s", res)
	require.EqualValues(t, 29, res.CopiedOffset)
	got := finished(t, e.meta, tp)
	end := int64(-1)
	for _, s := range got {
		end = max(end, s.EndOffset)
	}
	require.EqualValues(t, 29, end, "segments %s", spans(got))
	require.EqualValues(t, 29, l.HighestOffsetInRemoteStorage())
	// Offset 15 of epoch 1 (the new leader's record) is in remote storage.
	seg, ok, err := e.meta.SegmentFor(tp, 1, 15)
	require.NoError(t, err)
	require.True(t, ok, "the records that replaced the discarded tail are uploaded: %s", spans(got))
	require.LessOrEqual(t, seg.StartOffset, int64(15))
}

// TestCopyLagMetrics: a copy run that fails midway leaves the segments it
// did not upload as lag, with the age of the oldest; a successful run
// clears it.
func TestCopyLagMetrics(t *testing.T) {
	e := newMgrEnv(t, nil)
	tp := testPartition(0)
	l := e.openLog("p0", log.Options{})
	appendSegments(t, l, 0, 3, 5)
	boom := errors.New("refused")
	e.hooks.beforeCopy = func(m *SegmentMetadata) error {
		if m.StartOffset == 5 {
			return boom
		}
		return nil
	}
	require.NoError(t, e.mgr.OnLeadershipChange([]Partition{{TopicIDPartition: tp, Log: l}}, nil))
	e.nowMs.Add(60_000)
	require.ErrorIs(t, runErr(e.mgr.RunCopy(context.Background(), tp)), boom)
	pm := e.mgr.Metrics().Partitions[tp]
	require.EqualValues(t, 2, pm.CopyLagSegments, "[5,9] and [10,14] wait")
	require.Positive(t, pm.CopyLagBytes)
	require.Equal(t, 60*time.Second, pm.CopyLagAge, "records stamped at the start, 60 s ago")
	require.EqualValues(t, 4, pm.HighestOffsetInRemoteStorage)
	e.hooks.beforeCopy = nil
	require.NoError(t, runErr(e.mgr.RunCopy(context.Background(), tp)))
	pm = e.mgr.Metrics().Partitions[tp]
	require.Zero(t, pm.CopyLagSegments)
	require.Zero(t, pm.CopyLagAge)
}

// runErr is the error of a task run whose result the test does not read.
func runErr[R any](_ R, err error) error { return err }

// errOnly drops the result of a task's Run method.
func errOnly[R any](run func(context.Context, TopicIDPartition) (R, error)) func(context.Context, TopicIDPartition) error {
	return func(ctx context.Context, tp TopicIDPartition) error { return runErr(run(ctx, tp)) }
}

// TestHighestRemoteOffset: what the tasks derive for a log, without
// installing it. An epoch's highest offset counts while a finished
// segment holds it; once another lineage's leader deleted the segments
// above the log start (the epoch cleanup), only what remote storage
// still holds counts, although the metadata's highest offset of the
// epoch is never lowered.
func TestHighestRemoteOffset(t *testing.T) {
	e := newMgrEnv(t, nil)
	tp := testPartition(0)
	e.addFinished(tp, 0, 99, []epochcache.Entry{{Epoch: 0, StartOffset: 0}})
	later := e.addFinished(tp, 100, 149, []epochcache.Entry{{Epoch: 1, StartOffset: 100}})
	l := e.openLog("p0", log.Options{})
	appendSegments(t, l, 0, 1, 100)
	appendSegments(t, l, 1, 1, 50)

	off, err := e.mgr.HighestRemoteOffset(tp, l)
	require.NoError(t, err)
	require.EqualValues(t, 149, off)

	ctx := context.Background()
	for _, s := range []SegmentState{DeleteSegmentStarted, DeleteSegmentFinished} {
		require.NoError(t, e.meta.UpdateSegment(ctx, SegmentMetadataUpdate{SegmentID: later.SegmentID, State: s}))
	}
	h, ok, err := e.meta.HighestOffsetForEpoch(tp, 1)
	require.NoError(t, err)
	require.True(t, ok)
	require.EqualValues(t, 149, h, "the metadata keeps the epoch's highest offset")
	off, err = e.mgr.HighestRemoteOffset(tp, l)
	require.NoError(t, err)
	require.EqualValues(t, 99, off, "[100, 149] is gone: only [0, 99] counts")
	require.EqualValues(t, base.UndefinedOffset, l.HighestOffsetInRemoteStorage(), "nothing installed")
}

// TestRemoteLineageHoleIsCopiedAgain: the log holds [0, 100) in epoch 0
// and [100, 150) in epoch 1; remote storage holds [100, 149] of epoch 1
// and, of this lineage, nothing below (another lineage's leader deleted
// the epoch-0 segment in its epoch cleanup, and this lineage leads
// again; the segment [0, 99] in epoch 3 is another lineage's and fills
// no hole). Kafka counts 149 as copied and its leader's first copy run
// raises the log start to 100, so local retention deletes [0, 100), its
// only copy. Here the tasks' highest offset stops at the hole (-1: none
// held from the local log start 0), the report keeps the log start at
// 0, and the run copies the log from 0 again.
func TestRemoteLineageHoleIsCopiedAgain(t *testing.T) {
	e := newMgrEnv(t, nil)
	tp := testPartition(0)
	e.addFinished(tp, 100, 149, []epochcache.Entry{{Epoch: 1, StartOffset: 100}})
	e.addFinished(tp, 0, 99, []epochcache.Entry{{Epoch: 3, StartOffset: 0}})
	l := e.openLog("p0", log.Options{RetentionMs: log.RetentionInfinite})
	appendSegments(t, l, 0, 1, 100)
	appendSegments(t, l, 1, 1, 50)
	l.UpdateHighWatermark(150)

	off, err := e.mgr.HighestRemoteOffset(tp, l)
	require.NoError(t, err)
	require.EqualValues(t, -1, off, "a hole at 0 below 149")

	require.NoError(t, e.mgr.OnLeadershipChange([]Partition{{TopicIDPartition: tp, Log: l}}, nil))
	res, err := e.mgr.RunCopy(context.Background(), tp)
	require.NoError(t, err)
	require.EqualValues(t, 0, res.LogStartReported)
	require.EqualValues(t, 0, l.LogStartOffset())
	var copied [][2]int64
	for _, m := range res.Copied {
		copied = append(copied, [2]int64{m.StartOffset, m.EndOffset})
	}
	require.Equal(t, [][2]int64{{0, 99}, {100, 149}}, copied)
	require.EqualValues(t, 149, l.HighestOffsetInRemoteStorage())
	off, err = e.mgr.HighestRemoteOffset(tp, l)
	require.NoError(t, err)
	require.EqualValues(t, 149, off)
}

// TestRemoteHoleBelowLogStart: below the log start nothing is a hole.
// Remote storage holds [120, 149] (an earlier leader's segments, whose
// boundaries differ from this log's), and retention deleted the segments
// below and raised the log start to 120 inside the local segment [100,
// 150): the local log start follows it to 120, the highest offset is
// 149, and a new leader's copy run uploads nothing again.
func TestRemoteHoleBelowLogStart(t *testing.T) {
	e := newMgrEnv(t, nil)
	tp := testPartition(0)
	e.addFinished(tp, 120, 149, []epochcache.Entry{{Epoch: 0, StartOffset: 120}})
	l := e.openLog("p0", log.Options{RetentionMs: log.RetentionInfinite})
	appendSegments(t, l, 0, 1, 100)
	appendSegments(t, l, 0, 1, 50)
	l.UpdateHighWatermark(150)
	_, err := l.UpdateLogStartOffsetFromRemoteTier(120)
	require.NoError(t, err)
	require.EqualValues(t, 120, l.LocalLogStartOffset())

	off, err := e.mgr.HighestRemoteOffset(tp, l)
	require.NoError(t, err)
	require.EqualValues(t, 149, off)
	require.NoError(t, e.mgr.OnLeadershipChange([]Partition{{TopicIDPartition: tp, Log: l}}, nil))
	res, err := e.mgr.RunCopy(context.Background(), tp)
	require.NoError(t, err)
	require.Empty(t, res.Copied)
	require.EqualValues(t, 120, l.LogStartOffset())
}

// rolledSegmentLog opens a log with local retention on and one rolled
// segment [0, 100) in epoch 1, none of it in remote storage.
func rolledSegmentLog(t *testing.T, e *mgrEnv) *log.UnifiedLog {
	t.Helper()
	l := e.openLog("p0", log.Options{RetentionMs: log.RetentionInfinite, LocalRetentionMs: 1})
	appendSegments(t, l, 1, 1, 100)
	require.NoError(t, l.Roll())
	return l
}

// requireLocalCopyKept runs local retention past its limit and requires
// it to keep [0, 100), the only copy.
func requireLocalCopyKept(t *testing.T, e *mgrEnv, l *log.UnifiedLog) {
	t.Helper()
	e.nowMs.Add(1000)
	n, err := l.DeleteOldSegments()
	require.NoError(t, err)
	require.Zero(t, n, "the only copy of [0, 100) stays")
}

// TestRegistrationCapsUnheldRemoteOffset: as a follower the log installed
// 99 as tiered ([0, 99] of its epoch 1 was copied); then the leader of
// another lineage deleted that segment (its epoch cleanup after an
// unclean election), and an unclean election makes this log the leader.
// Registering it caps what local retention counts as copied before any
// task runs, so retention keeps [0, 100), now the only copy.
func TestRegistrationCapsUnheldRemoteOffset(t *testing.T) {
	e, tp := newMgrEnv(t, nil), testPartition(0)
	l := rolledSegmentLog(t, e)
	require.True(t, l.UpdateHighestOffsetInRemoteStorage(99, l.TruncationCount()))
	require.EqualValues(t, 99, l.HighestOffsetInRemoteStorageInLineage())

	require.NoError(t, e.mgr.OnLeadershipChange([]Partition{{TopicIDPartition: tp, Log: l}}, nil))
	require.EqualValues(t, -1, l.HighestOffsetInRemoteStorageInLineage(), "no segment holds 99 any more")
	requireLocalCopyKept(t, e, l)
	require.EqualValues(t, 0, l.LocalLogStartOffset())
}

// A task that looked up an offset before the partition's role changed
// (its segments still listed then) and installs it after the
// registration's check is dropped: the registration fences the log's
// remote progress, so a task run outside the Manager's lifecycle (Kafka's
// RemoteLogManager cancels a task without waiting for it) cannot undo the
// check and let local retention delete the only copy.
func TestRegistrationFencesTaskLookedUpBefore(t *testing.T) {
	e, tp := newMgrEnv(t, nil), testPartition(0)
	l := rolledSegmentLog(t, e)
	count := l.TruncationCount() // the task's lookup: 99 was tiered then

	require.NoError(t, e.mgr.OnLeadershipChange([]Partition{{TopicIDPartition: tp, Log: l}}, nil))
	require.False(t, l.UpdateHighestOffsetInRemoteStorage(99, count), "computed before the registration")
	require.EqualValues(t, -1, l.HighestOffsetInRemoteStorageInLineage())
	requireLocalCopyKept(t, e, l)
	require.Zero(t, l.Metrics().Truncations, "a fence is not a truncation")
}
