package tierstate

import (
	"fmt"
	"strings"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/internal/invariants"
	"github.com/tierlog/tierlog/internal/mutation"
)

// Phase is where a partition stands in the classic-to-diskless switch (see
// the package documentation). Phases only move forward, except that an
// operator may abort a pending seal (seal pending -> classic).
type Phase int8

const (
	// PhaseClassic: not switched. Tag 100 absent or -1. Classic produce.
	PhaseClassic Phase = iota
	// PhaseSealPending: the switch is armed (tag 100 = -2) and the leader
	// must seal its log and propose the seal. Classic produce is refused
	// (Kafka: REPLICA_NOT_AVAILABLE); followers replicate the frozen prefix.
	PhaseSealPending
	// PhaseOne: the seal S >= 0 is committed, the classic prefix [0, S) may
	// not be in remote storage yet. No diskless produce and no
	// consolidation yet: the seal commit writes no diskless leader epoch
	// (TakesDisklessRecords).
	PhaseOne
	// PhaseTwo: the leader proved the prefix is in remote storage
	// (classicPrefixInRemoteStorage, tag 103); every active replica is in
	// the ISR and any replica can lead. Diskless produce from S, stamped
	// with the E_d the flag commit wrote.
	PhaseTwo
)

func (p Phase) String() string {
	switch p {
	case PhaseClassic:
		return "classic"
	case PhaseSealPending:
		return "seal-pending"
	case PhaseOne:
		return "phase-1"
	case PhaseTwo:
		return "phase-2"
	}
	return fmt.Sprintf("Phase(%d)", int8(p))
}

// Values of classicToDisklessStartOffset (tag 100) that are not a seal.
const (
	// NoSeal: not switched (Inkless: NO_CLASSIC_TO_DISKLESS_START_OFFSET).
	// Also what an absent tag 100 means.
	NoSeal = base.UndefinedOffset
	// SealPending: switch armed, seal not committed yet (Inkless:
	// CLASSIC_TO_DISKLESS_SWITCH_PENDING).
	SealPending int64 = -2
)

// epochField is a leader epoch stored plus one, so that the zero State has
// undefined (-1) epochs and is a valid classic partition.
type epochField int32

func epochOf(e int32) epochField { return epochField(e + 1) }
func (e epochField) get() int32  { return int32(e) - 1 }

// State is the switch state of one partition: the Inkless fields of its
// PartitionRecord plus whether the partition consolidates. It
// is an immutable value: every transition returns a new State, and
// States compare with ==. The zero State is a classic, non-consolidating
// partition.
//
// Invariants (checked by validate after every transition):
//   - phase >= PhaseOne iff a seal >= 0 is held (the field stays 0 otherwise).
//   - classicPrefixInRemoteStorage iff phase == PhaseTwo.
//   - a recorded epoch R >= 0 only in PhaseTwo, and then below the
//     diskless leader epoch (the flag commit writes E_d = epoch + 1 >= R + 1).
//   - a diskless leader epoch (>= 0) and producer states only with a
//     committed seal (PhaseOne, PhaseTwo).
//   - a seal epoch (>= 0) only with a committed seal.
//   - epochs are >= -1.
type State struct {
	phase Phase
	// seal is S, the first diskless offset; set only in PhaseOne and
	// PhaseTwo. Tag 100.
	seal int64
	// producerStates is tag 101's payload (encodeProducerStates): a string
	// so that the State stays immutable and comparable.
	producerStates string
	// disklessLeaderEpoch is E_d, tag 102.
	disklessLeaderEpoch epochField
	// lastClassicLeaderEpoch is R, tag 104: the epoch of the record at
	// S-1 on the leader that asked for phase 2.
	lastClassicLeaderEpoch epochField
	// sealLineage is tag 105's payload (tierlog's, not Inkless's): the
	// sealing leader's epoch entries below the seal (seal_lineage.go),
	// empty when unknown (no record below the seal, a proposal without
	// it, an operator's seal without it).
	sealLineage string
	// consolidating is not a metadata field: the partition's topic
	// consolidates diskless records into its local log (Inkless
	// consolidation enabled and the topic diskless with remote storage).
	consolidating bool
}

// Phase returns the partition's phase.
func (s State) Phase() Phase { return s.phase }

// Seal returns classicToDisklessStartOffset (tag 100) as the metadata
// holds it: NoSeal (-1) for a classic partition, SealPending (-2) while
// the seal is pending, the committed seal S >= 0 in phases 1 and 2.
func (s State) Seal() int64 {
	switch s.phase {
	case PhaseClassic:
		return NoSeal
	case PhaseSealPending:
		return SealPending
	}
	return s.seal
}

// SealCommitted reports whether a seal S >= 0 is committed (phases 1
// and 2).
func (s State) SealCommitted() bool { return s.phase >= PhaseOne }

// ClassicPrefixInRemoteStorage returns the phase-2 flag (tag 103).
func (s State) ClassicPrefixInRemoteStorage() bool { return s.phase == PhaseTwo }

// LastClassicLeaderEpoch returns the recorded epoch R (tag 104), or
// record.UndefinedEpoch when none was recorded.
func (s State) LastClassicLeaderEpoch() int32 { return s.lastClassicLeaderEpoch.get() }

// SealEpoch returns the seal epoch: the leader epoch of the sealed record
// at S-1 as the sealing leader's log held it (the last entry of
// SealLineage), or record.UndefinedEpoch when unknown. A replica (or a
// remote copy) whose record at S-1 has another epoch holds a lineage an
// unclean election discarded, and the operator's recovery refuses to
// take its records for the prefix (CheckElectReplica, PlanStartPhaseTwo).
func (s State) SealEpoch() int32 {
	// The last entry only: the lineage may hold 64.
	if n := len(s.sealLineage) / sealLineageEntryBytes; n > 0 {
		return decodeSealLineage(s.sealLineage[(n-1)*sealLineageEntryBytes:])[0].Epoch
	}
	return base.UndefinedEpoch
}

// SealLineage returns the seal lineage (tag 105): the sealing leader's
// leader-epoch entries over its records below the seal, nil when
// unknown. It names the lineage the seal committed offset by offset
// from its first entry's start. It is tierlog's own field: Inkless
// writes no such tag, so a state it wrote has none and the operator's
// lineage checks are skipped.
func (s State) SealLineage() []epochcache.Entry { return decodeSealLineage(s.sealLineage) }

// SealLineageEpochAt returns the epoch of the sealed lineage's record at
// offset, false when the seal lineage does not cover it (unknown, or
// below its first entry).
func (s State) SealLineageEpochAt(offset int64) (int32, bool) {
	if offset >= s.seal || !s.SealCommitted() {
		return base.UndefinedEpoch, false
	}
	return sealLineageEpochAt(s.SealLineage(), offset)
}

// DisklessLeaderEpoch returns E_d (tag 102), or record.UndefinedEpoch
// (Inkless: NO_DISKLESS_LEADER_EPOCH).
func (s State) DisklessLeaderEpoch() int32 { return s.disklessLeaderEpoch.get() }

// TakesDisklessRecords reports whether diskless records may be written
// for the partition now: produced into the WAL and consolidated into a
// local log, each batch stamped with a leader epoch. True for a partition
// that never switched (born diskless, stamped 0) and in phase 2 once the
// flag commit wrote E_d; false while the seal is pending and in phase 1.
//
// Phase 1 has no diskless epoch: the seal commit writes none, and the
// epoch the flag commit writes (E_d = the leader epoch the record
// produces, github.com/aiven/inkless/pull/827) is above every classic
// and phase-1 epoch only from then on. A batch stamped earlier would
// carry a label from before the flag: stamped 0 it turns a leader's
// epoch cache 0@0 1@20 into 0@40; stamped with an E_d that an older
// controller wrote with the seal (7), the flag commit then raises E_d
// (to 8) and OffsetsForLeaderEpoch(7) ends at the seal, so a follower
// truncates its valid diskless records. That E_d is therefore not
// enough: only the flag opens the partition.
func (s State) TakesDisklessRecords() bool {
	if s.phase == PhaseClassic {
		return true
	}
	if !mutation.Disabled(mutation.Phase2Gate) {
		return s.phase == PhaseTwo && s.DisklessLeaderEpoch() >= 0
	}
	return s.SealCommitted()
}

// Consolidating reports whether the partition consolidates diskless
// records into its local log.
func (s State) Consolidating() bool { return s.consolidating }

// ProducerStates returns a copy of the producer states committed with the
// seal (tag 101); nil when there are none.
func (s State) ProducerStates() []ProducerStateEntry {
	ps, err := decodeProducerStates([]byte(s.producerStates))
	// The string was encoded by this package (validate checks it too).
	invariants.Assertf(err == nil, "corrupt producer states in a State: %v", err)
	return ps
}

// UsesRecordedEpoch reports whether the partition is in phase 2 with a
// recorded epoch R >= 0: the condition for the phase-2 rebuild
// (https://github.com/aiven/inkless/pull/857). Without R (-1: an empty
// classic prefix, or a state an older controller wrote) the upstream
// rebuild applies; the replica check runs either way (CheckReplica).
func (s State) UsesRecordedEpoch() bool {
	return s.phase == PhaseTwo && s.lastClassicLeaderEpoch.get() >= 0
}

// RunsReplicaCheck reports whether a replica of this partition runs the
// phase-2 replica check when it is new to the broker or its leader epoch
// rose (https://github.com/aiven/inkless/pull/857): consolidating and
// phase 2 (with R = -1 too: see CheckReplica).
func (s State) RunsReplicaCheck() bool { return s.consolidating && s.phase == PhaseTwo }

// WithConsolidating returns the State with the consolidating property
// set. It is configuration, not a metadata field, so it may change in any
// phase.
func (s State) WithConsolidating(consolidating bool) State {
	s.consolidating = consolidating
	return s
}

// String prints the State for logs and tests, for example
// "phase-2 seal=100 seal-lineage=1@0,2@90 recorded-epoch=2 diskless-epoch=6 producers=1 consolidating".
func (s State) String() string {
	var b strings.Builder
	b.WriteString(s.phase.String())
	if s.phase >= PhaseOne {
		fmt.Fprintf(&b, " seal=%d", s.seal)
	}
	if s.sealLineage != "" {
		fmt.Fprintf(&b, " seal-lineage=%s", formatSealLineage(s.SealLineage()))
	}
	if s.phase == PhaseTwo {
		fmt.Fprintf(&b, " recorded-epoch=%d", s.LastClassicLeaderEpoch())
	}
	if e := s.DisklessLeaderEpoch(); e != base.UndefinedEpoch {
		fmt.Fprintf(&b, " diskless-epoch=%d", e)
	}
	if n := producerStateCount(s.producerStates); n > 0 {
		fmt.Fprintf(&b, " producers=%d", n)
	}
	if s.consolidating {
		b.WriteString(" consolidating")
	}
	return b.String()
}

// validate checks the State's invariants. A State built by this package
// always passes; tests and assertions call it after every transition.
func (s State) validate() error {
	r, ed := s.LastClassicLeaderEpoch(), s.DisklessLeaderEpoch()
	switch {
	case s.phase < PhaseClassic || s.phase > PhaseTwo:
		return fmt.Errorf("unknown phase %d", s.phase)
	case s.phase >= PhaseOne && s.seal < 0:
		return fmt.Errorf("%s with negative seal %d", s.phase, s.seal)
	case s.phase < PhaseOne && s.seal != 0:
		return fmt.Errorf("%s keeps seal %d", s.phase, s.seal)
	case r < base.UndefinedEpoch || ed < base.UndefinedEpoch:
		return fmt.Errorf("epochs below -1: recorded %d, diskless %d", r, ed)
	case s.sealLineage != "" && s.phase < PhaseOne:
		return fmt.Errorf("seal lineage %s in %s", formatSealLineage(s.SealLineage()), s.phase)
	case len(s.sealLineage)%sealLineageEntryBytes != 0:
		return fmt.Errorf("seal lineage of %d bytes", len(s.sealLineage))
	case r != base.UndefinedEpoch && s.phase != PhaseTwo:
		return fmt.Errorf("recorded epoch %d in %s", r, s.phase)
	case r != base.UndefinedEpoch && ed <= r:
		return fmt.Errorf("recorded epoch %d not below diskless epoch %d", r, ed)
	case ed != base.UndefinedEpoch && s.phase < PhaseOne:
		return fmt.Errorf("diskless epoch %d in %s", ed, s.phase)
	case s.producerStates != "" && s.phase < PhaseOne:
		return fmt.Errorf("producer states in %s", s.phase)
	}
	if _, err := decodeProducerStates([]byte(s.producerStates)); err != nil {
		return err
	}
	if err := checkSealLineage(s.SealLineage(), s.seal); err != nil {
		return fmt.Errorf("seal lineage: %w", err)
	}
	return nil
}
