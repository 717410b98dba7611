//go:build tierlog_mutation

package sim

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/cryptotest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/internal/mutation"
)

// shrinkGuard finds the first seed from 1 on that breaks an invariant
// with gs disabled (for the rest of t), shrinks its schedule and writes
// the script to dir. It returns the script's path and the violation's
// kind.
func shrinkGuard(t *testing.T, gs []mutation.Guard, dir string) (string, Kind) {
	for _, g := range gs {
		mutation.Disable(t, g)
	}
	start := time.Now()
	// The log directory moves weigh 0: with them in the menu the first
	// catching seed of first-prune-bound,wal-read-gap shrinks to a
	// force-leader outside phase 2 (Replay does not keep the menu's
	// preconditions), which loses records with every guard on.
	// The menu before the switch undo, the WAL read faults, the liveness
	// check and the log directory moves: with them, the first seeds of
	// first-prune-bound,wal-read-gap shrink into another bug.
	weights := map[string]int{"start-move": 0, "move-copy": 0, "promote-future": 0, "undo-switch": 0,
		"rearm-switch": 0, "wal-read-faults": 0, "plane-faults": 0, "settle": 0}
	for seed := uint64(1); seed <= 50; seed++ {
		cryptotest.SetGlobalRandom(t, seed)
		res, err := Run(seed, RunOptions{Steps: 500, Weights: weights})
		require.NoError(t, err)
		if !res.Failed() {
			continue
		}
		found := time.Since(start)
		s, err := Shrink(res.Actions, res.Violation.Kind, ShrinkOptions{Cluster: Options{Seed: seed},
			Before: func() { cryptotest.SetGlobalRandom(t, seed) }})
		require.NoError(t, err)
		require.Less(t, len(s.Applied), res.Steps)
		t.Logf("seed %d found in %v: %d steps -> %d steps in %v (%d replays): %v", seed, found.Round(time.Millisecond),
			res.Steps, len(s.Applied), s.Elapsed.Round(time.Millisecond), s.Runs, s.Violation)
		path := filepath.Join(dir, "shrunk")
		script := s.Script(fmt.Sprintf("seed %d with %v disabled, shrunk from %d steps to %d", seed, gs,
			res.Steps, len(s.Applied)))
		require.NoError(t, os.WriteFile(path, []byte(script), 0o644))
		if out := os.Getenv("TIERLOG_SHRINK_DIR"); out != "" {
			// Keep a copy (for testdata/scripts: then -rewrite it with the
			// guards on).
			name := "shrunk_" + strings.ReplaceAll(joinGuardNames(gs), ",", "_")
			require.NoError(t, os.WriteFile(filepath.Join(out, name), []byte(script), 0o644))
		}
		return path, res.Violation.Kind
	}
	t.Fatalf("no seed of 1 to 50 breaks an invariant with %v disabled", gs)
	return "", 0
}

// TestShrinkGuardScript: with a guard the random runs catch disabled,
// the first failing seed's schedule shrinks to a script that the script
// runner fails with the same invariant while the guard is off (printing
// what the replay printed) and passes with it on.
func TestShrinkGuardScript(t *testing.T) {
	for _, gs := range [][]mutation.Guard{{mutation.Phase2Gate}, {mutation.FirstPruneBound, mutation.WALReadGap}} {
		t.Run(joinGuardNames(gs), func(t *testing.T) {
			dir := t.TempDir()
			var path string
			var kind Kind
			t.Run("off", func(t *testing.T) {
				path, kind = shrinkGuard(t, gs, dir)
				vs := runScriptFile(t, path, true)
				require.NotEmpty(t, vs, "the shrunk script breaks no invariant")
				require.Equal(t, kind, vs[0].Kind, "%v", vs[0])
			})
			require.NotEmpty(t, path)
			t.Run("on", func(t *testing.T) {
				require.Empty(t, runScriptFile(t, path, false), "with the guard on")
			})
		})
	}
}

func joinGuardNames(gs []mutation.Guard) string {
	s := ""
	for i, g := range gs {
		if i > 0 {
			s += ","
		}
		s += g.String()
	}
	return s
}

// TestShrunkScripts: the shrunk scripts kept in testdata/scripts (which
// TestScripts passes with every guard on) break their invariant with
// their guards disabled.
func TestShrunkScripts(t *testing.T) {
	for _, r := range []struct {
		file   string
		guards []mutation.Guard
		kind   Kind
	}{
		{"shrunk_phase2_gate", []mutation.Guard{mutation.Phase2Gate}, LineageDiverged},
		{"shrunk_first_prune_bound", []mutation.Guard{mutation.FirstPruneBound, mutation.WALReadGap}, LostRecord},
		{"shrunk_first_prune_bound_alone", []mutation.Guard{mutation.FirstPruneBound}, Stuck},
		{"unclean_truncation_below_local_start", []mutation.Guard{mutation.TruncationKeepsRemotePrefix}, LostRecord},
		// Either guard alone saves these two: the snapshot the reload
		// keeps for the recovery point holds the producer as well.
		{"recovery_snapshots_first_segment_base", []mutation.Guard{mutation.RecoveryFirstSnapshot,
			mutation.RecoveryPointSnapshotKept}, Duplicate},
		{"recovery_point_snapshot_kept", []mutation.Guard{mutation.RecoveryPointSnapshotKept}, Duplicate},
		{"divergent_tail_below_leader_log_start", []mutation.Guard{mutation.FetchEpochBelowEarliest}, Duplicate},
		{"clean_open_after_delete_records_to_log_end", []mutation.Guard{mutation.EpochCheckAtLogStart,
			mutation.RecoveryPointSnapshotKept}, Duplicate},
		{"shrunk_delete_rewrites_checkpoints", []mutation.Guard{mutation.DeleteRewritesCheckpoints}, Conflict},
		{"truncate_fully_lower_log_start_crash", []mutation.Guard{mutation.TruncateFullyOrder}, LineageDiverged},
		{"truncation_fence_stale_remote_offset_after_unclean", []mutation.Guard{mutation.TruncationFence}, LostRecord},
		{"prune_floor_phase_one_before_reseal", []mutation.Guard{mutation.PruneFloor}, Stuck},
		{"unclean_remote_lookup_epoch_mapping_replaced", []mutation.Guard{mutation.RemoteLookupEpochMembers}, LostRecord},
		{"truncation_crash_at_segment_removal", []mutation.Guard{mutation.TruncationRemovalOrder}, LostRecord},
		{"replica_remote_progress_tail_truncated_to_seal", []mutation.Guard{mutation.ReplicaRemoteProgress,
			mutation.TruncationLowersRemoteHighest, mutation.RemoteRegistrationCap}, LostRecord},
		{"unclean_stale_remote_offset_after_deletion", []mutation.Guard{mutation.RemoteRegistrationCap}, LostRecord},
		{"unclean_task_install_after_registration", []mutation.Guard{mutation.RemoteRegistrationCap}, Stuck},
		{"prune_remote_holds_lineage_cleaned_up", []mutation.Guard{mutation.PruneRemoteHolds,
			mutation.RemoteHighestHeld, mutation.RemoteLineageHole}, PrunedPastRemote},
		{"unclean_remote_hole_below_highest", []mutation.Guard{mutation.RemoteLineageHole}, LostRecord},
		{"init_row_from_metadata_after_start_phase_2", []mutation.Guard{mutation.InitRowFromMetadata}, Stuck},
		// pull/857's worked example of a move: with the check and the
		// promotion's lineage check both off, the future log holding
		// the discarded [100, 120) replaces the consolidated records.
		{"pull857_truncation_move_online", []mutation.Guard{mutation.ReplicaFutureLog, mutation.PromoteLineage}, Conflict},
		// The random runs' case of it: the future log keeps the record a
		// lowered seal gave up.
		{"replica_future_log_past_lowered_seal", []mutation.Guard{mutation.ReplicaFutureLog,
			mutation.PromoteLineage}, Conflict},
		{"replica_suffix_past_seal_lowered_seal", []mutation.Guard{mutation.ReplicaSuffixPastSeal,
			mutation.SealTruncation}, Conflict},
		{"seal_truncation_lowered_seal", []mutation.Guard{mutation.SealTruncation}, Conflict},
		{"elect_replica_discarded_lineage", []mutation.Guard{mutation.SealEpochLineage}, Conflict},
		{"start_phase_2_remote_of_discarded_lineage", []mutation.Guard{mutation.SealEpochLineage}, LostRecord},
		{"start_phase_2_remote_below_seal_epoch", []mutation.Guard{mutation.SealEpochLineage}, LostRecord},
		{"reseal_lineage_remote_below_seal_epoch", []mutation.Guard{mutation.SealEpochLineage}, LostRecord},
	} {
		t.Run(r.file, func(t *testing.T) {
			for _, g := range r.guards {
				mutation.Disable(t, g)
			}
			vs := runScriptFile(t, filepath.Join("testdata/scripts", r.file), false)
			require.NotEmpty(t, vs, "%v disabled: no violation", r.guards)
			require.Equal(t, r.kind, vs[0].Kind, "%v", vs[0])
		})
	}
}

// TestScriptsOfGuardsWithBackups: each script breaks with its guard and
// the guard's backups (mutation.Backups) disabled (TestShrunkScripts),
// and passes with the guard alone or the backups alone disabled: either
// layer stops the bug by itself.
func TestScriptsOfGuardsWithBackups(t *testing.T) {
	for _, r := range []struct {
		file  string
		guard mutation.Guard
	}{
		// The check recreates the replica; the truncation caps the
		// remote progress local retention trusts below the seal.
		{"replica_remote_progress_tail_truncated_to_seal", mutation.ReplicaRemoteProgress},
		// The pruner finds no segment holding h; the lookup finds no h.
		{"prune_remote_holds_lineage_cleaned_up", mutation.PruneRemoteHolds},
		// The check recreates the replica and deletes its future log;
		// the promotion refuses a future log whose last offset is in
		// another epoch than the current log's.
		{"pull857_truncation_move_online", mutation.ReplicaFutureLog},
		{"replica_future_log_past_lowered_seal", mutation.ReplicaFutureLog},
		// The check recreates the replica; applying the lowered seal in
		// phase 1 truncated its tail already.
		{"replica_suffix_past_seal_lowered_seal", mutation.ReplicaSuffixPastSeal},
	} {
		backups := mutation.Backups(r.guard)
		require.NotEmpty(t, backups, "%v", r.guard)
		for _, off := range [][]mutation.Guard{{r.guard}, backups} {
			t.Run(r.file+"/"+fmt.Sprint(off), func(t *testing.T) {
				for _, g := range off {
					mutation.Disable(t, g)
				}
				vs := runScriptFile(t, filepath.Join("testdata/scripts", r.file), false)
				require.Empty(t, vs, "only %v disabled", off)
			})
		}
	}
}
