// Package consolidate copies a switched partition's diskless records from
// the WAL into its local log, so that the remote-log manager can tier them,
// and prunes the WAL behind remote storage (Inkless's consolidation: the
// DisklessLeaderEndPoint, the ConsolidationFetcherThread and the
// ConsolidatedDisklessLogPruner; github.com/aiven/inkless/pull/857 and
// /pull/855 for the first-prune bound, the deleted-prefix reset and the
// prune cap).
//
// # Model
//
// A consolidating partition has three tiers. Remote storage holds the
// classic prefix and, later, the consolidated diskless records; the WAL
// holds the diskless records from its start W; the local log is what
// consolidation has copied.
//
//	offset            X                S = seal          W        HW_d
//	remote storage    [ classic prefix ][ consolidated ...]
//	WAL (diskless)                                        [ ...... )
//	local log                          [ consolidated ........ )
//	                                                          ^ LEO: next fetch
//
// The Endpoint is the consolidation fetcher's "leader" (it satisfies
// tierstate.LeaderEndpoint). A fetch at O is served from the WAL unless O
// falls in the redirect window [L, D), where D = max(W, S) is the lowest
// diskless start (the seal stands in for W until the first prune moves W
// there) and L = min(X, local log start) the whole-log start. In the
// window the answer is OFFSET_OUT_OF_RANGE when X >= D (the prefix was
// deleted: reset to X), NOT_LEADER_OR_FOLLOWER when remote storage does
// not hold S-1 yet (retry; never consolidate below the seal), and
// OFFSET_MOVED_TO_TIERED_STORAGE otherwise (the fetcher rebuilds its log
// from remote storage with tierstate.Machine). DecideFetch is that
// decision as a pure function (with DisklessStart, WholeLogStart,
// PartitionBudget, TrimBatches, EarliestLocalOffset, LatestOffset and
// PlanEpochEnd for the other answers); Endpoint runs it over a
// wal.Reader, a wal.ControlPlane and the remote metadata.
//
// DecidePrune is the pruner's decision per partition: prune the WAL up to
// h = highestOffsetInRemoteStorage once h reaches the partition's floor
// (S-1 for the first prune of a switched partition), never for a leader
// whose remote progress is stale (h >= LEO) or that was recreated and has
// not rebuilt; Pruner sends the prunes and raises each floor to the WAL
// start the control plane returns (capped at h+1, wal.PrunedLogStart).
//
// Fetcher is the consolidation fetcher: a pool of goroutines shares every
// partition; per partition it fetches from the Endpoint at the log end,
// stamps E_d into each batch and appends as a follower, rebuilds on
// OFFSET_MOVED_TO_TIERED_STORAGE (tierstate.Machine, the phase-2 rebuild
// only below the seal) and resets on OFFSET_OUT_OF_RANGE; Run's workers
// fetch the next round while they append the last, and use its answer
// only where the append ended where it starts. Each answer's buffer goes
// back to the WAL reader (Endpoint.Release, wal.Reader.Release) once its
// batches are appended or its answer dropped, never before: the log's
// append writes them to its file and keeps no reference. PlanStart is the
// reconciler's start rule. Reporter and CrossTierCache carry X from the
// leader's remote-log manager through the control plane to every reader
// (remote.ConsolidationState); ReportingLog wraps the remote.PartitionLog
// given to remote.Manager so that its log start reports reach the
// Reporter. PlanClassicPrefixRequest is the leader's
// decision to ask for phase 2.
//
// A switched partition takes no diskless record before its phase-2 flag
// commits E_d (tierstate.State.TakesDisklessRecords): DisklessProduceAllowed
// refuses a produce (ErrAwaitingPhaseTwo, Kafka NOT_LEADER_OR_FOLLOWER),
// StampEpoch refuses to stamp, the Fetcher holds the partition and
// PlanStart answers retry, so no batch carries a leader epoch from before
// the flag (github.com/aiven/inkless/pull/827).
//
// Before consolidation starts, the leader switches its classic log
// (LeaderSwitch, one Step per switch state): ClassicGate refuses classic
// appends from the arming on, SealLeader aborts the undecided
// transactions, rolls and flushes and proposes S = LEO once HW = LEO,
// InitDisklessLog creates the WAL's row (W = log start, HW = S, the
// producer states) once the seal is committed, and the phase-2 request
// goes out once remote storage holds S-1.
//
// # Concurrency
//
// Endpoint and Pruner are safe for concurrent use and hold no lock across
// I/O. The decisions are pure.
//
// This package decides and drives; the local log, the remote tier and the
// WAL keep their own state and locks.
package consolidate
