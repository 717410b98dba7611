package log

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/log/record"
)

// openTestLog opens a log in p0 on fs with a fixed clock.
func openTestLog(t *testing.T, fs vfs.FS, o Options) *UnifiedLog {
	t.Helper()
	o.FS = fs
	if o.Now == nil {
		o.Now = func() time.Time { return time.UnixMilli(1_000_000) }
	}
	if o.SegmentIndexBytes == 0 {
		o.SegmentIndexBytes = 4096
	}
	l, err := Open("p0", o)
	require.NoError(t, err)
	return l
}

// appendRecords appends n single-record batches as leader in epoch.
func appendRecords(t *testing.T, l *UnifiedLog, epoch int32, n int, ts int64) {
	t.Helper()
	for i := 0; i < n; i++ {
		_, err := l.AppendAsLeader(buildBatches(t, 1, 1, 10, ts, 0, -1), epoch, OriginClient)
		require.NoError(t, err)
	}
}

// TestRetentionNeverDeletesAtOrAboveHighWatermark: expired records
// 0..99 in more than five segments; for each high watermark 0..100,
// retention keeps the log start at or below it, the first segment's base
// at or below it and every other base above it. At 100: log start 100 and
// one empty segment. (UnifiedLogTest
// testCannotDeleteSegmentsAtOrAboveHighWatermark.)
func TestRetentionNeverDeletesAtOrAboveHighWatermark(t *testing.T) {
	now := int64(10_000_000)
	l := openTestLog(t, vfs.NewMem(), Options{
		SegmentBytes: 1024, RetentionMs: 1000,
		Now: func() time.Time { return time.UnixMilli(now) },
	})
	defer l.Close()
	appendRecords(t, l, 0, 100, now-5000) // expired: older than retention
	require.Greater(t, l.Metrics().Segments, 5)
	for hw := int64(0); hw <= 100; hw++ {
		l.UpdateHighWatermark(hw)
		_, err := l.DeleteOldSegments()
		require.NoError(t, err)
		require.LessOrEqual(t, l.LogStartOffset(), hw)
		v, err := l.acquireView()
		require.NoError(t, err)
		require.LessOrEqual(t, v.segments[0].BaseOffset(), hw, "hw %d", hw)
		for _, s := range v.segments[1:] {
			require.Greater(t, s.BaseOffset(), hw, "hw %d", hw)
		}
		v.unref()
	}
	require.Equal(t, int64(100), l.LogStartOffset())
	require.Equal(t, 1, l.Metrics().Segments)
	require.Equal(t, int64(0), l.Metrics().Bytes)
}

// TestUpdateHighestOffsetInRemoteStorageIgnoresOffsetComputedBeforeTruncation
// ports the test of the same name in github.com/aiven/inkless/pull/857:
// truncateTo and
// truncateFullyAndStartAt make the log drop an offset computed before
// them, and a truncateTo without effect does not.
func TestUpdateHighestOffsetInRemoteStorageIgnoresOffsetComputedBeforeTruncation(t *testing.T) {
	l := openTestLog(t, vfs.NewMem(), Options{RemoteStorageEnabled: true})
	defer l.Close()
	appendRecords(t, l, 0, 120, 0)

	c := l.TruncationCount()
	changed, err := l.TruncateTo(100)
	require.NoError(t, err)
	require.True(t, changed)
	require.False(t, l.UpdateHighestOffsetInRemoteStorage(119, c))
	require.Equal(t, int64(-1), l.HighestOffsetInRemoteStorage())

	c = l.TruncationCount()
	require.NoError(t, l.TruncateFullyAndStartAt(100, -1))
	require.False(t, l.UpdateHighestOffsetInRemoteStorage(99, c))
	require.Equal(t, int64(-1), l.HighestOffsetInRemoteStorage())

	appendRecords(t, l, 0, 20, 0)
	c = l.TruncationCount()
	changed, err = l.TruncateTo(130)
	require.NoError(t, err)
	require.False(t, changed)
	require.True(t, l.UpdateHighestOffsetInRemoteStorage(119, c))
	require.Equal(t, int64(119), l.HighestOffsetInRemoteStorage())
}

// TestTruncationCountWaitsForRunningTruncation ports the test of the same
// name in github.com/aiven/inkless/pull/857: a truncateTo paused after it
// counted itself and before it truncated the epoch cache holds up a
// reader of the count, which then sees the new count together with the
// truncated cache. If the count were read without the log mutex, the
// reader would see the new count while the cache still held the removed
// epoch.
func TestTruncationCountWaitsForRunningTruncation(t *testing.T) {
	l := openTestLog(t, vfs.NewMem(), Options{RemoteStorageEnabled: true})
	defer l.Close()
	appendRecords(t, l, 0, 5, 0)
	appendRecords(t, l, 1, 5, 0) // epoch 1 starts at 5

	paused, resume := make(chan struct{}), make(chan struct{})
	l.testingKnobs.afterTruncationCounted = func() {
		close(paused)
		<-resume
	}
	done := make(chan error)
	go func() {
		_, err := l.TruncateTo(5)
		done <- err
	}()
	<-paused

	type observation struct {
		count  uint64
		epochs []epochcache.Entry
	}
	observed := make(chan observation)
	go func() {
		c := l.TruncationCount()
		observed <- observation{uint64(c), l.EpochEntries()}
	}()
	select {
	case o := <-observed:
		t.Fatalf("TruncationCount returned %d during a running truncation (epochs %v)", o.count, o.epochs)
	case <-time.After(50 * time.Millisecond):
		// Still waiting for the mutex, as it must. (A timeout can only
		// make this test pass wrongly, never fail wrongly.)
	}
	close(resume)
	require.NoError(t, <-done)
	o := <-observed
	require.Equal(t, uint64(1), o.count)
	require.Equal(t, []epochcache.Entry{{Epoch: 0, StartOffset: 0}}, o.epochs,
		"the new count must come with the truncated epoch cache")
}

// TestConcurrentReadsDuringWrites runs readers against appends, rolls,
// truncations and retention; under -race it checks the lock-free paths.
// Readers must only ever see whole batches with increasing offsets.
func TestConcurrentReadsDuringWrites(t *testing.T) {
	l := openTestLog(t, vfs.NewMem(), Options{SegmentBytes: 2048, RetentionBytes: 8192})
	defer l.Close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte
			for {
				select {
				case <-stop:
					return
				default:
				}
				start := l.LogStartOffset()
				info, err := l.Read(buf, start, 4096, IsolationHighWatermark, true)
				if err != nil {
					if errors.Is(err, ErrOffsetOutOfRange) {
						continue // retention or truncation moved the start
					}
					errs <- err
					return
				}
				buf = info.Records
				prev := int64(-1)
				s := record.NewScanner(info.Records, record.ScannerOptions{})
				for s.Next() {
					b := s.Batch()
					if b.BaseOffset() <= prev || b.LastOffset() >= info.HighWatermark {
						errs <- fmt.Errorf("batch [%d, %d] after %d, hw %d", b.BaseOffset(), b.LastOffset(), prev, info.HighWatermark)
						return
					}
					prev = b.LastOffset()
				}
				if err := s.Err(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := 0; i < 400; i++ {
		appendRecords(t, l, int32(i/100), 1, 0)
		l.UpdateHighWatermark(l.LogEndOffset())
		switch i % 50 {
		case 17:
			_, err := l.TruncateTo(l.LogEndOffset() - 3)
			require.NoError(t, err)
		case 31:
			_, err := l.DeleteOldSegments()
			require.NoError(t, err)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestClosedAndDeleted: after Close every method returns ErrClosed (reads
// included, never a hang); Close is idempotent; Delete removes the
// directory.
func TestClosedAndDeleted(t *testing.T) {
	fs := vfs.NewMem()
	l := openTestLog(t, fs, Options{})
	appendRecords(t, l, 0, 3, 0)
	require.NoError(t, l.Close())
	require.NoError(t, l.Close())

	_, err := l.Read(nil, 0, 100, IsolationLogEnd, true)
	require.ErrorIs(t, err, ErrClosed)
	_, err = l.AppendAsLeader(buildBatches(t, 1, 1, 10, 0, 0, -1), 0, OriginClient)
	require.ErrorIs(t, err, ErrClosed)
	_, err = l.TruncateTo(1)
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, l.Flush(), ErrClosed)
	_, _, err = l.ListOffsets(0)
	require.ErrorIs(t, err, ErrClosed)

	// The clean close left a marker; a reopen trusts the segments.
	l = openTestLog(t, fs, Options{})
	require.Equal(t, int64(3), l.LogEndOffset())
	require.NoError(t, l.Delete())
	_, err = fs.Stat("p0")
	require.True(t, errors.Is(err, os.ErrNotExist), "directory removed: %v", err)
	_, err = l.Read(nil, 0, 100, IsolationLogEnd, true)
	require.ErrorIs(t, err, ErrClosed)
}

// TestOptionsValidation: Open refuses impossible settings with
// ErrInvalidArgument and fills the defaults Kafka uses.
func TestOptionsValidation(t *testing.T) {
	for _, o := range []Options{
		{SegmentBytes: -1},
		{SegmentBytes: 1 << 32},
		{SegmentIndexBytes: 8},
		{RetentionBytes: -3},
		{LocalRetentionMs: -3},
		{FlushMessages: -1},
	} {
		o.FS = vfs.NewMem()
		_, err := Open("p0", o)
		require.ErrorIs(t, err, ErrInvalidArgument, "%+v", o)
	}
	o, err := Options{}.withDefaults()
	require.NoError(t, err)
	require.Equal(t, int64(1<<30), o.SegmentBytes)
	require.Equal(t, 4096, o.IndexIntervalBytes)
	require.Equal(t, RetentionInfinite, o.RetentionBytes)
	require.Equal(t, LocalRetentionDefault, o.LocalRetentionBytes)
	// Local retention resolves from the total settings (-2), and applies
	// only while segments are copied to remote storage.
	o.RetentionBytes, o.RemoteStorageEnabled = 100, true
	require.Equal(t, int64(100), o.localRetentionBytes())
	o.LocalRetentionBytes = 10
	require.Equal(t, int64(10), o.localRetentionBytes())
	o.RemoteLogCopyDisabled = true
	require.Equal(t, int64(100), o.localRetentionBytes())
}

// TestFlushPolicy: FlushMessages fsyncs once enough records are
// unflushed; FlushMs once the oldest unflushed append is old enough.
func TestFlushPolicy(t *testing.T) {
	now := int64(1_000_000)
	clock := func() time.Time { return time.UnixMilli(now) }
	l := openTestLog(t, vfs.NewMem(), Options{FlushMessages: 3, Now: clock})
	appendRecords(t, l, 0, 2, 0)
	require.Equal(t, int64(0), l.Metrics().RecoveryPoint)
	appendRecords(t, l, 0, 1, 0)
	require.Equal(t, int64(3), l.Metrics().RecoveryPoint, "the third record triggers the flush")
	require.NoError(t, l.Close())

	l = openTestLog(t, vfs.NewMem(), Options{FlushMs: 100, Now: clock})
	defer l.Close()
	appendRecords(t, l, 0, 1, 0)
	require.NoError(t, l.MaybeFlush())
	require.Equal(t, int64(0), l.Metrics().RecoveryPoint)
	now += 100
	require.NoError(t, l.MaybeFlush())
	require.Equal(t, int64(1), l.Metrics().RecoveryPoint)
	require.Positive(t, l.Metrics().Fsyncs)
}

// TestRetentionNone: a zero retention limit, which a literal 0 cannot ask
// for (0 is the default), is asked for with RetentionNone and stored as 0.
func TestRetentionNone(t *testing.T) {
	l, err := Open("p0", Options{FS: vfs.NewMem(), RetentionMs: RetentionNone, RetentionBytes: RetentionNone})
	require.NoError(t, err)
	defer l.Close()
	ms, bytes := l.Retention()
	require.Equal(t, int64(0), ms)
	require.Equal(t, int64(0), bytes)

	o, err := Options{LocalRetentionMs: RetentionNone, LocalRetentionBytes: RetentionNone,
		RemoteStorageEnabled: true}.withDefaults()
	require.NoError(t, err)
	require.Equal(t, int64(0), o.localRetentionMs())
	require.Equal(t, int64(0), o.localRetentionBytes())
	require.Equal(t, RetentionInfinite, o.RetentionBytes, "the total limit keeps its default")
}

// TestTruncationLowersHighestOffsetInRemoteStorage: a truncation below
// the highest offset in remote storage (an unclean leader change: remote
// storage holds another lineage's records there) keeps that offset, as
// Kafka does, but caps what local retention counts as copied below the
// new log end, so the records appended afterwards are not deleted as
// tiered; an install computed after the truncation lifts the cap; a
// truncation above the offset leaves everything as it is.
func TestTruncationLowersHighestOffsetInRemoteStorage(t *testing.T) {
	l := openTestLog(t, vfs.NewMem(), Options{RemoteStorageEnabled: true})
	defer l.Close()
	appendRecords(t, l, 0, 120, 0)
	require.True(t, l.UpdateHighestOffsetInRemoteStorage(99, l.TruncationCount()))
	deletable := func() int64 { return min(l.HighestOffsetInRemoteStorage(), l.remoteRetentionCap.Load()) }

	_, err := l.TruncateTo(110)
	require.NoError(t, err)
	require.Equal(t, int64(99), deletable(), "above it: kept")

	_, err = l.TruncateTo(50)
	require.NoError(t, err)
	require.Equal(t, int64(99), l.HighestOffsetInRemoteStorage(), "Kafka's value is kept")
	require.Equal(t, int64(49), deletable(), "below it: retention counts up to the new end - 1")
	appendRecords(t, l, 1, 30, 0) // [50, 80) in a new lineage
	require.False(t, l.UpdateHighestOffsetInRemoteStorage(59, l.TruncationCount()), "not above 99")
	require.Equal(t, int64(59), deletable(), "an install after the truncation lifts the cap")

	require.NoError(t, l.TruncateFullyAndStartAt(20, -1))
	require.Equal(t, int64(19), deletable())
	changed, err := l.TruncateTo(30)
	require.NoError(t, err)
	require.False(t, changed)
	require.Equal(t, int64(19), deletable(), "a truncation that changes nothing")
}

// TestTruncationBelowLocalLogStartKeepsRemotePrefix: a follower of a
// tiered log whose local log starts at L (remote storage holds the records
// below it) truncates to t < L after an unclean leader change. Kafka's
// truncateTo starts the log afresh at t (log start t, epoch cache
// cleared); here the log start and the epoch covering [0, t) stay, also
// across a reopen, so the remote prefix remains part of the log. Without
// remote storage the log starts at t as in Kafka.
func TestTruncationBelowLocalLogStartKeepsRemotePrefix(t *testing.T) {
	for _, remote := range []bool{true, false} {
		t.Run(fmt.Sprintf("remote=%t", remote), func(t *testing.T) {
			fs := vfs.NewMem()
			o := Options{SegmentBytes: 600, RemoteStorageEnabled: remote}
			if remote {
				o.LocalRetentionBytes = 1
			} else {
				o.RetentionBytes = 1
			}
			l := openTestLog(t, fs, o)
			appendRecords(t, l, 1, 60, 0)
			l.UpdateHighWatermark(l.LogEndOffset())
			if remote {
				require.True(t, l.UpdateHighestOffsetInRemoteStorage(56, l.TruncationCount()))
			}
			_, err := l.DeleteOldSegments()
			require.NoError(t, err)
			local := l.LocalLogStartOffset()
			require.Greater(t, local, int64(10), "retention deleted the first segments")
			target := local - 5

			changed, err := l.TruncateTo(target)
			require.NoError(t, err)
			require.True(t, changed)
			check := func(l *UnifiedLog) {
				require.Equal(t, target, l.LogEndOffset())
				require.Equal(t, target, l.LocalLogStartOffset())
				if remote {
					require.Equal(t, int64(0), l.LogStartOffset(), "remote storage holds [0, %d)", local)
					require.Equal(t, []epochcache.Entry{{Epoch: 1, StartOffset: 0}}, l.EpochEntries())
				} else {
					require.Equal(t, target, l.LogStartOffset())
					require.Empty(t, l.EpochEntries())
				}
			}
			check(l)
			require.NoError(t, l.Close())
			l = openTestLog(t, fs, o)
			defer l.Close()
			check(l)
		})
	}
}

// TestHighestOffsetInRemoteStorageInLineage: what the WAL pruner may
// trust. A truncation below the highest offset in remote storage (an
// unclean leader change) caps it below the new log end, though
// HighestOffsetInRemoteStorage keeps Kafka's value; an install computed
// after the truncation (remote storage now holds [0, 59] of this
// lineage) lifts the cap to it.
func TestHighestOffsetInRemoteStorageInLineage(t *testing.T) {
	l := openTestLog(t, vfs.NewMem(), Options{RemoteStorageEnabled: true})
	defer l.Close()
	appendRecords(t, l, 0, 120, 0)
	require.True(t, l.UpdateHighestOffsetInRemoteStorage(99, l.TruncationCount()))
	require.Equal(t, int64(99), l.HighestOffsetInRemoteStorageInLineage())

	_, err := l.TruncateTo(50)
	require.NoError(t, err)
	require.Equal(t, int64(99), l.HighestOffsetInRemoteStorage())
	require.Equal(t, int64(49), l.HighestOffsetInRemoteStorageInLineage())
	appendRecords(t, l, 1, 30, 0)
	require.Equal(t, int64(49), l.HighestOffsetInRemoteStorageInLineage(), "appends do not lift it")
	l.UpdateHighestOffsetInRemoteStorage(59, l.TruncationCount())
	require.Equal(t, int64(59), l.HighestOffsetInRemoteStorageInLineage())
}
