package log

import (
	"errors"
	"io"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"github.com/tierlog/tierlog/log/internal/segment"
	"github.com/tierlog/tierlog/log/record"
)

// TestSegmentIndexes: the live entries of every segment, the active one
// included, name batches that start at the entry's position and end at its
// offset; a rolled segment's entries equal what its flushed .index decodes
// to.
func TestSegmentIndexes(t *testing.T) {
	fs := vfs.NewMem()
	l := openTestLog(t, fs, Options{SegmentBytes: 1200, IndexIntervalBytes: 1})
	appendRecords(t, l, 0, 40, 1_000)
	require.NoError(t, l.Flush())
	segs, err := l.Segments(0)
	require.NoError(t, err)
	require.Greater(t, len(segs), 2)
	for i, s := range segs {
		got, err := l.SegmentIndexes(s.BaseOffset)
		require.NoError(t, err)
		require.NotEmpty(t, got.OffsetIndex, "segment %d", s.BaseOffset)
		require.NotEmpty(t, got.TimeIndex, "segment %d", s.BaseOffset)
		for _, e := range got.OffsetIndex {
			info, err := l.Read(nil, e.Offset, 1, IsolationLogEnd, true)
			require.NoError(t, err)
			b, err := record.ReadBatch(info.Records)
			require.NoError(t, err)
			require.Equal(t, e.Offset, b.LastOffset(), "entry %+v", e)
		}
		if i == len(segs)-1 {
			continue // the active segment's index is written at roll and close
		}
		f, err := fs.Open(fs.PathJoin(l.dir, segment.IndexFileName(s.BaseOffset)))
		require.NoError(t, err)
		data, err := io.ReadAll(f)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		fromFile, err := DecodeOffsetIndex("file", s.BaseOffset, data)
		require.NoError(t, err)
		require.Equal(t, fromFile, got.OffsetIndex)
	}
	_, err = l.SegmentIndexes(segs[0].BaseOffset + 1)
	require.True(t, errors.Is(err, ErrSegmentNotFound), "%v", err)
	require.NoError(t, l.Close())
}
