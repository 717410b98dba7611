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

// lineageAgreedEnd: a segment holds a lineage's records up to where
// their epochs part. github.com/aiven/inkless/pull/857's "local prefix"
// example: X's segment [0, 119] (epoch 0, then the discarded epoch 1
// from 80) holds A's lineage (epoch 0, then 2 from 80) to 79. Below the
// lineage's first entry (a cache truncated from the start at the log
// start 22) nothing agrees, unless the run starts at or past it.
func TestLineageAgreedEnd(t *testing.T) {
	e := func(pairs ...int64) []epochcache.Entry {
		var out []epochcache.Entry
		for i := 0; i < len(pairs); i += 2 {
			out = append(out, epochcache.Entry{Epoch: int32(pairs[i]), StartOffset: pairs[i+1]})
		}
		return out
	}
	for _, tc := range []struct {
		name       string
		start, end int64
		seg        []epochcache.Entry
		lineage    []epochcache.Entry
		from       int64
		want       int64
	}{
		{"local prefix", 0, 119, e(0, 0, 1, 80), e(0, 0, 2, 80), 0, 79},
		{"same lineage", 0, 119, e(0, 0, 1, 80), e(0, 0, 1, 80, 3, 200), 0, 119},
		{"the lineage's epoch ends inside", 0, 119, e(0, 0), e(0, 0, 2, 50), 0, 49},
		{"another lineage from the start", 0, 99, e(3, 0), e(0, 0, 1, 100), 0, -1},
		{"an older leader's records of the epoch", 10, 30, e(1, 10), e(0, 0, 1, 20), 0, 9},
		{"below the cache's first entry", 20, 24, e(1, 20), e(1, 22), 0, 19},
		{"from the cache's first entry", 20, 24, e(1, 20), e(1, 22), 22, 24},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &SegmentMetadata{StartOffset: tc.start, EndOffset: tc.end, SegmentLeaderEpochs: tc.seg}
			require.Equal(t, tc.want, lineageAgreedEnd(m, tc.lineage, tc.from))
		})
	}
}
