package sim

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"testing/cryptotest"

	"github.com/stretchr/testify/require"
)

// walFaultMenu turns the WAL read faults on and off often, and takes the
// switch to phase 2 early, so that most steps read the WAL.
var walFaultMenu = map[string]int{"wal-read-faults": 6, "plane-faults": 6, "switch-step": 12, "consume": 16,
	"consolidate": 20}

// Every kind of hostile WAL read answer is injected in a few seeds, and
// with every guard on none is served: the runs break no invariant (a
// consumer is served exactly the committed records, consolidated logs
// hold them) and settle once the faults are off.
func TestWALFaultsRefused(t *testing.T) {
	fired := map[string]int{}
	for seed := uint64(1); seed <= 6; seed++ {
		cryptotest.SetGlobalRandom(t, seed)
		res, err := Run(seed, RunOptions{Steps: 400, Weights: walFaultMenu})
		require.NoError(t, err)
		require.False(t, res.Failed(), "seed %d: %v\n%s", seed, res.Violation, res.TraceTail(30))
		for k, n := range res.WALFaults {
			fired[k] += n
		}
	}
	t.Logf("fired: %v", fired)
	want := []string{faultFlipBit, faultTruncate, faultOtherObject, faultReplaced, faultMissingRow,
		faultSwappedRows, faultStaleAnswer}
	slices.Sort(want)
	got := slices.Sorted(maps.Keys(fired))
	require.Equal(t, want, got, "every kind fires")
}

// Settle brings the in-sync followers to the leader's log end; a
// cluster with a fault on or a broker down is not applicable; a follower
// whose fetches never reach the leader is Stuck.
func TestSettle(t *testing.T) {
	c := scriptedPrefix(t) // broker 3 down
	require.ErrorIs(t, c.Settle(), ErrNotApplicable)
	require.NoError(t, c.Restart(3))
	require.NoError(t, c.Produce(3)) // [5, 8) on the leader only
	require.NoError(t, c.SetPlaneFaults(0.3))
	require.ErrorIs(t, c.Settle(), ErrNotApplicable)
	require.NoError(t, c.SetPlaneFaults(0))
	require.NoError(t, c.Settle())
	for _, id := range c.ISR() {
		_, _, leo, hw := c.Broker(id).Offsets()
		require.Equal(t, [2]int64{8, 8}, [2]int64{leo, hw}, "broker %d", id)
	}
	require.Contains(t, c.ISR(), int32(2))

	require.NoError(t, c.Produce(2))
	c.Broker(2).classic = nil // its fetcher never reaches the leader
	var v *Violation
	require.ErrorAs(t, c.Settle(), &v)
	requireKind(t, v, Stuck)
	require.Equal(t, int32(2), v.Broker)
	require.Equal(t, int64(8), v.Offset)
	require.Contains(t, v.Detail, "leader's log end 10")
}

// A follower far behind takes many catch-up rounds, each of which moves
// it: Settle's cap grows with the lag (settleLimit), so a backlog longer
// than maxSettleRounds rounds of fetches is not reported Stuck (a
// 2,000-step schedule's was).
func TestSettleLongBacklog(t *testing.T) {
	c := scriptedPrefix(t) // broker 3 down at log end 0
	for range 6000 {
		require.NoError(t, c.Produce(1))
	}
	require.NoError(t, c.Restart(3))
	require.NoError(t, c.Settle())
	for _, id := range c.ISR() {
		_, _, leo, hw := c.Broker(id).Offsets()
		require.Equal(t, [2]int64{6005, 6005}, [2]int64{leo, hw}, "broker %d", id)
	}
	trace := c.Trace()
	var rounds int
	_, err := fmt.Sscanf(trace[len(trace)-1][strings.Index(trace[len(trace)-1], "settled after "):], "settled after %d round(s)", &rounds)
	require.NoError(t, err, trace[len(trace)-1])
	require.Greater(t, rounds, maxSettleRounds, "the backlog took more rounds than the fixed cap")
}

// A broker's crash at an armed file operation fences it; the election
// that follows can make another broker reach its own armed crash in the
// same step. Both crashes end in that step: seed 3736826154506295 (found
// by a soak) ends on one, where the second broker stayed up on a log its
// crash had failed and the cluster's close failed with it. The trace
// check keeps the seed honest: if the default menu changes its draws,
// this fails instead of passing without the cascade.
func TestCascadedCrashesEndInTheirStep(t *testing.T) {
	const seed = 3736826154506295
	cryptotest.SetGlobalRandom(t, seed)
	res, err := Run(seed, RunOptions{Steps: 500})
	require.NoError(t, err)
	require.False(t, res.Failed(), "%v", res.Violation)
	last := strings.Join(res.Trace[len(res.Trace)-6:], "\n")
	require.Contains(t, last, "b2 crashed before create", last)
	require.Contains(t, last, "b1 crashed before sync", last)
}
