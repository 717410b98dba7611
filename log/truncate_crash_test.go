package log

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/internal/atomicfile"
	"github.com/tierlog/tierlog/internal/harness/crashtest"
)

// TestTruncateToIsCrashSafe crashes before every file operation of a
// truncation that removes the segments above its cut (a follower whose
// log diverged from its leader's: Kafka's UnifiedLog.truncateTo) and
// reopens each crash image: keeping none or all of the unsynced data
// (MemFS undoes the unlinks), and keeping the directory's entries whole,
// unlinks too. Every image must hold a prefix of the log: from the log start
// on its records one after the other, each the one written at its
// offset, up to a log end between the cut and the old log end; once the
// truncation has returned, the log end is the cut.
//
// The segments above the cut were once unlinked from the lowest up with
// no directory fsync between: an image keeping the unlink of a lower
// segment and undoing a higher one's reopened a log with a hole below
// its end, and a read at the hole was served from the next segment.
func TestTruncateToIsCrashSafe(t *testing.T) {
	for _, cut := range []int64{3, 10, 17} {
		t.Run(fmt.Sprint(cut), func(t *testing.T) {
			mem := newCrashDisk(t)
			opts := Options{SegmentBytes: 300, RetentionBytes: -1}
			rng := rand.New(rand.NewPCG(1, uint64(cut)))
			var written map[int64][]byte // base offset -> batch bytes
			done := false
			check := func(point int, what string) error {
				for _, pct := range []int{0, 100} {
					clone := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rng})
					if err := checkTruncateToClone(clone, opts, written, cut, done); err != nil {
						return fmt.Errorf("crash point %d (before %s), %d%% unsynced kept: %w", point, what, pct, err)
					}
				}
				// MemFS undoes every unlink since the directory's last
				// fsync, but a disk may keep them: the image with the
				// directory's entries kept whole (its fsync now, on the
				// live disk, is a state a crash could leave anyway).
				if err := atomicfile.SyncDir(mem, "p0"); err != nil {
					return err
				}
				clone := mem.CrashClone(vfs.CrashCloneCfg{})
				if err := checkTruncateToClone(clone, opts, written, cut, done); err != nil {
					return fmt.Errorf("crash point %d (before %s), the directory's entries kept: %w", point, what, err)
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
			require.Greater(t, l.Metrics().Segments, 4)
			s, err := readLogState(l)
			require.NoError(t, err)
			written = map[int64][]byte{}
			for _, b := range s.batches {
				written[b.base] = b.data
			}

			rec.Arm(true)
			truncated, err := l.TruncateTo(cut)
			require.NoError(t, err)
			require.True(t, truncated)
			require.NoError(t, rec.Err())
			done = true
			require.NoError(t, check(0, "nothing: the truncation returned"))
			rec.Arm(false)
			require.Greater(t, rec.Checked(), 2)
		})
	}
}

// checkTruncateToClone opens the log of a crash image of a truncation to
// cut of a log of 30 flushed records and checks that it holds a prefix
// of them: no hole from the log start to the log end, each batch the one
// written at its offset, a log end in [cut, 30] (cut once done).
func checkTruncateToClone(clone *vfs.MemFS, opts Options, written map[int64][]byte, cut int64, done bool) error {
	l, s, err := openImage(clone, opts)
	if l != nil {
		defer l.Close()
	}
	if err != nil {
		return err
	}
	switch {
	case done && s.leo != cut:
		return fmt.Errorf("log end %d after the truncation to %d returned\n%s", s.leo, cut, s)
	case s.leo < cut || s.leo > 30:
		return fmt.Errorf("log end %d outside [%d, 30]\n%s", s.leo, cut, s)
	}
	next := s.logStart
	for _, b := range s.batches {
		if b.base > next {
			return fmt.Errorf("hole [%d, %d) below the log end %d\n%s", next, b.base, s.leo, s)
		}
		if !bytes.Equal(b.data, written[b.base]) {
			return fmt.Errorf("batch [%d, %d) is not the one written there\n%s", b.base, b.next, s)
		}
		next = b.next
	}
	if next != s.leo {
		return fmt.Errorf("records end at %d, log end %d\n%s", next, s.leo, s)
	}
	return nil
}
