package consolidate

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/tierstate"
	"github.com/tierlog/tierlog/truncation"
	"github.com/tierlog/tierlog/wal"
)

// appendClassic appends n classic records to l as leader in epoch.
func appendClassic(t *testing.T, l *log.UnifiedLog, epoch int32, n int) {
	t.Helper()
	b := record.NewBuilder(record.DefaultBuilderOptions())
	for i := range n {
		b.Add(int64(i), nil, fmt.Appendf(nil, "classic-%d-%d", epoch, i))
	}
	buf, err := b.Build()
	require.NoError(t, err)
	_, err = l.AppendAsLeader(buf, epoch, log.OriginClient)
	require.NoError(t, err)
}

// sealedState is a consolidating partition whose seal is committed
// (phase 1), with the WAL row W = 0, HW = S.
func (e *walEnv) sealedState(seal int64) tierstate.State {
	e.t.Helper()
	res, err := e.cp.InitDisklessLog(e.ctx, []wal.InitDisklessLogRequest{{Partition: walTP(e.tp), Topic: e.tp.Topic,
		LogStartOffset: 0, DisklessStartOffset: seal}})
	require.NoError(e.t, err)
	require.NoError(e.t, res[0].Err)
	return committedSeal(e.t, seal, nil)
}

// stepAll runs the fetcher until no partition is ready (at most n steps).
func stepAll(t *testing.T, f *Fetcher, e *walEnv, n int) {
	t.Helper()
	for range n {
		served, err := f.Step(e.ctx)
		require.NoError(t, err)
		if served == 0 {
			return
		}
	}
}

// A leader with epoch cache 0@0 1@20 seals at 40 (phase 1: the seal
// commit writes no E_d). A diskless batch in the WAL (from a broker that
// did not hold produce) is not consolidated in phase 1: stamped with
// StampEpoch's old 0 it would turn the cache into 0@40 and the lineage of
// the classic prefix would be gone. The phase-2 flag commit in leader
// epoch 1 writes E_d = 2 (github.com/aiven/inkless/pull/827), and
// consolidation then appends at 40 in epoch 2.
func TestPhaseOneBatchIsNotConsolidated(t *testing.T) {
	e := newWALEnv(t)
	l := e.openLog("leader")
	appendClassic(t, l, 0, 20)
	appendClassic(t, l, 1, 20)
	l.UpdateHighWatermark(40)
	require.Equal(t, "0@0 1@20", epochcache.FormatEntries(l.EpochEntries()))

	phase1 := e.sealedState(40)
	require.Equal(t, int32(-1), phase1.DisklessLeaderEpoch())
	// (assert, not require: without the gate the test goes on to show
	// what consolidation does to the cache)
	assert.False(t, phase1.TakesDisklessRecords())
	err := DisklessProduceAllowed(phase1)
	assert.ErrorIs(t, err, ErrAwaitingPhaseTwo)
	var held *DisklessHeldError
	if assert.ErrorAs(t, err, &held) {
		assert.Equal(t, int64(40), held.Seal)
	}
	_, err = StampEpoch(phase1)
	assert.ErrorIs(t, err, ErrAwaitingPhaseTwo)

	base := e.produce(10, "d")
	require.Equal(t, int64(40), base)
	e.parts.set(e.tp, phase1, l)
	ep := e.endpoint(EndpointOptions{})
	f, err := NewFetcher(FetcherOptions{Endpoint: ep, Machine: e.machine(ep, checkpointData{}), Clock: &manualClock{}})
	require.NoError(t, err)
	require.NoError(t, f.Add(FetcherPartition{Partition: e.tp, Log: l, State: phase1, CurrentLeaderEpoch: 1}))
	stepAll(t, f, e, 5)
	require.Equal(t, "0@0 1@20", epochcache.FormatEntries(l.EpochEntries()), "a phase-1 batch was consolidated")
	require.Equal(t, int64(40), l.LogEndOffset())
	require.Zero(t, f.Metrics().Appends)

	phase2, err := phase1.SetClassicPrefixInRemoteStorage(
		tierstate.ClassicPrefixRequest{BrokerID: 1, LeaderEpoch: 1, Seal: 40, LastClassicLeaderEpoch: 1},
		tierstate.Leadership{Leader: 1, LeaderEpoch: 1})
	require.NoError(t, err)
	require.Equal(t, int32(2), phase2.DisklessLeaderEpoch())
	require.NoError(t, DisklessProduceAllowed(phase2))
	e.parts.set(e.tp, phase2, l)
	require.NoError(t, f.Add(FetcherPartition{Partition: e.tp, Log: l, State: phase2, CurrentLeaderEpoch: 2}))
	stepAll(t, f, e, 5)
	require.Equal(t, "0@0 1@20 2@40", epochcache.FormatEntries(l.EpochEntries()))
	require.Equal(t, expect(40, 10, "d"), readAll(t, l, 40, 2))
}

// The mixed-version hazard of github.com/aiven/inkless/pull/827's review:
// an older controller wrote E_d = 7, the leader epoch at the seal
// commit (seal 100). The change-record rules accept that record, and
// later the flag record that raises E_d to 8 (E_d never falls; 7 -> 8
// rises). Had consolidation stamped the diskless records 100-159 with 7
// before the flag, a follower asking for the end of epoch 7 afterwards is
// answered with the seal (epoch 7 is below E_d = 8) and truncates its
// valid diskless records to 100. The library never stamps before the
// flag, so the records carry 8 and the follower keeps them.
func TestDisklessEpochOfAnOlderSealCommitIsNotStamped(t *testing.T) {
	e := newWALEnv(t)
	l := e.openLog("follower")
	appendClassic(t, l, 0, 50)
	appendClassic(t, l, 7, 50)
	l.UpdateHighWatermark(100)

	sealed := e.sealedState(100)
	// What an older controller's seal commit leaves: tag 102 = 7 in phase 1.
	older, err := sealed.ApplyChange(tierstate.Tags{DisklessLeaderEpoch: tierstate.Some[int32](7)})
	require.NoError(t, err, "the change-record rules accept E_d with the seal")
	require.Equal(t, tierstate.PhaseOne, older.Phase())
	require.Equal(t, int32(7), older.DisklessLeaderEpoch())
	assert.False(t, older.TakesDisklessRecords(), "an E_d from before the flag opens nothing")
	assert.ErrorIs(t, DisklessProduceAllowed(older), ErrAwaitingPhaseTwo)

	for i := range 3 {
		e.produce(20, fmt.Sprintf("d%d", i))
	}
	e.parts.set(e.tp, older, l)
	ep := e.endpoint(EndpointOptions{})
	f, err := NewFetcher(FetcherOptions{Endpoint: ep, Machine: e.machine(ep, checkpointData{}), Clock: &manualClock{}})
	require.NoError(t, err)
	require.NoError(t, f.Add(FetcherPartition{Partition: e.tp, Log: l, State: older, CurrentLeaderEpoch: 7}))
	stepAll(t, f, e, 5)

	// The flag commit in leader epoch 7 raises E_d to 8; its record
	// replays to the same State (7 -> 8 is accepted).
	flagged, err := older.SetClassicPrefixInRemoteStorage(
		tierstate.ClassicPrefixRequest{BrokerID: 1, LeaderEpoch: 7, Seal: 100, LastClassicLeaderEpoch: 7},
		tierstate.Leadership{Leader: 1, LeaderEpoch: 7})
	require.NoError(t, err)
	require.Equal(t, int32(8), flagged.DisklessLeaderEpoch())
	replayed, err := older.ApplyChange(tierstate.ChangeTags(older, flagged))
	require.NoError(t, err)
	require.Equal(t, flagged, replayed)

	e.parts.set(e.tp, flagged, l)
	require.NoError(t, f.Add(FetcherPartition{Partition: e.tp, Log: l, State: flagged, CurrentLeaderEpoch: 8}))
	stepAll(t, f, e, 10)
	require.Equal(t, int64(160), l.LogEndOffset())

	// The follower's divergence check against the diskless endpoint, for
	// the epoch of its last record.
	latest, ok := l.LatestEpoch()
	require.True(t, ok)
	ans, err := ep.FetchEpochEndOffset(e.ctx, e.tp, 8, latest)
	require.NoError(t, err)
	plan := truncation.PlanDivergence(ans, l.EndOffsetForEpoch, l.LogEndOffset(), l.HighWatermark())
	_, err = l.TruncateTo(plan.TruncateTo)
	require.NoError(t, err)
	require.Equal(t, int64(160), l.LogEndOffset(), "the follower truncated its diskless records: %s (asked epoch %d, answer %v)",
		plan, latest, ans)
	require.Equal(t, "0@0 7@50 8@100", epochcache.FormatEntries(l.EpochEntries()))
	var want []string
	for i := range 3 {
		want = append(want, expect(100+int64(20*i), 20, fmt.Sprintf("d%d", i))...)
	}
	require.Equal(t, want, readAll(t, l, 100, 8))
}
