package sim

import (
	"maps"

	"github.com/tierlog/tierlog/internal/mutation"
)

// simCatch is one guard the random simulation catches: with the guard
// (and its backups, mutation.Backups) disabled, a search from seed 1
// finds a seed that breaks an invariant within limit seeds.
type simCatch struct {
	guard   mutation.Guard
	weights map[string]int
	// limit bounds the search (seeds 1 to limit). The first catching
	// seed, as `go run -tags tierlog_mutation ./cmd/tierlog-sim -mutation
	// GUARD -seeds 2000` prints it, is in docs/simulation.md; the limit
	// leaves room for a change of the menu to move it.
	limit uint64
}

// simCatches is the simulation's column of the mutation table
// (docs/reliability.md, "Mutation check"): a row for every guard
// (TestEveryGuardHasASearchRow), in the order of the search's shards.
//
// first-prune-bound alone: without the bound a leader with an empty log
// is offered the first diskless batch at its log end 0, and the
// fetcher's appendablePrefix refuses a batch that does not start there,
// so the leader stays at 0: the liveness check (Settle) finds it Stuck
// (script shrunk_first_prune_bound_alone); the merged menu reaches it
// in no seed of 1 to 1500 (Settle needs a quiet cluster), the menu with
// all-clear at seed 7. With wal-read-gap off too it appends the batch
// at 0: a consumer is served from past its fetch offset (LostRecord) or
// a follower's epochs disagree with the leader's (LineageDiverged).
//
// Each row's comment gives the first catching seed on the menu of this
// file's version (docs/simulation.md, "The guard search"); the limit is
// about three times it, or the seed plus a margin where that would make
// the row's search take more than a few seconds.
var simCatches = []simCatch{
	// The object store answers a WAL object's GET with another object's
	// bytes of the same size (wal-read-faults): without the binding
	// check they are served (UncommittedRead). Seed 5 after 283 steps.
	{guard: mutation.WALReadBinding, limit: 35},
	// The control plane's FindBatches answer misses a row in the middle
	// (plane-faults): without the gap check the batches after the hole
	// are served (LostRecord: a record that does not follow the one
	// before). Seed 5 after 384 steps.
	{guard: mutation.WALReadGap, limit: 40},
	// Two rows swapped at the start of a FindBatches answer
	// (plane-faults): without the check the later batch is served as the
	// answer's start (LostRecord: served past the fetch offset). Seed 30
	// after 336 steps.
	{guard: mutation.WALReadSkippedStart, limit: 350},
	// Diskless records produced or consolidated in phase 1 carry an epoch
	// from before the flag: a follower's epochs disagree with the
	// leader's (LineageDiverged). Seed 62 after 323 steps.
	{guard: mutation.Phase2Gate, limit: 190},
	// An undone switch that stays consolidating reads as born diskless:
	// the leader starts consolidating and followers leave the classic
	// fetcher (ClassicBroken), at the undo-switch step. Seed 1 after 96
	// steps.
	{guard: mutation.UndoLeavesDiskless, limit: 40},
	// A broker that loads a producer snapshot at its restart keeps only
	// each producer's last batch; an idempotent producer's retry of an
	// earlier batch of its window, committed, is refused as out of order
	// (Duplicate). Seed 6 after 101 steps.
	{guard: mutation.ProducerBatchesWindow, limit: 40},
	// A crash soon after a log directory was created (a new or lost
	// disk) loses the directory with the logs' synced files: the replica
	// comes back empty, and once it leads, remote storage serves a
	// consumer records the partition no longer commits, or no tier holds
	// a committed offset. Seed 12 after 211 steps (LostRecord), the same
	// in every run.
	{guard: mutation.LogDirParentSync, limit: 60},
	// The random reseal names an offset inside one of the leader's
	// batches: the truncation to it loses the batch's records below the
	// seal. Seed 55 after 181 steps.
	{guard: mutation.ResealBatchBoundary, limit: 80},
	// The operator forces the seal while it is pending (the random
	// reseal acts in the seal-pending phase too) at an offset below the
	// leader's log end: the leader truncates committed records to it with
	// no loss accepted (LostRecord). Seed 5 after 138 steps.
	{guard: mutation.ResealPendingLogEnd, limit: 220},
	// The operator forces the seal while it is pending at the leader's
	// log end above its high watermark: an in-sync follower holding
	// another tail there (a leader of an earlier epoch wrote it) is
	// elected and serves it (Conflict). Seed 549 after 94 steps.
	{guard: mutation.ResealPendingHighWatermark, limit: 600},
	// With flush.messages unlimited (the flush row, weight 0 in the
	// default menu for open findings, see random.go) a clean stop
	// leaves the log's records unsynced behind its clean-shutdown
	// marker: a crash after the restart drops them while the recovered
	// log keeps its end (LostRecord: a fetch served past a hole; or
	// Duplicate, a restart that forgot a producer). Seed 54 after 309
	// steps (LostRecord), with flush on.
	{guard: mutation.ManagedCloseDurable, weights: flushMenu, limit: 55},
	// With flush.messages unlimited a roll's snapshot or checkpoint
	// write fsyncs the directory before the rolled segment's data is
	// synced: a crash keeping no unsynced data recovers the new segment
	// above an empty old one (Duplicate: a restart that forgot a
	// producer; or LostRecord). Seed 23 after 170 steps, with flush on.
	{guard: mutation.RollSyncOrder, weights: flushMenu, limit: 70},
	// With flush.messages unlimited a DeleteRecords to the log end is
	// checkpointed before the records below it are durable: a crash
	// reopens an empty log at the new log start that forgot the
	// producers the raise keeps (Duplicate). Seed 58 after 497 steps,
	// with flush on (seed 53 is recovery-point-snapshot-kept's).
	{guard: mutation.LogStartDataFirst, weights: flushMenu, limit: 285},
	// With flush.messages unlimited the recovery point stays below a
	// log start raised to the log end; a crash recovery starts at the
	// segment holding it, whose snapshot the open's reload deleted, and
	// forgets a producer whose batches retention removed (Duplicate).
	// Seed 53 after 396 steps.
	{guard: mutation.RecoveryPointSnapshotKept, weights: flushMenu, limit: 60},
	// A crash during a roll loses its producer snapshot; the restart's
	// recovery starts at the new segment and writes none there, and once
	// DeleteRecords moves the log start to the log end the reload deletes
	// the older ones: a crash forgets the producers of the segments below
	// (Duplicate). With recovery-point-snapshot-kept off too (its kept
	// snapshot holds them as well): seed 943 after 271 steps.
	{guard: mutation.RecoveryFirstSnapshot, limit: 1000},
	// A clean open after DeleteRecords to the log end took the epoch
	// cache for damage and recovered every segment, deleting the
	// producer snapshots above the first; a crash inside that recovery
	// left a log whose next open forgot producers (Duplicate). With
	// recovery-point-snapshot-kept off too: seed 23 after 279 steps.
	{guard: mutation.EpochCheckAtLogStart,
		weights: producerLogStartMenu, limit: 70},
	// A truncation below the checkpointed high watermark, then a crash:
	// the restart restores the old high watermark over records appended
	// since at the truncated offsets, not committed (Conflict). Seed 307
	// after 381 steps (script unclean_truncation_below_checkpointed_hw).
	{guard: mutation.TruncationRewritesHWCheckpoint, weights: unclean3Menu, limit: 330},
	// A random reseal lowers the seal below the first WAL batch; the
	// prune moves W past h + 1. Seed 14 after 351 steps.
	{guard: mutation.PrunerCap, limit: 40},
	// start-phase-2 elects a replica whose log below the seal holds an
	// uncommitted record of an older epoch; without a recorded epoch the
	// replica check is skipped and it leads with it. empty-prefix-check
	// stops the same bug (without a recorded epoch the check recreates
	// any replica holding a record below the seal, safe but a rebuild
	// each): it is the guard's backup (mutation.Backups), disabled with
	// it. On the start-phase-2 menu seed 57 after 252 steps.
	{guard: mutation.StartPhaseTwoRecordedEpoch, weights: startPhaseTwoMenu, limit: 200},
	// DeleteRecords (or a follower taking the leader's log start) writes
	// the epoch checkpoint truncated from the start before the offsets
	// checkpoint: a crash brings the records below the new log start
	// back without epochs, and a follower copying them disagrees with
	// the leader (LineageDiverged). With delete-records on (weight 0 in
	// the default menu for an open finding, see random.go): seed 20 after
	// 215 steps.
	{guard: mutation.LogStartCheckpointFirst, weights: deleteRecordsMenu, limit: 55},
	// A DeleteRecords inside a batch the leader tiered truncates the
	// epoch cache to the new log start; a remote read checks the batch's
	// lineage at its base offset, which the cache no longer covers, and
	// refuses the committed records from the log start on forever
	// (LostRecord: a new leader's remote storage holds them in its
	// lineage and does not serve them). Seed 17 after 303 steps, with
	// delete-records on (443 before the checker took an unserved offset
	// of a valid segment for a lost record rather than an accepted loss).
	{guard: mutation.RemoteReadLogStartBatch, weights: deleteRecordsMenu, limit: 110},
	// A restart changes no idempotent producer's answer
	// (checkRestartedProducers): a recovery that forgets a producer
	// whose batches lie below the log start (DeleteRecords inside the
	// recovered segment, then a crash) would append its retry again
	// (Duplicate at the restart). recover-producers-from-segment-base:
	// the recovery of the first segment replays it from the log start,
	// not its base. Seed 2 after 145 steps.
	{guard: mutation.RecoverProducersFromSegmentBase, limit: 40},
	// snapshot-floor: DeleteRecords deletes the producer snapshot at the
	// base of the segment holding the new log start, so the recovery of
	// that segment starts empty there and forgets the producers of the
	// segments below. Seed 18 after 74 steps.
	{guard: mutation.SnapshotFloor, limit: 55},
	// recovery-snapshots: a crash recovery writes no snapshot at the
	// segment bases it passes nor at the log end; once retention or
	// DeleteRecords removed the older snapshots, the next crash's
	// recovery finds none and starts with no state, forgetting the
	// producers whose batches lie below it. With recovery-point-snapshot-kept
	// off too (the snapshot it keeps at the recovery point's segment
	// holds them as well): seed 8 after 133 steps.
	{guard: mutation.RecoverySnapshots, limit: 55},
	// first-prune-bound alone: a leader whose log ends below the seal in
	// phase 2 before the first prune (its disk lost, then a forced
	// election) is offered the first diskless batch
	// and refuses it, as it does not start at its log end; the
	// incident's end (all-clear, weight 0 in the default menu, see
	// random.go) runs Settle, which finds it Stuck. Seed 3
	// after 252 steps.
	{guard: mutation.FirstPruneBound, weights: allClearMenu, limit: 50},
	// empty-prefix-coverage: DeleteRecords moved the log start to the
	// seal before the switch; in phase 2 the leader loses its disk after
	// a copy and a prune and comes back empty as the last-known leader:
	// the endpoint waits for remote storage to hold S - 1, deleted, and
	// all-clear's Settle finds it Stuck. Seed 516 after 498 steps.
	{guard: mutation.EmptyPrefixCoverage, weights: allClearMenu, limit: 600},
	// epoch-cleanup-guard: after an unclean election a leader forced in
	// phase 2 caches only epochs above the classic prefix's, and its
	// expiration's epoch cleanup deletes the remote segments of the
	// prefix: the WAL start the pruner moved to the seal is past the
	// highest offset remote storage still holds (PrunedPastRemote). On
	// the unclean menu with all-clear: seed 73 after 393 steps (227 in an
	// earlier version; not in 600 seeds of the unclean menu alone).
	{guard: mutation.EpochCleanupGuard, weights: uncleanAllClearMenu, limit: 300},
	// Unclean ElectLeaders requests (weight 0 in the default menu) with
	// the operator's start-phase-2 left out (it had open findings with
	// unclean elections when the rows were searched). Seeds 202 (396 steps; with
	// its backup remote-read-lineage, since the lineage check also reads
	// a batch's last offset) and, for remote-read-lineage, 17 (93 steps). truncation-lowers-remote-highest and
	// remote-highest-in-lineage have rows on the unclean task menu below.
	{guard: mutation.SealCapRemoteRead, weights: uncleanMenu, limit: 300},
	{guard: mutation.RemoteReadLineage, weights: uncleanMenu, limit: 265},
	// A follower that an unclean election truncates below its local log
	// start loses its log start and the epochs below the truncation; when
	// it leads later, its consolidation stops past the seal (Stuck), or
	// a committed offset is on no tier. On the unclean expire menu: seed
	// 383 after 352 steps (LostRecord).
	{guard: mutation.TruncationKeepsRemotePrefix, weights: uncleanExpireMenu, limit: 780},
	// empty-prefix-check: DeleteRecords reaches the seal, so the classic
	// prefix [X, S) is empty and start-phase-2 records no epoch; without
	// the check a replica holding records below the seal that the
	// partition no longer commits leads with them (Conflict). On the
	// phase-2 menu (DeleteRecords and the switch's and start-phase-2's
	// rows weighed up): seed 102 after 202 steps (on the default menu, 12
	// of seeds 1 to 1227 with delete-records at 2, before the fix).
	{guard: mutation.EmptyPrefixCheck, weights: emptyPrefixMenu, limit: 140},
	// remote-producer-window: a follower out of the ISR is rebuilt from
	// remote storage past an idempotent producer's batches, then leads;
	// the producer retries a batch of its window whose answer it lost,
	// and a rebuild from Kafka's snapshot alone (each producer's last
	// batch) refuses it as out of order (Duplicate). On the producer
	// menu: seed 21 after 205 steps.
	{guard: mutation.RemoteProducerWindow, weights: producerRebuildMenu, limit: 60},
	// promote-lineage: the promotion's lineage check, with its backup
	// replica-future-log (the phase-2 check deletes such a future log
	// first). The move fetcher's truncations keep the future log in the
	// current log's lineage elsewhere: since a resumed move promotes only
	// after its first round (Kafka's truncating state), as Kafka does, no
	// seed of 1 to 300 of the move menu or 1 to 1000 of the move-across-
	// the-seal menu breaks with promote-lineage alone off (seed 40 of the
	// move menu did while a resumed move could promote at once). With
	// both off: see replica-future-log's row.
	{guard: mutation.PromoteLineage, weights: loneLeaderMoveMenu, limit: 950},
	// remote-highest-held: an unclean election's leader deletes the
	// segment of epoch 0 that remote storage held (epoch cleanup); the
	// metadata's highest offset of epoch 0 stays, and when a replica of
	// that lineage leads again its copy task counts the segment as
	// copied (h=0, nothing uploaded), so local retention deletes the
	// only copy (LostRecord; script unclean_prune_past_deleted_lineage
	// reaches the pruner's PrunedPastRemote). Not in seeds 1 to 1251 of
	// the unclean menu; on the unclean tiering menu: seed 130 after 160
	// steps. prune-remote-holds (the pruner's own check of that offset)
	// is not caught in 800 seeds of it.
	{guard: mutation.RemoteHighestHeld, weights: uncleanTieringMenu, limit: 300},
	// truncation-lowers-remote-highest, remote-highest-in-lineage: an
	// unclean election truncates a replica below its highest remote
	// offset, and a remote task's lookup made before it installs the
	// stale offset (or one of another lineage), so local retention
	// deletes records remote storage does not hold (LostRecord); both
	// stop the same bug (caught at unclean seed 554 before the model committed what an
	// unclean election's leader serves; not in seeds 1 to 1850 of the
	// unclean menu since). On the unclean task menu: seed 96 after 107
	// steps.
	{guard: mutation.TruncationLowersRemoteHighest, weights: uncleanTaskMenu, limit: 200},
	{guard: mutation.RemoteHighestInLineage, weights: uncleanTaskMenu, limit: 200},
	// copy-settles-uploads: with late PUTs on (lateputs.go: the copy's
	// data and indexes upload concurrently, and the store applies a PUT
	// the copy cancelled at the end of the step), a data PUT fails and
	// the copy cancels its indexes PUT instead of waiting for it; the
	// failed copy's cleanup lists the segment without the indexes, which
	// land afterwards: an object of no segment (OrphanObject). On the
	// late-puts menu: seed 15 after 258 steps.
	{guard: mutation.CopySettlesUploads, weights: latePutsMenu, limit: 80},
	// group-commit-step-undo: a commit fails inside its step of the
	// control plane's group commit after its batches were accepted
	// (cp-step-fault: pebblecp.Options.StepFault); without the step's
	// own copy of the partition row the group keeps the failed step's
	// high watermark, so the writer's retry commits after a gap of
	// offsets no batch holds (LostRecord: checkWALRun). With
	// cp-step-fault at 3: seed 1 after 187 steps.
	{guard: mutation.GroupCommitStepUndo, weights: stepFaultMenu, limit: 20},
	// A follower whose last epoch precedes the leader's earliest (the
	// leader's cache truncated by DeleteRecords) keeps a replaced tail
	// below the log start; elected, its producer state answers a retry
	// DUPLICATE at offsets holding other records (Duplicate). Seed 37
	// after 121 steps of the step-fault menu (no step fault fires in it).
	{guard: mutation.FetchEpochBelowEarliest, weights: stepFaultMenu, limit: 60},
	// delete-rewrites-checkpoints: a broker checkpoints its high
	// watermark, the topic is deleted and created again under its name
	// (recreate-topic), and the deletion leaves the deleted log's entry
	// in replication-offset-checkpoint; the new log gets records it does
	// not commit, and after a crash its restart restores the deleted
	// log's high watermark over them, which another leader's committed
	// records replace (Conflict). On the recreate menu: seed 3 after 261
	// steps.
	{guard: mutation.DeleteRewritesCheckpoints, weights: recreateMenu, limit: 10},
	// A follower whose log start DeleteRecords raised resets, after an
	// unclean election, to the new leader's lower log end (an
	// out-of-range fetch: a full truncation lowering its log start), and
	// crashes before its directory's next fsync keeping every unsynced
	// item: the new segment stays, the removal of the old one is undone.
	// Without the guard the lower log start is already checkpointed, and
	// the restart opens a log ending at the old segment's base with no
	// record below it; the next reset truncates inside that range and
	// the follower joins the ISR claiming offsets it does not hold
	// (LineageDiverged; script truncate_fully_lower_log_start_crash), or
	// loses a committed record. On the truncate-fully menu: seed 233
	// after 353 steps (LostRecord).
	{guard: mutation.TruncateFullyOrder, weights: truncateFullyMenu, limit: 260},
	// truncation-fence: a lone leader tiers [0, 64] and is lost to an
	// unclean election; back as a follower, its remote task looks up 64
	// before its fetch truncates the log to 8, and installs it after it
	// is elected uncleanly again and seals at 9: without the fence the
	// phase-2 check recreates the leader over its last record
	// (LostRecord; script
	// truncation_fence_stale_remote_offset_after_unclean, from seed 578
	// of loneLeaderMenu). On the early-switch menu: seed 10 after 98
	// steps.
	{guard: mutation.TruncationFence, weights: loneLeaderSwitchMenu, limit: 30},
	// prune-floor: the WAL pruner runs in phase 1, and the operator then
	// lowers the seal below the WAL start it set: the consolidating
	// replicas stop there (Stuck; script
	// prune_floor_phase_one_before_reseal, from seed 693 of
	// loneLeaderMenu). On the reseal menu: seed 119 after 142 steps (49 in
	// an earlier version).
	{guard: mutation.PruneFloor, weights: loneLeaderResealMenu, limit: 360},
	// remote-lookup-epoch-members: a segment copied by an unclean leader
	// takes over the mapping of an epoch's start from a longer segment
	// of the lone leader, and a later leader of that lineage, which
	// deleted its local copy on the epoch's highest offset, cannot read
	// the epoch's last record from remote storage (LostRecord; script
	// unclean_remote_lookup_epoch_mapping_replaced). On the early-switch
	// menu: seed 43 after 89 steps.
	{guard: mutation.RemoteLookupEpochMembers, weights: loneLeaderSwitchMenu, limit: 100},
	// truncation-removal-order: a follower's truncation crashes between
	// the removals of the segments above its cut; the restart loads a
	// log with a hole below its end, and elected uncleanly it serves a
	// fetch across the hole (LostRecord; script
	// truncation_crash_at_segment_removal). On the reseal menu: seed 577
	// after 361 steps (none in 400 seeds of the lone-leader and
	// early-switch menus).
	{guard: mutation.TruncationRemovalOrder, weights: loneLeaderResealMenu, limit: 650},
	// The phase-2 check keeps a replica whose tail past the seal was
	// tiered and then truncated to the seal: it leads, copies from its
	// stale remote progress on and the pruner trusts it (LostRecord).
	// The truncation capping the progress local retention trusts below
	// its cut (the backup) stops the same bug: seed 550 of the lone-leader reseal menu after 321 steps, which
	// passes with either guard alone disabled (script
	// replica_remote_progress_tail_truncated_to_seal).
	{guard: mutation.ReplicaRemoteProgress, weights: loneLeaderResealMenu, limit: 600},
	// An unclean election's epoch cleanup deletes the segment holding a
	// lineage's highest offset in remote storage; that lineage leads
	// again, its task installs the offset (remote-highest-held, the
	// backup, off) and the pruner trusts it (PrunedPastRemote). Seed 248
	// of the lone-leader menu after 205 steps, which passes with either
	// guard alone disabled (script prune_remote_holds_lineage_cleaned_up).
	{guard: mutation.PruneRemoteHolds, weights: loneLeaderMenu, limit: 300},
	// An unclean election's epoch cleanup deletes a lower epoch's segment
	// of a lineage that leads again; its copy task raises the log start
	// to the first segment still held, past a record only its local log
	// holds (LostRecord). Seed 641 of the lone-leader menu after 115
	// steps (script unclean_remote_hole_below_highest).
	{guard: mutation.RemoteLineageHole, weights: loneLeaderMenu, limit: 700},
	// Every replica lost its disk in phase 2 before any leader wrote
	// the WAL row (the operator's start-phase-2 lowered a seal no leader
	// had initialised): the leader waits for its log to end at the seal
	// to write the row, and without the row its consolidation fetch is
	// answered "unknown partition", never redirected to remote storage,
	// so it never rebuilds, and Settle finds a committed offset no fetch
	// serves (Stuck; script init_row_from_metadata_after_start_phase_2).
	// On the all-clear menu: seed 7 after 222 steps.
	{guard: mutation.InitRowFromMetadata, weights: allClearMenu, limit: 420},
	// seal-truncation: a replica applying a lowered seal keeps its
	// classic tail past it, joins the ISR at the seal and leads with a
	// record the seal gave up (Conflict; script
	// seal_truncation_lowered_seal). On the lone-leader menu: seed 3
	// after 219 steps (none in 300 seeds of the default menu: a
	// follower's fetch truncates the tail there).
	{guard: mutation.SealTruncation, weights: loneLeaderMenu, limit: 20},
	// The phase-2 check keeps a replica with a classic tail past a
	// lowered seal, which applying the seal (seal-truncation, the
	// backup) would have truncated: it holds the given-up record where
	// the diskless one is (Conflict). Seed 66 of the lone-leader menu
	// after 98 steps, which passes with either guard alone disabled
	// (script replica_suffix_past_seal_lowered_seal).
	{guard: mutation.ReplicaSuffixPastSeal, weights: loneLeaderMenu, limit: 100},
	// The operator's recovery takes a lineage an unclean election
	// discarded for the sealed prefix: start-phase-2 trusts a remote
	// copy whose record at S - 1 is of another epoch than the seal's
	// (LostRecord; script start_phase_2_remote_of_discarded_lineage), or
	// elect --replica takes a replica truncated to the seal whose
	// records below it are of that lineage (Conflict; script
	// elect_replica_discarded_lineage). On the unclean operator menu:
	// seed 632 after 123 steps (none in 600 seeds of the unclean menu,
	// which leaves start-phase-2 out).
	{guard: mutation.SealEpochLineage, weights: uncleanOperatorMenu, limit: 700},
	// The phase-2 check keeps a replica whose future log (a log directory
	// move) ends past the log end: the leader's move fetcher copied its
	// record past a seal the operator then lowered, and applying the
	// lowered seal truncated the current log without marking the move
	// fetcher. Consolidation grows the log back to the future log's end
	// and the promotion on equal log ends replaces the diskless record
	// with the given-up one (Conflict). The promotion's lineage check
	// (the backup) stops the same bug. On the move-across-the-seal menu:
	// seed 859 after 196 steps, which passes with either guard alone
	// disabled (script replica_future_log_past_lowered_seal).
	{guard: mutation.ReplicaFutureLog, weights: loneLeaderMoveMenu, limit: 950},
	// DeleteRecords raises a lone leader's log start past the log end of
	// a replica an unclean election makes the leader, which seals and
	// writes the WAL row with its own log start (0); the first leader,
	// truncated to the seal, leads again and asks for phase 2 with its
	// prefix empty. Without the raise of X to the seal the consolidating
	// leader waits for ever for S - 1 in remote storage (Stuck). On the
	// lone-leader menu with unclean elections: seed 819 after 266 steps
	// (script unclean_empty_prefix_raises_cross_tier_start).
	{guard: mutation.EmptyPrefixCrossTierStart, weights: withWeights(loneLeaderMenu, map[string]int{"elect-unclean": 1}), limit: 900},
	// retention-log-start, with its backup truncation-keeps-remote-prefix
	// off too: a replica rebuilt from remote storage truncates to the
	// seal below its local log start, which then moves its log start up
	// and keeps the classic epoch; its future log copies that and, once
	// promoted, leads, and its expiration takes that log start for the
	// partition's, deleting the only copy of the classic prefix
	// (LostRecord). On the move-across-the-seal menu with unclean
	// elections at 2: seed 570 after 277 steps, which passes with the
	// backup alone off (script retention_log_start_promoted_future_log).
	{guard: mutation.RetentionLogStart, weights: withWeights(loneLeaderMoveMenu, map[string]int{"elect-unclean": 2}), limit: 650},
	// An unclean leader's local retention deletes the only copy of
	// records whose segments another lineage's leader deleted (its epoch
	// cleanup) after a follower task installed them as tiered, or looked
	// them up before the registration and installs them after it. On the
	// lone-leader menu with unclean elections: seed 52 after 483 steps,
	// the install after the registration (Stuck; script
	// unclean_task_install_after_registration). The move-across-the-seal
	// menu reaches the first shape at seed 1493 (script
	// unclean_stale_remote_offset_after_deletion), about 50 s.
	{guard: mutation.RemoteRegistrationCap, weights: withWeights(loneLeaderMenu, map[string]int{"elect-unclean": 1}), limit: 160},
}

// SearchPlan returns guard g's row: the menu its search runs on (nil:
// the default menu; a copy) and the seed bound TestSimCatchesEachGuard
// searches within (about three times the first catching seed). ok is
// false for a guard without a row. tierlog-sim's -mutation searches a
// guard on its row's menu unless -menu or -weights name another.
func SearchPlan(g mutation.Guard) (weights map[string]int, limit uint64, ok bool) {
	for _, sc := range simCatches {
		if sc.guard == g {
			return maps.Clone(sc.weights), sc.limit, true
		}
	}
	return nil, 0, false
}
