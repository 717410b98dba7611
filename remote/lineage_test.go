package remote

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tierlog/tierlog/epochcache"
)

// TestSegmentWithinLineageFiltersBoth: the lineage is filtered like the
// segment's epochs, so a caller passing the log's raw epoch entries (with
// an epoch that holds no record) gets the answer of the filtered lineage.
func TestSegmentWithinLineageFiltersBoth(t *testing.T) {
	raw := []epochcache.Entry{{Epoch: 0, StartOffset: 0}, {Epoch: 1, StartOffset: 100}, {Epoch: 2, StartOffset: 100}}
	filtered := FilterLineage(raw)
	require.Equal(t, []epochcache.Entry{{Epoch: 0, StartOffset: 0}, {Epoch: 2, StartOffset: 100}}, filtered)
	m := &SegmentMetadata{StartOffset: 0, EndOffset: 149,
		SegmentLeaderEpochs: []epochcache.Entry{{Epoch: 0, StartOffset: 0}, {Epoch: 2, StartOffset: 100}}}
	require.True(t, SegmentWithinLineage(m, 200, filtered))
	require.True(t, SegmentWithinLineage(m, 200, raw), "the empty epoch 1 is dropped from the lineage too")
	// The segment's own empty epochs were always dropped.
	m.SegmentLeaderEpochs = raw
	require.True(t, SegmentWithinLineage(m, 200, raw))
	// A lineage with no empty epoch is used as is.
	require.Equal(t, filtered, filterLineageIfNeeded(filtered))
}
