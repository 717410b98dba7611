package consolidate

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/tierstate"
	"github.com/tierlog/tierlog/wal"
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

// After a seal lowered below the WAL's first batch (start-phase-2 at 60
// with the diskless records from 100), the first consolidated batch
// lands past the log end. The fetcher starts E_d at the seal, so the
// records past the seal read as the consolidated suffix they are, not as
// a classic tail (which the driver would truncate to the seal).
func TestFetcherStartsDisklessEpochAtLoweredSeal(t *testing.T) {
	e := newWALEnv(t)
	res, err := e.cp.InitDisklessLog(e.ctx, []wal.InitDisklessLogRequest{{Partition: walTP(e.tp), Topic: e.tp.Topic,
		LogStartOffset: 0, DisklessStartOffset: 100}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	state, err := committedSeal(t, 100, nil).StartPhaseTwo(60, -1, 4)
	require.NoError(t, err)
	_, err = e.cp.RepairDisklessLog(e.ctx, []wal.RepairDisklessLogRequest{{Partition: walTP(e.tp), DisklessStartOffset: 60}})
	require.NoError(t, err)
	require.Equal(t, int64(100), e.produce(20, "d"))

	l := e.openLog("leader")
	require.NoError(t, l.TruncateFullyAndStartAt(60, 60))
	e.parts.set(e.tp, state, l)
	ep := e.endpoint(EndpointOptions{})
	f, err := NewFetcher(FetcherOptions{Endpoint: ep, Machine: e.machine(ep, checkpointData{}), Clock: &manualClock{}})
	require.NoError(t, err)
	require.NoError(t, f.Add(FetcherPartition{Partition: e.tp, Log: l, State: state, CurrentLeaderEpoch: 4}))
	_, err = f.Step(e.ctx)
	require.NoError(t, err)
	require.Equal(t, int64(120), l.LogEndOffset())
	require.Equal(t, "5@60", epochcache.FormatEntries(l.EpochEntries()))
	require.True(t, tierstate.HasConsolidatedDisklessSuffixFromSeal(state, l))
}
