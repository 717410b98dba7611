package consolidate

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/epochcache"
)

// Without a recorded epoch (an operator's start-phase-2,
// github.com/aiven/inkless/pull/855) the epochs below E_d may have no
// records: the leader epoch grew through elections after the last
// classic record. OffsetsForLeaderEpoch then answers, as Kafka does, the
// largest epoch at or below the one asked that the lineage has: the
// epoch remote storage holds at seal - 1. A rebuild asking for E_d - 1
// finds its target segment.
func TestEndpointEpochEndWithoutRecordedEpoch(t *testing.T) {
	e := newWALEnv(t)
	state := e.switchAt(0, 100, -1)
	require.Equal(t, int32(5), state.DisklessLeaderEpoch())
	e.parts.set(e.tp, state, e.openLog("leader"))
	ep := e.endpoint(EndpointOptions{})

	// No segment holds 99 yet: the E_d split as before.
	end, err := ep.FetchEpochEndOffset(e.ctx, e.tp, 5, 4)
	require.NoError(t, err)
	require.Equal(t, epochcache.EpochEndOffset{Epoch: 4, EndOffset: 100}, end)

	e.addSegment(0, 99, epochcache.Entry{Epoch: 0, StartOffset: 0}, epochcache.Entry{Epoch: 1, StartOffset: 40})
	for _, tc := range []struct{ asked, want int32 }{{4, 1}, {1, 1}, {0, 0}} {
		end, err = ep.FetchEpochEndOffset(e.ctx, e.tp, 5, tc.asked)
		require.NoError(t, err)
		require.Equal(t, epochcache.EpochEndOffset{Epoch: tc.want, EndOffset: 100}, end, "asked %d", tc.asked)
	}
	// E_d and later still end at the WAL's end.
	end, err = ep.FetchEpochEndOffset(e.ctx, e.tp, 5, 5)
	require.NoError(t, err)
	require.Equal(t, int32(5), end.Epoch)
}
