package consolidate

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/tierstate"
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
	require.Equal(t, ClassicPrefixPlan{Send: true, LastClassicLeaderEpoch: -1}, PlanClassicPrefixRequest(s, empty))

	// Not consolidating, or already phase 2: nothing to send.
	require.False(t, PlanClassicPrefixRequest(s.WithConsolidating(false), a).Send)
	p2, err := s.SetClassicPrefixInRemoteStorage(tierstate.ClassicPrefixRequest{BrokerID: 1, LeaderEpoch: 4, Seal: 100, LastClassicLeaderEpoch: 2},
		tierstate.Leadership{Leader: 1, LeaderEpoch: 4})
	require.NoError(t, err)
	require.False(t, PlanClassicPrefixRequest(p2, a).Send)
}
