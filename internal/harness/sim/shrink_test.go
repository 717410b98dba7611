package sim

import (
	"strings"
	"testing"
	"testing/cryptotest"

	"github.com/cockroachdb/datadriven"
	"github.com/stretchr/testify/require"
)

// TestReplayRecordedRun replays the actions a random run recorded: every
// one takes a step again and writes the trace line the run wrote, so a
// recorded schedule is the run (the ground Shrink stands on).
func TestReplayRecordedRun(t *testing.T) {
	// Seed 9 takes two Settle actions with catch-up rounds: one action,
	// several steps. The default menu: crashes cut at a file operation,
	// crash images keeping half the unsynced data, object-store faults
	// and log directory moves included (determinismSeeds holds seeds
	// taking each).
	seeds := append([]uint64{3, 9}, determinismSeeds()...)
	if raceEnabled {
		seeds = []uint64{9, 14}
	}
	for _, seed := range seeds {
		cryptotest.SetGlobalRandom(t, seed)
		res, err := Run(seed, RunOptions{Steps: 300})
		require.NoError(t, err)
		require.False(t, res.Failed(), "seed %d: %v", seed, res.Violation)
		require.Len(t, res.Trace, res.Steps+1) // the swarm line, then a line per step
		require.LessOrEqual(t, len(res.Actions), res.Steps)

		cryptotest.SetGlobalRandom(t, seed)
		r, err := Replay(Options{Seed: seed}, res.Actions)
		require.NoError(t, err)
		require.Nil(t, r.Violation)
		require.Equal(t, res.Actions, r.Applied)
		// The run's first line carries the initial record's delta, which
		// a script (and a replay) leaves out. A swarm run's first line is
		// its configuration, no step. An action's output holds the lines
		// of every step it took, then its outcome.
		require.NotNil(t, res.Swarm)
		require.Equal(t, res.Swarm.String(), res.Trace[0])
		steps := res.Trace[1:]
		got := strings.Join(r.Outputs[1:], "")
		for i := 1; i < len(steps); i++ {
			want := formatStep([]string{steps[i]}, nil)
			j := strings.Index(got, want)
			require.True(t, j >= 0, "seed %d step %d: replay\n%s\nrun\n%s", seed, i+1, got, want)
			got = got[j+len(want):]
		}
	}
}

// TestActionString: the script line of an action, and simpler's variants.
func TestActionString(t *testing.T) {
	require.Equal(t, "produce n=3", Action{Cmd: "produce", Args: []Arg{{"n", "3"}}}.String())
	require.Equal(t, "crash broker=2", Action{Cmd: "crash", Broker: 2}.String())
	require.Equal(t, "start-phase-2 accept-data-loss",
		Action{Cmd: "start-phase-2", Args: []Arg{{"accept-data-loss", ""}}}.String())
	var got []string
	for _, a := range simpler(Action{Cmd: "consume", Args: []Arg{{"offset", "40"}}}) {
		got = append(got, a.String())
	}
	require.Equal(t, []string{"consume offset=0", "consume offset=20"}, got)
	got = nil
	for _, a := range simpler(Action{Cmd: "crash", Broker: 1}) {
		got = append(got, a.String())
	}
	require.Equal(t, []string{"crash broker=1 unsynced=0", "crash broker=1 unsynced=100"}, got)
	_, err := Replay(Options{Seed: 1}, []Action{{Cmd: "reseal"}})
	require.ErrorIs(t, err, ErrUnreplayable)
}

// runScriptFile runs the script at path through the script commands and
// returns its violations (which fail no test here). compare: the output
// must be the script's; otherwise only the violations count.
func runScriptFile(t *testing.T, path string, compare bool) []*Violation {
	var vs []*Violation
	e := &scriptEnv{t: t, onViolation: func(v *Violation) { vs = append(vs, v) }}
	defer func() {
		if e.c != nil {
			_ = e.c.Close()
		}
	}()
	datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
		e.t = t
		out := e.run(d)
		if !compare {
			return d.Expected
		}
		return out
	})
	return vs
}
