package tierstate

import (
	"errors"
	"fmt"
	"github.com/tierlog/tierlog/epochcache"

	"github.com/tierlog/tierlog/internal/mutation"
)

// The operator's `kafka-topic-switch.sh seal <offset>`
// (https://github.com/aiven/inkless/pull/871): before it sends
// AlterDisklessSwitch the tool checks the new seal against the range
// [log start, leader's log end]. A seal above the leader's log end names
// records the leader does not have: the leader stays fenced below the
// seal (https://github.com/aiven/inkless/pull/855), no replica can reach
// the seal, and the partition is stuck. In the pull request's example
// the seal is 20 and the last-known leader's log ends at 15: `seal 15`
// brings the partition back, `seal 18` would leave it where it was.
//
//	offset     0               15       18  20 = S
//	leader     [================)                      log end 15
//	seal 15    ok: the leader holds [0, 15) and leads at the seal
//	seal 18    refused: [15, 18) exists nowhere, the leader stays fenced

// ErrSealOutOfRange: the operator's seal lies outside [log start, leader's
// log end], the range kafka-topic-switch.sh seal accepts. Refused by the
// tool before any request (no Kafka error code); the error is a
// *SealRangeError.
var ErrSealOutOfRange = errors.New("tierstate: seal outside [log start, leader log end]")

// ErrSealInsideBatch: the operator's seal lies inside one of the leader's
// batches. Lowering the seal truncates the leader's log there, and a
// truncation keeps no part of a batch (Kafka's truncateTo cuts at the
// batch's start), so the batch's records below the seal would go too: the
// new classic prefix would end before the seal. Refused by the tool, with
// the batch named; the error is a *SealBatchError.
var ErrSealInsideBatch = errors.New("tierstate: seal inside a batch of the leader")

// ErrForcedSealBelowLogEnd: while the seal is pending, the operator's
// seal lies below the leader's log end. The leader commits the seal
// itself once its high watermark reaches its log end, so that no
// acknowledged record lies above the seal; a forced seal below it would
// truncate records the leader holds, committed ones among them, with no
// loss accepted (the lowering of a committed seal in phase 1 is the
// recovery that accepts a loss). The error is a *ForcedSealError.
var ErrForcedSealBelowLogEnd = errors.New("tierstate: forced seal below the leader's log end")

// ErrForcedSealAboveHighWatermark: while the seal is pending, the
// operator's seal (the leader's log end) lies above the leader's high
// watermark. The records above the high watermark are not committed
// (Kafka's rule): an in-sync follower may hold a different tail there (a
// leader of an earlier epoch wrote it), and the seal, once committed,
// raises every replica's high watermark to it, so each replica would
// serve its own tail as committed, and the follower, elected, would serve
// records the leader's consumers never saw. The leader commits the seal
// itself once its high watermark reaches its log end; Inkless's tool
// (https://github.com/aiven/inkless/pull/665) accepts no seal above the
// high watermark either. The error is a *UnreplicatedSealError.
var ErrForcedSealAboveHighWatermark = errors.New("tierstate: forced seal above the leader's high watermark")

// ErrNoLeader: the partition has no leader, so nothing bounds a new seal
// (the tool reads the leader's log end).
var ErrNoLeader = errors.New("tierstate: partition has no leader")

// SealRangeError reports a seal outside [LogStartOffset,
// LeaderLogEndOffset] (both inclusive). errors.Is matches
// ErrRecoveryRefused and ErrSealOutOfRange.
type SealRangeError struct {
	// Seal is the refused seal.
	Seal int64
	// Leader is the broker whose log end bounds the range.
	Leader int32
	// LogStartOffset and LeaderLogEndOffset are the range's bounds,
	// inclusive. The range is empty when the leader's log ends below the
	// log start.
	LogStartOffset, LeaderLogEndOffset int64
}

func (e *SealRangeError) Error() string {
	return fmt.Sprintf("tierstate: %s refused: seal %d outside [%d, %d] (log start, leader %d's log end)",
		OpReseal, e.Seal, e.LogStartOffset, e.LeaderLogEndOffset, e.Leader)
}

// Unwrap returns ErrRecoveryRefused and ErrSealOutOfRange.
func (e *SealRangeError) Unwrap() []error { return []error{ErrRecoveryRefused, ErrSealOutOfRange} }

// SealBatchError reports a seal inside the leader's batch [BaseOffset,
// LastOffset]: BaseOffset and LastOffset+1 are the seals next to it that
// keep whole batches. errors.Is matches ErrRecoveryRefused and
// ErrSealInsideBatch.
type SealBatchError struct {
	Seal                   int64
	Leader                 int32
	BaseOffset, LastOffset int64
}

func (e *SealBatchError) Error() string {
	return fmt.Sprintf("tierstate: %s refused: seal %d inside leader %d's batch [%d, %d]: the truncation at the seal would drop [%d, %d) too; seal %d or %d keeps whole batches",
		OpReseal, e.Seal, e.Leader, e.BaseOffset, e.LastOffset, e.BaseOffset, e.Seal, e.BaseOffset, e.LastOffset+1)
}

// Unwrap returns ErrRecoveryRefused and ErrSealInsideBatch.
func (e *SealBatchError) Unwrap() []error { return []error{ErrRecoveryRefused, ErrSealInsideBatch} }

// ForcedSealError reports a seal forced while the seal is pending
// (AlterDisklessSwitch from seal pending) that is not the leader's log
// end. errors.Is matches ErrRecoveryRefused and ErrForcedSealBelowLogEnd.
type ForcedSealError struct {
	Seal               int64
	Leader             int32
	LeaderLogEndOffset int64
}

func (e *ForcedSealError) Error() string {
	return fmt.Sprintf("tierstate: %s refused: seal %d while the seal is pending: leader %d's log ends at %d, and a seal below it would truncate [%d, %d) with no loss accepted; seal %d, or let the leader commit the seal",
		OpReseal, e.Seal, e.Leader, e.LeaderLogEndOffset, e.Seal, e.LeaderLogEndOffset, e.LeaderLogEndOffset)
}

// Unwrap returns ErrRecoveryRefused and ErrForcedSealBelowLogEnd.
func (e *ForcedSealError) Unwrap() []error {
	return []error{ErrRecoveryRefused, ErrForcedSealBelowLogEnd}
}

// UnreplicatedSealError reports a seal forced while the seal is pending
// above the leader's high watermark: [HighWatermark, Seal) is not known to
// be replicated to the ISR. errors.Is matches ErrRecoveryRefused and
// ErrForcedSealAboveHighWatermark.
type UnreplicatedSealError struct {
	Seal          int64
	Leader        int32
	HighWatermark int64
}

func (e *UnreplicatedSealError) Error() string {
	return fmt.Sprintf("tierstate: %s refused: seal %d while the seal is pending: leader %d's high watermark is %d, and [%d, %d) is not committed (an in-sync follower may hold another tail there); let the followers catch up and the leader commit the seal",
		OpReseal, e.Seal, e.Leader, e.HighWatermark, e.HighWatermark, e.Seal)
}

// Unwrap returns ErrRecoveryRefused and ErrForcedSealAboveHighWatermark.
func (e *UnreplicatedSealError) Unwrap() []error {
	return []error{ErrRecoveryRefused, ErrForcedSealAboveHighWatermark}
}

// BatchSpan is one batch of a log: its base and last offsets.
type BatchSpan struct {
	// Known says the span was read; the zero value skips the check it
	// feeds.
	Known                  bool
	BaseOffset, LastOffset int64
}

// ResealRequest is what kafka-topic-switch.sh seal works from.
type ResealRequest struct {
	// Seal is the new seal (>= 0; the tool's -1 and -2 are
	// State.AbortSwitch and State.ArmSwitch).
	Seal int64
	// ClearProducerStates is --clear-producer-states.
	ClearProducerStates bool
	// LeaderLineage is the leader's leader-epoch entries over its
	// records below Seal (its log's epoch cache: UnifiedLog's
	// EpochEntriesInRange(-1, Seal)), nil when unknown: the committed
	// State's seal lineage (State.SealLineage), which the operator's
	// later recovery checks replicas and remote storage against. A
	// re-seal to the committed seal keeps the lineage committed with it.
	LeaderLineage []epochcache.Entry
	// Leader is the partition's leader (the last-known leader after
	// KIP-966's election, fenced or not), -1 when it has none.
	Leader int32
	// LogStartOffset is the partition's log start offset: with a
	// committed seal X, the cross-tier log start the leader's
	// description reports (ReplicaDescription.CrossTierLogStartOffset);
	// before it, the leader's log start offset.
	LogStartOffset int64
	// LeaderLogEndOffset is the leader's log end offset
	// (ReplicaDescription.LogEndOffset: a fenced leader answers too).
	LeaderLogEndOffset int64
	// LeaderHighWatermark is the leader's high watermark
	// (ReplicaDescription.HighWatermark). Read only while the seal is
	// pending: a forced seal above it is refused
	// (*UnreplicatedSealError).
	LeaderHighWatermark int64
	// SealBatch is the leader's batch holding offset Seal, when Seal is
	// below its log end (a log's read from Seal returns it first), in
	// whichever tier holds it: below the local log start, the remote
	// segment's batch (remote.Manager.Read at Seal). A seal strictly
	// inside it is refused (*SealBatchError); unknown (the zero value)
	// skips that check. A seal inside a tiered batch would leave the
	// batch's records below the seal unreadable: a tiered read refuses a
	// batch that reaches the committed seal (remote.SealCapError).
	SealBatch BatchSpan
}

// PlanReseal is kafka-topic-switch.sh seal S
// (https://github.com/aiven/inkless/pull/871): the switch rules of
// State.Reseal first (its *TransitionError: classic, phase 2, a negative
// seal, a seal above the committed one), then the tool's range check, and
// returns the State the controller commits. Refused with a
// *RecoveryError (ErrNoLeader; ErrInvalidArgument for a negative bound)
// or a *SealRangeError when S is outside [LogStartOffset,
// LeaderLogEndOffset], or a *SealBatchError when S lies inside the
// leader's batch SealBatch. Pure: the caller describes the leader.
//
// The seal lowers only a committed seal (phase 1), where the operator
// recovers a partition whose leader lost records. While the seal is
// pending the State rules accept S too (the operator forces the seal),
// but only the leader's log end keeps every record the leader holds, as
// the seal the leader commits does: any other S is refused with a
// *ForcedSealError ([INF]: Inkless's tool accepts any S up to the high
// watermark, which truncates acknowledged records above S with no loss
// accepted), and the log end only when the leader's high watermark has
// reached it, as the leader's own seal waits for: a seal above the high
// watermark is refused with an *UnreplicatedSealError.
func PlanReseal(s State, req ResealRequest) (State, error) {
	next, err := s.Reseal(req.Seal, req.LeaderLineage, req.ClearProducerStates)
	if err != nil {
		return s, err
	}
	switch {
	case req.Leader < 0:
		return s, refuseRecovery(OpReseal, noReplica, ErrNoLeader, "seal %d", req.Seal)
	case req.LogStartOffset < 0 || req.LeaderLogEndOffset < 0:
		return s, refuseRecovery(OpReseal, req.Leader, ErrInvalidArgument, "log start %d, leader log end %d",
			req.LogStartOffset, req.LeaderLogEndOffset)
	case s.Phase() == PhaseSealPending && req.Seal < req.LeaderLogEndOffset &&
		!mutation.Disabled(mutation.ResealPendingLogEnd):
		return s, &ForcedSealError{Seal: req.Seal, Leader: req.Leader, LeaderLogEndOffset: req.LeaderLogEndOffset}
	case req.Seal < req.LogStartOffset || req.Seal > req.LeaderLogEndOffset:
		return s, &SealRangeError{Seal: req.Seal, Leader: req.Leader, LogStartOffset: req.LogStartOffset,
			LeaderLogEndOffset: req.LeaderLogEndOffset}
	case s.Phase() == PhaseSealPending && req.Seal > req.LeaderHighWatermark &&
		!mutation.Disabled(mutation.ResealPendingHighWatermark):
		// The seal raises every replica's high watermark to it: only
		// records the ISR holds (below the high watermark) may lie below.
		return s, &UnreplicatedSealError{Seal: req.Seal, Leader: req.Leader, HighWatermark: req.LeaderHighWatermark}
	case req.SealBatch.Known && req.SealBatch.BaseOffset < req.Seal && req.Seal <= req.SealBatch.LastOffset &&
		!mutation.Disabled(mutation.ResealBatchBoundary):
		return s, &SealBatchError{Seal: req.Seal, Leader: req.Leader, BaseOffset: req.SealBatch.BaseOffset,
			LastOffset: req.SealBatch.LastOffset}
	}
	return next, nil
}
