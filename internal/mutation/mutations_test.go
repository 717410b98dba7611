//go:build tierlog_mutation

package mutation_test

import (
	"bytes"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/tierlog/tierlog/internal/mutation"
)

// catch names one test that fails when guard is disabled: the test
// holds the guard. Each row is checked both ways: with nothing disabled
// the test passes, with the guard disabled it fails.
type catch struct {
	guard mutation.Guard
	pkg   string // module-relative package directory
	test  string // test name; "TestX/sub" names one subtest (a datadriven file)
}

// catches is the mutation table (docs/reliability.md, "Mutation check").
// A guard without a row fails TestMutations. The internal/harness/sim rows are
// the cluster simulation's scripted runs of the seeds' worked examples
// (and, for the two retention guards, a scripted Go test): each guard
// is caught by the whole system, not only by its unit's test.
var catches = []catch{
	{mutation.TruncationFence, "truncation", "TestFence"},
	{mutation.TruncationFence, "log", "TestUpdateHighestOffsetInRemoteStorageIgnoresOffsetComputedBeforeTruncation"},
	{mutation.TruncationFence, "remote", "TestFollowerTaskInstallsHighestRemoteOffsetWithTruncationCountFromBeforeTheLookup"},
	{mutation.TruncationFence, "remote", "TestCopyTaskFindsCopiedOffsetAgainAfterTruncationDuringUpload"},
	{mutation.TruncationFence, "internal/harness/sim", "TestScripts/pull857_truncation_task"},
	{mutation.TruncationFence, "internal/harness/sim", "TestScripts/truncation_fence_stale_remote_offset_after_unclean"},

	{mutation.RetentionLogStart, "remote", "TestConsolidatingExpirationTakesCrossTierLogStart"},
	{mutation.RetentionLogStart, "internal/harness/sim", "TestSimScriptedRetentionGuards"},
	{mutation.RetentionLogStart, "internal/harness/sim", "TestScripts/retention_log_start_promoted_future_log"},

	{mutation.EpochCleanupGuard, "remote", "TestTaskDecisionsDataDriven/cleanup_inkless857"},
	{mutation.EpochCleanupGuard, "remote", "TestRecreatedLeaderKeepsRemotePrefix"},
	{mutation.EpochCleanupGuard, "consolidate", "TestRetentionGuardOnRealCrossTierStart"},
	{mutation.EpochCleanupGuard, "internal/harness/sim", "TestSimScriptedRetentionGuards"},

	{mutation.ReplicaSuffixPastSeal, "tierstate", "TestRebuildDataDriven/replica_recreate_instead_of_truncate"},
	{mutation.ReplicaSuffixPastSeal, "tierstate", "TestRebuildDataDriven/replica_consolidated_replica_kept"},
	{mutation.ReplicaSuffixPastSeal, "tierstate", "TestHasConsolidatedDisklessSuffixFromSeal"},
	{mutation.ReplicaSuffixPastSeal, "replica", "TestReplicaDataDriven/classic_tail"},
	{mutation.ReplicaSuffixPastSeal, "internal/harness/sim", "TestScripts/pull857_truncation"},

	{mutation.ReplicaRemoteProgress, "tierstate", "TestRebuildDataDriven/replica_recreate_instead_of_truncate"},
	{mutation.ReplicaRemoteProgress, "replica", "TestReplicaDataDriven/classic_tail"},
	{mutation.ReplicaRemoteProgress, "internal/harness/sim", "TestScripts/pull857_truncation_online"},

	{mutation.PrunerCap, "wal", "TestRules/prune"},
	{mutation.PrunerCap, "consolidate", "TestPruneDataDriven/prune_seal_lowered"},
	{mutation.PrunerCap, "internal/harness/sim", "TestScripts/pull855_start_phase_2"},

	{mutation.PruneRemoteHolds, "consolidate", "TestPruneDataDriven/prune_remote_deleted"},
	{mutation.RemoteLookupEpochMembers, "remote", "TestMetadataDataDriven/supersede_order"},
	{mutation.RemoteLookupEpochMembers, "internal/harness/sim", "TestScripts/unclean_remote_lookup_epoch_mapping_replaced"},
	{mutation.TruncationRemovalOrder, "log", "TestTruncateToIsCrashSafe"},
	{mutation.RemoteLineageHole, "remote", "TestRemoteLineageHoleIsCopiedAgain"},
	{mutation.RemoteLineageHole, "internal/harness/sim", "TestScripts/unclean_remote_hole_below_highest"},
	{mutation.InitRowFromMetadata, "consolidate", "TestInitDisklessLogFromMetadata"},
	{mutation.InitRowFromMetadata, "internal/harness/sim", "TestScripts/init_row_from_metadata_after_start_phase_2"},
	{mutation.SealTruncation, "replica", "TestReplicaDataDriven/seal"},
	{mutation.SealTruncation, "internal/harness/sim", "TestScripts/seal_truncation_lowered_seal"},
	{mutation.SealEpochLineage, "tierstate", "TestCheckElectReplicaRefusesDiscardedLineage"},
	{mutation.SealEpochLineage, "tierstate", "TestPlanStartPhaseTwoRemoteOfDiscardedLineage"},
	{mutation.SealEpochLineage, "tierstate", "TestStateDataDriven/state_seal_lineage"},
	{mutation.SealEpochLineage, "tierstate", "TestPlanStartPhaseTwoRemoteBelowTheSealEpoch"},
	{mutation.SealEpochLineage, "internal/harness/sim", "TestScripts/elect_replica_discarded_lineage"},
	{mutation.SealEpochLineage, "internal/harness/sim", "TestScripts/start_phase_2_remote_of_discarded_lineage"},
	{mutation.SealEpochLineage, "internal/harness/sim", "TestScripts/start_phase_2_remote_below_seal_epoch"},
	{mutation.SealEpochLineage, "internal/harness/sim", "TestScripts/reseal_lineage_remote_below_seal_epoch"},
	{mutation.TruncationRemovalOrder, "internal/harness/sim", "TestScripts/truncation_crash_at_segment_removal"},

	{mutation.RemoteHighestHeld, "remote", "TestHighestRemoteOffset"},
	{mutation.RemoteHighestHeld, "internal/harness/sim", "TestScripts/unclean_prune_past_deleted_lineage"},
	{mutation.RemoteRegistrationCap, "remote", "TestRegistrationCapsUnheldRemoteOffset"},
	{mutation.RemoteRegistrationCap, "internal/harness/sim", "TestScripts/unclean_stale_remote_offset_after_deletion"},
	{mutation.RemoteRegistrationCap, "remote", "TestRegistrationFencesTaskLookedUpBefore"},
	{mutation.RemoteRegistrationCap, "internal/harness/sim", "TestScripts/unclean_task_install_after_registration"},
	{mutation.EmptyPrefixCrossTierStart, "consolidate", "TestLeaderSwitchEmptyPrefixRaisesCrossTierStart"},
	{mutation.EmptyPrefixCrossTierStart, "internal/harness/sim", "TestScripts/unclean_empty_prefix_raises_cross_tier_start"},

	{mutation.FirstPruneBound, "consolidate", "TestDecideDataDriven/decide_first_prune_bound"},
	{mutation.FirstPruneBound, "consolidate", "TestEndpointRecreatedLeaderBeforeFirstPrune"},
	{mutation.FirstPruneBound, "consolidate", "TestFetcherRecreatedLeaderConsolidatesFromSeal"},
	{mutation.FirstPruneBound, "internal/harness/sim", "TestScripts/pull857_example"},
	{mutation.FirstPruneBound, "internal/harness/sim", "TestScripts/shrunk_first_prune_bound_alone"},

	{mutation.PruneFloor, "consolidate", "TestPruneDataDriven/prune_first_prune"},
	{mutation.PruneFloor, "internal/harness/sim", "TestScripts/pull857_truncation_online"},
	{mutation.PruneFloor, "internal/harness/sim", "TestScripts/prune_floor_phase_one_before_reseal"},

	{mutation.ReplicaFutureLog, "tierstate", "TestRebuildDataDriven/replica_future_log"},
	{mutation.ReplicaFutureLog, "replica", "TestReplicaDataDriven/keep"},
	{mutation.ReplicaFutureLog, "internal/harness/sim", "TestScripts/pull857_truncation_move_online"},

	{mutation.WALReadBinding, "wal", "TestReaderBindingObjectReplaced"},
	{mutation.WALReadBinding, "wal", "TestReaderBindingRunsSwapped"},
	{mutation.WALReadBinding, "wal", "TestReaderBindingForeignCoordinates/other-partition"},
	{mutation.WALReadBinding, "wal", "TestReaderBindingLeaderEpochFlipped"},
	{mutation.WALReadBinding, "wal", "TestReaderRandomDamage/model"},
	{mutation.WALReadBinding, "consolidate", "TestFetcherRandomDamage/reader"},
	{mutation.WALReadBinding, "internal/harness/badinput", "TestCorpus/wal_read/object_replaced_under_its_key_by_another_valid_object_of_the_same_layout"},
	{mutation.WALReadBinding, "internal/harness/badinput", "TestCorpus/wal_read/first_batch's_leader-epoch_field_flipped_(outside_its_crc)"},

	{mutation.WALReadGap, "wal", "TestReaderGapAfterFirstBatch"},
	{mutation.WALReadGap, "wal", "TestReaderFirstBatchAfterRequestedOffset"},
	{mutation.WALReadGap, "consolidate", "TestFetcherNeverAppendsAGap"},
	{mutation.WALReadGap, "consolidate", "TestAppendablePrefix"},
	{mutation.WALReadGap, "wal", "TestReaderRandomDamage/model"},
	{mutation.WALReadGap, "consolidate", "TestFetcherRandomDamage/reference"},
	{mutation.WALReadGap, "internal/harness/badinput", "TestCorpus/wal_read/answer_leaves_out_the_second_batch_(a_gap)"},
	{mutation.Phase2Gate, "tierstate", "TestRouteFollowerFetcher"},
	{mutation.Phase2Gate, "tierstate", "TestHandOffAtSeal"},
	{mutation.Phase2Gate, "consolidate", "TestPhaseOneBatchIsNotConsolidated"},
	{mutation.Phase2Gate, "consolidate", "TestDisklessEpochOfAnOlderSealCommitIsNotStamped"},
	{mutation.Phase2Gate, "replica", "TestAppendAsLeaderFollowsTheSwitch"},
	{mutation.Phase2Gate, "replica", "TestReplicaDataDriven/handoff"},
	{mutation.Phase2Gate, "internal/harness/sim", "TestScripts/phase1_produce"},

	{mutation.SealCapRemoteRead, "remote", "TestRemoteReadStopsAtTheSeal"},
	{mutation.SealCapRemoteRead, "internal/harness/sim", "TestScripts/pull857_crossing"},
	{mutation.RecoverProducersFromSegmentBase, "log", "TestLoadProducersAfterDeleteRecordsMidSegment"},
	{mutation.RecoverProducersFromSegmentBase, "log", "TestProducerStateRestartProperty"},
	{mutation.RecoverProducersFromSegmentBase, "log", "TestDataDriven/producer_recovery"},
	{mutation.RecoverProducersFromSegmentBase, "internal/harness/sim", "TestScripts/delete_records_producers_restart"},

	{mutation.RecoverySnapshots, "log", "TestLoadingLogKeepsLargestStrayProducerStateSnapshot"},
	{mutation.RecoverySnapshots, "log", "TestProducerStateRestartProperty"},
	{mutation.RecoverySnapshots, "log", "TestDataDriven/producer_recovery"},

	{mutation.ProducerBatchesWindow, "log", "TestProducerDedupWindowSurvivesRestart"},
	{mutation.ProducerBatchesWindow, "log", "TestProducerStateRestartProperty"},
	{mutation.ProducerBatchesWindow, "log", "TestDataDriven/producer_snapshots"},
	{mutation.ProducerBatchesWindow, "log", "TestDataDriven/producer_recovery"},

	{mutation.SnapshotFloor, "log", "TestProducerStateRestartProperty"},
	{mutation.LogDirParentSync, "logmanager", "TestHighWatermarkAfterCrash"},
	{mutation.DeleteRewritesCheckpoints, "logmanager", "TestDelete"},
	{mutation.DeleteRewritesCheckpoints, "logmanager", "TestDeleteThenRecreateAfterCrash"},
	{mutation.DeleteRewritesCheckpoints, "internal/harness/sim", "TestScripts/shrunk_delete_rewrites_checkpoints"},
	{mutation.GroupCommitStepUndo, "wal/pebblecp", "TestGroupCommitFailingStep"},
	{mutation.GroupCommitStepUndo, "wal/pebblecp", "TestGroupCommitStepFault"},
	{mutation.GroupCommitStepUndo, "internal/harness/sim", "TestScripts/shrunk_group_commit_step_undo"},
	{mutation.ManagedCloseDurable, "logmanager", "TestCloseMarkerAfterDurable"},
	{mutation.ManagedCloseDurable, "logmanager", "TestCrashDuringOpenAndClose"},
	{mutation.ResealBatchBoundary, "tierstate", "TestPlanResealInsideBatch"},
	{mutation.ResealBatchBoundary, "internal/harness/sim", "TestScripts/reseal_inside_batch"},
	{mutation.ResealBatchBoundary, "internal/harness/sim", "TestScripts/reseal_inside_tiered_batch"},
	{mutation.TruncationLowersRemoteHighest, "log", "TestTruncationLowersHighestOffsetInRemoteStorage"},
	{mutation.TruncationLowersRemoteHighest, "internal/harness/sim", "TestScripts/unclean_truncation_remote_highest"},
	{mutation.UndoLeavesDiskless, "tierstate", "TestAbortReturnsPartitionToClassic"},
	{mutation.UndoLeavesDiskless, "tierstate", "TestStateDataDriven/state_undo"},
	{mutation.UndoLeavesDiskless, "internal/harness/sim", "TestScripts/switch_undo_abort"},
	{mutation.WALReadSkippedStart, "wal", "TestReaderRowsOutOfOrderAtTheStart"},
	{mutation.TruncationKeepsRemotePrefix, "log", "TestTruncationBelowLocalLogStartKeepsRemotePrefix"},
	{mutation.TruncationKeepsRemotePrefix, "internal/harness/sim", "TestScripts/unclean_truncation_below_local_start"},
	{mutation.RemoteReadLineage, "remote", "TestRemoteReadStopsAtTheLineage"},
	{mutation.RemoteReadLineage, "remote", "TestRemoteReadRefusesBatchPastTheLineageEnd"},
	{mutation.RemoteReadLineage, "internal/harness/sim", "TestScripts/unclean_remote_batch_past_lineage_end"},
	{mutation.RemoteHighestInLineage, "log", "TestHighestOffsetInRemoteStorageInLineage"},
	{mutation.StartPhaseTwoRecordedEpoch, "tierstate", "TestPlanStartPhaseTwo"},
	{mutation.StartPhaseTwoRecordedEpoch, "internal/harness/sim", "TestScripts/start_phase_2_divergent_tail"},
	{mutation.LogStartCheckpointFirst, "log", "TestLogStartRaiseIsCrashSafe"},
	{mutation.LogStartCheckpointFirst, "internal/harness/sim", "TestScripts/delete_records_log_start_after_crash"},
	{mutation.LogStartCheckpointFirst, "log", "TestCrashSweep"},
	{mutation.TruncateFullyOrder, "log", "TestTruncateFullyBelowLogStartIsCrashSafe"},
	{mutation.TruncateFullyOrder, "log", "TestCrashSweep"},
	{mutation.TruncateFullyOrder, "internal/harness/sim", "TestScripts/truncate_fully_lower_log_start_crash"},
	{mutation.ResealPendingLogEnd, "tierstate", "TestPlanResealWhileSealPending"},
	{mutation.ResealPendingLogEnd, "internal/harness/sim", "TestScripts/reseal_while_pending"},
	{mutation.RemoteReadLogStartBatch, "remote", "TestRemoteReadBatchStraddlingTheLogStart"},
	{mutation.EmptyPrefixCheck, "tierstate", "TestCheckReplicaEmptyPrefix"},
	{mutation.EmptyPrefixCheck, "internal/harness/sim", "TestScripts/start_phase_2_below_cross_tier_start"},

	{mutation.RemoteProducerWindow, "log", "TestTruncateFullyAndRestoreProducerWindow"},
	{mutation.RemoteProducerWindow, "remote", "TestCopyUploadsProducerWindow"},
	{mutation.RemoteProducerWindow, "internal/harness/sim", "TestScripts/producer_window_after_remote_rebuild"},
	{mutation.PromoteLineage, "replica", "TestReplicaDataDriven/move"},
	{mutation.PromoteLineage, "internal/harness/sim", "TestScripts/promote_future_after_truncation"},
	{mutation.CopySettlesUploads, "remote", "TestFailedCopySettlesItsUploads"},
	{mutation.CopySettlesUploads, "internal/harness/sim", "TestScripts/shrunk_copy_settles_uploads"},
	{mutation.ResealPendingHighWatermark, "tierstate", "TestPlanResealPendingAboveHighWatermark"},
	{mutation.ResealPendingHighWatermark, "internal/harness/sim", "TestScripts/forced_seal_above_high_watermark"},
	{mutation.ResealPendingHighWatermark, "internal/harness/sim", "TestScripts/reseal_while_pending_past_high_watermark"},
	{mutation.EmptyPrefixCoverage, "consolidate", "TestDecideDataDriven/decide_empty_prefix_coverage"},
	{mutation.EmptyPrefixCoverage, "internal/harness/sim", "TestScripts/empty_prefix_recreated_leader_rebuild"},
	{mutation.RollSyncOrder, "consolidate", "TestSealLeaderCrash"},
	{mutation.RollSyncOrder, "log", "TestRollSyncOrderCrash"},
	{mutation.RollSyncOrder, "internal/harness/sim", "TestScripts/flush_unlimited_producers_lost_after_restart"},
	{mutation.LogStartDataFirst, "log", "TestLogStartRaiseToLogEndCrash"},
	{mutation.LogStartDataFirst, "internal/harness/sim", "TestScripts/flush_unlimited_producers_lost_after_delete_records"},
	{mutation.RecoveryFirstSnapshot, "log", "TestRecoverySnapshotsFirstSegmentBase"},
	{mutation.RecoveryFirstSnapshot, "internal/harness/sim", "TestScripts/recovery_snapshots_first_segment_base"},
	{mutation.EpochCheckAtLogStart, "log", "TestCleanOpenAfterDeleteRecordsToLogEnd"},
	{mutation.EpochCheckAtLogStart, "internal/harness/sim", "TestScripts/clean_open_after_delete_records_to_log_end"},
	{mutation.RecoveryPointSnapshotKept, "log", "TestRecoveryKeepsSnapshotAtRecoveryPoint"},
	{mutation.RecoveryPointSnapshotKept, "internal/harness/sim", "TestScripts/recovery_point_snapshot_kept"},
	{mutation.FetchEpochBelowEarliest, "tierstate", "TestFetchDataDriven/fetch_diverging"},
	{mutation.FetchEpochBelowEarliest, "internal/harness/sim", "TestScripts/divergent_tail_below_leader_log_start"},
	{mutation.TruncationRewritesHWCheckpoint, "logmanager", "TestTruncateBelowHighWatermarkThenCrash"},
	{mutation.TruncationRewritesHWCheckpoint, "internal/harness/sim", "TestScripts/unclean_truncation_below_checkpointed_hw"},
}

// TestMutations builds the test binaries of the table's packages with
// -tags tierlog_mutation, runs every row's test with nothing disabled
// (it must pass) and with its guard disabled through TIERLOG_MUTATION
// (it must fail).
func TestMutations(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs other packages' tests")
	}
	for _, g := range mutation.Guards() {
		if !hasCatch(g) {
			t.Errorf("guard %v: no test in the table catches it", g)
		}
	}
	root := moduleRoot(t)
	bins := buildTestBinaries(t, root)

	t.Run("control", func(t *testing.T) {
		seen := map[catch]bool{}
		for _, c := range catches {
			key := catch{pkg: c.pkg, test: c.test}
			if seen[key] {
				continue
			}
			seen[key] = true
			out, err := runTest(root, bins, c, "")
			if err != nil || !reported(out, "PASS", c.test) {
				t.Errorf("%s %s with every guard on: want PASS (err %v)\n%s", c.pkg, c.test, err, tail(out))
			}
		}
	})
	for _, g := range mutation.Guards() {
		t.Run(g.String(), func(t *testing.T) {
			for _, c := range catches {
				if c.guard != g {
					continue
				}
				disabled := g.String()
				for _, w := range catchWith[c] {
					disabled += "," + w.String()
				}
				out, err := runTest(root, bins, c, disabled)
				if err == nil || !reported(out, "FAIL", c.test) {
					t.Errorf("%s %s with %v disabled: want FAIL (err %v)\n%s", c.pkg, c.test, disabled, err, tail(out))
				}
			}
		})
	}
}

// catchWith names, for a row whose bug several guards stop, the other
// guards disabled with the row's: each alone keeps the test passing.
var catchWith = map[catch][]mutation.Guard{
	// An epoch's highest offset whose segment another lineage's epoch
	// cleanup deleted: the tasks' highest offset stops at the hole from
	// the local log start too.
	{mutation.RemoteHighestHeld, "remote", "TestHighestRemoteOffset"}:                                      {mutation.RemoteLineageHole},
	{mutation.RemoteHighestHeld, "internal/harness/sim", "TestScripts/unclean_prune_past_deleted_lineage"}: {mutation.RemoteLineageHole},
	// A remote segment crossing the seal with records an unclean
	// election discarded: the seal cap and the lineage check each refuse
	// them.
	{mutation.SealCapRemoteRead, "internal/harness/sim", "TestScripts/pull857_crossing"}: {mutation.RemoteReadLineage},
	// A highest remote offset left above an unclean truncation: the
	// leadership change that follows caps it again when it registers
	// the partition.
	{mutation.TruncationLowersRemoteHighest, "internal/harness/sim", "TestScripts/unclean_truncation_remote_highest"}: {mutation.RemoteRegistrationCap},
	// A promoted future log whose log start a truncation below its local
	// log start moved up: a truncation keeps the log start.
	{mutation.RetentionLogStart, "internal/harness/sim", "TestScripts/retention_log_start_promoted_future_log"}: {mutation.TruncationKeepsRemotePrefix},
	// A restart that lost a producer below the log start: the snapshot
	// the reload keeps for the recovery point's segment holds it too.
	{mutation.RecoveryFirstSnapshot, "internal/harness/sim", "TestScripts/recovery_snapshots_first_segment_base"}:     {mutation.RecoveryPointSnapshotKept},
	{mutation.EpochCheckAtLogStart, "internal/harness/sim", "TestScripts/clean_open_after_delete_records_to_log_end"}: {mutation.RecoveryPointSnapshotKept},
	// The property's restarts after DeleteRecords to the log end: the
	// snapshots a recovery writes, the one the reload keeps for the
	// recovery point and a clean open that does not rebuild the epochs
	// each keep the producers.
	{mutation.RecoverySnapshots, "log", "TestProducerStateRestartProperty"}: {mutation.EpochCheckAtLogStart,
		mutation.RecoveryPointSnapshotKept},
}

func hasCatch(g mutation.Guard) bool {
	for _, c := range catches {
		if c.guard == g {
			return true
		}
	}
	return false
}

// moduleRoot is the directory of the main module's go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command(goTool(), "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		t.Fatal("not inside the module")
	}
	return filepath.Dir(mod)
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// buildTestBinaries compiles each package of the table once (go test -c
// into a temporary directory, one <name>.test per package; the package
// names are the directories' last elements) and returns them by package.
func buildTestBinaries(t *testing.T, root string) map[string]string {
	t.Helper()
	dir := t.TempDir()
	bins := map[string]string{}
	args := []string{"test", "-c", "-tags", "tierlog_mutation", "-o", dir + string(filepath.Separator)}
	for _, c := range catches {
		if _, ok := bins[c.pkg]; !ok {
			bins[c.pkg] = filepath.Join(dir, path.Base(c.pkg)+".test")
			args = append(args, "./"+c.pkg)
		}
	}
	cmd := exec.Command(goTool(), args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return bins
}

// runTest runs c's test from its package directory (datadriven files are
// found relative to it) with TIERLOG_MUTATION set to guard ("" for none).
func runTest(root string, bins map[string]string, c catch, guard string) ([]byte, error) {
	cmd := exec.Command(bins[c.pkg], "-test.run", runPattern(c.test), "-test.v", "-test.count=1", "-test.timeout=5m")
	cmd.Dir = filepath.Join(root, filepath.FromSlash(c.pkg))
	env := []string{mutation.EnvVar + "=" + guard}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, mutation.EnvVar+"=") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.Bytes(), err
}

// runPattern anchors every level of a test path: "TestRules/prune"
// becomes "^TestRules$/^prune$", so no other test or subtest runs.
func runPattern(test string) string {
	parts := strings.Split(test, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

// reported says whether the verbose output has the test's own result
// line with verdict (PASS or FAIL): a pattern that matched nothing, or a
// binary that died before the test ran, reports neither.
func reported(out []byte, verdict, test string) bool {
	re := regexp.MustCompile(`(?m)^\s*--- ` + verdict + `: ` + regexp.QuoteMeta(test) + ` \(`)
	return re.Match(out)
}

// tail keeps the end of a run's output for a failure message.
func tail(out []byte) string {
	const n = 3000
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return string(out)
}
