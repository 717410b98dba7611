package consolidate

import (
	"fmt"

	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/internal/mutation"
	"github.com/tierlog/tierlog/tierstate"
)

// The pruner's decisions (Inkless's ConsolidatedDisklessLogPruner), as
// pure functions.
//
//	offset           0              S-1  S                h       LEO
//	remote storage   [ classic prefix  ][ consolidated ... ]
//	local log                           [ consolidated ............ )
//	WAL              W ...                   [ batches ..............
//	prune at h:                                  batches with last offset <= h go,
//	                                             W -> min(first kept batch, h+1)
//
// A switched partition's first prune waits until remote storage holds
// S-1 (the floor starts there), because until then a leader that loses
// its log needs W at or below the seal to rebuild. Every later prune
// waits for h to reach the floor, which follows the WAL start each prune
// returns.

// PruneInput is what DecidePrune needs for one partition the broker
// leads.
type PruneInput struct {
	// State is the partition's switch state.
	State tierstate.State
	// HighestOffsetInRemoteStorage is h, the leader's log's inclusive
	// highest offset known copied (-1 when none is known).
	HighestOffsetInRemoteStorage int64
	// LogEndOffset is the leader's local log end.
	LogEndOffset int64
	// Floor is the partition's prune floor, NoFloor when unset.
	Floor int64
	// AwaitingRebuild: the leader was recreated (or lost its log) and has
	// not rebuilt it yet.
	AwaitingRebuild bool
	// HighestNotInRemoteStorage: the remote log metadata lists no
	// COPY_SEGMENT_FINISHED segment holding h in the leader's epoch at h
	// (Pruner, with PrunerOptions.RemoteSegments). The log's h was
	// installed from metadata whose segments were deleted since: the
	// highest offset of an epoch in the metadata is never lowered (Kafka's
	// highestOffsetForEpoch), and a leader of another lineage deletes the
	// segments outside its own (the epoch cleanup), which an unclean
	// election can make the partition's lineage again.
	HighestNotInRemoteStorage bool
}

// NoFloor is the floor of a partition whose consolidation has not
// started: a switched partition is never pruned then.
const NoFloor = base.UndefinedOffset

// PruneReason says why DecidePrune did or did not prune.
type PruneReason int8

const (
	// PruneAtRemoteEnd: prune the WAL up to h.
	PruneAtRemoteEnd PruneReason = iota
	// SkipNotConsolidating: the partition does not consolidate.
	SkipNotConsolidating
	// SkipSealPending: the switch is armed; nothing is diskless yet.
	SkipSealPending
	// SkipClassic: the partition is classic (no WAL).
	SkipClassic
	// SkipNothingRemote: h < 0.
	SkipNothingRemote
	// SkipAwaitingRebuild: a recreated leader; its h says nothing until
	// the rebuild.
	SkipAwaitingRebuild
	// SkipStaleRemoteProgress: h >= LEO, remote progress the log does
	// not back (a truncation left it behind); pruning at h could delete
	// diskless batches no one consolidated (github.com/aiven/inkless/pull/857).
	SkipStaleRemoteProgress
	// SkipNoFloor: a switched partition whose consolidation has not
	// started.
	SkipNoFloor
	// SkipBelowFloor: h has not reached the floor (S-1 for the first
	// prune, then the WAL start the last prune returned).
	SkipBelowFloor
	// SkipHighestNotInRemoteStorage: remote storage no longer holds h
	// (PruneInput.HighestNotInRemoteStorage); the copy task copies the
	// records again and a later h is trusted.
	SkipHighestNotInRemoteStorage
)

func (r PruneReason) String() string {
	switch r {
	case PruneAtRemoteEnd:
		return "prune"
	case SkipNotConsolidating:
		return "skip: not consolidating"
	case SkipSealPending:
		return "skip: seal pending"
	case SkipClassic:
		return "skip: classic"
	case SkipNothingRemote:
		return "skip: nothing in remote storage"
	case SkipAwaitingRebuild:
		return "skip: awaiting rebuild"
	case SkipStaleRemoteProgress:
		return "skip: remote progress at or past the log end"
	case SkipNoFloor:
		return "skip: no floor"
	case SkipBelowFloor:
		return "skip: below floor"
	case SkipHighestNotInRemoteStorage:
		return "skip: remote storage does not hold h"
	}
	return fmt.Sprintf("PruneReason(%d)", int8(r))
}

// PruneDecision is DecidePrune's answer.
type PruneDecision struct {
	Reason PruneReason
	// HighestTieredOffset is the prune request's offset (h) when Reason is
	// PruneAtRemoteEnd, -1 otherwise.
	HighestTieredOffset int64
}

// Prune reports whether to send a prune request.
func (d PruneDecision) Prune() bool { return d.Reason == PruneAtRemoteEnd }

// DecidePrune decides whether to prune one partition's WAL, in this order:
// consolidating, not seal-pending, not classic; h >= 0; not awaiting a
// rebuild; h < LEO; remote storage holds h; a born-diskless partition is then pruned at h, a
// switched one only once its floor is set and h >= floor.
func DecidePrune(in PruneInput) PruneDecision {
	skip := func(r PruneReason) PruneDecision {
		return PruneDecision{Reason: r, HighestTieredOffset: base.UndefinedOffset}
	}
	s, h := in.State, in.HighestOffsetInRemoteStorage
	switch {
	case !s.Consolidating():
		return skip(SkipNotConsolidating)
	case s.Phase() == tierstate.PhaseSealPending:
		return skip(SkipSealPending)
	case s.Phase() == tierstate.PhaseClassic && !bornDiskless(s):
		return skip(SkipClassic)
	case h < 0:
		return skip(SkipNothingRemote)
	case in.AwaitingRebuild:
		return skip(SkipAwaitingRebuild)
	case h >= in.LogEndOffset:
		return skip(SkipStaleRemoteProgress)
	case in.HighestNotInRemoteStorage && !mutation.Disabled(mutation.PruneRemoteHolds):
		return skip(SkipHighestNotInRemoteStorage)
	}
	if s.SealCommitted() && !mutation.Disabled(mutation.PruneFloor) {
		switch {
		case in.Floor == NoFloor:
			return skip(SkipNoFloor)
		case h < in.Floor:
			return skip(SkipBelowFloor)
		}
	}
	return PruneDecision{Reason: PruneAtRemoteEnd, HighestTieredOffset: h}
}

// bornDiskless reports whether a partition without a seal is diskless
// from birth. tierstate.State has no field for it: a consolidating
// partition with no seal is taken as born diskless.
func bornDiskless(s tierstate.State) bool { return s.Consolidating() && s.Seal() == tierstate.NoSeal }

// InitialFloor is the floor a switched partition gets when its
// consolidation starts: S-1, so the first prune waits until remote storage
// holds the whole classic prefix, and a kept phase-2 leader at LEO == S
// with h == S-1 is pruned at S-1 (W moves to S). A seal of 0 has no
// classic prefix: floor 0. A born-diskless partition needs no floor
// (NoFloor).
func InitialFloor(seal int64) int64 {
	switch {
	case seal > 0:
		return seal - 1
	case seal == 0:
		return 0
	}
	return NoFloor
}

// RaiseFloor returns the floor after a prune returned WAL start w: the
// floor rises to w and never falls (a lower w is ignored, lowered true,
// and deserves a warning: the control plane answered with a WAL start
// below an earlier one).
func RaiseFloor(floor, w int64) (newFloor int64, lowered bool) {
	if w < floor {
		return floor, true
	}
	return w, false
}
