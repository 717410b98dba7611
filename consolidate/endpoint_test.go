package consolidate

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/remote"
)

// The recreated leader of github.com/aiven/inkless/pull/857 against a real
// WAL on mem: seal 100 before the first prune (W = 0), diskless records
// [100, 160), an empty local log. The consolidation fetch at 0 waits
// while remote storage lacks 99, is redirected once the segment holding 99
// in the recorded epoch 2 is finished, and the fetch at the seal is served.
func TestEndpointRecreatedLeaderBeforeFirstPrune(t *testing.T) {
	e := newWALEnv(t)
	state := e.switchAt(0, 100, 2)
	require.Equal(t, int64(100), e.produce(20, "a"))
	require.Equal(t, int64(120), e.produce(20, "b"))
	require.Equal(t, int64(140), e.produce(20, "c"))
	local := e.openLog("leader")
	e.parts.set(e.tp, state, local)
	e.xs.set(e.tp, 0)
	ep := e.endpoint(EndpointOptions{})

	// Remote storage holds [0, 59] only.
	e.addSegment(0, 59, epochcache.Entry{Epoch: 0, StartOffset: 0})
	res, err := ep.Fetch(e.ctx, []FetchPartition{{Partition: e.tp, Offset: 0}})
	require.NoError(t, err)
	require.ErrorIs(t, res[0].Err, ErrNotLeaderOrFollower)
	require.True(t, res[0].RemotePrefixUnknown)
	require.Empty(t, res[0].Records, "never consolidate below the seal")
	require.Equal(t, int64(0), res[0].LogStartOffset)

	// A segment holding 99 in a discarded epoch does not cover the seal.
	e.addSegment(60, 119, epochcache.Entry{Epoch: 1, StartOffset: 60})
	res, err = ep.Fetch(e.ctx, []FetchPartition{{Partition: e.tp, Offset: 0}})
	require.NoError(t, err)
	require.ErrorIs(t, res[0].Err, ErrNotLeaderOrFollower)

	// The segment holding 99 in epoch 2: redirect.
	e.addSegment(60, 99, epochcache.Entry{Epoch: 0, StartOffset: 60}, epochcache.Entry{Epoch: 2, StartOffset: 80})
	res, err = ep.Fetch(e.ctx, []FetchPartition{{Partition: e.tp, Offset: 0}})
	require.NoError(t, err)
	require.ErrorIs(t, res[0].Err, ErrOffsetMovedToTieredStorage)
	require.Equal(t, FetchOffsetMovedToTieredStorage, res[0].Code)
	require.False(t, res[0].RemotePrefixUnknown)
	require.Equal(t, int64(160), res[0].HighWatermark)

	got, err := ep.FetchEarliestLocalOffset(e.ctx, e.tp, 4)
	require.NoError(t, err)
	require.Equal(t, epochcache.OffsetAndEpoch{Offset: 100, Epoch: 5}, got, "the first-prune bound: the seal, in E_d")

	// The fetch at the seal is served from the WAL.
	res, err = ep.Fetch(e.ctx, []FetchPartition{{Partition: e.tp, Offset: 100}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	v := values(t, res[0].Records)
	require.Len(t, v, 60)
	require.Equal(t, "100:a-0", v[0])
	require.Equal(t, "159:c-19", v[59])

	m := ep.Metrics()
	require.Equal(t, int64(1), m.Redirects)
	require.Equal(t, int64(2), m.PrefixUnknown)
	require.Equal(t, int64(3), m.CoverageLookups)
}

// DeleteRecords at the seal moved X to 100 while W stays 0: the fetch at 0
// is answered OFFSET_OUT_OF_RANGE without a remote lookup, even though
// remote storage still lists a segment holding 99.
func TestEndpointDeletedPrefixResetsBeforeRemoteLookup(t *testing.T) {
	e := newWALEnv(t)
	state := e.switchAt(0, 100, 2)
	e.produce(10, "a")
	e.parts.set(e.tp, state, e.openLog("leader"))
	e.addSegment(0, 99, epochcache.Entry{Epoch: 2, StartOffset: 0})
	e.xs.set(e.tp, 100)
	ep := e.endpoint(EndpointOptions{})

	res, err := ep.Fetch(e.ctx, []FetchPartition{{Partition: e.tp, Offset: 0}})
	require.NoError(t, err)
	require.ErrorIs(t, res[0].Err, ErrOffsetOutOfRange)
	require.Equal(t, int64(0), ep.Metrics().CoverageLookups)
	require.Equal(t, int64(1), ep.Metrics().Resets)

	// The reset starts the local log at the endpoint's earliest offset.
	x, err := ep.FetchEarliestOffset(e.ctx, e.tp, 4)
	require.NoError(t, err)
	require.Equal(t, int64(0), x.Offset, "the control plane's X is not advanced in this test")
}

// Without a recorded epoch the coverage of seal - 1 is looked up in any
// epoch, through the segment listing.
func TestEndpointCoverageWithoutRecordedEpoch(t *testing.T) {
	e := newWALEnv(t)
	_ = e.switchAt(0, 100, 2)
	s, err := committedSeal(t, 100, nil).StartPhaseTwo(100, -1, 4)
	require.NoError(t, err)
	require.Equal(t, int32(-1), s.LastClassicLeaderEpoch())
	e.parts.set(e.tp, s, e.openLog("leader"))
	ep := e.endpoint(EndpointOptions{})

	res, err := ep.Fetch(e.ctx, []FetchPartition{{Partition: e.tp, Offset: 0}})
	require.NoError(t, err)
	require.ErrorIs(t, res[0].Err, ErrNotLeaderOrFollower)
	e.addSegment(50, 99, epochcache.Entry{Epoch: 7, StartOffset: 50})
	res, err = ep.Fetch(e.ctx, []FetchPartition{{Partition: e.tp, Offset: 0}})
	require.NoError(t, err)
	require.ErrorIs(t, res[0].Err, ErrOffsetMovedToTieredStorage)
}

// Each partition's answer is trimmed to the budget: with a budget of one
// byte every fetch returns exactly one batch, and a fetch inside a batch
// returns that batch.
func TestEndpointTrimsToBudget(t *testing.T) {
	e := newWALEnv(t)
	state := e.switchAt(0, 100, 2)
	for range 4 {
		e.produce(5, "x")
	}
	l := e.openLog("leader")
	e.parts.set(e.tp, state, l)
	ep := e.endpoint(EndpointOptions{SegmentBytes: 4096, MaxMessageBytes: 1 << 20})
	for _, tc := range []struct{ offset, first, last int64 }{{100, 100, 104}, {105, 105, 109}, {112, 110, 114}, {119, 115, 119}} {
		res, err := ep.Fetch(e.ctx, []FetchPartition{{Partition: e.tp, Offset: tc.offset}})
		require.NoError(t, err)
		require.NoError(t, res[0].Err)
		v := values(t, res[0].Records)
		require.Len(t, v, 5, "offset %d", tc.offset)
		require.Equal(t, tc.first, offsetOf(t, v[0]))
		require.Equal(t, tc.last, offsetOf(t, v[4]))
	}
	res, err := ep.Fetch(e.ctx, []FetchPartition{{Partition: e.tp, Offset: 120}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	require.Empty(t, res[0].Records, "at the high watermark")
	require.NotNil(t, res[0].Records, "an empty record set, not a null one")
	res, err = ep.Fetch(e.ctx, []FetchPartition{{Partition: remote.TopicIDPartition{Topic: "unknown"}, Offset: 0}})
	require.NoError(t, err)
	require.Error(t, res[0].Err)
	require.NotNil(t, res[0].Records, "an empty record set with an error too")
}

func offsetOf(t *testing.T, v string) int64 {
	o, _, _ := strings.Cut(v, ":")
	n, err := strconv.ParseInt(o, 10, 64)
	require.NoError(t, err)
	return n
}

// The other endpoint calls through the control plane, with the E_d split.
func TestEndpointOffsets(t *testing.T) {
	e := newWALEnv(t)
	state := e.switchAt(0, 100, 2)
	e.produce(60, "a")
	e.parts.set(e.tp, state, e.openLog("leader"))
	ep := e.endpoint(EndpointOptions{})

	end, err := ep.FetchEpochEndOffset(e.ctx, e.tp, 4, 3)
	require.NoError(t, err)
	require.Equal(t, epochcache.EpochEndOffset{Epoch: 3, EndOffset: 100}, end)
	end, err = ep.FetchEpochEndOffset(e.ctx, e.tp, 4, 5)
	require.NoError(t, err)
	require.Equal(t, epochcache.EpochEndOffset{Epoch: 5, EndOffset: 160}, end)
	end, err = ep.FetchEpochEndOffset(e.ctx, e.tp, 4, -1)
	require.NoError(t, err)
	require.True(t, end.Undefined())

	latest, err := ep.FetchLatestOffset(e.ctx, e.tp, 4)
	require.NoError(t, err)
	require.Equal(t, epochcache.OffsetAndEpoch{Offset: 160, Epoch: 5}, latest)

	// An unknown partition, and a known one the control plane lacks.
	other := remote.TopicIDPartition{TopicID: testTopic, Topic: "orders", Partition: 9}
	_, err = ep.FetchEpochEndOffset(e.ctx, other, 4, 5)
	require.ErrorIs(t, err, ErrUnknownTopicOrPartition)
	e.parts.set(other, state, nil)
	_, err = ep.FetchEpochEndOffset(e.ctx, other, 4, 5)
	require.ErrorIs(t, err, ErrUnknownTopicOrPartition)
	res, err := ep.Fetch(e.ctx, []FetchPartition{{Partition: other, Offset: 0}})
	require.NoError(t, err)
	require.Error(t, res[0].Err)
	require.False(t, errors.Is(res[0].Err, ErrOffsetMovedToTieredStorage))
	require.Equal(t, int64(-1), res[0].LogStartOffset)
}
