package segment

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDetachedSegmentIgnoresForeignIndex: a reader of an older segment
// list may still hold a segment whose files were removed, while a new
// segment at the same base offset took the file names (the log truncated
// fully and restarted at that base). The old object's first index lookup
// must rebuild from its own open .log, not load the new segment's index,
// whose positions mean nothing in the old file.
func TestDetachedSegmentIgnoresForeignIndex(t *testing.T) {
	fs := newMemDir(t)
	opts := Options{IndexIntervalBytes: 1}

	// The old segment: 20 batches with 100-byte values, indexes on disk.
	old, err := Create(fs, testDir, 0, 0, opts)
	require.NoError(t, err)
	data, _ := batchesOf(t, 0, 20, 100)
	require.NoError(t, old.Append(19, data))
	require.NoError(t, old.OnBecomeInactive())
	require.NoError(t, old.Close())
	// Reopened from disk: its indexes are not loaded yet.
	old, err = Open(fs, testDir, 0, 0, opts)
	require.NoError(t, err)
	defer old.Close()

	require.NoError(t, old.RemoveFiles())

	// The new segment at the same base: different batch sizes, so its
	// index positions fall inside the old file's batches.
	fresh, err := Create(fs, testDir, 0, 0, opts)
	require.NoError(t, err)
	defer fresh.Close()
	freshData, _ := batchesOf(t, 0, 20, 7)
	require.NoError(t, fresh.Append(19, freshData))
	require.NoError(t, fresh.Flush())

	for _, offset := range []int64{3, 11, 19} {
		res, err := old.Read(nil, offset, 1<<20, -1, true)
		require.NoError(t, err, "offset %d", offset)
		require.True(t, res.Found)
		require.Equal(t, offset, res.BatchBaseOffset, "the old segment's own batch")
	}
}
