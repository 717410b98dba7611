package replica

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tierlog/tierlog/consolidate"
	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/tierstate"
)

// viewLog is a ViewLog whose records are all in one epoch.
type viewLog struct {
	leo, hw int64
	epoch   int32
}

func (v viewLog) LogEndOffset() int64        { return v.leo }
func (v viewLog) LocalLogStartOffset() int64 { return 0 }
func (v viewLog) HighWatermark() int64       { return v.hw }
func (v viewLog) LatestEpoch() (int32, bool) { return v.epoch, v.leo > 0 }
func (v viewLog) EpochForOffset(o int64) (int32, bool) {
	return v.epoch, o >= 0 && o < v.leo
}
func (v viewLog) EpochEntries() []epochcache.Entry {
	if v.leo == 0 {
		return nil
	}
	return []epochcache.Entry{{Epoch: v.epoch, StartOffset: 0}}
}

// A leader's consolidation start agrees with the reconciler's rules
// (consolidate.PlanStart) wherever the fenced phase-1 leader of
// github.com/aiven/inkless/pull/855 does not override them.
func TestLeaderStartAgreesWithPlanStart(t *testing.T) {
	mk := func(tags tierstate.Tags) tierstate.State {
		s, err := tierstate.FromPartitionRecord(tags)
		require.NoError(t, err)
		return s.WithConsolidating(true)
	}
	states := []tierstate.State{
		mk(tierstate.Tags{}),
		mk(tierstate.Tags{ClassicToDisklessStartOffset: tierstate.Some[int64](tierstate.SealPending)}),
		mk(tierstate.Tags{ClassicToDisklessStartOffset: tierstate.Some[int64](100), DisklessLeaderEpoch: tierstate.Some[int32](4)}),
		mk(tierstate.Tags{ClassicToDisklessStartOffset: tierstate.Some[int64](100), DisklessLeaderEpoch: tierstate.Some[int32](4),
			ClassicPrefixInRemoteStorage: tierstate.Some(true)}),
	}
	for _, s := range states {
		for _, leo := range []int64{0, 60, 100, 130} {
			l := viewLog{leo: leo, hw: min(leo, 100), epoch: 4}
			t.Run(fmt.Sprintf("%s/leo=%d", s, leo), func(t *testing.T) {
				plan := DecideTransition(Delta{Leader: true, LeaderEpoch: 5, InIsr: true, State: s}, l)
				last := plan[len(plan)-1]
				if plan.Has(Fence) {
					require.Equal(t, tierstate.PhaseOne, s.Phase())
					require.Less(t, leo, s.Seal())
					return
				}
				hw := l.hw
				if plan.Has(RaiseHighWatermark) {
					hw = s.Seal()
				}
				want := consolidate.PlanStart(s, leo, hw, true, true)
				if want.Action != consolidate.StartReady {
					require.Equal(t, StopFetching, last.Kind, plan.String())
					return
				}
				require.Equal(t, StartConsolidation, last.Kind, plan.String())
				require.Equal(t, want.FetchOffset, last.Offset, plan.String())
			})
		}
	}
}
