package tierstate

import (
	"fmt"
	"strings"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/internal/mutation"
)

// The phase-2 replica check (https://github.com/aiven/inkless/pull/857). In
// phase 2 every live replica is in the ISR and any one can lead, but a
// replica may hold records below the seal that the partition does not (it
// led an epoch whose records the next leader never had, or an unclean
// election discarded them), or a classic tail past the seal. The recorded
// epoch R (the leader epoch of the record at seal - 1 on the leader that
// asked for phase 2) tells them apart: each epoch has one leader, so a
// replica whose record at seal - 1 is in epoch R holds the committed
// prefix, at any high watermark. A replica that fails the check is
// recreated (Recreate), never truncated in place.

// ConsolidatedSuffixLog is what HasConsolidatedDisklessSuffixFromSeal
// reads of a log. *log.UnifiedLog satisfies it.
type ConsolidatedSuffixLog interface {
	LogEndOffset() int64
	LocalLogStartOffset() int64
	EpochForOffset(offset int64) (int32, bool)
	EpochEntries() []epochcache.Entry
}

// ReplicaLog is what CheckReplica reads of a replica's current log.
// *log.UnifiedLog satisfies it.
type ReplicaLog interface {
	ConsolidatedSuffixLog
	HighestOffsetInRemoteStorage() int64
}

// FutureReplicaLog is what CheckReplica reads of the replica's future log
// (the destination of a log directory move). *log.UnifiedLog satisfies
// it.
type FutureReplicaLog interface {
	LogStartOffset() int64
	LogEndOffset() int64
	EpochForOffset(offset int64) (int32, bool)
}

// HasConsolidatedDisklessSuffixFromSeal reports whether the records of l at
// and past the seal are consolidated diskless records (Inkless:
// ReplicaManager.hasConsolidatedDisklessSuffixFromSeal): the partition
// consolidates, has a committed seal S and a diskless leader epoch E_d; l
// ends past S; with start = max(S, local log start) the record at start is
// in E_d and no epoch entry in (start, LEO) has another epoch.
// Consolidation stamps E_d on every batch it appends (in the batch's
// partition leader epoch, outside the CRC), and E_d is above every classic
// epoch, so a classic tail past the seal never passes.
func HasConsolidatedDisklessSuffixFromSeal(s State, l ConsolidatedSuffixLog) bool {
	ok, _ := consolidatedSuffix(s, l)
	return ok
}

// consolidatedSuffix is HasConsolidatedDisklessSuffixFromSeal with the
// reason it fails.
func consolidatedSuffix(s State, l ConsolidatedSuffixLog) (bool, string) {
	seal, ed, leo := s.Seal(), s.DisklessLeaderEpoch(), l.LogEndOffset()
	switch {
	case !s.Consolidating():
		return false, "the partition does not consolidate"
	case !s.SealCommitted():
		return false, "no committed seal"
	case leo <= seal:
		return false, fmt.Sprintf("log end %d not past the seal %d", leo, seal)
	case ed == base.UndefinedEpoch:
		return false, "no diskless leader epoch"
	}
	start := max(seal, l.LocalLogStartOffset())
	if e, ok := l.EpochForOffset(start); !ok || e != ed {
		return false, fmt.Sprintf("record at %d in epoch %s, not the diskless epoch %d", start, formatEpoch(e, ok), ed)
	}
	for _, e := range l.EpochEntries() {
		if e.StartOffset > start && e.StartOffset < leo && e.Epoch != ed {
			return false, fmt.Sprintf("epoch %d starts at %d, not the diskless epoch %d", e.Epoch, e.StartOffset, ed)
		}
	}
	return true, ""
}

// ReplicaCondition is one condition of the phase-2 replica check.
type ReplicaCondition int8

const (
	// ConditionEpochAtSeal (condition 1): the record at
	// T = min(S, LEO) - 1 is in the recorded epoch R, or the log has no
	// record at or below T.
	ConditionEpochAtSeal ReplicaCondition = iota + 1
	// ConditionSuffixPastSeal (condition 2): the log ends at or below the
	// seal, or its records past the seal are consolidated diskless records.
	ConditionSuffixPastSeal
	// ConditionRemoteProgress (condition 3): the highest offset in remote
	// storage is below the log end offset.
	ConditionRemoteProgress
	// ConditionFutureLog (condition 4): no future log, or one that ends at or
	// below the current log end, in the current log's epoch there.
	ConditionFutureLog
)

func (c ReplicaCondition) String() string {
	switch c {
	case ConditionEpochAtSeal:
		return "epoch-at-seal"
	case ConditionSuffixPastSeal:
		return "suffix-past-seal"
	case ConditionRemoteProgress:
		return "remote-progress"
	case ConditionFutureLog:
		return "future-log"
	}
	return fmt.Sprintf("ReplicaCondition(%d)", int8(c))
}

// ReplicaFailure is one failed condition and the offsets and epochs that
// failed it.
type ReplicaFailure struct {
	Condition ReplicaCondition
	Detail    string
}

func (f ReplicaFailure) String() string { return fmt.Sprintf("%s (%s)", f.Condition, f.Detail) }

// ReplicaDecision is CheckReplica's answer.
type ReplicaDecision struct {
	// Recreate: the replica fails at least one condition and must be
	// recreated (Recreate). False: keep the log.
	Recreate bool
	// Failures lists every failed condition, in condition order.
	Failures []ReplicaFailure
	// Skipped says why the check did not run, if it did not: the partition
	// is not in phase 2, or CheckAndRecreate could not stop the fetchers.
	Skipped string
}

func (d ReplicaDecision) String() string {
	switch {
	case d.Skipped != "":
		return "not checked: " + d.Skipped
	case !d.Recreate:
		return "keep"
	}
	parts := make([]string, len(d.Failures))
	for i, f := range d.Failures {
		parts[i] = f.String()
	}
	return "recreate: " + strings.Join(parts, "; ")
}

// CheckReplica decides whether a consolidating phase-2 replica keeps its
// log (https://github.com/aiven/inkless/pull/857): it is kept only if all
// four conditions hold (see ReplicaCondition). current is the replica's
// log, future its future log or nil when there is none (a nil
// *log.UnifiedLog counts as none). The caller has
// stopped the partition's fetchers first (CheckAndRecreate does), so
// neither log moves and no future log is promoted meanwhile.
//
// Together conditions 2 and 3 catch a classic tail past the seal: online
// and not yet truncated it fails 2; truncated to the seal it fails 3,
// because the remote progress of the tail only grows. An empty log passes
// (T = -1), and so does a log that ends below the seal with its last record
// in R. Without a recorded epoch (R = -1) the classic prefix [X, S) is
// empty: the leader that asked for phase 2 had no record below the seal,
// or remote storage holds none below the operator's new seal, so any
// record at T fails condition 1 (a state written by a controller older
// than https://github.com/aiven/inkless/pull/857 has no R either: its
// replicas are all recreated and rebuilt, safe but a rebuild each); one that ends below the seal in another epoch is recreated even if
// it holds only committed records (a known limitation that
// https://github.com/aiven/inkless/pull/857 accepts: it costs a rebuild).
//
// Pure: it reads the logs' offsets and epoch caches and changes nothing.
func CheckReplica(s State, current ReplicaLog, future FutureReplicaLog) ReplicaDecision {
	if s.Phase() != PhaseTwo {
		return ReplicaDecision{Skipped: fmt.Sprintf("%s, not phase 2", s.Phase())}
	}
	var d ReplicaDecision
	fail := func(c ReplicaCondition, format string, args ...any) {
		d.Failures = append(d.Failures, ReplicaFailure{Condition: c, Detail: fmt.Sprintf(format, args...)})
	}
	seal, recorded, leo := s.Seal(), s.LastClassicLeaderEpoch(), current.LogEndOffset()

	// 1. The epoch at min(S, LEO) - 1. [INF] No record there (T < 0, or
	// no cache entry at or below T) passes.
	if t := min(seal, leo) - 1; t >= 0 {
		e, ok := current.EpochForOffset(t)
		switch {
		case !ok:
		case recorded == base.UndefinedEpoch && !mutation.Disabled(mutation.EmptyPrefixCheck):
			// No recorded epoch: the partition's classic prefix [X, S)
			// is empty (DeleteRecords or retention moved its log start
			// X to the seal or past it), so every record below the seal
			// is below X: the replica holds records the partition
			// deleted, or that were never committed.
			fail(ConditionEpochAtSeal, "epoch at %d is %d, and the classic prefix is empty (no recorded epoch)", t, e)
		case recorded != base.UndefinedEpoch && e != recorded:
			fail(ConditionEpochAtSeal, "epoch at %d is %d, recorded epoch %d", t, e, recorded)
		}
	}
	// 2. Records past the seal.
	if leo > seal && !mutation.Disabled(mutation.ReplicaSuffixPastSeal) {
		if ok, why := consolidatedSuffix(s, current); !ok {
			fail(ConditionSuffixPastSeal, "log end %d past the seal %d: %s", leo, seal, why)
		}
	}
	// 3. Remote progress below the log end.
	if h := current.HighestOffsetInRemoteStorage(); h >= leo && !mutation.Disabled(mutation.ReplicaRemoteProgress) {
		fail(ConditionRemoteProgress, "highest offset in remote storage %d not below the log end %d", h, leo)
	}
	// 4. The future log.
	if !isNilLog(future) && !mutation.Disabled(mutation.ReplicaFutureLog) {
		checkFutureLog(current, future, fail)
	}
	d.Recreate = len(d.Failures) > 0
	return d
}

// checkFutureLog is condition 4. [INF] A future log without records (its
// log end at its log start) passes; a future log that has a record at
// F - 1 where the current log has none fails.
func checkFutureLog(current ReplicaLog, future FutureReplicaLog, fail func(ReplicaCondition, string, ...any)) {
	f, leo := future.LogEndOffset(), current.LogEndOffset()
	if f > leo {
		fail(ConditionFutureLog, "future log ends at %d past the log end %d", f, leo)
		return
	}
	if f <= future.LogStartOffset() {
		return
	}
	fe, fok := future.EpochForOffset(f - 1)
	ce, cok := current.EpochForOffset(f - 1)
	if fok != cok || fe != ce {
		fail(ConditionFutureLog, "epoch at %d is %s in the future log, %s in the current log", f-1,
			formatEpoch(fe, fok), formatEpoch(ce, cok))
	}
}

// ReplicaDelta is what a metadata delta says about one partition of this
// broker, for ShouldCheckReplica.
type ReplicaDelta struct {
	// NewToBroker: the broker did not host the partition before this
	// delta (a new replica, a reassignment, or the first delta after a
	// restart).
	NewToBroker bool
	// PreviousLeaderEpoch is the leader epoch the broker applied last
	// (ignored when NewToBroker); LeaderEpoch the delta's.
	PreviousLeaderEpoch int32
	LeaderEpoch         int32
	// Offline: the replica was marked offline (a failed recreate, a
	// storage error); later deltas skip it: no check, no recreate, no
	// fetcher.
	Offline bool
}

// ShouldCheckReplica decides whether applying a delta runs the replica
// check for a partition, before its leader and follower transitions
// (https://github.com/aiven/inkless/pull/857): a consolidating partition in
// phase 2, whose replica is new to the broker or
// whose leader epoch rose. An ISR-only change (the partition epoch moves,
// the leader epoch does not) never runs it; the phase-2 flag commit bumps
// the leader epoch, so every live replica checks itself when phase 2
// starts. why says which rule decided.
func ShouldCheckReplica(s State, d ReplicaDelta) (run bool, why string) {
	switch {
	case d.Offline:
		return false, "replica offline"
	case !s.Consolidating():
		return false, "not consolidating"
	case s.Phase() != PhaseTwo:
		return false, fmt.Sprintf("%s, not phase 2", s.Phase())
	case d.NewToBroker:
		return true, "new to the broker"
	case d.LeaderEpoch > d.PreviousLeaderEpoch:
		return true, fmt.Sprintf("leader epoch %d -> %d", d.PreviousLeaderEpoch, d.LeaderEpoch)
	}
	return false, fmt.Sprintf("leader epoch unchanged (%d)", d.LeaderEpoch)
}
