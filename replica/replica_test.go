package replica

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/tierstate"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func phaseTwoState(t *testing.T) tierstate.State {
	s, err := tierstate.FromPartitionRecord(tierstate.Tags{
		ClassicToDisklessStartOffset: tierstate.Some[int64](100),
		DisklessLeaderEpoch:          tierstate.Some[int32](4),
		ClassicPrefixInRemoteStorage: tierstate.Some(true),
		LastClassicLeaderEpoch:       tierstate.Some[int32](2),
	})
	require.NoError(t, err)
	return s.WithConsolidating(true)
}

// bLog is broker B's log of github.com/aiven/inkless/pull/857: epoch 0
// [0, 80), epoch 1 [80, 100).
func bLog(t *testing.T, e *env) {
	l := e.r.Log().(*log.UnifiedLog)
	_, err := l.AppendAsLeader(batch(t, 80), 0, log.OriginClient)
	require.NoError(t, err)
	_, err = l.AppendAsLeader(batch(t, 20), 1, log.OriginClient)
	require.NoError(t, err)
}

func TestNewNeedsDependencies(t *testing.T) {
	_, err := New(Options{Partition: testTP})
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.ErrorIs(t, err, base.ErrInvalidArgument)
}

// A failed effect of the transition takes the replica offline; later
// deltas skip it.
func TestFailedEffectTakesReplicaOffline(t *testing.T) {
	e := newEnv(t, true)
	e.rec.fail["consolidation-add"] = true
	s := phaseTwoState(t)
	_, err := e.r.Apply(context.Background(), Delta{Leader: true, LeaderEpoch: 5, InIsr: true, State: s})
	require.ErrorIs(t, err, errInjected)
	require.True(t, e.r.Prior().Offline)
	delete(e.rec.fail, "consolidation-add")
	plan, err := e.r.Apply(context.Background(), Delta{Leader: true, LeaderEpoch: 6, InIsr: true, State: s})
	require.ErrorIs(t, err, ErrOffline)
	require.Equal(t, Plan{{Kind: SkipOffline, Offset: -1, Reason: "replica offline"}}, plan)
}

// A fetcher that does not stop skips the check, keeps both logs, still
// cancels the remote tasks, and takes the replica offline.
func TestFetcherStopFailureKeepsLogsOffline(t *testing.T) {
	e := newEnv(t, true)
	bLog(t, e)
	e.rec.fail["classic-remove"] = true
	_, err := e.r.Apply(context.Background(), Delta{Leader: true, LeaderEpoch: 5, InIsr: true, State: phaseTwoState(t)})
	require.ErrorIs(t, err, errInjected)
	require.True(t, e.r.Prior().Offline)
	require.NotNil(t, e.r.Log())
	require.Equal(t, int64(100), e.r.Log().LogEndOffset())
	require.Contains(t, e.rec.calls, "rlm-stop keep-metadata=true")
	require.NotContains(t, e.rec.calls, "delete-log leo=100")
}

// Every action is one zap line carrying its offset and reason (the
// epochs and offsets that led to it).
func TestEveryActionIsLogged(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	e := newEnv(t, true)
	e.r.opts.Logger = zap.New(core)
	bLog(t, e)
	_, err := e.r.Apply(context.Background(), Delta{Leader: true, LeaderEpoch: 5, InIsr: true, State: phaseTwoState(t)})
	require.NoError(t, err)
	var lines []string
	for _, entry := range logs.FilterMessage("replica action").All() {
		lines = append(lines, entry.ContextMap()["action"].(string))
	}
	require.Equal(t, []string{"check-replica", "create-log", "become-leader", "start-consolidation"}, lines)
	check := logs.FilterMessage("replica action").All()[0].ContextMap()
	require.Contains(t, check["reason"], "epoch at 99 is 1, recorded epoch 2")
	require.Len(t, e.events, 4)
	require.True(t, e.events[0].Check.Recreate)
	require.Equal(t, tierstate.ConditionEpochAtSeal, e.events[0].Check.Failures[0].Condition)
	require.Equal(t, tierstate.Recreated, e.events[0].Recreate.Outcome)
}

// Events reach the listener with no lock held: a listener may call the
// driver back.
func TestListenerMayCallBack(t *testing.T) {
	e := newEnv(t, true)
	var seen []Prior
	e.r.opts.OnEvent = func(Event) { seen = append(seen, e.r.Prior()) }
	_, err := e.r.Apply(context.Background(), Delta{Leader: true, LeaderEpoch: 1, InIsr: true})
	require.NoError(t, err)
	require.NotEmpty(t, seen)
}

// The decision is pure: deciding twice on the same inputs gives the same
// plan and changes neither the log nor the prior.
func TestDecideIsPure(t *testing.T) {
	e := newEnv(t, true)
	bLog(t, e)
	d := Delta{LeaderID: 2, LeaderEpoch: 5, InIsr: true, State: phaseTwoState(t).WithConsolidating(false)}
	p1 := DecideTransition(d, e.r.Log())
	p2 := DecideTransition(d, e.r.Log())
	require.Equal(t, p1, p2)
	require.Equal(t, int64(100), e.r.Log().LogEndOffset())
	require.Equal(t, Prior{LeaderEpoch: -1}, e.r.Prior())
}

// A fenced replica comes back as new to the broker: a phase-2 delta
// checks it even at an unchanged leader epoch.
func TestUnfencedReplicaIsChecked(t *testing.T) {
	plan := DecideCheck(Prior{Hosted: true, LeaderEpoch: 4, Fenced: true},
		Delta{Leader: true, LeaderEpoch: 4, InIsr: true, State: phaseTwoState(t)})
	require.Equal(t, "unfence (fenced in phase 1; metadata changed: leader epoch 4 -> 4)\n"+
		"check-replica (new to the broker, seal 100, recorded epoch 2)", plan.String())
}

// Deltas and fetch hooks from several goroutines apply one at a time (run
// under -race).
func TestConcurrentDeltasAndHooks(t *testing.T) {
	e := newEnv(t, true)
	var mu sync.Mutex
	e.r.opts.OnEvent = func(Event) { mu.Lock(); mu.Unlock() }
	s := phaseTwoState(t)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 20 {
				_, _ = e.r.Apply(context.Background(), Delta{LeaderID: 2, LeaderEpoch: int32(5 + j), InIsr: i%2 == 0, State: s})
				_, _ = e.r.HandOff(context.Background())
				_ = e.r.Prior()
			}
		}()
	}
	wg.Wait()
	require.False(t, e.r.Prior().Offline)
}

// The metrics count the pull/855 story: fenced, brought back, fenced
// again, then a log directory failure.
func TestMetrics(t *testing.T) {
	e := newEnv(t, false)
	s, err := tierstate.FromPartitionRecord(tierstate.Tags{ClassicToDisklessStartOffset: tierstate.Some[int64](1000),
		DisklessLeaderEpoch: tierstate.Some[int32](3)})
	require.NoError(t, err)
	s = s.WithConsolidating(true)
	ctx := context.Background()
	for _, d := range []Delta{{Leader: true, LeaderEpoch: 4, InIsr: true, State: s},
		{LeaderID: 2, LeaderEpoch: 5, State: s}, {Leader: true, LeaderEpoch: 6, InIsr: true, State: s}} {
		_, err := e.r.Apply(ctx, d)
		require.NoError(t, err)
	}
	require.Equal(t, Metrics{Deltas: 3, Fences: 2, Unfences: 1, Fenced: true}, e.r.Metrics())
	require.NoError(t, e.r.LogDirFailure(ctx))
	require.Equal(t, Metrics{Deltas: 3, Fences: 2, Unfences: 1, Offlines: 1, Offline: true}, e.r.Metrics())
}

// A cancelled context applies nothing.
func TestCancelledContextAppliesNothing(t *testing.T) {
	e := newEnv(t, true)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	plan, err := e.r.Apply(ctx, Delta{Leader: true, LeaderEpoch: 1, InIsr: true})
	require.ErrorIs(t, err, context.Canceled)
	require.Empty(t, plan)
	require.Empty(t, e.rec.calls)
	require.Equal(t, Prior{LeaderEpoch: -1}, e.r.Prior())
}

// The plan Apply returns says what the check decided, like its event.
func TestAppliedPlanCarriesTheCheck(t *testing.T) {
	e := newEnv(t, true)
	bLog(t, e)
	plan, err := e.r.Apply(context.Background(), Delta{Leader: true, LeaderEpoch: 5, InIsr: true, State: phaseTwoState(t)})
	require.NoError(t, err)
	require.Equal(t, e.events[0].Action, plan[0])
	require.Contains(t, plan[0].Reason, "epoch at 99 is 1, recorded epoch 2); recreated")
}
