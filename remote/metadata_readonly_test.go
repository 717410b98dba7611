package remote

import (
	"context"
	"fmt"
	"sort"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"github.com/tierlog/tierlog/epochcache"
)

// dirListing is each file of dir with its size, sorted.
func dirListing(t *testing.T, fs vfs.FS, dir string) []string {
	t.Helper()
	names, err := fs.List(dir)
	require.NoError(t, err)
	var out []string
	for _, n := range names {
		st, err := fs.Stat(fs.PathJoin(dir, n))
		require.NoError(t, err)
		out = append(out, fmt.Sprintf("%s %d", n, st.Size()))
	}
	sort.Strings(out)
	return out
}

// TestOpenReadOnly: a read-only open lists what a writer stored, refuses
// writes, leaves the directory's files as they were, and refuses a
// directory without a database instead of creating one.
func TestOpenReadOnly(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	m, err := Open(fs, "meta", MetadataOptions{})
	require.NoError(t, err)
	tp0, tp1 := testPartition(1), testPartition(0)
	for _, tp := range []TopicIDPartition{tp0, tp1} {
		seg := SegmentMetadata{SegmentID: NewSegmentID(tp), EndOffset: 9,
			SegmentLeaderEpochs: []epochcache.Entry{{Epoch: 0, StartOffset: 0}}}
		require.NoError(t, m.AddSegment(ctx, seg))
	}
	require.NoError(t, m.Close())
	before := dirListing(t, fs, "meta")

	ro, err := Open(fs, "meta", MetadataOptions{ReadOnly: true})
	require.NoError(t, err)
	parts, err := ro.Partitions()
	require.NoError(t, err)
	require.Equal(t, []TopicIDPartition{tp1, tp0}, parts)
	segs, err := ro.ListSegments(tp0)
	require.NoError(t, err)
	require.Len(t, segs, 1)
	extra := SegmentMetadata{SegmentID: NewSegmentID(tp0), StartOffset: 10, EndOffset: 19,
		SegmentLeaderEpochs: []epochcache.Entry{{Epoch: 0, StartOffset: 10}}}
	require.Error(t, ro.AddSegment(ctx, extra))
	require.NoError(t, ro.Close())
	require.Equal(t, before, dirListing(t, fs, "meta"))

	_, err = Open(fs, "missing", MetadataOptions{ReadOnly: true})
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, err = fs.Stat("missing")
	require.Error(t, err, "a read-only open created the directory")
}
