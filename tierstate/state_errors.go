package tierstate

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tierlog/tierlog/internal/base"
)

// Errors returned by this package. Test for them with errors.Is; never
// compare strings. A refused transition is a *TransitionError and a
// refused metadata record a *TagError; both unwrap to their umbrella
// sentinel (ErrInvalidTransition, ErrInvalidTags) and to the reason
// below. The Kafka error a controller answers with is named on each.
var (
	// ErrInvalidTransition: a switch operation or change record that the
	// switch protocol does not allow from the current State. Returned as a
	// *TransitionError.
	ErrInvalidTransition = errors.New("tierstate: invalid switch transition")

	// ErrInvalidTags: Inkless tagged fields that cannot be decoded, or
	// whose values contradict each other in a full PartitionRecord.
	// Returned as a *TagError.
	ErrInvalidTags = errors.New("tierstate: invalid switch tags")

	// ErrNotSwitching: the operation needs a switch in progress and the
	// partition is classic (the topic is not diskless, or the switch was
	// aborted). Kafka: INVALID_REQUEST.
	ErrNotSwitching = errors.New("tierstate: partition is not being switched")

	// ErrSealCommitted: arming, aborting or committing the seal again
	// after it was committed. Only an operator re-seal or start-phase-2
	// may change a committed seal, and only downwards. Kafka:
	// INVALID_REQUEST.
	ErrSealCommitted = errors.New("tierstate: seal already committed")

	// ErrSealNotCommitted: the operation or field needs a committed seal
	// (phase 1 or 2) and the switch is pending or absent. Kafka:
	// INVALID_REQUEST.
	ErrSealNotCommitted = errors.New("tierstate: seal not committed")

	// ErrInvalidSeal: a seal below 0 where a seal is required, or a tag
	// 100 below -2. Kafka: INVALID_REQUEST.
	ErrInvalidSeal = errors.New("tierstate: invalid seal offset")

	// ErrSealIncrease: a new seal above the committed one. The committed
	// seal never rises: records at and above it belong to diskless
	// storage. Kafka: INVALID_REQUEST.
	ErrSealIncrease = errors.New("tierstate: seal above the committed seal")

	// ErrSealMismatch: a request names a seal other than the committed
	// one. Kafka: INVALID_REQUEST.
	ErrSealMismatch = errors.New("tierstate: seal does not match the committed seal")

	// ErrInPhaseTwo: the operation exists only in phase 1 (operator
	// re-seal, elect, start-phase-2), or a change record would change the
	// seal of a phase-2 partition. Kafka: INVALID_REQUEST.
	ErrInPhaseTwo = errors.New("tierstate: partition is in phase 2")

	// ErrPhaseBackwards: a change record clears classicPrefixInRemoteStorage.
	// Phase 2 is final.
	ErrPhaseBackwards = errors.New("tierstate: phase 2 cannot be undone")

	// ErrInvalidRecordedEpoch: lastClassicLeaderEpoch outside [-1, current
	// leader epoch] (https://github.com/aiven/inkless/pull/857). Kafka:
	// INVALID_REQUEST.
	ErrInvalidRecordedEpoch = errors.New("tierstate: invalid last classic leader epoch")

	// ErrRecordedEpochNotWithFlag: a change record sets
	// lastClassicLeaderEpoch other than together with the phase-2 flag,
	// which is the only record that writes it.
	ErrRecordedEpochNotWithFlag = errors.New("tierstate: last classic leader epoch set without the phase-2 flag")

	// ErrInvalidEpoch: an epoch tag below -1.
	ErrInvalidEpoch = errors.New("tierstate: invalid epoch")

	// ErrDisklessEpochDecrease: a change record lowers the diskless
	// leader epoch. Consolidated batches carry E_d, and leader epochs only
	// grow, so a lower value can only come from a stale writer.
	ErrDisklessEpochDecrease = errors.New("tierstate: diskless leader epoch decreased")

	// ErrConflictingTags: a change record's switch fields contradict
	// each other: it undoes or re-arms the switch (tag 100 = -1 or -2)
	// and also sets a field the same tag drops, or it changes the seal
	// epoch (tag 105) without writing the seal (tag 100).
	ErrConflictingTags = errors.New("tierstate: conflicting switch fields")

	// ErrLeaderEpochAhead: the request's leader epoch is above the
	// partition's; the controller has not caught up. Kafka: NOT_CONTROLLER.
	ErrLeaderEpochAhead = errors.New("tierstate: request leader epoch ahead of the controller")

	// ErrFencedEpoch: the request's leader epoch is below the partition's.
	// Kafka: FENCED_LEADER_EPOCH (74).
	ErrFencedEpoch = base.ErrFencedEpoch

	// ErrNotLeader: the sender is not the partition's current leader.
	// [INF] Kafka: NOT_LEADER_OR_FOLLOWER (the RPC's check names no
	// error code).
	ErrNotLeader = errors.New("tierstate: sender is not the partition leader")

	// ErrCorruption marks tag bytes that cannot be decoded.
	ErrCorruption = base.ErrCorruption

	// ErrInvalidArgument: a caller bug (a negative current leader epoch).
	ErrInvalidArgument = base.ErrInvalidArgument
)

// TransitionError reports a switch operation or change record that the
// State refuses. errors.Is matches ErrInvalidTransition and Reason.
type TransitionError struct {
	// Op names the operation ("arm", "commit-seal", "apply-change", ...).
	Op string
	// From is the phase the partition is in; To the phase the operation
	// would have led to.
	From, To Phase
	// Reason is one of the package's sentinels.
	Reason error
	// Detail gives the offsets and epochs involved.
	Detail string
}

func (e *TransitionError) Error() string {
	msg := fmt.Sprintf("tierstate: %s refused (%s -> %s): %s", e.Op, e.From, e.To, reasonText(e.Reason))
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// Unwrap returns ErrInvalidTransition and the reason.
func (e *TransitionError) Unwrap() []error { return []error{ErrInvalidTransition, e.Reason} }

// TagError reports a tagged field that cannot be decoded or that
// contradicts the others. errors.Is matches ErrInvalidTags and Reason.
type TagError struct {
	Tag    uint32
	Reason error
	Detail string
}

func (e *TagError) Error() string {
	msg := fmt.Sprintf("tierstate: tag %d: %s", e.Tag, reasonText(e.Reason))
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// Unwrap returns ErrInvalidTags and the reason.
func (e *TagError) Unwrap() []error { return []error{ErrInvalidTags, e.Reason} }

func refuse(op string, from, to Phase, reason error, format string, args ...any) *TransitionError {
	return &TransitionError{Op: op, From: from, To: to, Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// reasonText is a reason's message without this package's prefix, which
// the wrapping error already carries.
func reasonText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return strings.TrimPrefix(err.Error(), "tierstate: ")
}
