// Package mutation lets a test build switch off one safety guard of the
// library at a time, to show that the tests catch the bug the guard
// prevents (a mutation check: a guard whose removal no test notices is a
// guard no test holds).
//
// Library code marks each guard with one line:
//
//	if !mutation.Disabled(mutation.PrunerCap) { ...guard... }
//
// Built without the tag tierlog_mutation, Disabled is a function that
// returns the constant false; the compiler inlines it and removes the
// branch, so the guards cost nothing in a normal build. Built with
// -tags tierlog_mutation, a guard is disabled for one test by
// Disable(t, guard), or for a whole test binary by the environment
// variable TIERLOG_MUTATION (comma-separated guard names), which is how
// TestMutations runs a package's tests against each mutant.
//
// This package imports only the standard library.
package mutation

import (
	"fmt"
	"strings"
)

// EnvVar names the guards a test binary built with -tags
// tierlog_mutation starts with disabled: comma-separated Guard names.
const EnvVar = "TIERLOG_MUTATION"

// Guard names one guard that can be switched off.
type Guard uint8

const (
	// TruncationFence: a value computed while the log's truncation count
	// was c may be installed only while the count is still c
	// (truncation.Fenced.Valid). The log's UpdateHighestOffsetInRemoteStorage
	// and with it the remote copy and follower tasks rely on it: progress
	// computed before a truncation is never installed after it
	// (github.com/aiven/inkless/pull/857).
	TruncationFence Guard = iota + 1
	// RetentionLogStart: the expiration task of a consolidating partition
	// uses the cross-tier log start X (or, unknown, the first remote
	// segment) as the log start, not the local log start the seal pins, so
	// retention never deletes remote segments at or above X
	// (remote.Manager, runExpiration).
	RetentionLogStart
	// EpochCleanupGuard: the epoch-cache cleanup of a consolidating
	// partition deletes only segments that end below a known X
	// (remote.PlanEpochCleanup): a recreated leader caches only its new
	// epoch, and the classic prefix its rebuild reads must survive
	// (github.com/aiven/inkless/pull/857).
	EpochCleanupGuard
	// ReplicaSuffixPastSeal: the phase-2 replica check recreates a replica
	// whose records past the seal are not a consolidated diskless suffix
	// (tierstate.CheckReplica, condition suffix-past-seal; a classic tail
	// past the seal).
	ReplicaSuffixPastSeal
	// ReplicaRemoteProgress: the phase-2 replica check recreates a
	// replica whose highest offset in remote storage is not below its log
	// end (tierstate.CheckReplica, condition remote-progress; a tail that
	// was tiered and then truncated to the seal leaves that progress, and
	// the WAL pruner would trust it).
	ReplicaRemoteProgress
	// PrunerCap: a prune never moves the WAL start W past
	// highestOffsetInRemoteStorage + 1 (wal.PrunedLogStart), so a seal
	// lowered below the first WAL batch leaves no offsets that exist
	// nowhere (github.com/aiven/inkless/pull/855).
	PrunerCap
	// FirstPruneBound: the consolidation endpoint's diskless start of a
	// switched partition is D = max(W, S) (consolidate.DisklessStart), so
	// before the first prune moves W to the seal a leader without a local
	// log is redirected to remote storage, not served the first diskless
	// batch at offset 0 (github.com/aiven/inkless/pull/857).
	FirstPruneBound
	// PruneFloor: a switched partition is pruned only once its floor is
	// armed and h reaches it (consolidate.DecidePrune): the first prune
	// waits until remote storage holds S - 1, later ones follow the WAL
	// start the last prune returned.
	PruneFloor
	// ReplicaFutureLog: the phase-2 replica check recreates a replica
	// whose log-directory move's future log ends past the current log or
	// in another epoch (tierstate.CheckReplica, condition future-log): a
	// promotion would bring back records the partition does not hold.
	ReplicaFutureLog
	// WALReadBinding: the WAL reader compares every batch it reads with
	// the binding its control-plane row recorded at commit (CRC field,
	// leader epoch field, producer id, epoch and base sequence) when the
	// row has one (wal.BatchBinding.Known), so bytes replaced under a key,
	// two partitions' runs swapped or coordinates pointing at another
	// batch are refused as corruption, never served.
	WALReadBinding
	// WALReadGap: the WAL reader refuses a FindBatches answer whose next
	// batch does not start right after the one before (or whose first
	// batch ends before the requested offset), and the consolidation
	// fetcher never appends a batch that does not start at its log's end,
	// so a skipped batch never becomes a hole in the consolidated log.
	WALReadGap
	// Phase2Gate: a partition switched from classic to diskless takes
	// diskless records (WAL produce, consolidation and its epoch stamp)
	// only once the phase-2 flag committed its diskless leader epoch
	// (tierstate.State.TakesDisklessRecords): a batch consolidated in
	// phase 1 would carry an epoch from before the flag.
	Phase2Gate
	// SealCapRemoteRead: a remote read below a committed seal returns no
	// batch at or above the seal (remote.Manager.Read): after an unclean
	// election a remote segment can cross the seal with records the
	// partition discarded.
	SealCapRemoteRead
	// RecoverProducersFromSegmentBase: a log recovery replays the producer
	// state of a recovered segment from its base, also when the log start
	// lies inside it (log.recoverSegments; Kafka's LogSegment.recover), so
	// a producer whose batches lie below the log start is not forgotten by
	// a crash (Kafka's LogLoaderTest.testLoadProducersAfterDeleteRecordsMidSegment).
	RecoverProducersFromSegmentBase
	// RecoverySnapshots: a log recovery writes a producer snapshot at the
	// base of each segment after the first it recovers and at the log end
	// (Kafka's recoverSegment and rebuildProducerState), so a later crash
	// does not replay the log from its start.
	RecoverySnapshots
	// ProducerBatchesWindow: a producer snapshot load restores every
	// producer's whole dedup window from the batches file beside the
	// snapshot (producer.LoadSnapshotWithBatches), so a retry of any of a
	// producer's last five batches is a duplicate after a restart, not
	// OUT_OF_ORDER_SEQUENCE.
	ProducerBatchesWindow
	// SnapshotFloor: the producer snapshot at the base of the segment
	// holding the log start is kept when the log start rises inside the
	// segment (log.snapshotFloor), so a recovery of that segment rebuilds
	// the state of producers whose batches lie below the log start.
	SnapshotFloor
	// LogDirParentSync: a log directory the log manager creates is made
	// durable in its parent before any log is opened in it
	// (logmanager.Manager.createDir; Kafka's createAndValidateLogDirs), so
	// a crash does not take the directory, and every log fsynced beneath
	// it, away.
	LogDirParentSync
	// DeleteRewritesCheckpoints: a log manager's Delete rewrites its
	// directory's checkpoints without the deleted partition before it
	// returns (logmanager.Manager.deleteOpLocked), so a later log of the
	// same name never starts from the deleted log's high watermark after a
	// crash.
	DeleteRewritesCheckpoints
	// GroupCommitStepUndo: a CommitFile that fails inside a group commit
	// (an offset overflow after one of its batches was accepted) leaves
	// the group's partition rows as it found them: pebblecp's step changes
	// copies of the group's rows (txn.log), pgcp's decideCommit undoes its
	// changes. Without it the next commit of the group starts after a gap.
	GroupCommitStepUndo
	// ManagedCloseDurable: a log manager's Close makes every file its
	// logs' deferred closes wrote durable (syncfs(2), or an fsync of each)
	// before it publishes them and again before it writes the directory's
	// clean-shutdown marker (logmanager.Manager.makeDurable), so the marker
	// never vouches for records or files that a crash can still take.
	ManagedCloseDurable
	// ResealBatchBoundary: tierstate.PlanReseal refuses a seal inside one
	// of the leader's batches, whose truncation would drop the batch's
	// records below the seal too.
	ResealBatchBoundary
	// TruncationLowersRemoteHighest: a log truncation to end caps the
	// highest offset in remote storage at end-1, so that local retention
	// never deletes records appended after an unclean truncation as if
	// another lineage's remote segments held them.
	TruncationLowersRemoteHighest
	// UndoLeavesDiskless: an undo of the classic-to-diskless switch (the
	// operator's abort of a pending seal, tierstate.State.AbortSwitch and
	// an explicit tag 100 = -1 replayed by State.ApplyChange) returns the
	// partition to classic without consolidation. A classic State that
	// kept consolidating reads as born diskless: the leader would start
	// consolidating at its high watermark and followers would leave the
	// classic fetcher, so classic records stop being replicated.
	UndoLeavesDiskless
	// WALReadSkippedStart: the WAL reader refuses a whole FindBatches
	// answer, not only the rows from the first bad one, when a refused
	// row holds offsets between the requested offset and a first batch
	// that starts past it (wal.Reader, skippedStart): rows out of order
	// that put a later batch first would otherwise be served as the
	// start of the answer, skipping the batches before it.
	WALReadSkippedStart
	// TruncationKeepsRemotePrefix: a truncation below the local log start
	// of a log with remote storage keeps the log start offset and the
	// epochs below the truncation offset (log.UnifiedLog.TruncateTo), so
	// a follower that an unclean election truncated below its local log
	// and that leads later does not delete the committed remote prefix
	// (below its log start, or by the epoch cleanup).
	TruncationKeepsRemotePrefix
	// RemoteReadLineage: a remote read returns only batches whose leader
	// epoch is the one the leader's epoch cache gives their base offset
	// (remote.Manager.Read): a segment copied before an unclean election
	// can hold, past its epoch's end in the leader's lineage, records the
	// partition discarded.
	RemoteReadLineage
	// RemoteHighestInLineage: the WAL pruner and the phase-2 request trust
	// the highest offset in remote storage only as far as it holds the
	// leader's lineage (log.UnifiedLog.HighestOffsetInRemoteStorageInLineage):
	// a truncation under it caps it below the new log end until a task
	// computed after the truncation installs an offset, so a leader that
	// an unclean election truncated neither prunes the WAL past what
	// remote storage holds of its records nor asks for phase 2 before
	// S-1 of its lineage is tiered.
	RemoteHighestInLineage
	// StartPhaseTwoRecordedEpoch: start-phase-2 records as R the epoch of
	// the remote record at the new seal - 1
	// (tierstate.PlanStartPhaseTwo), so every replica runs the phase-2
	// replica check and one whose log below the seal diverges from remote
	// storage (an uncommitted tail of an older epoch) is recreated rather
	// than elected with it.
	StartPhaseTwoRecordedEpoch
	// LogStartCheckpointFirst: a log start raise (DeleteRecords, remote
	// retention, local retention) writes the offsets checkpoint with the
	// new log start before the epoch checkpoint it truncated from the
	// start (log.UnifiedLog.commitLogStartFlushMuHeld), so a crash never
	// reopens the log at the old log start with a cache that lost the
	// epochs of the records above it.
	LogStartCheckpointFirst
	// TruncateFullyOrder: a full truncation (log.UnifiedLog.truncateFullyLocked)
	// makes the removal of the old segments durable before it creates
	// the new one, and checkpoints a log start below the current one (a
	// follower whose leader ends below its log start) only after that, so
	// a crash never leaves the empty segment among old ones, nor reopens
	// the old segments from below the epoch cache's first entry.
	TruncateFullyOrder
	// ResealPendingLogEnd: a seal the operator forces while the seal is
	// pending must be the leader's log end (tierstate.PlanReseal,
	// *tierstate.ForcedSealError): a lower one truncates acknowledged
	// records with no loss accepted.
	ResealPendingLogEnd
	// RemoteReadLogStartBatch: a remote read checks the lineage of a
	// batch that straddles the log start (a DeleteRecords inside it) at
	// its last offset: the epoch cache, truncated from the start to the
	// log start, has no epoch at its base offset, and the batch's records
	// would be refused forever.
	RemoteReadLogStartBatch
	// EmptyPrefixCheck: in phase 2 without a recorded epoch (the classic
	// prefix [X, S) is empty: DeleteRecords or retention moved the log
	// start to the seal or past it), the replica check recreates a
	// replica holding a record below the seal: every such record is
	// below the partition's log start (tierstate.CheckReplica).
	EmptyPrefixCheck
	// PruneRemoteHolds: the WAL pruner prunes at h only while the remote
	// log metadata lists a finished segment holding h in the leader's
	// epoch at h (consolidate.DecidePrune, SkipHighestNotInRemoteStorage):
	// the highest offset an epoch reached in remote storage is never
	// lowered, and after an unclean election the segments holding it may
	// have been deleted by a leader of another lineage (the epoch
	// cleanup), so the WAL would be pruned past what remote storage holds.
	PruneRemoteHolds
	// RemoteHighestHeld: the remote tasks derive an epoch's highest
	// offset in remote storage from the segments the metadata still
	// holds when the never-lowered highest offset lies above the log
	// start and no finished segment holds it (remote.Manager's
	// heldHighestOffset), and cap the log's in-lineage highest offset
	// there: segments a leader of another lineage deleted (the epoch
	// cleanup) are copied again when an unclean election makes this
	// log's lineage the partition's, rather than counted as copied, so
	// local retention does not delete their only copy.
	RemoteHighestHeld
	// RemoteProducerWindow: a rebuild from remote storage loads the
	// producer batches file uploaded with the segment
	// (log.RemoteRestore.ProducerBatches), so a retry of any batch of a
	// producer's dedup window is answered as a duplicate with its
	// original offset, not refused as out of order (Kafka's snapshot
	// holds each producer's last batch only).
	RemoteProducerWindow
	// PromoteLineage: a future log is promoted only when the epoch of
	// its last offset is the current log's too (replica.DecidePromotion):
	// with equal log ends only, a future log holding records the current
	// log's truncation discarded replaced it, and its committed records
	// were lost.
	PromoteLineage
	// CopySettlesUploads: a failed remote copy waits for the answer of
	// its other upload instead of cancelling it (remote.StorageManager
	// CopySegment): a cancelled request may still be applied by the
	// store after the failed copy's cleanup listed the segment's objects,
	// leaving an object of no segment.
	CopySettlesUploads
	// ResealPendingHighWatermark: a seal the operator forces while the
	// seal is pending (the leader's log end) must not lie above the
	// leader's high watermark (tierstate.PlanReseal,
	// *tierstate.UnreplicatedSealError): the seal raises every replica's
	// high watermark to it, and an in-sync follower holding another tail
	// above the old high watermark, elected, serves it as committed.
	ResealPendingHighWatermark
	// EmptyPrefixCoverage: the consolidation endpoint asks remote storage
	// for S - 1 only while the classic prefix [X, S) is not empty
	// (consolidate.DecideFetch): with X at or past S, S - 1 was deleted
	// and a recreated leader waiting for it never consolidates.
	EmptyPrefixCoverage
	// RollSyncOrder: the data of a rolled segment is made durable before
	// any fsync of the log directory can make a later segment's entry
	// durable (log.UnifiedLog.syncRolled before every directory-syncing
	// write, and Flush syncing segment data before its checkpoint files):
	// otherwise a crash under flush.messages unlimited left the rolled
	// segment empty beside the next one, a hole below the log end, and a
	// producer snapshot at the next base vouching for batches in the hole.
	RollSyncOrder
	// LogStartDataFirst: a raised log start is checkpointed only after
	// the records below it are durable (log.UnifiedLog.syncBelow):
	// otherwise a crash keeping no unsynced data reopened a log ending
	// below its durable log start, which Open empties, forgetting the
	// producers whose batches the log held (a DeleteRecords to the log
	// end under flush.messages unlimited).
	LogStartDataFirst
	// RecoveryFirstSnapshot: a log recovery that finds no producer
	// snapshot at the base of the first segment it recovers writes one
	// (the state rebuilt from an older snapshot and the segments below):
	// otherwise, once the log start passes into that segment, a reload
	// deletes the older snapshots and a restart forgets the producers
	// whose batches lie only below the segment.
	RecoveryFirstSnapshot
	// EpochCheckAtLogStart: a clean open compares the epoch cache with
	// the active segment's last batch at the log start when the batch
	// lies below it (log.UnifiedLog.checkEpochsAgainst): a log start
	// raised past the batch truncated the cache from the start, and
	// taking that for a damaged checkpoint made the open rebuild the
	// epochs by recovering every segment from the first, deleting the
	// producer snapshots a crash during that recovery did not restore.
	EpochCheckAtLogStart
	// RecoveryPointSnapshotKept: a producer state reload keeps the
	// snapshot at the base of the segment holding the recovery point
	// (log.UnifiedLog.reloadProducers), which a crash recovery starts
	// from: a log start raised above that segment must not delete it
	// (flush.messages unlimited, where the recovery point lags).
	RecoveryPointSnapshotKept
	// FetchEpochBelowEarliest: a follower fetch whose last epoch precedes
	// the leader's earliest epoch is out of range at the log start
	// (tierstate.ValidateFetch), so the follower starts over there: the
	// leader cannot vouch for its records below the log start, and a
	// replaced tail kept there gave producer state that answered a retry
	// DUPLICATE with offsets holding other records.
	FetchEpochBelowEarliest
	// TruncationRewritesHWCheckpoint: a truncation that lowers a managed
	// log's high watermark rewrites its directory's high-watermark
	// checkpoint before it returns (logmanager.Manager.highWatermarkLowered),
	// so a crash does not restore the old high watermark over the records
	// that later take the truncated offsets (they are not committed).
	TruncationRewritesHWCheckpoint
	// RemoteLookupEpochMembers: remote metadata's lookup of (epoch,
	// offset) falls back to any finished segment holding offset in the
	// epoch when the epoch's mapping (one segment per epoch start, as
	// Kafka's) points at a segment where the epoch ends sooner, so a
	// record the epoch's highest offset counts in remote storage is
	// served from it.
	RemoteLookupEpochMembers
	// TruncationRemovalOrder: a truncation removes the segments above
	// its cut from the highest down, with a directory fsync after each
	// (log.UnifiedLog.removeSegmentsAboveLocked), so a crash inside it
	// never leaves a hole below a segment whose removal it undid.
	TruncationRemovalOrder
	// RemoteLineageHole: a hole in remote storage below a lineage's
	// highest remote offset (an unclean election's epoch cleanup deleted
	// an older epoch's segments, and the lineage leads again) is copied
	// again rather than counted as copied or expired: the remote tasks'
	// highest offset stops at the end of the lineage's gap-free run of
	// finished segments from the local log start, and a copy task's log
	// start report never passes the local log start
	// (remote.Manager.findHighestRemoteOffset, reportLogStart).
	RemoteLineageHole
	// InitRowFromMetadata: a phase-2 leader whose log ends below the seal
	// (it lost its disk) writes the partition's WAL row from the
	// metadata (the seal and its producer states) rather than waiting for
	// its log to end at the seal: without the row its consolidation fetch
	// is never redirected to remote storage, so it never rebuilds and
	// never serves the classic prefix (consolidate.PlanInitDisklessLog).
	InitRowFromMetadata
	// SealTruncation: a replica whose log runs past the committed seal
	// without a consolidated diskless suffix truncates it to the seal
	// when it applies the seal (replica.DecideTransition; Inkless's
	// maybeTruncateSwitchedFollower and maybeReconcileSwitchedLeader), so
	// no classic tail the seal discarded is served or replicated.
	SealTruncation
	// SealEpochLineage: the operator's recovery takes no record of a
	// lineage other than the sealed one for the classic prefix: elect
	// --replica refuses a replica whose record at S-1 has another epoch
	// than the seal's (tag 105), and a remote copy whose record at S-1
	// (or whose last record below it, with a higher epoch) is of another
	// lineage covers nothing of the prefix (tierstate.CheckElectReplica,
	// ReplicaDescription.RemoteRange, State.StartPhaseTwo).
	SealEpochLineage
	// RemoteRegistrationCap: registering a partition with the remote log
	// manager (a new leader or follower role) caps what local retention
	// counts as copied to what remote storage still holds of the log's
	// lineage before the role's first task runs: a leader of another
	// lineage may have deleted the segments a task installed earlier (its
	// epoch cleanup after an unclean election), and an unclean election
	// can make this lineage the partition's again
	// (remote.Manager.capUnheld).
	RemoteRegistrationCap
	// EmptyPrefixCrossTierStart: a phase-1 leader whose log starts at the
	// seal raises the cross-tier log start X to the seal before it asks for
	// phase 2 with no recorded epoch, so a row an earlier leader wrote
	// with a lower log start (one an unclean election put before it) does
	// not make the consolidation endpoint wait for a classic prefix no one
	// holds (consolidate.SendClassicPrefixRequest).
	EmptyPrefixCrossTierStart

	numGuards = iota + 1
)

var names = [numGuards]string{
	TruncationFence:                 "truncation-fence",
	RetentionLogStart:               "retention-log-start",
	EpochCleanupGuard:               "epoch-cleanup-guard",
	ReplicaSuffixPastSeal:           "replica-suffix-past-seal",
	ReplicaRemoteProgress:           "replica-remote-progress",
	PrunerCap:                       "pruner-cap",
	FirstPruneBound:                 "first-prune-bound",
	PruneFloor:                      "prune-floor",
	ReplicaFutureLog:                "replica-future-log",
	WALReadBinding:                  "wal-read-binding",
	WALReadGap:                      "wal-read-gap",
	Phase2Gate:                      "phase2-gate",
	SealCapRemoteRead:               "seal-cap-remote-read",
	RecoverProducersFromSegmentBase: "recover-producers-from-segment-base",
	RecoverySnapshots:               "recovery-snapshots",
	ProducerBatchesWindow:           "producer-batches-window",
	SnapshotFloor:                   "snapshot-floor",
	LogDirParentSync:                "log-dir-parent-sync",
	DeleteRewritesCheckpoints:       "delete-rewrites-checkpoints",
	GroupCommitStepUndo:             "group-commit-step-undo",
	ManagedCloseDurable:             "managed-close-durable",
	ResealBatchBoundary:             "reseal-batch-boundary",
	TruncationLowersRemoteHighest:   "truncation-lowers-remote-highest",
	UndoLeavesDiskless:              "undo-leaves-diskless",
	WALReadSkippedStart:             "wal-read-skipped-start",
	TruncationKeepsRemotePrefix:     "truncation-keeps-remote-prefix",
	RemoteReadLineage:               "remote-read-lineage",
	RemoteHighestInLineage:          "remote-highest-in-lineage",
	StartPhaseTwoRecordedEpoch:      "start-phase-2-recorded-epoch",
	LogStartCheckpointFirst:         "log-start-checkpoint-first",
	TruncateFullyOrder:              "truncate-fully-order",
	ResealPendingLogEnd:             "reseal-pending-log-end",
	RemoteReadLogStartBatch:         "remote-read-log-start-batch",
	EmptyPrefixCheck:                "empty-prefix-check",
	PruneRemoteHolds:                "prune-remote-holds",
	RemoteHighestHeld:               "remote-highest-held",
	RemoteProducerWindow:            "remote-producer-window",
	PromoteLineage:                  "promote-lineage",
	CopySettlesUploads:              "copy-settles-uploads",
	ResealPendingHighWatermark:      "reseal-pending-high-watermark",
	EmptyPrefixCoverage:             "empty-prefix-coverage",
	RollSyncOrder:                   "roll-sync-order",
	LogStartDataFirst:               "log-start-data-first",
	RecoveryFirstSnapshot:           "recovery-first-snapshot",
	EpochCheckAtLogStart:            "epoch-check-at-log-start",
	TruncationRewritesHWCheckpoint:  "truncation-rewrites-hw-checkpoint",
	RecoveryPointSnapshotKept:       "recovery-point-snapshot-kept",
	FetchEpochBelowEarliest:         "fetch-epoch-below-earliest",
	RemoteLookupEpochMembers:        "remote-lookup-epoch-members",
	TruncationRemovalOrder:          "truncation-removal-order",
	RemoteLineageHole:               "remote-lineage-hole",
	InitRowFromMetadata:             "init-row-from-metadata",
	SealTruncation:                  "seal-truncation",
	SealEpochLineage:                "seal-epoch-lineage",
	RemoteRegistrationCap:           "remote-registration-cap",
	EmptyPrefixCrossTierStart:       "empty-prefix-cross-tier-start",
}

// backups are, per guard, the guards of another layer that stop the
// same hazard one step later (defence in depth): with the guard alone
// disabled the backup stops the bug, so no invariant breaks and a
// search cannot tell the guard from dead code. Searched together, a
// seed that breaks with both disabled and passes with the backups alone
// disabled is one the guard holds by itself once its backup is gone.
var backups = map[Guard][]Guard{
	// A truncation caps the highest offset in remote storage that local
	// retention trusts below its cut: a replica truncated to the seal
	// whose tail was tiered does not delete the records consolidated
	// past the seal as copied, and its copy task derives its progress
	// again after the truncation.
	ReplicaRemoteProgress: {TruncationLowersRemoteHighest, RemoteRegistrationCap},
	// Registering a partition in a new role (every leader change)
	// derives again from remote storage what local retention counts as
	// copied, so a highest offset left stale by a truncation lasts only
	// until the next leadership change.
	TruncationFence:               {RemoteRegistrationCap},
	TruncationLowersRemoteHighest: {RemoteRegistrationCap},
	// The tasks count an epoch's highest offset in remote storage only
	// while a finished segment holds it, and stop at a hole from the
	// local log start on, so the log's h never names offsets another
	// lineage's epoch cleanup deleted, and the pruner has no such h to
	// trust.
	PruneRemoteHolds: {RemoteHighestHeld, RemoteLineageHole},
	// The tasks' highest offset stops at a hole from the local log start
	// on, and a segment deleted at the top of an epoch is such a hole.
	RemoteHighestHeld: {RemoteLineageHole},
	// Without a recorded epoch the replica check recreates every replica
	// holding a record below the seal (safe, a rebuild each), so one
	// whose log diverges from remote storage there is recreated anyway.
	StartPhaseTwoRecordedEpoch: {EmptyPrefixCheck},
	// A consolidating leader's log start lies above the cross-tier log
	// start only if a truncation below its local log start lost it: a
	// truncation keeps the log start, so retention's log start is X either
	// way.
	RetentionLogStart: {TruncationKeepsRemotePrefix},
	// A kept future log holding discarded records is promoted only when
	// its last offset is in the current log's epoch there, which a
	// current log regrown from the WAL (in the diskless epoch) is not.
	ReplicaFutureLog: {PromoteLineage},
	// And the other way round: the phase-2 check deletes a future log
	// running past the current log, or holding another epoch at its
	// end, before the promotion's lineage check meets it. Outside the
	// check the move fetcher's truncations (the classic fetcher's marks,
	// a resumed move's epoch truncation before any promotion) keep the
	// future log in the current log's lineage.
	PromoteLineage: {ReplicaFutureLog},
	// A replica the check keeps with a classic tail past the seal is
	// truncated to the seal by the transition that follows the check.
	ReplicaSuffixPastSeal: {SealTruncation},
	// A remote batch crossing the seal holds records an unclean election
	// discarded past it: the read's lineage check refuses the batch too
	// (its last offset is in another epoch of the leader's lineage, or
	// past its log end).
	SealCapRemoteRead: {RemoteReadLineage},
	// The snapshot a reload keeps at the recovery point's segment holds
	// the producers that the recovery's own snapshots would hold.
	RecoverySnapshots:     {RecoveryPointSnapshotKept},
	RecoveryFirstSnapshot: {RecoveryPointSnapshotKept},
	EpochCheckAtLogStart:  {RecoveryPointSnapshotKept},
}

// Backups returns the guards that stop g's hazard one step later, which
// a search disables together with g (nil when g has none).
func Backups(g Guard) []Guard {
	return append([]Guard(nil), backups[g]...)
}

// String returns the guard's name, as TIERLOG_MUTATION spells it.
func (g Guard) String() string {
	if g > 0 && g < numGuards {
		return names[g]
	}
	return fmt.Sprintf("Guard(%d)", uint8(g))
}

// Guards returns every guard, in declaration order.
func Guards() []Guard {
	out := make([]Guard, 0, numGuards-1)
	for g := Guard(1); g < numGuards; g++ {
		out = append(out, g)
	}
	return out
}

// Parse returns the guard called name (its String).
func Parse(name string) (Guard, error) {
	for g := Guard(1); g < numGuards; g++ {
		if names[g] == name {
			return g, nil
		}
	}
	return 0, fmt.Errorf("mutation: unknown guard %q", name)
}

// ParseList reads a TIERLOG_MUTATION value: guard names separated by
// commas, blanks ignored.
func ParseList(s string) ([]Guard, error) {
	var out []Guard
	for _, name := range strings.Split(s, ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		g, err := Parse(name)
		if err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, nil
}

// TB is the part of testing.TB that Disable uses (so this package does
// not import testing into library builds).
type TB interface {
	Helper()
	Cleanup(func())
	Skip(args ...any)
}
