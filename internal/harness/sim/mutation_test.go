//go:build tierlog_mutation

package sim

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"testing/cryptotest"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/internal/mutation"
)

// name is the row's subtest name: its guards, as -mutation spells them.
func (sc simCatch) name() string {
	name := sc.guard.String()
	for _, g := range mutation.Backups(sc.guard) {
		name += "," + g.String()
	}
	return name
}

// TestSimCatchesEachGuard searches, for each row, seeds from 1 with its
// guard (and the guard's backups, mutation.Backups) disabled until one
// breaks an invariant that the same seed with every guard on does not
// (within the row's limit): a seed that breaks with every guard on too
// meets another bug, not the guard's, and one that breaks with the
// backups alone disabled meets theirs; the search goes on past both.
//
// TIERLOG_SIM_SHARD=k/n runs the rows whose index is k modulo n only:
// the guards are the process's, so .ci/run runs the shards as separate
// test processes side by side, one per core.
func TestSimCatchesEachGuard(t *testing.T) {
	// As tierlog-sim does: a quarter of the collections, 15-25% faster.
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	k, n := catchShard(t)
	for i, sc := range simCatches {
		if i%n != k {
			continue
		}
		t.Run(sc.name(), func(t *testing.T) {
			opts := RunOptions{Steps: 500, Weights: sc.weights}
			backups := mutation.Backups(sc.guard)
			guards := append([]mutation.Guard{sc.guard}, backups...)
			for seed := uint64(1); seed <= sc.limit; seed++ {
				off := runDisabled(t, seed, opts, guards)
				if !off.Failed() {
					continue
				}
				cryptotest.SetGlobalRandom(t, seed)
				on, err := Run(seed, opts)
				require.NoError(t, err)
				if on.Failed() {
					t.Logf("seed %d breaks with every guard on too (another bug): %v", seed, on.Violation)
					continue
				}
				if len(backups) > 0 {
					if b := runDisabled(t, seed, opts, backups); b.Failed() {
						t.Logf("seed %d breaks with the backups alone disabled too (their bug): %v", seed, b.Violation)
						continue
					}
				}
				t.Logf("caught at seed %d after %d steps: %v", seed, off.Steps, off.Violation)
				return
			}
			t.Fatalf("%s: not caught in %d seeds", sc.name(), sc.limit)
		})
	}
}

// catchShard reads TIERLOG_SIM_SHARD (k/n, 0 <= k < n; unset: 0/1).
func catchShard(t *testing.T) (k, n int) {
	v := os.Getenv("TIERLOG_SIM_SHARD")
	if v == "" {
		return 0, 1
	}
	a, b, ok := strings.Cut(v, "/")
	k, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || k < 0 || k >= n {
		t.Fatalf("TIERLOG_SIM_SHARD=%q: want k/n with 0 <= k < n", v)
	}
	return k, n
}

// runDisabled runs seed with guards disabled for the run alone.
func runDisabled(t *testing.T, seed uint64, opts RunOptions, guards []mutation.Guard) *Result {
	t.Helper()
	sc := &guardScope{}
	defer sc.close()
	for _, g := range guards {
		mutation.Disable(sc, g)
	}
	if sc.skipped != "" {
		t.Skip(sc.skipped)
	}
	cryptotest.SetGlobalRandom(t, seed)
	res, err := Run(seed, opts)
	require.NoError(t, err)
	return res
}

// guardScope is the mutation.TB of one run: the guards stay disabled
// until close runs the cleanups mutation.Disable registered.
type guardScope struct {
	cleanups []func()
	skipped  string
}

func (s *guardScope) Helper()          {}
func (s *guardScope) Cleanup(f func()) { s.cleanups = append(s.cleanups, f) }
func (s *guardScope) Skip(args ...any) { s.skipped = fmt.Sprint(args...) }

func (s *guardScope) close() {
	for i := len(s.cleanups) - 1; i >= 0; i-- {
		s.cleanups[i]()
	}
	s.cleanups = nil
}

// TestSimSearchGuard is a tool, not a check: with TIERLOG_SIM_SEARCH=N it
// runs seeds 1 to N with the guards of TIERLOG_MUTATION disabled
// (TIERLOG_SIM_WEIGHTS=churn for the churn menu) and logs the seeds
// that break an invariant, for the table above.
func TestSimSearchGuard(t *testing.T) {
	v := os.Getenv("TIERLOG_SIM_SEARCH")
	if v == "" {
		t.Skip("TIERLOG_SIM_SEARCH=N searches seeds 1 to N")
	}
	n, err := strconv.Atoi(v)
	require.NoError(t, err)
	var w map[string]int
	if os.Getenv("TIERLOG_SIM_WEIGHTS") == "churn" {
		w = churn
	}
	found := 0
	for seed := uint64(1); seed <= uint64(n); seed++ {
		cryptotest.SetGlobalRandom(t, seed)
		res, err := Run(seed, RunOptions{Steps: 500, Weights: w})
		require.NoError(t, err)
		if res.Failed() {
			found++
			t.Logf("caught: seed %d: %v", seed, res.Violation)
		}
	}
	t.Logf("%d of %d seeds caught", found, n)
}

// resetAtSealScript is the shape the random runs reach only rarely: a
// replica whose log starts at the seal with only the diskless epoch
// cached (an out-of-range answer at the seal truncated it below its
// local log start, which is a full truncation) leads the partition
// while remote storage holds the classic prefix, and runs retention.
// diskless picks the epoch the replica caches from the seal: the diskless
// epoch E_d (the out-of-range reset, then consolidation), or the
// recorded last classic epoch R (a replica restored at the seal with the
// epoch in force there). It returns the first violation (nil if none).
func resetAtSealScript(t *testing.T, diskless bool) *Violation {
	cryptotest.SetGlobalRandom(t, 1)
	c, err := New(Options{Seed: 1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	var v *Violation
	step := func(err error) {
		t.Helper()
		if v != nil || errors.As(err, &v) {
			return // the first violation is the answer; later steps only follow it
		}
		require.NoError(t, err)
	}
	require.NoError(t, c.Crash(3))
	for range 20 {
		step(c.Produce(5))
		step(c.CatchUp(2))
	}
	step(c.ArmSwitch())
	step(c.SwitchStep()) // sealed at the log end, committed
	step(c.SwitchStep()) // InitDisklessLog
	seal := c.Seal()
	step(c.Copy(1))      // the classic prefix [0, S-1] into remote storage
	step(c.SwitchStep()) // phase 2
	require.Equal(t, seal-1, c.HighestRemoteOffset())
	epoch := c.State().LastClassicLeaderEpoch()
	if diskless {
		epoch = c.State().DisklessLeaderEpoch()
	}
	l := c.Broker(2).Log()
	require.NoError(t, l.TruncateFullyAndStartAt(seal, seal))
	require.NoError(t, l.AssignEpochStartOffset(epoch, seal))
	step(c.ElectLeader(2))
	step(c.Expire(2))
	step(c.Consume(0))
	return v
}

// The guards of a consolidating partition's retention, which the
// random runs do not reach reliably, caught by resetAtSealScript: with
// either guard disabled the new leader's expiration deletes the classic
// prefix (LostRecord).
func TestSimScriptedRetentionGuards(t *testing.T) {
	rows := []struct {
		guard    mutation.Guard
		diskless bool
	}{{mutation.RetentionLogStart, false}, {mutation.EpochCleanupGuard, true}}
	for _, r := range rows {
		require.Nil(t, resetAtSealScript(t, r.diskless), "with every guard on")
	}
	for _, r := range rows {
		g := r.guard
		t.Run(g.String(), func(t *testing.T) {
			mutation.Disable(t, g)
			v := resetAtSealScript(t, r.diskless)
			require.NotNil(t, v, "%v disabled: no violation", g)
			require.Equal(t, LostRecord, v.Kind, "%v", v)
		})
	}
}

// TestSimResetAtSealEpochCleanup: the script reset_at_seal_epoch_cleanup
// reaches the reset at the seal through actions alone (a forced election
// of a replica whose log ends at the seal, and an out-of-range fetch
// that empties the old leader's log, when truncation-keeps-remote-prefix
// is off too: with it on, the reset log keeps its classic epoch); with
// epoch-cleanup-guard disabled the new leader's epoch-cache cleanup
// deletes the classic prefix.
func TestSimResetAtSealEpochCleanup(t *testing.T) {
	mutation.Disable(t, mutation.TruncationKeepsRemotePrefix)
	mutation.Disable(t, mutation.EpochCleanupGuard)
	vs := runScriptFile(t, filepath.Join("testdata/scripts", "reset_at_seal_epoch_cleanup"), false)
	require.NotEmpty(t, vs, "epoch-cleanup-guard disabled: no violation")
	require.Equal(t, LostRecord, vs[0].Kind, "%v", vs[0])
}
