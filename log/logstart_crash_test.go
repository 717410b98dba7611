package log

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/harness/crashtest"
)

// TestLogStartRaiseIsCrashSafe crashes before every file operation of a
// log start raise (a DeleteRecords on the leader or a follower, inside a
// segment, at an epoch boundary, at the log end; and the retention that
// deletes the segments below it, or raises the log start itself) and
// reopens each crash image, keeping none and all of the unsynced data.
// Every image must hold a log whose log start lies between the old and
// the new one and whose every batch from the log start on has its epoch
// in the epoch cache; once the raise has returned, an image must keep it.
//
// The raise truncates the epoch cache from the start (Kafka's
// LeaderEpochFileCache.truncateFromStartAsyncFlush); a cache written with
// that truncation while the offsets checkpoint still held the old log
// start gave, after a crash, records below the cache's first entry (or
// none at all when the raise reached the log end, where the load's
// truncation from the end drops the moved entry), which a follower
// copying them reads in their batches' epochs (the simulation's
// LineageDiverged).
func TestLogStartRaiseIsCrashSafe(t *testing.T) {
	for _, tc := range []struct {
		name string
		// raise is the log start raise; 0 skips it.
		raise int64
		// retention runs DeleteOldSegments after the raise, on a log
		// keeping at most retentionBytes (0: no size limit).
		retention      bool
		retentionBytes int64
	}{
		{name: "inside-segment", raise: 7},
		{name: "epoch-boundary", raise: 10},
		{name: "log-end", raise: 30},
		{name: "inside-segment-then-retention", raise: 17, retention: true},
		{name: "log-end-then-retention", raise: 30, retention: true},
		{name: "retention-size", retention: true, retentionBytes: 900},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := newCrashDisk(t)
			opts := Options{SegmentBytes: 400, RetentionBytes: -1}
			if tc.retentionBytes > 0 {
				opts.RetentionBytes = tc.retentionBytes
			}
			// lo and hi bound the log start an image may show; done
			// is set once the operation returned.
			var lo, hi int64
			rng := rand.New(rand.NewPCG(1, 2))
			check := func(point int, what string) error {
				for _, pct := range []int{0, 100} {
					clone := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rng})
					if err := checkLogStartClone(clone, opts, lo, hi); err != nil {
						return fmt.Errorf("crash point %d (before %s), %d%% unsynced kept: %w", point, what, pct, err)
					}
				}
				return nil
			}
			rec := crashtest.New(1, check)
			l := openTestLog(t, rec.Wrap(mem), opts)
			defer func() { require.NoError(t, l.Close()) }()
			for epoch := range int32(3) {
				appendRecords(t, l, epoch, 10, 1_000)
			}
			require.NoError(t, l.Flush())
			require.Greater(t, l.Metrics().Segments, 3)
			l.UpdateHighWatermark(30)

			lo, hi = 0, 0
			rec.Arm(true)
			if tc.raise > 0 {
				hi = tc.raise
				moved, err := l.MaybeIncrementLogStartOffset(tc.raise)
				require.NoError(t, err)
				require.True(t, moved)
				require.NoError(t, rec.Err())
				// Returned: the raise must survive a crash.
				lo = tc.raise
				require.NoError(t, check(0, "nothing: the raise returned"))
			}
			if tc.retention {
				// Retention may raise the log start to any segment
				// base up to the high watermark.
				hi = 30
				n, err := l.DeleteOldSegments()
				require.NoError(t, err)
				require.Positive(t, n)
				require.NoError(t, rec.Err())
				lo, hi = l.LogStartOffset(), l.LogStartOffset()
				require.NoError(t, check(0, "nothing: retention returned"))
			}
			rec.Arm(false)
			require.Greater(t, rec.Checked(), 1)
		})
	}
}

// checkLogStartClone opens the log of a crash image and checks it: every
// flushed record from its log start on, each batch with its epoch in the
// cache (readLogState), a log start in [lo, hi] and the log end 30.
func checkLogStartClone(clone *vfs.MemFS, opts Options, lo, hi int64) error {
	l, s, err := openImage(clone, opts)
	if l != nil {
		defer l.Close()
	}
	if err != nil {
		return err
	}
	if s.logStart < lo || s.logStart > hi {
		return fmt.Errorf("log start %d outside [%d, %d]\n%s", s.logStart, lo, hi, s)
	}
	if s.leo != 30 {
		return fmt.Errorf("log end %d, want 30\n%s", s.leo, s)
	}
	if s.logStart < s.leo && len(s.batches) == 0 {
		return fmt.Errorf("no batch in [%d, %d)\n%s", s.logStart, s.leo, s)
	}
	if s.logStart < s.leo {
		if e, ok := l.EpochForOffset(s.logStart); !ok || e != s.batches[0].epoch {
			return fmt.Errorf("log start %d has epoch %d (%t), its batch %d: %s", s.logStart, e, ok,
				s.batches[0].epoch, epochcache.FormatEntries(s.epochs))
		}
	}
	return nil
}

// TestTruncateFullyBelowLogStartIsCrashSafe crashes before every file
// operation of a full truncation that lowers the log start (a follower
// whose leader's log ends below its log start: Kafka's
// truncateFullyAndStartAt(leaderEndOffset)) and of one that keeps it.
// Each image must hold the old log or a prefix of it (log start 15,
// every batch with its epoch: the segments are removed from the highest
// down, each removal durable before the next) or an empty log starting
// between the new log start and the old one; once the truncation has
// returned, the empty log at the new start. A checkpoint naming the
// lowered log start written while the old segments could still come back
// reopened them from there, with records
// below the epoch cache's first entry; and an image keeping the new
// segment but not the removals before it (100% of the unsynced directory
// entries) had a hole: the empty segment replacing an old one of its name
// (n = 15) or overlapping one (n = 22).
func TestTruncateFullyBelowLogStartIsCrashSafe(t *testing.T) {
	for _, n := range []int64{11, 0, 15, 22, 40} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			mem := newCrashDisk(t)
			opts := Options{SegmentBytes: 400, RetentionBytes: -1}
			rng := rand.New(rand.NewPCG(1, 2))
			done := false
			check := func(point int, what string) error {
				for _, pct := range []int{0, 100} {
					clone := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rng})
					if err := checkTruncateFullyClone(clone, opts, n, done); err != nil {
						return fmt.Errorf("crash point %d (before %s), %d%% unsynced kept: %w", point, what, pct, err)
					}
				}
				return nil
			}
			rec := crashtest.New(1, check)
			l := openTestLog(t, rec.Wrap(mem), opts)
			defer func() { require.NoError(t, l.Close()) }()
			for epoch := range int32(3) {
				appendRecords(t, l, epoch, 10, 1_000)
			}
			l.UpdateHighWatermark(30)
			_, err := l.MaybeIncrementLogStartOffset(15) // inside a segment
			require.NoError(t, err)
			require.NoError(t, l.Flush())
			require.Greater(t, l.Metrics().Segments, 3)

			rec.Arm(true)
			require.NoError(t, l.TruncateFullyAndStartAt(n, -1))
			require.NoError(t, rec.Err())
			done = true
			require.NoError(t, check(0, "nothing: the truncation returned"))
			rec.Arm(false)
			require.Greater(t, rec.Checked(), 1)
		})
	}
}

// checkTruncateFullyClone opens the log of a crash image of a full
// truncation to n of the log [15, 30): the old log (its log start raised
// to n at most) or an empty one starting in [min(n, 15), max(n, 15)],
// exactly at n once done.
func checkTruncateFullyClone(clone *vfs.MemFS, opts Options, n int64, done bool) error {
	l, s, err := openImage(clone, opts)
	if l != nil {
		defer l.Close()
	}
	if err != nil {
		return err
	}
	switch {
	case done && (s.logStart != n || s.leo != n):
		return fmt.Errorf("after the truncation: log [%d, %d), want an empty log at %d\n%s", s.logStart, s.leo, n, s)
	case s.logStart >= 15 && s.logStart <= max(n, 15) && s.leo > s.logStart && s.leo <= 30:
		// The old log or a prefix of it (its segments are removed from
		// the highest down, each removal durable before the next), its
		// log start raised to n at most (the new checkpoint over the
		// old segments): every record from its log start to its end,
		// each with its epoch (readLogState).
		next := s.logStart
		for _, b := range s.batches {
			if b.base > next {
				break
			}
			next = b.next
		}
		if next != s.leo {
			return fmt.Errorf("old log without the records [%d, %d)\n%s", next, s.leo, s)
		}
	case s.logStart == s.leo && s.logStart >= min(n, 15) && s.logStart <= max(n, 15):
	default:
		return fmt.Errorf("log [%d, %d): neither a prefix of the old log [15, 30) nor an empty one at %d..%d\n%s",
			s.logStart, s.leo, min(n, 15), max(n, 15), s)
	}
	return nil
}

// TestRecoveryAfterTruncationBelowLogStart crashes before every file
// operation of a follower's append after a truncation below its log
// start, and reopens each image. DeleteRecords moved the log start to
// the log end (10) of a log whose one segment holds batches [0, 5) and
// [5, 10) of epoch 6; a truncation to 7 (an out-of-range fetch: the new
// leader's log ends there) cuts at the batch start 5 and lowers the log
// start to 5, so the segment keeps [0, 5) of epoch 6 below the log start.
// The new leader then sends [5, 6) of epoch 4 and [6, 7) of epoch 8. An
// image of the append before the next flush (which writes the epoch
// checkpoint: until then it holds the truncation's empty list) recovers
// the segment; recovery assigned epoch 6 from the deleted batches below
// the log start, so the lower epoch 4 at 5 was skipped (recovery assigns
// only epochs above the latest, as Kafka's LogSegment.recover) and the
// cache said 6@5 8@6: the follower's lineage diverged from its leader's
// (the simulation's LineageDiverged, lone-leader seed 3112 with unclean
// elections).
func TestRecoveryAfterTruncationBelowLogStart(t *testing.T) {
	mem := newCrashDisk(t)
	opts := Options{SegmentBytes: 1 << 20, RetentionBytes: -1}
	rng := rand.New(rand.NewPCG(1, 2))
	check := func(point int, what string) error {
		for _, pct := range []int{0, 100} {
			clone := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rng})
			l, s, err := openImage(clone, opts)
			if l != nil {
				_ = l.Close()
			}
			if err != nil {
				return fmt.Errorf("crash point %d (before %s), %d%% unsynced kept: %w", point, what, pct, err)
			}
			if s.logStart != 5 {
				return fmt.Errorf("crash point %d (before %s), %d%% unsynced kept: log start %d, want 5\n%s",
					point, what, pct, s.logStart, s)
			}
		}
		return nil
	}
	rec := crashtest.New(1, check)
	l := openTestLog(t, rec.Wrap(mem), opts)
	defer func() { require.NoError(t, l.Close()) }()
	for range 2 {
		_, err := l.AppendAsLeader(buildBatches(t, 1, 5, 10, 1_000, 0, -1), 6, OriginClient)
		require.NoError(t, err)
	}
	require.NoError(t, l.Flush())
	l.UpdateHighWatermark(10)
	_, err := l.MaybeIncrementLogStartOffset(10)
	require.NoError(t, err)
	_, err = l.TruncateTo(7)
	require.NoError(t, err)
	require.Equal(t, [2]int64{5, 5}, [2]int64{l.LogStartOffset(), l.LogEndOffset()})

	rec.Arm(true)
	batches := append(buildBatches(t, 1, 1, 10, 1_000, 5, 4), buildBatches(t, 1, 1, 10, 1_000, 6, 8)...)
	_, err = l.AppendAsFollower(batches, 8)
	require.NoError(t, err)
	require.NoError(t, rec.Err())
	require.NoError(t, check(0, "nothing: the append returned"))
	rec.Arm(false)
	require.Positive(t, rec.Checked())
	require.Equal(t, "4@5 8@6", epochcache.FormatEntries(l.EpochEntries()))
}
