package sim

import (
	"slices"
	"strings"
	"testing"
	"testing/cryptotest"

	"github.com/stretchr/testify/require"
)

// TestSwarmKindsNameMenuRows: every action a swarm kind switches is a
// row of the scheduler's menu (a renamed row would silently leave its
// kind without effect).
func TestSwarmKindsNameMenuRows(t *testing.T) {
	for _, k := range swarmKinds {
		for _, name := range k.actions {
			require.True(t, slices.ContainsFunc(choices, func(ch choice) bool { return ch.name == name }),
				"kind %s names %q, which is no row of choices", k.name, name)
		}
	}
}

// TestDrawSwarm: a seed's configuration is always the same, seeds differ,
// and over seeds 1 to 200 every kind is off in some and weighed up in
// others.
func TestDrawSwarm(t *testing.T) {
	require.Equal(t, DrawSwarm(5), DrawSwarm(5))
	off, heavy := map[string]int{}, map[string]int{}
	distinct := map[string]bool{}
	for seed := uint64(1); seed <= 200; seed++ {
		s := DrawSwarm(seed)
		require.Len(t, s.Kinds, len(swarmKinds))
		distinct[s.String()] = true
		for _, k := range s.Kinds {
			switch {
			case k.Factor == 0:
				off[k.Name]++
			case k.Factor > 1:
				heavy[k.Name]++
			}
		}
	}
	require.Greater(t, len(distinct), 150, "seeds 1 to 200 draw few distinct configurations")
	for _, k := range swarmKinds {
		require.Positive(t, off[k.name], "kind %s is never off", k.name)
		require.Positive(t, heavy[k.name], "kind %s is never weighed up", k.name)
	}
}

// TestRunTakesSwarmConfiguration: a run prints its configuration as the
// first trace line and records it; a kind the configuration turns off
// takes no step, while NoSwarm runs the menu itself.
func TestRunTakesSwarmConfiguration(t *testing.T) {
	// The first seed whose configuration turns crashes off.
	var seed uint64
	for s := uint64(1); seed == 0; s++ {
		if !DrawSwarm(s).On("crash") {
			seed = s
		}
	}
	cryptotest.SetGlobalRandom(t, seed)
	res, err := Run(seed, RunOptions{Steps: 300})
	require.NoError(t, err)
	require.False(t, res.Failed(), "seed %d: %v\n%s", seed, res.Violation, res.TraceTail(20))
	require.Equal(t, DrawSwarm(seed), res.Swarm)
	require.Equal(t, res.Swarm.String(), res.Trace[0])
	require.True(t, strings.HasPrefix(res.Trace[0], "swarm: crash=off "), res.Trace[0])
	for _, a := range res.Actions {
		require.NotEqual(t, "crash", a.Cmd, "seed %d crashed a broker with crashes off", seed)
	}

	cryptotest.SetGlobalRandom(t, seed)
	res, err = Run(seed, RunOptions{Steps: 300, NoSwarm: true})
	require.NoError(t, err)
	require.False(t, res.Failed(), "seed %d without swarm: %v\n%s", seed, res.Violation, res.TraceTail(20))
	require.Nil(t, res.Swarm)
	require.False(t, strings.HasPrefix(res.Trace[0], "swarm:"), res.Trace[0])
	require.True(t, slices.ContainsFunc(res.Actions, func(a Action) bool { return a.Cmd == "crash" }),
		"seed %d without swarm took no crash in 300 steps", seed)
}

// TestRandomTakesNewFaultKinds: over seeds 1 to 20 the random runs take
// every fault action of the swarm's new kinds (control-plane outages and
// lost answers, partitions and their heals, clock jumps, the remote
// task's two steps), and an ambiguous commit's batches count as
// committed.
func TestRandomTakesNewFaultKinds(t *testing.T) {
	counts := map[string]int{}
	ambiguous := 0
	for seed := uint64(1); seed <= 20; seed++ {
		cryptotest.SetGlobalRandom(t, seed)
		res, err := Run(seed, RunOptions{})
		require.NoError(t, err)
		require.False(t, res.Failed(), "seed %d: %v\n%s", seed, res.Violation, res.TraceTail(40))
		for _, a := range res.Actions {
			counts[a.Cmd]++
		}
		for _, l := range res.Trace {
			if strings.Contains(l, "answer lost; committed all the same") {
				ambiguous++
			}
		}
	}
	for _, a := range []string{"cp-outage", "cp-ambiguous", "partition", "heal", "clock-jump", "task-lookup",
		"task-install"} {
		require.Positive(t, counts[a], "no %s step in seeds 1 to 20", a)
	}
	require.Positive(t, ambiguous, "no ambiguous commit in seeds 1 to 20")
}

// TestPartitionBlocksFetches: a follower cut off from the leader fetches
// nothing (its fetch is not applicable) and falls behind until the
// partition heals; a leader cut off from its followers cannot advance
// its high watermark.
func TestPartitionBlocksFetches(t *testing.T) {
	cryptotest.SetGlobalRandom(t, 1)
	c, err := New(Options{Seed: 1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.Produce(5))
	require.NoError(t, c.PartitionBroker(2))
	require.ErrorIs(t, c.PartitionBroker(3), ErrNotApplicable, "one partition at a time")
	require.ErrorIs(t, c.Replicate(2), ErrNotApplicable)
	require.NoError(t, c.Replicate(3))
	_, _, leo, _ := c.Broker(2).Offsets()
	require.Zero(t, leo)
	require.Zero(t, c.Committed(), "broker 2 is in the ISR: nothing commits without its fetch")
	require.NoError(t, c.Heal())
	require.ErrorIs(t, c.Heal(), ErrNotApplicable)
	require.NoError(t, c.CatchUp(2))
	require.EqualValues(t, 5, c.Committed())

	require.NoError(t, c.PartitionBroker(1)) // the leader
	require.NoError(t, c.Produce(3))
	require.ErrorIs(t, c.Replicate(2), ErrNotApplicable)
	require.ErrorIs(t, c.Replicate(3), ErrNotApplicable)
	require.EqualValues(t, 5, c.Committed())
}

// TestClockJump: the clock jumps forward, up to a day short of the
// default retention.ms, which the checker does not model.
func TestClockJump(t *testing.T) {
	cryptotest.SetGlobalRandom(t, 1)
	c, err := New(Options{Seed: 1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	before := c.nowMs
	require.NoError(t, c.ClockJump(3600_000))
	require.Equal(t, before+10+3600_000, c.nowMs) // the step's own 10 ms and the jump
	require.ErrorIs(t, c.ClockJump(7*24*3600_000), ErrNotApplicable)
	require.ErrorIs(t, c.ClockJump(0), ErrNotApplicable)
	require.Equal(t, before+10+3600_000, c.nowMs)
}

// TestPhaseWeights: a weight "action@phase" applies only while the
// switch is in that phase. Weights for a phase that equal the plain ones
// leave a seed's schedule as it was, a weight of 0 in the classic phase
// keeps the action out until the switch is armed, and a phase that does
// not exist is refused.
func TestPhaseWeights(t *testing.T) {
	const seed = 5
	cryptotest.SetGlobalRandom(t, seed)
	plain, err := Run(seed, RunOptions{Steps: 200})
	require.NoError(t, err)
	cryptotest.SetGlobalRandom(t, seed)
	same, err := Run(seed, RunOptions{Steps: 200, Weights: map[string]int{"crash@classic": 2, "produce@phase-2": 20}})
	require.NoError(t, err)
	require.Equal(t, plain.Trace, same.Trace)

	w := map[string]int{"produce@classic": 0, "produce-idempotent@classic": 0, "retry-produce@classic": 0, "arm-switch@classic": 40}
	cryptotest.SetGlobalRandom(t, seed)
	res, err := Run(seed, RunOptions{Steps: 300, Weights: w, NoSwarm: true})
	require.NoError(t, err)
	require.False(t, res.Failed(), "%v\n%s", res.Violation, res.TraceTail(20))
	armed := slices.IndexFunc(res.Trace, func(l string) bool { return strings.Contains(l, " arm-switch ") })
	require.Positive(t, armed, "no arm-switch in 300 steps")
	produced := 0
	for i, l := range res.Trace {
		if f := strings.Fields(l); len(f) > 1 && f[1] == "produce" {
			require.Greater(t, i, armed, "produced in the classic phase: %s", l)
			produced++
		}
	}
	require.Positive(t, produced, "nothing produced after the switch was armed")

	_, err = Run(seed, RunOptions{Steps: 10, Weights: map[string]int{"crash@phase-3": 1}})
	require.ErrorContains(t, err, `no phase "phase-3"`)
	_, err = Run(seed, RunOptions{Steps: 10, Weights: map[string]int{"crush@phase-2": 1}})
	require.ErrorContains(t, err, `"crush"`)
}
