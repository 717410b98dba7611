package truncation

import (
	"fmt"

	"github.com/tierlog/tierlog/epochcache"
)

// Undefined values of the OffsetsForLeaderEpoch protocol. Kafka:
// UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET. (The same values as
// internal/base's; repeated here because this package's plans are plain
// values a broker fills from the wire.)
const (
	undefinedEpoch  int32 = -1
	undefinedOffset int64 = -1
)

// EpochEndOffset is a leader's answer to OffsetsForLeaderEpoch for the
// epoch a follower asked about: the largest epoch <= the asked one that
// the leader knows, and its exclusive end offset. Either may be -1
// (undefined). The same type as epochcache.EpochEndOffset.
type EpochEndOffset = epochcache.EpochEndOffset

// EndOffsetFunc is the follower's own OffsetsForLeaderEpoch answer for an
// epoch, Undefined when it has none: log.UnifiedLog.EndOffsetForEpoch
// has this shape.
type EndOffsetFunc func(epoch int32) EpochEndOffset

// DivergencePlan says where a follower cuts its log after the leader's
// answer.
type DivergencePlan struct {
	// TruncateTo is the offset to truncate to (keep offsets below it).
	TruncateTo int64
	// Done is false when the follower must ask the leader again, for
	// AskEpoch, before it may fetch: its own history diverged at an epoch
	// the leader answered for a different one.
	Done     bool
	AskEpoch int32
	// Reason names the rule that applied, for logs and tests.
	Reason string
}

func (p DivergencePlan) String() string {
	if p.Done {
		return fmt.Sprintf("truncate-to=%d (%s)", p.TruncateTo, p.Reason)
	}
	return fmt.Sprintf("truncate-to=%d, ask again for epoch %d (%s)", p.TruncateTo, p.AskEpoch, p.Reason)
}

// PlanDivergence decides how far a follower truncates after the leader
// answered OffsetsForLeaderEpoch (Kafka's
// AbstractFetcherThread.getOffsetTruncationState):
//
//	leader end offset undefined      truncate to the high watermark (the initial fetch offset)
//	leader epoch undefined           truncate to min(leader end, LEO)
//	we have no entry for that epoch  truncate to min(leader end, LEO)
//	our floor epoch differs          truncate to min(our end, LEO), ask again for our epoch
//	same epoch                       truncate to min(our end, leader end, LEO)
//
// It is a pure function of its inputs; the fetcher executes the plan with
// log.UnifiedLog.TruncateTo.
func PlanDivergence(leader EpochEndOffset, local EndOffsetFunc, logEndOffset, highWatermark int64) DivergencePlan {
	switch {
	case leader.EndOffset == undefinedOffset:
		return DivergencePlan{TruncateTo: min(highWatermark, logEndOffset), Done: true,
			Reason: "leader has no end offset: truncate to the high watermark"}
	case leader.Epoch == undefinedEpoch:
		return DivergencePlan{TruncateTo: min(leader.EndOffset, logEndOffset), Done: true,
			Reason: "leader epoch undefined: truncate to the leader's end offset"}
	}
	ans := local(leader.Epoch)
	end, epoch, ok := ans.EndOffset, ans.Epoch, !ans.Undefined()
	switch {
	case !ok:
		return DivergencePlan{TruncateTo: min(leader.EndOffset, logEndOffset), Done: true,
			Reason: fmt.Sprintf("no local epoch at or below %d: truncate to the leader's end offset", leader.Epoch)}
	case epoch != leader.Epoch:
		return DivergencePlan{TruncateTo: min(end, logEndOffset), AskEpoch: epoch,
			Reason: fmt.Sprintf("local floor epoch %d differs from the leader's %d", epoch, leader.Epoch)}
	}
	return DivergencePlan{TruncateTo: min(end, leader.EndOffset, logEndOffset), Done: true,
		Reason: fmt.Sprintf("epoch %d ends at %d here and %d on the leader", epoch, end, leader.EndOffset)}
}

// ResetAction is what a follower does after OFFSET_OUT_OF_RANGE.
type ResetAction int8

const (
	// FetchAtEnd: the leader's log covers our end; keep our log and fetch
	// from our log end offset (or from the leader's start if later: see
	// ResetPlan.FetchOffset).
	FetchAtEnd ResetAction = iota
	// TruncateToLeaderEnd: the leader's log ends below ours; truncate to
	// its end and fetch there.
	TruncateToLeaderEnd
	// StartAtLeaderStart: the leader's log starts above our end; empty our
	// log and start it at the leader's log start
	// (TruncateFullyAndStartAt).
	StartAtLeaderStart
)

func (a ResetAction) String() string {
	switch a {
	case FetchAtEnd:
		return "fetch-at-end"
	case TruncateToLeaderEnd:
		return "truncate-to-leader-end"
	case StartAtLeaderStart:
		return "start-at-leader-start"
	}
	return fmt.Sprintf("ResetAction(%d)", int8(a))
}

// ResetPlan is the follower's answer to OFFSET_OUT_OF_RANGE.
type ResetPlan struct {
	Action ResetAction
	// Offset is the truncation or start offset of the action (unused for
	// FetchAtEnd).
	Offset int64
	// FetchOffset is where the follower fetches next.
	FetchOffset int64
}

func (p ResetPlan) String() string {
	return fmt.Sprintf("%s offset=%d fetch=%d", p.Action, p.Offset, p.FetchOffset)
}

// PlanOutOfRangeReset decides what a follower does when the leader
// answered its fetch with OFFSET_OUT_OF_RANGE (Kafka's
// AbstractFetcherThread.fetchOffsetAndTruncate), from the leader's latest and earliest
// offsets and the follower's log end offset.
func PlanOutOfRangeReset(leaderEnd, leaderStart, logEndOffset int64) ResetPlan {
	switch {
	case leaderEnd < logEndOffset:
		return ResetPlan{Action: TruncateToLeaderEnd, Offset: leaderEnd, FetchOffset: leaderEnd}
	case leaderStart >= logEndOffset:
		// At equality too (Kafka fetches from its end there): a leader
		// answers out of range at its log start when it cannot vouch for
		// the follower's records below it (tierstate.ValidateFetch), and
		// starting over drops only records below the leader's log start.
		return ResetPlan{Action: StartAtLeaderStart, Offset: leaderStart, FetchOffset: leaderStart}
	}
	return ResetPlan{Action: FetchAtEnd, Offset: logEndOffset, FetchOffset: max(leaderStart, logEndOffset)}
}
