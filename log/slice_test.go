package log

import (
	"bytes"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"github.com/tierlog/tierlog/internal/harness/countfs"
)

// TestPointReadOnePread: a point read of the log (Read with maxBytes 1
// and minOneMessage, the batch holding the offset) costs one pread of the
// segment file for every offset, and ReadSlice one pread of a header (two
// in a segment's first batch); ReadSlice names exactly the bytes Read
// returns, under each isolation bound.
func TestPointReadOnePread(t *testing.T) {
	fs := countfs.Wrap(vfs.NewMem())
	const records, batches = 16, 60
	l := openTestLog(t, fs, Options{SegmentBytes: 256 << 10})
	defer l.Close()
	for range batches {
		_, err := l.AppendAsLeader(buildBatches(t, 1, records, 1000, 1_000_000, 0, -1), 0, OriginClient)
		require.NoError(t, err)
	}
	require.Greater(t, l.Metrics().Segments, 2)
	hw := int64(batches*records - 37) // inside a batch
	l.UpdateHighWatermark(hw)

	st, err := l.acquireState()
	require.NoError(t, err)
	firstBatch := map[int64]bool{} // base offsets of segments
	for _, s := range st.view.segments {
		firstBatch[s.BaseOffset()] = true
	}
	st.view.unref()

	var buf []byte
	for o := int64(0); o < batches*records; o++ {
		before := fs.ReadAts.Load()
		info, err := l.Read(buf, o, 1, IsolationLogEnd, true)
		n := fs.ReadAts.Load() - before
		require.NoError(t, err)
		require.NotEmpty(t, info.Records, "offset %d", o)
		require.Equal(t, int64(1), n, "offset %d (batch %d): preads", o, info.BatchBaseOffset)
		want := int64(1)
		if firstBatch[info.BatchBaseOffset] {
			want = 2 // ReadSlice reads headers only: the first batch is never indexed
		}

		before = fs.ReadAts.Load()
		sl, err := l.ReadSlice(o, 1, IsolationLogEnd, true)
		n = fs.ReadAts.Load() - before
		require.NoError(t, err)
		require.LessOrEqual(t, n, want, "offset %d: ReadSlice preads", o)
		got := make([]byte, sl.Size)
		_, err = sl.File.ReadAt(got, sl.Position)
		require.NoError(t, err)
		sl.Release()
		require.True(t, bytes.Equal(got, info.Records), "offset %d: slice differs from Read", o)
		require.Equal(t, info.Position, sl.Position)
		require.Equal(t, info.SegmentBaseOffset, sl.SegmentBaseOffset)
		buf = info.Records[:0]

		// A consumer fetch up to the high watermark: whole batches
		// that end below it, as Read returns them.
		for _, iso := range []Isolation{IsolationHighWatermark, IsolationCommitted} {
			info, err := l.Read(buf, o, 64<<10, iso, false)
			if o >= hw {
				require.NoError(t, err)
				require.Empty(t, info.Records)
				continue
			}
			require.NoError(t, err)
			sl, err := l.ReadSlice(o, 64<<10, iso, false)
			require.NoError(t, err)
			got := make([]byte, sl.Size)
			if sl.Size > 0 {
				_, err = sl.File.ReadAt(got, sl.Position)
				require.NoError(t, err)
			}
			sl.Release()
			// The slice may end inside a batch where maxBytes falls;
			// Read returns whole batches only: its bytes are a prefix.
			require.True(t, bytes.HasPrefix(got, info.Records), "offset %d %s: slice %d bytes, read %d", o, iso, len(got), len(info.Records))
			buf = info.Records[:0]
		}
	}
}
