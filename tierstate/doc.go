// Package tierstate holds the classic-to-diskless switch state of a
// partition and the decisions taken on it (Inkless, SPEC 6), and the
// leader's validation of a fetch against its tiered log (SPEC 3.3, 4.9).
//
// # Switch state
//
// A State is the Inkless metadata of one partition, carried as raw tagged
// fields on Kafka's PartitionRecord and PartitionChangeRecord (SPEC 6.2),
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
//	phase 1        S >= 0    false     no                yes
//	phase 2        S >= 0    true      no                yes
//
// A State is an immutable, comparable value. The operations (ArmSwitch,
// AbortSwitch, CommitSeal, Reseal, SetClassicPrefixInRemoteStorage,
// StartPhaseTwo, ValidateElectReplica) are the controller's and the
// operator's decisions: each returns the State to commit or a
// *TransitionError naming the rule, and ChangeTags gives the record. A
// broker replays records with FromPartitionRecord and ApplyChange, which
// apply SPEC 6.2's merge rule (an absent field keeps its value, a present
// one replaces it, a negative tag 100 drops tags 101, 102 and 104) and
// refuse records no operation writes. Across all of them:
//
//   - phases only move forward; the one way back is an operator's abort
//     of a pending seal (seal pending -> classic);
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
// Machine is the tier state machine (SPEC 5): a fetcher whose fetch was
// answered OFFSET_MOVED_TO_TIERED_STORAGE rebuilds its log's leader
// epochs, producer state and log start from one remote segment, upstream
// style or, for a phase-2 partition with a recorded epoch, from the
// segment holding seal - 1 in that epoch, starting the log at the seal.
// CheckReplica, ShouldCheckReplica, Recreate and CheckAndRecreate are the
// phase-2 replica check and its recreate (SPEC 6.11): a replica that fails
// is deleted and rebuilt, never truncated in place.
//
// # Operator recovery
//
// Describe, CheckElectReplica and PlanStartPhaseTwo are the checks
// kafka-topic-switch.sh makes for a phase-1 partition that lost its
// classic prefix (SPEC 6.13). Describe is one replica's
// DescribeDisklessSwitchReplica answer: its log's offsets, whether its
// broker fenced it, the cross-tier log start X and the end of the
// gap-free run of finished remote segments from X, capped at the seal. A
// ReplicaDescription says whether the log and remote storage cover
// [X, S), whether the replica holds the prefix, and what start-phase-2
// would lose. CheckElectReplica adds HW == S and gap-free coverage to
// State.ValidateElectReplica; PlanStartPhaseTwo refuses while a replica
// holds the prefix, puts the seal at the highest remote end, needs the
// loss accepted, and gives the State that State.StartPhaseTwo commits.
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
package tierstate
