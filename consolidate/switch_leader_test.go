package consolidate

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/tierstate"
	"github.com/tierlog/tierlog/wal"
)

type fakePrefixLog struct {
	h, logStart int64
	epochs      []epochcache.Entry
}

func (f fakePrefixLog) HighestOffsetInRemoteStorageInLineage() int64 { return f.h }
func (f fakePrefixLog) LogStartOffset() int64                        { return f.logStart }
func (f fakePrefixLog) EpochForOffset(o int64) (int32, bool) {
	e, ok := int32(-1), false
	for _, x := range f.epochs {
		if x.StartOffset <= o {
			e, ok = x.Epoch, true
		}
	}
	return e, ok
}

// Leader A of github.com/aiven/inkless/pull/857's first example: epochs
// {0:0, 2:80}, seal 100. It asks for phase 2 only once remote storage
// holds 99, with R = 2, the epoch of its record at 99.
func TestPlanClassicPrefixRequest(t *testing.T) {
	s := committedSeal(t, 100, nil)
	a := fakePrefixLog{h: 79, epochs: []epochcache.Entry{{Epoch: 0, StartOffset: 0}, {Epoch: 2, StartOffset: 80}}}
	require.Equal(t, ClassicPrefixPlan{LastClassicLeaderEpoch: -1}, PlanClassicPrefixRequest(s, a), "the copy has not reached 99")
	a.h = 98
	require.False(t, PlanClassicPrefixRequest(s, a).Send, "98 is not 99")
	a.h = 99
	require.Equal(t, ClassicPrefixPlan{Send: true, LastClassicLeaderEpoch: 2}, PlanClassicPrefixRequest(s, a))

	// A log that starts at the seal holds no record below it: R = -1.
	// (Its epochs still name epoch 2 from 80: the log start decides.)
	empty := fakePrefixLog{h: 99, logStart: 100, epochs: []epochcache.Entry{{Epoch: 2, StartOffset: 80}, {Epoch: 4, StartOffset: 100}}}
	require.Equal(t, ClassicPrefixPlan{Send: true, LastClassicLeaderEpoch: -1, EmptyPrefix: true}, PlanClassicPrefixRequest(s, empty))

	// Not consolidating, or already phase 2: nothing to send.
	require.False(t, PlanClassicPrefixRequest(s.WithConsolidating(false), a).Send)
	p2, err := s.SetClassicPrefixInRemoteStorage(tierstate.ClassicPrefixRequest{BrokerID: 1, LeaderEpoch: 4, Seal: 100, LastClassicLeaderEpoch: 2},
		tierstate.Leadership{Leader: 1, LeaderEpoch: 4})
	require.NoError(t, err)
	require.False(t, PlanClassicPrefixRequest(p2, a).Send)
}

// xAtPhaseTwo is a fakeController that also records the control plane's
// cross-tier log start X when the phase-2 request arrives.
type xAtPhaseTwo struct {
	*fakeController
	e *walEnv
	x []int64
}

func (c *xAtPhaseTwo) SetClassicPrefixInRemoteStorage(ctx context.Context, tp remote.TopicIDPartition, req tierstate.ClassicPrefixRequest) error {
	info, err := c.e.cp.LogInfo(ctx, walTP(tp))
	require.NoError(c.e.t, err)
	c.x = append(c.x, info.CrossTierLogStartOffset)
	return c.fakeController.SetClassicPrefixInRemoteStorage(ctx, tp, req)
}

// A phase-1 leader whose log starts at the seal 40 (DeleteRecords removed
// its classic prefix) asks for phase 2 with no recorded epoch while the
// WAL row an earlier leader wrote says X = 0: that leader's log started
// at 0 (an unclean election put it before this one, and the deletion never
// reached it). The request declares the prefix empty, so X is raised to
// the seal first: with X = 0 the endpoint would wait for remote storage
// to hold 39, which no replica tiered.
func TestLeaderSwitchEmptyPrefixRaisesCrossTierStart(t *testing.T) {
	e := newWALEnv(t)
	const seal = 40
	res, err := e.cp.InitDisklessLog(e.ctx, []wal.InitDisklessLogRequest{{Partition: walTP(e.tp), Topic: e.tp.Topic,
		LogStartOffset: 0, DisklessStartOffset: seal}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)

	l := e.openLog("leader")
	for i := range 4 {
		_, err := l.AppendAsLeader(classicBatch(t, 10, fmt.Sprintf("b%d", i), -1, 0), 2, log.OriginClient)
		require.NoError(t, err)
	}
	require.NoError(t, l.Flush())
	l.UpdateHighWatermark(seal)
	_, err = l.MaybeIncrementLogStartOffset(seal)
	require.NoError(t, err)
	l.UpdateHighestOffsetInRemoteStorage(seal-1, l.TruncationCount())
	require.Equal(t, ClassicPrefixPlan{Send: true, LastClassicLeaderEpoch: -1, EmptyPrefix: true}, PlanClassicPrefixRequest(committedSeal(t, seal, nil), l))

	ctrl := &xAtPhaseTwo{fakeController: &fakeController{state: committedSeal(t, seal, nil),
		leader: tierstate.Leadership{Leader: 3, LeaderEpoch: 5}}, e: e}
	sw := &LeaderSwitch{TP: e.tp, BrokerID: 3, LeaderEpoch: 5, Log: l, Controller: ctrl,
		ControlPlane: e.cp, NowMs: func() int64 { return 5_000 }}
	st, err := sw.Step(e.ctx, ctrl.state)
	require.NoError(t, err)
	require.Equal(t, &tierstate.ClassicPrefixRequest{BrokerID: 3, LeaderEpoch: 5, Seal: seal, LastClassicLeaderEpoch: -1}, st.PrefixSent)
	require.Equal(t, []int64{seal}, ctrl.x, "X at the seal before the request")
	require.Equal(t, tierstate.PhaseTwo, ctrl.state.Phase())

	// A log holding S-1 keeps X where it is: its prefix is not empty.
	a := fakePrefixLog{h: 39, epochs: []epochcache.Entry{{Epoch: 2, StartOffset: 0}}}
	require.False(t, PlanClassicPrefixRequest(committedSeal(t, seal, nil), a).EmptyPrefix)
}
