// Package tierstate holds the classic-to-diskless switch state of a
// partition and the decisions taken on it (Inkless), and the leader's
// validation of a fetch against its tiered log (Kafka's
// OffsetsForLeaderEpoch rules and KIP-405's reads below the local log).
//
// # Switch state
//
// A State is the Inkless metadata of one partition, carried as raw tagged
// fields on Kafka's PartitionRecord and PartitionChangeRecord,
// plus whether the partition consolidates:
//
//	tag  field                          absent means   State
//	100  classicToDisklessStartOffset   -1             Phase, Seal
//	101  producer states                none           ProducerStates
//	102  diskless leader epoch E_d      -1             DisklessLeaderEpoch
//	103  classicPrefixInRemoteStorage   false          Phase == PhaseTwo
//	104  lastClassicLeaderEpoch R       -1             LastClassicLeaderEpoch
//
// Tag 100 is both the seal S (the first diskless offset; classic owns
// [0, S)) and the phase:
//
//	phase          tag 100   tag 103   classic produce   diskless produce
//	classic        -1        absent    yes               no
//	seal pending   -2        absent    refused           no
//	phase 1        S >= 0    false     no                refused (no E_d yet)
//	phase 2        S >= 0    true      no                yes, in E_d
//
// State.TakesDisklessRecords says when diskless records (produce and
// consolidation) are taken: only once the phase-2 flag committed E_d, or
// for a partition that never switched.
//
// A State is an immutable, comparable value. The operations (ArmSwitch,
// AbortSwitch, RearmSwitch, CommitSeal, Reseal,
// SetClassicPrefixInRemoteStorage, StartPhaseTwo, ValidateElectReplica)
// are the controller's and the operator's decisions: each returns the
// State to commit or a *TransitionError naming the rule, and ChangeTags
// gives the record. A broker replays records with FromPartitionRecord and
// ApplyChange, which apply Kafka's merge rule for change records (an
// absent field keeps its value, a present one replaces it) and refuse
// records no operation writes. Across all of them:
//
//   - phases only move forward; the one way back is an operator's abort
//     of a pending seal (seal pending -> classic, not consolidating). An
//     undo (abort or re-arm) is refused once a seal is committed, as
//     Inkless's switch document says, so it never drops a recorded
//     epoch: tags 101, 102 and 104 exist only with a committed seal;
//   - a committed seal never rises; the operator may lower it in phase 1
//     (re-seal, start-phase-2);
//   - the diskless leader epoch never falls; R is written once, with the
//     phase-2 flag, and R < E_d.
//
// # Fetch validation
//
// ValidateFetch is the leader's check of one partition of a fetch,
// before it reads: epoch fencing, the follower's last fetched epoch
// (diverging epoch), the log's range, and the tiered range [log start,
// local log start) that a follower must rebuild from remote storage
// (OFFSET_MOVED_TO_TIERED_STORAGE) and a consumer reads remotely. It reads
// the log through FetchLog, which *log.UnifiedLog satisfies.
//
// # Concurrency
//
// States are values; share them freely. ValidateFetch holds no lock and
// reads the log's offsets through its lock-free getters.
//
// # Rebuild, replica check and recreate
//
// Machine is the tier state machine (Kafka: TierStateMachine, KIP-405): a
// fetcher whose fetch was answered OFFSET_MOVED_TO_TIERED_STORAGE rebuilds
// its log's leader epochs, producer state and log start from one remote
// segment, upstream style or, for a phase-2 partition with a recorded
// epoch, from the segment holding seal - 1 in that epoch, starting the log
// at the seal. CheckReplica, ShouldCheckReplica, Recreate and
// CheckAndRecreate are the phase-2 replica check and its recreate
// (https://github.com/aiven/inkless/pull/857): a replica that fails is
// deleted and rebuilt, never truncated in place.
//
// # Operator recovery
//
// Describe, CheckElectReplica and PlanStartPhaseTwo are the checks
// kafka-topic-switch.sh makes for a phase-1 partition that lost its classic
// prefix (https://github.com/aiven/inkless/pull/855). Describe is one
// replica's DescribeDisklessSwitchReplica answer: its log's offsets,
// whether its broker fenced it, the cross-tier log start X and the end of
// the gap-free run of finished remote segments from X, capped at the seal.
// A ReplicaDescription says whether the log and remote storage cover [X,
// S), whether the replica holds the prefix, and what start-phase-2 would
// lose. CheckElectReplica adds HW == S and gap-free coverage to
// State.ValidateElectReplica; PlanStartPhaseTwo refuses while a replica
// holds the prefix, puts the seal at the highest remote end, needs the loss
// accepted, and gives the State that State.StartPhaseTwo commits.
//
// # Followers at the seal
//
// ValidateFetchAtSeal answers a follower fetch at or past the seal of a
// switched partition (IsFetchAtSeal) without reading the leader's local
// records: an empty response with the high watermark clamped to the seal,
// after validating the follower's lineage at the seal, or nothing at all
// while the leader itself is below the seal. When it says so, the leader
// records the follower and ShouldAdmitAtSeal decides the ISR expansion on
// the seal rather than on the leader's high watermark. On the follower,
// HandOffAtSeal decides after each append whether the partition leaves the
// classic fetcher, and RouteFollowerFetcher which fetcher a metadata delta
// starts: a follower leaves classic replication only once the leader
// admitted it to the ISR.
//
// # What this package does not do
//
// Leader, ISR and reassignment changes that switch records carry are the
// controller's; positions, AlterPartition requests and fetchers are the
// broker's. The package decides; it keeps no cluster state.
//
// # Sources
//
// The switch is Inkless's classic-to-diskless switch, described in
// docs/inkless/CLASSIC_TO_DISKLESS_SWITCH.md of
// https://github.com/aiven/inkless. Rules that came later are cited by
// their pull requests:
//
//   - https://github.com/aiven/inkless/pull/760: followers at the seal
//     wait for the ISR;
//   - https://github.com/aiven/inkless/pull/827: the
//     SetClassicPrefixInRemoteStorage RPC and the diskless leader epoch
//     written with the phase-2 flag;
//   - https://github.com/aiven/inkless/pull/855: operator recovery of a
//     phase-1 partition that lost its classic prefix;
//   - https://github.com/aiven/inkless/pull/857: the recorded epoch R, the
//     phase-2 replica check and recreate, the phase-2 rebuild and the
//     truncation counter;
//   - https://github.com/aiven/inkless/pull/871: the last-known-leader
//     election in phase 1.
//
// [INF] marks a choice made where Inkless's behaviour is not pinned down
// (neither its code nor those pull requests say); the comment at the
// marker gives the choice and why.
package tierstate
