package tierstate

import (
	"fmt"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/internal/invariants"
)

// FromPartitionRecord builds the State of a partition from the Inkless
// fields of its full PartitionRecord (a new partition or a metadata
// snapshot): an absent field takes its default (tag 100 -1, tag 101
// none, tags 102 and 104 -1, tag 103 false, tag 105 unknown). The
// result is not consolidating; see WithConsolidating.
//
// Fields that contradict each other are a *TagError: a tag 100 below -2
// (ErrInvalidSeal), epochs below -1 or a seal lineage out of order or
// past the seal (ErrInvalidEpoch), producer states, a
// diskless epoch, a seal lineage or the phase-2 flag without a committed
// seal (ErrSealNotCommitted), a recorded epoch >= 0 without the flag
// (ErrRecordedEpochNotWithFlag) or not below the diskless epoch
// (ErrInvalidRecordedEpoch). An empty producer-state list is the same as
// none.
func FromPartitionRecord(t Tags) (State, error) {
	var s State
	if f := t.ClassicToDisklessStartOffset; f.Present {
		switch {
		case f.Value < SealPending:
			return State{}, &TagError{Tag: TagClassicToDisklessStartOffset, Reason: ErrInvalidSeal, Detail: fmt.Sprint(f.Value)}
		case f.Value == SealPending:
			s.phase = PhaseSealPending
		case f.Value >= 0:
			s.phase, s.seal = PhaseOne, f.Value
		}
	}
	committed := s.phase == PhaseOne
	if f := t.ProducerStates; f.Present && len(f.Value) > 0 {
		if !committed {
			return State{}, &TagError{Tag: TagProducerStates, Reason: ErrSealNotCommitted, Detail: s.phase.String()}
		}
		s.producerStates = encodeProducerStates(f.Value)
	}
	if f := t.DisklessLeaderEpoch; f.Present {
		switch {
		case f.Value < base.UndefinedEpoch:
			return State{}, &TagError{Tag: TagDisklessLeaderEpoch, Reason: ErrInvalidEpoch, Detail: fmt.Sprint(f.Value)}
		case f.Value >= 0 && !committed:
			return State{}, &TagError{Tag: TagDisklessLeaderEpoch, Reason: ErrSealNotCommitted, Detail: s.phase.String()}
		}
		s.disklessLeaderEpoch = epochOf(f.Value)
	}
	if f := t.ClassicPrefixInRemoteStorage; f.Present && f.Value {
		if !committed {
			return State{}, &TagError{Tag: TagClassicPrefixInRemoteStorage, Reason: ErrSealNotCommitted, Detail: s.phase.String()}
		}
		s.phase = PhaseTwo
	}
	if f := t.LastClassicLeaderEpoch; f.Present {
		switch {
		case f.Value < base.UndefinedEpoch:
			return State{}, &TagError{Tag: TagLastClassicLeaderEpoch, Reason: ErrInvalidEpoch, Detail: fmt.Sprint(f.Value)}
		case f.Value >= 0 && s.phase != PhaseTwo:
			return State{}, &TagError{Tag: TagLastClassicLeaderEpoch, Reason: ErrRecordedEpochNotWithFlag, Detail: s.phase.String()}
		}
		if ed := s.DisklessLeaderEpoch(); f.Value >= 0 && ed <= f.Value {
			return State{}, &TagError{Tag: TagLastClassicLeaderEpoch, Reason: ErrInvalidRecordedEpoch,
				Detail: fmt.Sprintf("%d not below diskless epoch %d", f.Value, ed)}
		}
		s.lastClassicLeaderEpoch = epochOf(f.Value)
	}
	if f := t.SealLineage; f.Present && len(f.Value) > 0 {
		if !s.SealCommitted() {
			return State{}, &TagError{Tag: TagSealLineage, Reason: ErrSealNotCommitted, Detail: s.phase.String()}
		}
		if err := checkSealLineage(f.Value, s.seal); err != nil {
			return State{}, &TagError{Tag: TagSealLineage, Reason: ErrInvalidEpoch, Detail: err.Error()}
		}
		s.sealLineage = encodeSealLineage(f.Value)
	}
	invariants.Assertf(s.validate() == nil, "FromPartitionRecord built an invalid state: %v", s.validate())
	return s, nil
}

// Tags returns the fields of the State's full PartitionRecord (Kafka's
// toRecord): defaults are omitted, so FromPartitionRecord(s.Tags()) gives
// s back (but not consolidating).
func (s State) Tags() Tags {
	var t Tags
	if s.phase != PhaseClassic {
		t.ClassicToDisklessStartOffset = Some(s.Seal())
	}
	if s.producerStates != "" {
		t.ProducerStates = Some(s.ProducerStates())
	}
	if e := s.DisklessLeaderEpoch(); e != base.UndefinedEpoch {
		t.DisklessLeaderEpoch = Some(e)
	}
	if s.phase == PhaseTwo {
		t.ClassicPrefixInRemoteStorage = Some(true)
	}
	if e := s.LastClassicLeaderEpoch(); e != base.UndefinedEpoch {
		t.LastClassicLeaderEpoch = Some(e)
	}
	if s.sealLineage != "" {
		t.SealLineage = Some(s.SealLineage())
	}
	return t
}

// ChangeTags returns the change record that takes a partition from one
// State to another: the fields that differ, with an explicit -1 in tag
// 100 for an abort (alone: a pending switch holds no other field). Applying it, from.ApplyChange(ChangeTags(from, to)),
// gives to (consolidating aside) whenever to is a State some operation
// reaches from from. Identical States give an empty record; Kafka still
// writes one when it only bumps the leader epoch (arm, re-arm).
func ChangeTags(from, to State) Tags {
	var t Tags
	if from.Seal() != to.Seal() {
		t.ClassicToDisklessStartOffset = Some(to.Seal())
	}
	if to.phase < PhaseOne {
		// Before the commit the other fields are all unset (validate).
		return t
	}
	if from.producerStates != to.producerStates {
		t.ProducerStates = Some(to.ProducerStates())
		if t.ProducerStates.Value == nil {
			t.ProducerStates.Value = []ProducerStateEntry{}
		}
	}
	if from.disklessLeaderEpoch != to.disklessLeaderEpoch {
		t.DisklessLeaderEpoch = Some(to.DisklessLeaderEpoch())
	}
	if from.ClassicPrefixInRemoteStorage() != to.ClassicPrefixInRemoteStorage() {
		t.ClassicPrefixInRemoteStorage = Some(to.ClassicPrefixInRemoteStorage())
	}
	if from.lastClassicLeaderEpoch != to.lastClassicLeaderEpoch {
		t.LastClassicLeaderEpoch = Some(to.LastClassicLeaderEpoch())
	}
	if to.sealLineage != clippedLineage(from, to.seal) {
		// A record without tag 105 leaves the lineage's entries below
		// the new seal (ApplyChange); tag 105 goes with tag 100, even
		// when the seal stays (a re-seal that learns its lineage).
		t.ClassicToDisklessStartOffset = Some(to.Seal())
		t.SealLineage = Some(to.SealLineage())
		if t.SealLineage.Value == nil {
			t.SealLineage.Value = []epochcache.Entry{}
		}
	}
	return t
}

// ApplyChange merges a PartitionChangeRecord's Inkless fields into the
// State: an absent field keeps its value, a present one (including an
// explicit -1) replaces it. Kafka's merge applies any record verbatim,
// and with a negative tag 100 drops tags 101, 102 and 104
// (https://github.com/aiven/inkless/pull/857 added 104; 105 is
// tierlog's); ApplyChange
// accepts a negative tag 100 only before a seal is committed, when none
// of those is set, so an undo has nothing to drop here. An explicit -1
// on a pending switch is the abort, and leaves the State AbortSwitch
// gives (classic, not consolidating). ApplyChange also refuses, as a
// *TransitionError with the State unchanged, a record that no switch
// operation writes:
//
//	tag 100 < -2                                ErrInvalidSeal
//	tag 100 = -1 or -2 after the commit         ErrSealCommitted
//	tag 100 = -1 or -2 with tags 101..105       ErrConflictingTags
//	tag 105 changed without tag 100             ErrConflictingTags
//	tag 105 changing a known one, seal kept     ErrConflictingTags
//	tag 100 >= 0 on a classic partition         ErrNotSwitching (arm first)
//	tag 100 above the committed seal            ErrSealIncrease
//	tag 100 changing a phase-2 seal             ErrInPhaseTwo
//	tag 101 (not empty), 102 >= 0 in a phase
//	without a committed seal                    ErrSealNotCommitted
//	tag 103 = true before the seal's record     ErrSealNotCommitted
//	tag 103 = false in phase 2                  ErrPhaseBackwards
//	tags 102, 104 < -1                          ErrInvalidEpoch
//	tag 105 out of order or past the seal       ErrInvalidEpoch
//	tag 105 not empty without a committed seal  ErrSealNotCommitted
//	tag 102 below the current E_d               ErrDisklessEpochDecrease
//	tag 104 changed except with the flag        ErrRecordedEpochNotWithFlag
//	R >= 0 not below the resulting E_d          ErrInvalidRecordedEpoch
//
// Rewriting a field with its current value is always accepted. The
// committed seal may fall (operator re-seal, start-phase-2) but never
// rise, and the diskless epoch never falls.
func (s State) ApplyChange(t Tags) (State, error) {
	n := s
	refusef := func(reason error, format string, args ...any) (State, error) {
		return s, refuse(OpApplyChange, s.phase, t.phaseAfter(s), reason, format, args...)
	}
	if f := t.ClassicToDisklessStartOffset; f.Present {
		v := f.Value
		switch {
		case v < SealPending:
			return refusef(ErrInvalidSeal, "tag 100 = %d", v)
		case v < 0:
			if s.SealCommitted() {
				return refusef(ErrSealCommitted, "tag 100 = %d with seal %d committed", v, s.seal)
			}
			if t.ProducerStates.Present || t.DisklessLeaderEpoch.Present ||
				t.ClassicPrefixInRemoteStorage.Present || t.LastClassicLeaderEpoch.Present || t.SealLineage.Present {
				return refusef(ErrConflictingTags, "record %s", t)
			}
			// 101, 102 and 104 exist only with a committed seal
			// (validate), so nothing is dropped.
			invariants.Assertf(s.producerStates == "" && s.DisklessLeaderEpoch() == base.UndefinedEpoch &&
				s.LastClassicLeaderEpoch() == base.UndefinedEpoch && s.sealLineage == "", "switch fields without a committed seal: %s", s)
			switch {
			case v == SealPending:
				n = State{phase: PhaseSealPending, consolidating: s.consolidating}
			case s.phase == PhaseSealPending:
				n = s.undone() // the abort
			default:
				n = s // an explicit -1 on a classic partition rewrites it
			}
			return n, nil
		case s.phase == PhaseClassic:
			return refusef(ErrNotSwitching, "tag 100 = %d without a pending seal", v)
		case s.SealCommitted() && v > s.seal:
			return refusef(ErrSealIncrease, "tag 100 = %d above committed seal %d", v, s.seal)
		case s.phase == PhaseTwo && v != s.seal:
			return refusef(ErrInPhaseTwo, "tag 100 = %d changes seal %d", v, s.seal)
		}
		if n.phase == PhaseSealPending {
			n.phase = PhaseOne
		}
		n.seal = v
	}
	if f := t.ProducerStates; f.Present {
		enc := encodeProducerStates(f.Value)
		if enc != n.producerStates && !n.SealCommitted() {
			return refusef(ErrSealNotCommitted, "tag 101 with %d producers in %s", len(f.Value), n.phase)
		}
		n.producerStates = enc
	}
	if f := t.DisklessLeaderEpoch; f.Present {
		switch {
		case f.Value < base.UndefinedEpoch:
			return refusef(ErrInvalidEpoch, "tag 102 = %d", f.Value)
		case f.Value < n.DisklessLeaderEpoch():
			return refusef(ErrDisklessEpochDecrease, "tag 102 = %d below %d", f.Value, n.DisklessLeaderEpoch())
		case f.Value >= 0 && !n.SealCommitted():
			return refusef(ErrSealNotCommitted, "tag 102 = %d in %s", f.Value, n.phase)
		}
		n.disklessLeaderEpoch = epochOf(f.Value)
	}
	settingFlag := false
	if f := t.ClassicPrefixInRemoteStorage; f.Present {
		switch {
		case !f.Value && s.phase == PhaseTwo:
			return refusef(ErrPhaseBackwards, "tag 103 = false")
		case f.Value && !s.SealCommitted():
			// The flag follows the seal's own record (the controller
			// refuses the phase-2 request before the seal commits).
			return refusef(ErrSealNotCommitted, "tag 103 = true in %s", s.phase)
		case f.Value && s.phase == PhaseOne:
			n.phase, settingFlag = PhaseTwo, true
		}
	}
	if f := t.LastClassicLeaderEpoch; f.Present {
		switch {
		case f.Value < base.UndefinedEpoch:
			return refusef(ErrInvalidEpoch, "tag 104 = %d", f.Value)
		case f.Value == s.LastClassicLeaderEpoch():
		case !settingFlag:
			return refusef(ErrRecordedEpochNotWithFlag, "tag 104 = %d (was %d) without setting tag 103",
				f.Value, s.LastClassicLeaderEpoch())
		}
		n.lastClassicLeaderEpoch = epochOf(f.Value)
	}
	if f := t.SealLineage; f.Present {
		// The seal lineage belongs to the seal: only a record that
		// writes the seal (its commit, a re-seal, a start-phase-2) sets
		// it.
		enc := encodeSealLineage(f.Value)
		switch {
		case enc == s.sealLineage:
		case !t.ClassicToDisklessStartOffset.Present:
			return refusef(ErrConflictingTags, "tag 105 = %s (was %s) without tag 100",
				formatSealLineage(f.Value), formatSealLineage(s.SealLineage()))
		case enc != "" && !n.SealCommitted():
			return refusef(ErrSealNotCommitted, "tag 105 = %s in %s", formatSealLineage(f.Value), n.phase)
		case s.sealLineage != "" && s.SealCommitted() && n.seal == s.seal:
			// The records below a seal do not change while it stays.
			return refusef(ErrConflictingTags, "tag 105 = %s changes the lineage %s of seal %d",
				formatSealLineage(f.Value), formatSealLineage(s.SealLineage()), s.seal)
		}
		if err := checkSealLineage(f.Value, n.seal); err != nil {
			return refusef(ErrInvalidEpoch, "tag 105 = %s: %v", formatSealLineage(f.Value), err)
		}
		n.sealLineage = enc
	} else {
		// A lowered seal without its lineage (a record Inkless's
		// controller wrote) keeps the sealed lineage's entries below it.
		n.sealLineage = clippedLineage(s, n.seal)
	}
	if r, ed := n.LastClassicLeaderEpoch(), n.DisklessLeaderEpoch(); r >= 0 && ed <= r {
		// The flag commit writes E_d = leader epoch + 1 and R <= leader epoch.
		return refusef(ErrInvalidRecordedEpoch, "recorded epoch %d not below diskless epoch %d", r, ed)
	}
	invariants.Assertf(n.validate() == nil, "ApplyChange(%s) on %s built an invalid state: %v", t, s, n.validate())
	return n, nil
}

// phaseAfter is the phase a change record aims at, for error reports.
func (t Tags) phaseAfter(s State) Phase {
	p := s.phase
	if f := t.ClassicToDisklessStartOffset; f.Present {
		switch {
		case f.Value == SealPending:
			p = PhaseSealPending
		case f.Value < 0:
			p = PhaseClassic
		case p < PhaseOne:
			p = PhaseOne
		}
	}
	if f := t.ClassicPrefixInRemoteStorage; f.Present {
		if f.Value {
			p = PhaseTwo
		} else if p == PhaseTwo {
			p = PhaseOne
		}
	}
	return p
}

// clippedLineage is s's seal lineage below seal, encoded: what a record
// lowering the seal without tag 105 leaves.
func clippedLineage(s State, seal int64) string {
	if s.sealLineage == "" {
		return ""
	}
	return encodeSealLineage(clipSealLineage(s.SealLineage(), seal))
}
