package tierstate

import (
	"fmt"

	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/internal/invariants"
)

// This file holds the switch's decisions about followers at the seal
// (https://github.com/aiven/inkless/pull/760, and the phase-1 wait of
// https://github.com/aiven/inkless/pull/855): what a
// leader answers to a follower fetch at or past the seal, when that fetch
// admits the follower to the ISR, and when a follower leaves the classic
// fetcher. All of them are pure functions of plain values and of a log's
// lock-free getters; the broker records positions, sends AlterPartition and
// moves partitions between fetchers.
//
// The invariant they keep together
// (https://github.com/aiven/inkless/pull/760): a switched follower leaves
// the classic fetcher only after the leader observed a validated follower
// fetch at or past the seal and admitted it to the ISR, and no follower
// ever receives the leader's records at or past the seal over classic
// replication.
//
//	leader                                  follower
//	IsFetchAtSeal -> ValidateFetchAtSeal    RouteFollowerFetcher (applyDelta)
//	   record RecordOffset                  HandOffAtSeal (after each append)
//	   TryAdmission -> ShouldAdmitAtSeal
//	                -> AlterPartition

// NoBrokerEpoch is a broker epoch that is not known: a fetch from a
// follower that sends none (Kafka: FetchRequest ReplicaState.ReplicaEpoch
// -1, before KIP-903), or a broker without a live registration in the
// metadata image.
const NoBrokerEpoch int64 = -1

// ErrNotAtSeal: ValidateFetchAtSeal was called for a fetch that is not a
// follower fetch at or past a committed seal. A caller bug: route with
// IsFetchAtSeal, and answer every other fetch with ValidateFetch.
var ErrNotAtSeal = fmt.Errorf("tierstate: not a follower fetch at or past a committed seal: %w", base.ErrInvalidArgument)

// IsFetchAtSeal reports whether a fetch takes the at-seal branch (Inkless
// ReplicaManager.fetchMessages): a follower fetch on a partition with a
// committed seal S, at an offset >= S. Such a fetch is never served from
// the leader's local log, even when a consolidating leader's log end is
// past S: the records at and past S are diskless records, which followers
// consolidate from the WAL, never replicate from the leader
// (https://github.com/aiven/inkless/pull/760: without the exclusion a
// follower at the seal received 85 bytes of the leader's consolidated log).
//
// Consumers and future replicas (alter-log-dir) keep ValidateFetch; so
// does a follower below the seal, which is still replicating the classic
// prefix.
func IsFetchAtSeal(s State, req FetchRequest) bool {
	return req.Fetcher == FetcherFollower && s.SealCommitted() && req.FetchOffset >= s.Seal()
}

// SealLeader is what the leader knows of its own partition when a follower
// fetch at the seal arrives.
type SealLeader struct {
	// Log is the leader's local log. Its offsets are read once per
	// decision. *log.UnifiedLog satisfies FetchLog.
	Log FetchLog
	// State is the partition's switch state; the seal must be committed.
	State State
	// LeaderEpoch is the partition's current leader epoch (not the log's
	// latest epoch: a new leader may not have appended yet).
	LeaderEpoch int32
	// IsLeader: this broker leads the partition. A follower fetch to a
	// non-leader is NOT_LEADER_OR_FOLLOWER (Kafka:
	// Partition.localLogWithEpochOrThrow with fetchOnlyLeader).
	IsLeader bool
}

// SealReplica is the leader's view of the replica that sent a fetch: its
// place in the partition and the metadata image's registration of its
// broker.
type SealReplica struct {
	// Assigned: the replica is in the partition's replica set. A fetch
	// from any other replica is NOT_LEADER_OR_FOLLOWER (Kafka:
	// Partition.followerReplicaOrThrow).
	Assigned bool
	// InIsr: the replica is in the partition's committed ISR.
	InIsr bool
	// Fenced and InControlledShutdown are the broker's registration
	// state (Kafka: MetadataCache.isBrokerFenced,
	// isBrokerShuttingDown); either makes it ineligible for the ISR.
	Fenced               bool
	InControlledShutdown bool
	// RegisteredBrokerEpoch is the broker epoch of the broker's live
	// registration, or NoBrokerEpoch when the image has none (Kafka:
	// MetadataCache.getAliveBrokerEpoch).
	RegisteredBrokerEpoch int64
}

// SealFetchRequest is one partition of a follower fetch at the seal.
type SealFetchRequest struct {
	// FetchRequest is the fetch itself; Fetcher must be FetcherFollower
	// and FetchOffset (O) at or past the seal (IsFetchAtSeal).
	FetchRequest
	// ReplicaID is the follower's broker id, for reasons and logs.
	ReplicaID int32
	// BrokerEpoch is the follower's broker epoch carried by the fetch
	// (KIP-903 ReplicaState.ReplicaEpoch), or NoBrokerEpoch.
	BrokerEpoch int64
}

// SealFetchStep names the step of ValidateFetchAtSeal's rules that
// decided.
type SealFetchStep int8

const (
	// SealStepLeaderBelowSeal is step 1: the leader's log ends below the
	// seal (it is rebuilding its own classic prefix). Nothing is
	// validated, recorded or admitted: its incomplete epoch cache must not
	// make an intact follower truncate (a diverging epoch or
	// OFFSET_OUT_OF_RANGE would make it discard the prefix the leader
	// lacks). The answer is empty with no error; the follower backs off
	// and asks again.
	SealStepLeaderBelowSeal SealFetchStep = iota + 1
	// SealStepPrefixExpired is step 2: the leader's log start is past the
	// seal and the fetch offset below it. Retention expired the classic
	// prefix, so there is no lineage left to check: only leadership,
	// assignment, leader epoch and broker epoch are validated, and the
	// follower is recorded at its real fetch offset.
	SealStepPrefixExpired
	// SealStepZeroByteRead is step 3: the fetch is validated as a
	// follower read of 0 bytes at V = (log start > S) ? O : S, with
	// ValidateFetch's epoch fencing and last-fetched-epoch divergence.
	SealStepZeroByteRead
)

func (s SealFetchStep) String() string {
	switch s {
	case SealStepLeaderBelowSeal:
		return "leader-below-seal"
	case SealStepPrefixExpired:
		return "prefix-expired"
	case SealStepZeroByteRead:
		return "zero-byte-read"
	}
	return fmt.Sprintf("SealFetchStep(%d)", int8(s))
}

// SealFetchError is the partition error of an at-seal fetch response.
type SealFetchError int8

const (
	// SealErrorNone: Kafka NONE (0).
	SealErrorNone SealFetchError = iota
	// SealErrorNotLeaderOrFollower: Kafka NOT_LEADER_OR_FOLLOWER (6).
	// This broker does not lead the partition, the replica is not
	// assigned, or the fetch carries a broker epoch older than the
	// broker's registration (Kafka: Replica.updateFetchStateOrThrow).
	// Retriable: the follower refreshes its metadata.
	SealErrorNotLeaderOrFollower
	// SealErrorFencedLeaderEpoch: Kafka FENCED_LEADER_EPOCH (74), the
	// fetch's current leader epoch is older than the leader's.
	SealErrorFencedLeaderEpoch
	// SealErrorUnknownLeaderEpoch: Kafka UNKNOWN_LEADER_EPOCH (75), the
	// fetch's current leader epoch is newer than the leader's.
	SealErrorUnknownLeaderEpoch
	// SealErrorOffsetOutOfRange: Kafka OFFSET_OUT_OF_RANGE (1). The leader
	// has no end offset for the follower's last fetched epoch (a follower
	// past the seal whose diskless epoch the leader cannot resolve), or
	// V is past the leader's log end. The follower's standard reset
	// truncates only what lies past the leader's frontier.
	SealErrorOffsetOutOfRange
)

func (e SealFetchError) String() string {
	switch e {
	case SealErrorNone:
		return "NONE"
	case SealErrorNotLeaderOrFollower:
		return "NOT_LEADER_OR_FOLLOWER"
	case SealErrorFencedLeaderEpoch:
		return "FENCED_LEADER_EPOCH"
	case SealErrorUnknownLeaderEpoch:
		return "UNKNOWN_LEADER_EPOCH"
	case SealErrorOffsetOutOfRange:
		return "OFFSET_OUT_OF_RANGE"
	}
	return fmt.Sprintf("SealFetchError(%d)", int8(e))
}

// SealFetchDecision is the leader's answer to one follower fetch at the
// seal and what it does besides answering. The response never carries
// records: the type has no field for them.
type SealFetchDecision struct {
	// Step is the step of ValidateFetchAtSeal's rules that decided.
	Step SealFetchStep
	// Error is the partition error of the response.
	Error SealFetchError
	// HighWatermark and LogStartOffset are the response's: the seal and 0
	// without an error (step 4: the high watermark is clamped
	// to the seal, never the consolidating leader's diskless frontier),
	// record.UndefinedOffset (-1) for both with one.
	HighWatermark  int64
	LogStartOffset int64
	// DivergingEpoch and DivergingEndOffset are the response's diverging
	// epoch (KIP-595): set only by a step-3 divergence,
	// record.UndefinedEpoch and record.UndefinedOffset otherwise.
	DivergingEpoch     int32
	DivergingEndOffset int64
	// ValidatedOffset is V, the offset of step 3's zero-byte read;
	// record.UndefinedOffset in steps 1 and 2.
	ValidatedOffset int64
	// RecordOffset is the follower position the leader records, with the
	// request's broker epoch (Kafka: Partition.updateFollowerFetchState):
	// V after a step-3 read, the real fetch offset O in step 2;
	// record.UndefinedOffset to record nothing (step 1, an error, a
	// divergence: Kafka keeps the previous position then).
	RecordOffset int64
	// TryAdmission: after recording, ask ShouldAdmitAtSeal whether to add
	// the follower to the ISR. Only a fetch validated now may admit, so
	// stale evidence from an earlier fetch never admits a follower that
	// diverges today (https://github.com/aiven/inkless/pull/760: "the
	// diverging-epoch guard is load-bearing").
	TryAdmission bool
	// Reason names the rule that decided, for logs and tests.
	Reason string
}

// Diverging reports whether the response carries a diverging epoch.
func (d SealFetchDecision) Diverging() bool { return d.DivergingEpoch != base.UndefinedEpoch }

func (d SealFetchDecision) String() string {
	s := d.Step.String()
	if d.Step == SealStepZeroByteRead {
		s += fmt.Sprintf(" at %d", d.ValidatedOffset)
	}
	s += fmt.Sprintf(": %s hw=%d log-start=%d", d.Error, d.HighWatermark, d.LogStartOffset)
	if d.Diverging() {
		s += fmt.Sprintf(" diverging epoch=%d end=%d", d.DivergingEpoch, d.DivergingEndOffset)
	}
	if d.RecordOffset != base.UndefinedOffset {
		s += fmt.Sprintf(" record=%d", d.RecordOffset)
	}
	if d.TryAdmission {
		s += " try-admission"
	}
	return s + " (" + d.Reason + ")"
}

// ValidateFetchAtSeal decides the leader's answer to a follower fetch at
// or past the seal S (Inkless ReplicaManager.fetchMessages' at-seal
// branch, https://github.com/aiven/inkless/pull/760). With O the fetch
// offset and the leader log's start and end read once:
//
//	step  condition                    validates                    records  admission  answer
//	1     LEO < S                      nothing                      -        no         empty, NONE
//	2     log start > S,               leader epoch, leadership,    O        try        empty, NONE
//	      O < log start                assignment, broker epoch
//	3     otherwise                    the same, then a 0-byte      V        try        empty, NONE
//	                                   read at V (ValidateFetch)
//	                                   diverging                    -        no         empty, diverging epoch
//	any   a validation fails           -                            -        no         empty, the error
//
// with V = (log start > S) ? O : S, and the answer's high watermark S and
// log start 0 without an error, -1 and -1 with one. The checks run in
// Kafka's order: leader epoch (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH),
// leadership and assignment (NOT_LEADER_OR_FOLLOWER), the read (step 3:
// divergence, OFFSET_OUT_OF_RANGE), and, only when the position is
// recorded, the broker epoch (NOT_LEADER_OR_FOLLOWER for a fetch older
// than the broker's registration; Kafka checks it in
// updateFollowerFetchState, which a divergence skips).
//
// Step 3 clamps the recorded position to the seal for a follower past it
// (V = S while the prefix is retained): admission needs only the classic
// prefix, and the leader's records past S are not the follower's to
// replicate. Step 2 records the real O instead: validating at S would be
// OFFSET_OUT_OF_RANGE (S is below the log start) and validating at the
// log start would report a false divergence for a follower carrying the
// classic epoch; with the prefix expired the partition is as good as born
// diskless, and recording O neither invents progress nor moves the
// leader's high watermark.
//
// The zero-byte read of step 3 reads no bytes, so it checks V against the
// whole log [log start, LEO], not the local part [local log start, LEO]
// [INF]: a consolidating leader that tiered its classic prefix and deleted
// it locally would otherwise answer OFFSET_MOVED_TO_TIERED_STORAGE at S,
// the follower would rebuild from remote storage to the leader's local
// log start, fetch there, be validated at S again, and never be admitted.
//
// Step 1 skips even the leader-epoch, leadership and assignment checks
// (Inkless skips validation and admission entirely there): its answer
// changes nothing on either side, and the follower asks again after its
// back-off.
//
// A fetch that IsFetchAtSeal rejects is refused with ErrNotAtSeal (a
// routing bug, not a Kafka answer).
func ValidateFetchAtSeal(leader SealLeader, replica SealReplica, req SealFetchRequest) (SealFetchDecision, error) {
	if !IsFetchAtSeal(leader.State, req.FetchRequest) {
		return SealFetchDecision{}, fmt.Errorf("%w: %s fetch at %d, switch %s", ErrNotAtSeal,
			req.Fetcher, req.FetchOffset, leader.State)
	}
	seal := leader.State.Seal()
	view := readSealView(leader.Log)
	offset := req.FetchOffset
	step, v := sealFetchStep(seal, view, offset)
	d := sealAnswer(step, seal, v)

	switch step {
	case SealStepLeaderBelowSeal:
		// A leader below the seal has no authority over the prefix.
		d.Reason = fmt.Sprintf("leader log end %d below seal %d: rebuilding its classic prefix, nothing validated", view.leo, seal)
		return d.checked(seal), nil
	case SealStepPrefixExpired:
		if code, why := checkSealFetcher(leader, replica, req, true); code != SealErrorNone {
			return d.failed(code, why).checked(seal), nil
		}
		d.RecordOffset, d.TryAdmission = offset, true
		d.Reason = fmt.Sprintf("log start %d past seal %d: prefix expired, lineage not checked, record fetch offset %d",
			view.logStart, seal, offset)
		return d.checked(seal), nil
	}

	// Step 3. The leader epoch, leadership and assignment come first, as in
	// Kafka's localLogWithEpochOrThrow and followerReplicaOrThrow;
	// ValidateFetch repeats the epoch check, which then passes.
	if code, why := checkSealFetcher(leader, replica, req, false); code != SealErrorNone {
		return d.failed(code, why).checked(seal), nil
	}
	read := ValidateFetch(view, leader.LeaderEpoch, FetchRequest{
		Fetcher:            FetcherFollower,
		FetchOffset:        v,
		LastFetchedEpoch:   req.LastFetchedEpoch,
		CurrentLeaderEpoch: req.CurrentLeaderEpoch,
	})
	d.Reason = read.Reason
	switch read.Outcome {
	case FetchRead:
		// Kafka checks the broker epoch when it records the position
		// (updateFollowerFetchState), which a divergence skips.
		if code, why := checkSealBrokerEpoch(replica, req); code != SealErrorNone {
			return d.failed(code, why).checked(seal), nil
		}
		d.RecordOffset, d.TryAdmission = v, true
	case FetchDiverging:
		d.DivergingEpoch, d.DivergingEndOffset = read.DivergingEpoch, read.DivergingEndOffset
	case FetchFencedLeaderEpoch:
		d = d.failed(SealErrorFencedLeaderEpoch, read.Reason) // unreachable: checked above
	case FetchUnknownLeaderEpoch:
		d = d.failed(SealErrorUnknownLeaderEpoch, read.Reason) // unreachable: checked above
	default:
		// The view has no tiered range, so every other outcome is
		// OFFSET_OUT_OF_RANGE.
		invariants.Assertf(read.Outcome == FetchOffsetOutOfRange, "zero-byte read at the seal answered %s", read.Outcome)
		d = d.failed(SealErrorOffsetOutOfRange, read.Reason)
	}
	return d.checked(seal), nil
}

// sealFetchStep picks the step of ValidateFetchAtSeal for a fetch at offset
// o, and V, the offset step 3 validates (record.UndefinedOffset in steps 1
// and 2).
func sealFetchStep(seal int64, view sealReadView, o int64) (SealFetchStep, int64) {
	switch {
	case view.leo < seal:
		return SealStepLeaderBelowSeal, base.UndefinedOffset
	case view.logStart > seal && o < view.logStart:
		return SealStepPrefixExpired, base.UndefinedOffset
	case view.logStart > seal:
		return SealStepZeroByteRead, o
	}
	return SealStepZeroByteRead, seal
}

// checkSealFetcher validates the fetch's leader epoch, this broker's
// leadership and the replica's assignment, in Kafka's order, and with
// brokerEpoch the fetch's broker epoch too (step 2, which records
// without a read).
func checkSealFetcher(leader SealLeader, replica SealReplica, req SealFetchRequest, brokerEpoch bool) (SealFetchError, string) {
	switch o, reason := checkLeaderEpoch(req.CurrentLeaderEpoch, leader.LeaderEpoch); o {
	case FetchFencedLeaderEpoch:
		return SealErrorFencedLeaderEpoch, reason
	case FetchUnknownLeaderEpoch:
		return SealErrorUnknownLeaderEpoch, reason
	}
	if !leader.IsLeader {
		return SealErrorNotLeaderOrFollower, "this broker does not lead the partition"
	}
	if !replica.Assigned {
		return SealErrorNotLeaderOrFollower, fmt.Sprintf("replica %d is not assigned to the partition", req.ReplicaID)
	}
	if brokerEpoch {
		return checkSealBrokerEpoch(replica, req)
	}
	return SealErrorNone, ""
}

// checkSealBrokerEpoch is Kafka's Replica.updateFetchStateOrThrow: a fetch
// carrying a broker epoch older than the broker's registration comes from
// a previous incarnation of the broker and may not record a position.
func checkSealBrokerEpoch(replica SealReplica, req SealFetchRequest) (SealFetchError, string) {
	if req.BrokerEpoch == NoBrokerEpoch || replica.RegisteredBrokerEpoch == NoBrokerEpoch ||
		replica.RegisteredBrokerEpoch <= req.BrokerEpoch {
		return SealErrorNone, ""
	}
	return SealErrorNotLeaderOrFollower, fmt.Sprintf("replica %d fetch broker epoch %d older than registered %d",
		req.ReplicaID, req.BrokerEpoch, replica.RegisteredBrokerEpoch)
}

// sealAnswer is a successful at-seal answer for step with V = v: empty, no
// error, the high watermark clamped to the seal, log start 0; nothing
// recorded yet.
func sealAnswer(step SealFetchStep, seal, v int64) SealFetchDecision {
	return SealFetchDecision{
		Step:               step,
		HighWatermark:      seal,
		LogStartOffset:     0,
		DivergingEpoch:     base.UndefinedEpoch,
		DivergingEndOffset: base.UndefinedOffset,
		ValidatedOffset:    v,
		RecordOffset:       base.UndefinedOffset,
	}
}

// failed turns d into an error answer: empty, -1/-1, nothing recorded, no
// diverging epoch, no admission.
func (d SealFetchDecision) failed(e SealFetchError, why string) SealFetchDecision {
	d.Error = e
	d.HighWatermark, d.LogStartOffset = base.UndefinedOffset, base.UndefinedOffset
	d.DivergingEpoch, d.DivergingEndOffset = base.UndefinedEpoch, base.UndefinedOffset
	d.RecordOffset, d.TryAdmission = base.UndefinedOffset, false
	d.Reason = why
	return d
}

// checked asserts the answer's invariants and returns it.
func (d SealFetchDecision) checked(seal int64) SealFetchDecision {
	if invariants.Enabled {
		ok := d.Error == SealErrorNone
		invariants.Assertf(ok == (d.HighWatermark == seal && d.LogStartOffset == 0),
			"at-seal answer %s: hw and log start must be (%d, 0) without an error", d, seal)
		invariants.Assertf(ok || (d.HighWatermark == base.UndefinedOffset && d.LogStartOffset == base.UndefinedOffset),
			"at-seal error answer %s carries offsets", d)
		invariants.Assertf(d.TryAdmission == (d.RecordOffset != base.UndefinedOffset),
			"at-seal answer %s: admission is tried exactly when a position is recorded", d)
		invariants.Assertf(!d.TryAdmission || (ok && !d.Diverging() && d.RecordOffset >= seal),
			"at-seal answer %s admits without a validated position at or past seal %d", d, seal)
		invariants.Assertf(d.Step != SealStepLeaderBelowSeal || (ok && !d.TryAdmission && !d.Diverging()),
			"at-seal answer %s: a leader below the seal validates nothing", d)
		invariants.Assertf((d.Step == SealStepZeroByteRead) == (d.ValidatedOffset != base.UndefinedOffset),
			"at-seal answer %s: only step 3 has a validated offset", d)
	}
	return d
}

// sealReadView is the leader's log as the at-seal zero-byte read sees it:
// its offsets read once, and the whole log [log start, LEO] readable, with
// no tiered range (see ValidateFetchAtSeal). It is a FetchLog, so step 3
// runs ValidateFetch itself rather than a copy of its checks.
type sealReadView struct {
	log           FetchLog
	logStart, leo int64
	highWatermark int64
}

func readSealView(l FetchLog) sealReadView {
	return sealReadView{log: l, logStart: l.LogStartOffset(), leo: l.LogEndOffset(), highWatermark: l.HighWatermark()}
}

func (v sealReadView) LogStartOffset() int64      { return v.logStart }
func (v sealReadView) LocalLogStartOffset() int64 { return v.logStart }
func (v sealReadView) LogEndOffset() int64        { return v.leo }
func (v sealReadView) HighWatermark() int64       { return v.highWatermark }
func (v sealReadView) RemoteStorageEnabled() bool { return false }

func (v sealReadView) EndOffsetForEpoch(epoch int32) EpochEndOffset {
	return v.log.EndOffsetForEpoch(epoch)
}

func (v sealReadView) EarliestEpoch() (int32, bool) { return v.log.EarliestEpoch() }

// SealAdmission is what ShouldAdmitAtSeal decides on: the leader's
// partition state after it recorded the follower's fetch.
type SealAdmission struct {
	// State is the partition's switch state.
	State State
	// IsLeader: this broker still leads the partition.
	IsLeader bool
	// IsrChangeInFlight: an AlterPartition of this leader is not answered
	// yet (Kafka: PartitionState.isInflight).
	IsrChangeInFlight bool
	// Replica is the leader's view of the follower.
	Replica SealReplica
	// RecordedEndOffset and RecordedBrokerEpoch are the follower position
	// the leader recorded and the broker epoch recorded with it;
	// RecordedEndOffset record.UndefinedOffset when none is (Kafka:
	// Replica.stateSnapshot.logEndOffset and brokerEpoch).
	RecordedEndOffset   int64
	RecordedBrokerEpoch int64
}

// ShouldAdmitAtSeal decides whether the leader adds a follower to the ISR
// after an at-seal fetch whose decision said TryAdmission (Inkless
// Partition.maybeExpandIsrAtSeal, https://github.com/aiven/inkless/pull/760):
// in order,
//
//  1. the partition has a committed seal, and this broker leads it;
//  2. no ISR change is in flight;
//  3. the follower is not in the ISR;
//  4. it is eligible: assigned, not fenced, not in controlled shutdown,
//     with a recorded position whose broker epoch is NoBrokerEpoch or
//     the broker's registered one (a registration must exist);
//  5. its recorded end offset is at or past the seal.
//
// admit true means: submit an AlterPartition adding the follower. why says
// which rule decided.
//
// It deliberately drops Kafka's generic in-sync rule (Partition.
// isFollowerInSync: follower end >= leader high watermark and >= the start
// of the leader's epoch): a consolidating leader's high watermark sits at
// the diskless frontier, which a follower never reaches over classic
// replication, and the records of the leader's epoch past the seal live in
// object storage, not in the follower's proof. Reaching the seal, validated
// by a leader that holds the whole prefix, is the evidence.
func ShouldAdmitAtSeal(a SealAdmission) (admit bool, why string) {
	r := a.Replica
	switch {
	case !a.State.SealCommitted():
		return false, fmt.Sprintf("switch %s has no committed seal: the generic ISR rule applies", a.State)
	case !a.IsLeader:
		return false, "this broker does not lead the partition"
	case a.IsrChangeInFlight:
		return false, "an ISR change is in flight"
	case r.InIsr:
		return false, "already in the ISR"
	case !r.Assigned:
		return false, "not an assigned replica"
	case r.Fenced:
		return false, "broker fenced"
	case r.InControlledShutdown:
		return false, "broker in controlled shutdown"
	case a.RecordedEndOffset == base.UndefinedOffset:
		return false, "no position recorded"
	case r.RegisteredBrokerEpoch == NoBrokerEpoch:
		return false, "broker has no live registration"
	case a.RecordedBrokerEpoch != NoBrokerEpoch && a.RecordedBrokerEpoch != r.RegisteredBrokerEpoch:
		return false, fmt.Sprintf("recorded broker epoch %d, registered %d", a.RecordedBrokerEpoch, r.RegisteredBrokerEpoch)
	case a.RecordedEndOffset < a.State.Seal():
		return false, fmt.Sprintf("recorded end %d below seal %d", a.RecordedEndOffset, a.State.Seal())
	}
	return true, fmt.Sprintf("recorded end %d at or past seal %d", a.RecordedEndOffset, a.State.Seal())
}

// SealFollowerLog is what the follower-side decisions read of the
// follower's own log. *log.UnifiedLog satisfies it.
type SealFollowerLog interface {
	LogEndOffset() int64
	HighWatermark() int64
	LatestEpoch() (int32, bool)
}

// SealHandOffAction is what a follower's classic fetcher does with a
// partition after an append.
type SealHandOffAction int8

const (
	// HandOffContinue: no committed seal, or the log ends below it: keep
	// replicating the classic prefix, without a back-off.
	HandOffContinue SealHandOffAction = iota
	// HandOffWaitForIsr: at or past the seal but not in the KRaft ISR.
	// Keep fetching with a back-off of replica.fetch.backoff.ms: the
	// leader records the offset a fetch carries, so it sees the follower
	// at the seal only on the next fetch, which also brings HW = S. Warn
	// once a minute while waiting (the under-replicated metric excludes
	// consolidating partitions; the warning is the operator's signal).
	HandOffWaitForIsr
	// HandOffWaitForHighWatermark: a non-consolidating partition in phase
	// 1, in the ISR at the seal, whose high watermark is below the seal
	// (https://github.com/aiven/inkless/pull/855): back off like
	// HandOffWaitForIsr until a fetch brings HW = S. An operator recovering
	// the partition trusts only a replica whose high watermark is at the
	// seal.
	HandOffWaitForHighWatermark
	// HandOffConsolidate: evict the partition from the classic fetcher
	// and start the consolidation fetcher at the log end offset.
	HandOffConsolidate
	// HandOffEvict: evict the partition from the classic fetcher (a
	// non-consolidating partition: nothing replicates it afterwards).
	HandOffEvict
)

func (a SealHandOffAction) String() string {
	switch a {
	case HandOffContinue:
		return "continue"
	case HandOffWaitForIsr:
		return "wait-for-isr"
	case HandOffWaitForHighWatermark:
		return "wait-for-high-watermark"
	case HandOffConsolidate:
		return "consolidate"
	case HandOffEvict:
		return "evict"
	}
	return fmt.Sprintf("SealHandOffAction(%d)", int8(a))
}

// SealHandOff is HandOffAtSeal's answer.
type SealHandOff struct {
	Action SealHandOffAction
	// ConsolidationStartOffset is the log end offset where the
	// consolidation fetcher starts, for HandOffConsolidate;
	// record.UndefinedOffset otherwise.
	ConsolidationStartOffset int64
	// Reason names the rule that decided, for logs and tests.
	Reason string
}

// Evicts reports whether the partition leaves the classic fetcher.
func (h SealHandOff) Evicts() bool {
	return h.Action == HandOffConsolidate || h.Action == HandOffEvict
}

// BacksOff reports whether the classic fetcher delays the partition by
// replica.fetch.backoff.ms before its next fetch.
func (h SealHandOff) BacksOff() bool {
	return h.Action == HandOffWaitForIsr || h.Action == HandOffWaitForHighWatermark
}

func (h SealHandOff) String() string {
	s := h.Action.String()
	if h.Action == HandOffConsolidate {
		s += fmt.Sprintf(" at %d", h.ConsolidationStartOffset)
	}
	if h.BacksOff() {
		s += " back-off"
	}
	return s + " (" + h.Reason + ")"
}

// HandOffAtSeal decides, after each append of the classic fetcher, whether
// a follower leaves it (Inkless ReplicaFetcherThread,
// https://github.com/aiven/inkless/pull/760 and
// https://github.com/aiven/inkless/pull/855). With S the committed seal and
// l the follower's log after the append:
//
//	condition                                               action
//	no committed seal, or LEO < S                           continue
//	LEO >= S, not in the KRaft ISR                          wait for the ISR, back off
//	LEO >= S, in the ISR, consolidating, phase 2            evict, consolidate at LEO
//	LEO >= S, in the ISR, not consolidating, phase 1, HW < S  wait for HW = S, back off
//	LEO >= S, in the ISR, not consolidating (otherwise)     evict
//
// A consolidating partition in phase 1 counts as not consolidating:
// consolidation waits for the phase-2 flag and its diskless epoch
// (State.TakesDisklessRecords); the flag's metadata delta starts it
// (RouteFollowerFetcher).
//
// A consolidating replica does not wait for its high watermark
// (https://github.com/aiven/inkless/pull/855), and one past the seal keeps
// its diskless suffix while it waits: the leader validates it at the seal
// (ValidateFetchAtSeal).
func HandOffAtSeal(s State, l SealFollowerLog, inIsr bool) SealHandOff {
	h := SealHandOff{ConsolidationStartOffset: base.UndefinedOffset}
	if !s.SealCommitted() {
		h.Reason = fmt.Sprintf("switch %s has no committed seal", s)
		return h
	}
	seal, leo, hw := s.Seal(), l.LogEndOffset(), l.HighWatermark()
	switch {
	case leo < seal:
		h.Action = HandOffContinue
		h.Reason = fmt.Sprintf("log end %d below seal %d: classic catch-up", leo, seal)
	case !inIsr:
		h.Action = HandOffWaitForIsr
		h.Reason = fmt.Sprintf("log end %d at or past seal %d, not in the ISR: the next fetch asks for admission", leo, seal)
	case s.Consolidating() && s.TakesDisklessRecords():
		h.Action, h.ConsolidationStartOffset = HandOffConsolidate, leo
		h.Reason = fmt.Sprintf("in the ISR with log end %d at or past seal %d", leo, seal)
	case s.Phase() == PhaseOne && hw < seal:
		h.Action = HandOffWaitForHighWatermark
		h.Reason = fmt.Sprintf("phase 1, %s: high watermark %d below seal %d", notConsolidating(s), hw, seal)
	default:
		h.Action = HandOffEvict
		h.Reason = fmt.Sprintf("in the ISR with log end %d and high watermark %d, seal %d, %s", leo, hw, seal, notConsolidating(s))
	}
	return h
}

// FollowerFetcher names the fetcher that replicates a follower's
// partition.
type FollowerFetcher int8

const (
	// ClassicFetcher is Kafka's replica fetcher: it fetches from the
	// partition leader.
	ClassicFetcher FollowerFetcher = iota
	// ConsolidationFetcher is Inkless's consolidation fetcher: it copies
	// diskless batches from the WAL through DisklessLeaderEndPoint.
	ConsolidationFetcher
)

func (f FollowerFetcher) String() string {
	switch f {
	case ClassicFetcher:
		return "classic"
	case ConsolidationFetcher:
		return "consolidation"
	}
	return fmt.Sprintf("FollowerFetcher(%d)", int8(f))
}

// FollowerRoute is RouteFollowerFetcher's answer.
type FollowerRoute struct {
	Fetcher FollowerFetcher
	// StartOffset is the fetcher's initial fetch offset.
	StartOffset int64
	// Reason names the rule that decided, for logs and tests.
	Reason string
}

func (r FollowerRoute) String() string {
	return fmt.Sprintf("%s fetcher at %d (%s)", r.Fetcher, r.StartOffset, r.Reason)
}

// RouteFollowerFetcher decides which fetcher replicates a follower's
// partition when a metadata delta makes or keeps this broker a follower
// (Inkless ReplicaManager.isReadyForConsolidation,
// https://github.com/aiven/inkless/pull/760): the consolidation fetcher iff
// the partition consolidates and either is born diskless (no seal, -1) or
// is in phase 2 with LEO >= S and this replica in the KRaft ISR; the
// classic fetcher otherwise, including while the seal is pending and in
// phase 1 (no diskless epoch to stamp yet: State.TakesDisklessRecords;
// HandOffAtSeal then evicts the replica at the seal).
//
// The consolidation fetcher starts at LEO past a seal, and at Kafka's
// initial fetch offset without one. The classic fetcher starts at Kafka's
// initial fetch offset (ReplicaManager.initialFetchOffset: the log end
// offset when the log has a leader epoch, else the high watermark). So a
// consolidating replica already past the seal but outside the ISR (a
// restart after a controlled shutdown, or an ISR-only delta that removed
// it) goes back to the classic fetcher at its real log end, not at the
// seal: its diskless suffix stays, and the leader validates it at the seal
// (ValidateFetchAtSeal). The broker removes the partition from both
// fetcher managers before it starts the chosen one, so the hand-off is
// exclusive.
func RouteFollowerFetcher(s State, l SealFollowerLog, inIsr bool) FollowerRoute {
	initial := initialFetchOffset(l)
	classic := func(why string) FollowerRoute {
		return FollowerRoute{Fetcher: ClassicFetcher, StartOffset: initial, Reason: why}
	}
	if !s.Consolidating() {
		return classic("not consolidating")
	}
	switch s.Phase() {
	case PhaseClassic:
		return FollowerRoute{Fetcher: ConsolidationFetcher, StartOffset: initial, Reason: "born diskless: no seal"}
	case PhaseSealPending:
		return classic("seal pending: replicate the frozen classic prefix")
	}
	seal, leo := s.Seal(), l.LogEndOffset()
	switch {
	case leo < seal:
		return classic(fmt.Sprintf("log end %d below seal %d: classic catch-up first", leo, seal))
	case !inIsr:
		return classic(fmt.Sprintf("log end %d at or past seal %d, not in the ISR: wait for admission", leo, seal))
	case !s.TakesDisklessRecords():
		return classic(fmt.Sprintf("log end %d at or past seal %d in %s: consolidation waits for the phase-2 flag", leo, seal, s.Phase()))
	}
	return FollowerRoute{Fetcher: ConsolidationFetcher, StartOffset: leo,
		Reason: fmt.Sprintf("in the ISR with log end %d at or past seal %d", leo, seal)}
}

// initialFetchOffset is Kafka's ReplicaManager.initialFetchOffset with
// truncation on fetch: a log with a leader epoch fetches on from its end
// (the leader's divergence check decides what to keep), one without from
// its high watermark.
// notConsolidating names why a replica at the seal does not consolidate.
func notConsolidating(s State) string {
	if s.Consolidating() {
		return "consolidation waits for the phase-2 flag"
	}
	return "not consolidating"
}

func initialFetchOffset(l SealFollowerLog) int64 {
	if _, ok := l.LatestEpoch(); ok {
		return l.LogEndOffset()
	}
	return l.HighWatermark()
}
