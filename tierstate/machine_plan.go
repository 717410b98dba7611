package tierstate

import (
	"fmt"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/remote"
)

// The rebuild's decisions, as pure functions of plain values: the
// Machine asks its sources and feeds the answers through these.

// RebuildMode says which rebuild applies to a partition.
type RebuildMode int8

const (
	// RebuildUpstream is Kafka's TierStateMachine
	// (buildRemoteLogAuxState): rebuild from
	// the remote segment holding the record just below the source's
	// local log start, and start the local log after that segment.
	RebuildUpstream RebuildMode = iota
	// RebuildPhaseTwo is Inkless's phase-2 rebuild
	// (https://github.com/aiven/inkless/pull/857):
	// rebuild from the segment holding seal - 1 in the recorded epoch R,
	// whatever the source's local log start, and start the local log at
	// the seal.
	RebuildPhaseTwo
)

func (m RebuildMode) String() string {
	switch m {
	case RebuildUpstream:
		return "upstream"
	case RebuildPhaseTwo:
		return "phase-2"
	}
	return fmt.Sprintf("RebuildMode(%d)", int8(m))
}

// ModeFor returns the rebuild of a partition in switch state s: phase 2
// with a recorded epoch R >= 0 uses RebuildPhaseTwo; every other partition
// (classic, phase 1, phase 2 with R = -1 from an older controller or an
// operator's start-phase-2) keeps the upstream rebuild.
//
// That is the mode of a fetch below the seal; Rebuild chooses with
// ModeForFetch, which also weighs the fetch offset.
func ModeFor(s State) RebuildMode {
	if s.UsesRecordedEpoch() {
		return RebuildPhaseTwo
	}
	return RebuildUpstream
}

// ModeForFetch returns the rebuild for a fetch at fetchOffset that the
// source answered OFFSET_MOVED_TO_TIERED_STORAGE: the phase-2 rebuild only
// when ModeFor says so and fetchOffset is below the seal; the upstream
// rebuild at or above the seal, whatever the state.
//
// The phase-2 rebuild restores the classic prefix and always restarts the
// log at the seal. A redirect at or above the seal means the source's
// local (WAL) start has moved past the seal: the records the fetch needs
// are consolidated diskless records, tiered in the diskless epoch, and
// the recorded epoch says nothing about them. Restarting such a replica at
// the seal would throw away its consolidated suffix, and its next fetch,
// at the seal, would be redirected and rebuilt to the seal again: the
// replica would never progress. The upstream rebuild starts the log past
// the source's local start instead (docs/switch.md, "Rebuilds after the
// WAL start passed the seal").
func ModeForFetch(s State, fetchOffset int64) RebuildMode {
	if s.UsesRecordedEpoch() && fetchOffset < s.Seal() {
		return RebuildPhaseTwo
	}
	return RebuildUpstream
}

// OffsetAndEpoch is an offset and the leader epoch of the record there
// (Kafka: OffsetAndEpoch). Printed as epoch@offset. The same type as
// epochcache.OffsetAndEpoch and log.OffsetAndEpoch.
type OffsetAndEpoch = epochcache.OffsetAndEpoch

// EpochEndOffset is one partition's OffsetsForLeaderEpoch answer: the
// largest epoch <= the requested one that the leader knows and its
// exclusive end offset, or record.UndefinedEpoch and record.UndefinedOffset
// when it has none (Kafka: LeaderEpochFileCache.endOffsetFor). The same
// type as epochcache.EpochEndOffset and truncation.EpochEndOffset.
type EpochEndOffset = epochcache.EpochEndOffset

// NeedsEpochQuery reports whether the upstream rebuild asks the leader
// OffsetsForLeaderEpoch(localStart.Epoch - 1) to find the epoch of the
// record at localStart.Offset - 1 (as Kafka's
// TierStateMachine.buildRemoteLogAuxState does). An epoch 0 needs no
// question, nor does an unknown (negative) one: there is no earlier epoch
// to ask about, and the lookup in that epoch decides.
func NeedsEpochQuery(localStart OffsetAndEpoch) bool { return localStart.Epoch > 0 }

// UpstreamTarget is Kafka's target choice in
// TierStateMachine.buildRemoteLogAuxState: the record just below the
// leader's local log start, and its epoch. answer is the leader's reply to
// OffsetsForLeaderEpoch(localStart.Epoch - 1), ignored unless
// NeedsEpochQuery. An answer ending after the target means the target lies
// in the answered epoch (epochs without records are skipped: cache
// {0:20, 1:85, 3:90, 4:98} with local start 90 asks for 2, gets (1, 90),
// and looks in epoch 1); otherwise the target is in the local start's
// epoch.
func UpstreamTarget(localStart OffsetAndEpoch, answer EpochEndOffset) OffsetAndEpoch {
	target := OffsetAndEpoch{Offset: localStart.Offset - 1, Epoch: localStart.Epoch}
	if NeedsEpochQuery(localStart) && answer.EndOffset > target.Offset {
		target.Epoch = answer.Epoch
	}
	return target
}

// PhaseTwoTarget is the target of the phase-2 rebuild
// (https://github.com/aiven/inkless/pull/857): the record at seal - 1 in
// the recorded epoch. ok is false unless s uses the recorded epoch and has
// a record below the seal.
func PhaseTwoTarget(s State) (target OffsetAndEpoch, ok bool) {
	if !s.UsesRecordedEpoch() || s.Seal() < 1 {
		return OffsetAndEpoch{Offset: base.UndefinedOffset, Epoch: base.UndefinedEpoch}, false
	}
	return OffsetAndEpoch{Offset: s.Seal() - 1, Epoch: s.LastClassicLeaderEpoch()}, true
}

// RestorePlan is what a rebuild installs from the segment it found.
type RestorePlan struct {
	// NextOffset is where the local log restarts (its log end, local log
	// start and high watermark) and where the fetch continues.
	NextOffset int64
	// Epochs are the checkpoint's entries that start below NextOffset.
	Epochs []epochcache.Entry
	// Dropped are the checkpoint's entries at or above NextOffset: in
	// phase 2 the epochs past the seal (a discarded classic tail).
	Dropped []epochcache.Entry
	// RestoreSnapshot: the segment's producer snapshot (taken at its end
	// + 1) is the producer state at NextOffset.
	RestoreSnapshot bool
}

// PlanRestore decides the restore from the segment seg found for target
// and the segment's leader-epoch checkpoint (the leader's cache before
// the segment end):
//
//	           next offset        epochs kept         producer snapshot
//	upstream   seg.EndOffset + 1  all (< next)        restored
//	phase 2    seal               starting < seal     only if seg.EndOffset == seal - 1
//
// In phase 2 the segment may cross the seal (an unclean election before the
// switch discarded its records past the seal): its records below the seal
// are the committed prefix, because each epoch has one leader. Sealing
// aborted every undecided transaction, so without the snapshot the empty
// producer state at the seal is right.
//
// The kept entries must map target.Offset to target.Epoch, the epoch the
// segment was found in; otherwise the checkpoint is not this segment's
// history (ErrRemoteEpochsInconsistent) and nothing is restored.
func PlanRestore(mode RebuildMode, seal int64, target OffsetAndEpoch, seg remote.SegmentMetadata,
	checkpoint []epochcache.Entry) (RestorePlan, error) {
	var p RestorePlan
	switch mode {
	case RebuildPhaseTwo:
		p.NextOffset = seal
		p.RestoreSnapshot = seg.EndOffset == seal-1
	default:
		p.NextOffset = seg.EndOffset + 1
		p.RestoreSnapshot = true
	}
	if target.Offset < seg.HeldStartOffset() || target.Offset > seg.EndOffset || p.NextOffset <= target.Offset {
		return RestorePlan{}, fmt.Errorf("%w: segment [%d, %d] does not hold the target %s below the next offset %d",
			ErrRemoteEpochsInconsistent, seg.StartOffset, seg.EndOffset, target, p.NextOffset)
	}
	for _, e := range checkpoint {
		if e.StartOffset < p.NextOffset {
			p.Epochs = append(p.Epochs, e)
		} else {
			p.Dropped = append(p.Dropped, e)
		}
	}
	if got, ok := epochcache.EpochForOffsetIn(p.Epochs, target.Offset); !ok || got != target.Epoch {
		return RestorePlan{}, fmt.Errorf("%w: checkpoint %s maps %d to epoch %s, the segment was found in epoch %d",
			ErrRemoteEpochsInconsistent, epochcache.FormatEntries(checkpoint), target.Offset, formatEpoch(got, ok), target.Epoch)
	}
	return p, nil
}

func formatEpoch(epoch int32, ok bool) string {
	if !ok {
		return "none"
	}
	return fmt.Sprint(epoch)
}

// undefinedEpochEndOffset is the OffsetsForLeaderEpoch answer "no such
// epoch".
var undefinedEpochEndOffset = epochcache.UndefinedEpochEndOffset
