package log

import (
	"bytes"
	"io"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// TestBackgroundFlushWritesSegmentRecoveryPoints appends without a flush
// policy: the appends start background flushes that advance the recovery
// point and write segment recovery points, and an open of a crash image
// (nothing unsynced kept) resumes at the last one, reading only the
// bytes after it, with every batch below the point intact. With the
// option off, nothing is flushed and the image recovers empty.
func TestBackgroundFlushWritesSegmentRecoveryPoints(t *testing.T) {
	for _, iv := range []int64{4096, -1} {
		mem := newCrashDisk(t)
		o := Options{RecoveryPointIntervalBytes: iv, SegmentBytes: 1 << 20}
		l := openTestLog(t, mem, o)
		var want [][]byte
		for range 40 {
			b := buildBatches(t, 1, 3, 300, 1_000_000, 0, -1)
			_, err := l.AppendAsLeader(b, 0, OriginClient)
			require.NoError(t, err)
			want = append(want, bytes.Clone(b))
			l.background.Wait() // one at a time, so the test is deterministic
		}
		rp := l.Metrics().RecoveryPoint
		img := mem.CrashClone(vfs.CrashCloneCfg{})
		require.NoError(t, l.Close())
		if iv < 0 {
			require.Zero(t, rp, "a background flush ran with the option off")
		} else {
			require.Positive(t, rp, "no background flush advanced the recovery point")
		}

		o.FS = img
		l2, err := Open("p0", o)
		require.NoError(t, err)
		m := l2.Metrics()
		require.GreaterOrEqual(t, m.LogEndOffset, rp, "a flushed batch is lost")
		require.Zero(t, m.RecoveryCuts)
		if iv > 0 {
			require.Positive(t, m.RecoverySkippedBytes, "recovery did not resume at a segment recovery point")
			f, err := img.Open("p0/" + OffsetsCheckpointFileName)
			require.NoError(t, err)
			data, err := io.ReadAll(f)
			require.NoError(t, err)
			require.NoError(t, f.Close())
			require.Contains(t, string(data), keySegmentPoint+" ")
		} else {
			require.Zero(t, m.RecoverySkippedBytes)
		}
		for i := 0; i < int(m.LogEndOffset/3); i++ {
			info, err := l2.Read(nil, int64(i*3), 1, IsolationLogEnd, true)
			require.NoError(t, err)
			require.True(t, bytes.Equal(info.Records, want[i]), "batch %d differs", i)
		}
		require.NoError(t, l2.Close())
	}
}
