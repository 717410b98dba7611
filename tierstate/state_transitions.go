package tierstate

import (
	"math"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/internal/invariants"
	"github.com/tierlog/tierlog/internal/mutation"
)

// The switch operations (Inkless's switch protocol,
// https://github.com/aiven/inkless/pull/827 and
// https://github.com/aiven/inkless/pull/855). Each is a pure decision: it
// returns the State the controller commits, or a *TransitionError (the
// State is unchanged and no record is written). ChangeTags gives the change
// record of an accepted transition.
//
//	            arm (operator sets diskless.enable)
//	  classic ─────────────────────────> seal pending ──┐ arm, re-arm (operator -2)
//	     ^  <─────────────────────────────    │  │ <────┘
//	     │        abort (operator -1)         │  │
//	     │                       commit-seal  │  │ reseal (operator S)
//	     │                 (InitDisklessLog)  v  v
//	     │                                  phase 1 ──┐ reseal (S' <= S)
//	     │                                    │  │ <──┘
//	     │            set-classic-prefix-flag │  │ start-phase-2 (S' <= S, operator)
//	     │    (SetClassicPrefixInRemoteStorage) v  v
//	     x  (no way back)                     phase 2 ──┐ set-classic-prefix-flag,
//	                                                 <──┘ same seal: no change
//
// Leader, ISR and reassignment changes that the same records carry are
// the controller's; this package decides only the switch fields.
//
// Undoing the switch. The operator's override (`kafka-topic-switch.sh
// seal`, AlterDisklessSwitch) undoes it with a negative seal: -1 aborts
// (AbortSwitch), -2 re-arms (RearmSwitch). Inkless accepts both only while
// the seal is pending and refuses them once a seal is committed, because
// diskless records may exist past it and consumers could move backwards
// (docs/inkless/CLASSIC_TO_DISKLESS_SWITCH.md of
// https://github.com/aiven/inkless, "Operator override of the seal
// offset", as published since the AlterDisklessSwitch tooling; an earlier
// draft allowed both after the commit). So:
//
//	phase          abort (-1)                re-arm (-2)
//	classic        ErrNotSwitching           ErrNotSwitching
//	seal pending   -> classic                -> seal pending (no field changes)
//	phase 1        ErrSealCommitted          ErrSealCommitted
//	phase 2        ErrSealCommitted          ErrSealCommitted
//
// Both refusals are *TransitionErrors whose From names the phase. An undo
// never drops a recorded epoch: R (tag 104), like E_d and the producer
// states, exists only with a committed seal, and no undo is accepted
// then (Kafka's merge drops tags 101, 102 and 104 with a negative tag
// 100, https://github.com/aiven/inkless/pull/857 adding 104; here there is
// nothing left to drop, see ApplyChange).

// Operation names, as TransitionError.Op reports them.
const (
	OpArm              = "arm"
	OpAbort            = "abort"
	OpRearm            = "rearm"
	OpCommitSeal       = "commit-seal"
	OpReseal           = "reseal"
	OpSetClassicPrefix = "set-classic-prefix-flag"
	OpStartPhaseTwo    = "start-phase-2"
	OpElectReplica     = "elect-replica"
	OpApplyChange      = "apply-change"
)

// ArmSwitch marks the seal pending (tag 100 = -2): the controller does it
// for every partition when diskless.enable becomes true, and the operator
// re-arms a pending switch with `kafka-topic-switch.sh seal -2`. Kafka also
// bumps the leader epoch in the same record, so the leader seals. Allowed
// from classic and seal pending; refused with ErrSealCommitted once a seal
// is committed.
func (s State) ArmSwitch() (State, error) {
	if s.SealCommitted() {
		return s, refuse(OpArm, s.phase, PhaseSealPending, ErrSealCommitted, "seal %d", s.seal)
	}
	return s.checked(State{phase: PhaseSealPending, consolidating: s.consolidating}), nil
}

// AbortSwitch returns a pending switch to classic (operator `seal -1`,
// written as an explicit tag 100 = -1; a pending switch has no tag 101,
// 102 or 104 for it to drop). Refused with ErrSealCommitted after the commit and with
// ErrNotSwitching on a classic partition (nothing to abort).
//
// The aborted partition is classic and not consolidating [INF]: Inkless
// says the abort "reverts the partition to classic", and a classic State
// that kept consolidating is a born-diskless partition to every decision
// downstream (the leader would consolidate from its high watermark,
// followers would leave the classic fetcher, the pruner would prune it as
// born diskless). Arming the switch again (ArmSwitch on the topic's
// diskless.enable) starts from classic like the first time; the broker
// takes consolidating from the State it replays, so it must not set it
// again from a topic configuration the abort left on.
func (s State) AbortSwitch() (State, error) {
	switch s.phase {
	case PhaseClassic:
		return s, refuse(OpAbort, s.phase, PhaseClassic, ErrNotSwitching, "")
	case PhaseOne, PhaseTwo:
		return s, refuse(OpAbort, s.phase, PhaseClassic, ErrSealCommitted, "seal %d", s.seal)
	}
	return s.checked(s.undone()), nil
}

// undone is the classic State an abort leaves: no switch field, and not
// consolidating (AbortSwitch).
func (s State) undone() State {
	n := State{consolidating: s.consolidating}
	if !mutation.Disabled(mutation.UndoLeavesDiskless) {
		n.consolidating = false
	}
	return n
}

// RearmSwitch is the operator's `kafka-topic-switch.sh seal -2`: a
// pending switch stays pending, and the controller re-sets the leader in
// the same record so that the leader epoch rises and the leader seals
// again. No switch field changes (the State is returned as it is).
// Unlike ArmSwitch, which the controller runs when diskless.enable turns
// on, the override is refused on a classic partition (ErrNotSwitching:
// nothing to re-arm) and, like the abort, once a seal is committed
// (ErrSealCommitted).
func (s State) RearmSwitch() (State, error) {
	switch s.phase {
	case PhaseClassic:
		return s, refuse(OpRearm, s.phase, PhaseSealPending, ErrNotSwitching, "")
	case PhaseOne, PhaseTwo:
		return s, refuse(OpRearm, s.phase, PhaseSealPending, ErrSealCommitted, "seal %d", s.seal)
	}
	return s.ArmSwitch()
}

// SealProposal is what a seal-pending leader sends the controller with
// InitDisklessLog once its log is sealed (consolidate.SealLeader makes
// it).
type SealProposal struct {
	// Seal is S, the leader's log end.
	Seal int64
	// Lineage is the leader's leader-epoch entries over its records
	// below S (its epoch cache: UnifiedLog.EpochEntriesInRange(-1, S)),
	// nil when unknown (State.SealLineage). The commit keeps the latest
	// MaxSealLineageEntries. A leader that does not send it (Inkless's)
	// leaves it nil.
	Lineage []epochcache.Entry
	// Producers are the leader's producer states at S (tag 101).
	Producers []ProducerStateEntry
}

// CommitSeal commits a proposal without a seal lineage: CommitSealProposal
// of SealProposal{Seal: seal, Producers: producers}.
func (s State) CommitSeal(seal int64, producers []ProducerStateEntry) (State, error) {
	return s.CommitSealProposal(SealProposal{Seal: seal, Producers: producers})
}

// CommitSealProposal commits the seal the leader proposed with
// InitDisklessLog (the controller's side of the protocol): seal pending
// -> phase 1 at the seal, with the leader's producer states and seal
// epoch. The diskless leader epoch is not written here: the phase-2 flag
// writes it (https://github.com/aiven/inkless/pull/827; older Inkless
// controllers wrote it with the seal). The leader-epoch and leader checks
// of the request are the controller's, on its partition registration.
// Refused: a negative seal (ErrInvalidSeal), a lineage out of order or
// past the seal (ErrInvalidEpoch), classic (ErrNotSwitching), an already
// committed seal (ErrSealCommitted).
func (s State) CommitSealProposal(p SealProposal) (State, error) {
	seal := p.Seal
	lineage := p.Lineage
	if n := len(lineage); n > MaxSealLineageEntries {
		lineage = lineage[n-MaxSealLineageEntries:]
	}
	switch {
	case s.phase == PhaseClassic:
		return s, refuse(OpCommitSeal, s.phase, PhaseOne, ErrNotSwitching, "seal %d", seal)
	case s.SealCommitted():
		return s, refuse(OpCommitSeal, s.phase, PhaseOne, ErrSealCommitted, "seal %d, request %d", s.seal, seal)
	case seal < 0:
		return s, refuse(OpCommitSeal, s.phase, PhaseOne, ErrInvalidSeal, "seal %d", seal)
	}
	if err := checkSealLineage(lineage, seal); err != nil {
		return s, refuse(OpCommitSeal, s.phase, PhaseOne, ErrInvalidEpoch, "seal lineage %s: %v",
			formatSealLineage(lineage), err)
	}
	return s.checked(State{
		phase:          PhaseOne,
		seal:           seal,
		sealLineage:    encodeSealLineage(lineage),
		producerStates: encodeProducerStates(p.Producers),
		consolidating:  s.consolidating,
	}), nil
}

// optionalEpoch is an optional epoch's value, -1 when absent.
func optionalEpoch(e Optional[int32]) int32 {
	if !e.Present {
		return base.UndefinedEpoch
	}
	return e.Value
}

// Reseal is the operator's `kafka-topic-switch.sh seal <offset>` with a
// value >= 0 (AlterDisklessSwitch): from seal pending it commits the seal;
// in phase 1 it moves the committed seal down (or rewrites it), for example
// to the log end offset of a last-known leader that lost records
// (https://github.com/aiven/inkless/pull/871). Producer states are kept
// unless clearProducerStates (--clear-producer-states). leader is the
// leader's leader-epoch entries over its records below seal (its epoch
// cache), nil when unknown. A re-seal to the committed seal keeps a seal
// lineage already known (the records below it are the ones sealed) and
// only learns an unknown one; a new or lowered seal takes the leader's
// entries below it (the leader's records are the ones it commits), or
// keeps the committed lineage's below it when the leader's are unknown
// or agree with them at seal-1 and reach less far down. Refused: a
// negative seal (ErrInvalidSeal), leader entries out of order
// (ErrInvalidEpoch), classic (ErrNotSwitching), a seal above the
// committed one (ErrSealIncrease), phase 2 (ErrInPhaseTwo: R and E_d were
// recorded for the seal at the flag commit [INF]).
//
// The tool's own check (log start <= seal <= the leader's LEO) needs the
// leader's log: PlanReseal makes it after these rules.
func (s State) Reseal(seal int64, leader []epochcache.Entry, clearProducerStates bool) (State, error) {
	to := PhaseOne
	switch {
	case s.phase == PhaseClassic:
		return s, refuse(OpReseal, s.phase, to, ErrNotSwitching, "seal %d", seal)
	case s.phase == PhaseTwo:
		return s, refuse(OpReseal, s.phase, s.phase, ErrInPhaseTwo, "seal %d, request %d", s.seal, seal)
	case seal < 0:
		return s, refuse(OpReseal, s.phase, to, ErrInvalidSeal, "seal %d", seal)
	case s.phase == PhaseOne && seal > s.seal:
		return s, refuse(OpReseal, s.phase, to, ErrSealIncrease, "seal %d, request %d", s.seal, seal)
	}
	if err := checkSealLineage(clipSealLineage(leader, seal), seal); err != nil {
		return s, refuse(OpReseal, s.phase, to, ErrInvalidEpoch, "leader lineage %s: %v", formatSealLineage(leader), err)
	}
	n := s
	if !s.SealCommitted() || seal != s.seal || s.sealLineage == "" {
		n.sealLineage = encodeSealLineage(lineageForSeal(s.SealLineage(), leader, seal))
	}
	n.phase, n.seal = PhaseOne, seal
	if clearProducerStates {
		n.producerStates = ""
	}
	return s.checked(n), nil
}

// Leadership is what the controller's partition registration holds
// besides the switch State: the leader's broker id and the leader epoch.
type Leadership struct {
	Leader      int32
	LeaderEpoch int32
}

// ClassicPrefixRequest is one partition of a SetClassicPrefixInRemoteStorage
// request (API key 503, https://github.com/aiven/inkless/pull/827).
type ClassicPrefixRequest struct {
	// BrokerID is the sender.
	BrokerID int32
	// LeaderEpoch is the sender's leader epoch.
	LeaderEpoch int32
	// Seal is the seal the sender proved to be in remote storage.
	Seal int64
	// LastClassicLeaderEpoch is R: the sender's epoch at Seal-1, or -1
	// when its log holds no record below the seal.
	LastClassicLeaderEpoch int32
}

// SetClassicPrefixInRemoteStorage decides the controller's answer to the
// phase-2 request (https://github.com/aiven/inkless/pull/827 and
// https://github.com/aiven/inkless/pull/857), with the partition's
// leadership p. Checks, in the controller's order (the broker epoch and an
// unknown partition, check 1, come before and are not the State's):
//
//  2. flag already set: the same seal is an idempotent retry, answered
//     NONE with no record (this returns s unchanged and no error; it runs
//     before the epoch checks because the commit bumped the leader
//     epoch); another seal is ErrSealMismatch (INVALID_REQUEST);
//  3. request leader epoch above p's: ErrLeaderEpochAhead
//     (NOT_CONTROLLER); below: ErrFencedEpoch (FENCED_LEADER_EPOCH);
//  4. sender not p.Leader: ErrNotLeader;
//  5. seal not committed (classic: ErrNotSwitching, pending:
//     ErrSealNotCommitted) or different from the request's
//     (ErrSealMismatch), all INVALID_REQUEST;
//  6. R outside [-1, p.LeaderEpoch]: ErrInvalidRecordedEpoch (https://github.com/aiven/inkless/pull/857).
//
// A partition leader epoch whose successor is below an E_d already
// recorded (by an older controller's seal commit) is inconsistent and
// refused with ErrDisklessEpochDecrease: E_d never falls.
//
// The committed State is phase 2 with R recorded and the diskless leader
// epoch E_d = p.LeaderEpoch + 1, the epoch the record itself produces
// (the record bumps the leader epoch exactly once), hence above every
// classic and phase-1 epoch and above R.
func (s State) SetClassicPrefixInRemoteStorage(req ClassicPrefixRequest, p Leadership) (State, error) {
	const op = OpSetClassicPrefix
	to := PhaseTwo
	if p.LeaderEpoch < 0 || p.LeaderEpoch == math.MaxInt32 {
		return s, refuse(op, s.phase, to, ErrInvalidArgument, "partition leader epoch %d", p.LeaderEpoch)
	}
	if s.phase == PhaseTwo {
		if req.Seal == s.seal {
			return s, nil
		}
		return s, refuse(op, s.phase, to, ErrSealMismatch, "flag set at seal %d, request %d", s.seal, req.Seal)
	}
	switch {
	case req.LeaderEpoch > p.LeaderEpoch:
		return s, refuse(op, s.phase, to, ErrLeaderEpochAhead, "request epoch %d, partition %d", req.LeaderEpoch, p.LeaderEpoch)
	case req.LeaderEpoch < p.LeaderEpoch:
		return s, refuse(op, s.phase, to, ErrFencedEpoch, "request epoch %d, partition %d", req.LeaderEpoch, p.LeaderEpoch)
	case req.BrokerID != p.Leader:
		return s, refuse(op, s.phase, to, ErrNotLeader, "sender %d, leader %d", req.BrokerID, p.Leader)
	case s.phase == PhaseClassic:
		return s, refuse(op, s.phase, to, ErrNotSwitching, "request seal %d", req.Seal)
	case s.phase == PhaseSealPending:
		return s, refuse(op, s.phase, to, ErrSealNotCommitted, "request seal %d", req.Seal)
	case req.Seal != s.seal:
		return s, refuse(op, s.phase, to, ErrSealMismatch, "seal %d, request %d", s.seal, req.Seal)
	case req.LastClassicLeaderEpoch < base.UndefinedEpoch || req.LastClassicLeaderEpoch > p.LeaderEpoch:
		return s, refuse(op, s.phase, to, ErrInvalidRecordedEpoch, "%d outside [-1, %d]", req.LastClassicLeaderEpoch, p.LeaderEpoch)
	case p.LeaderEpoch+1 < s.DisklessLeaderEpoch():
		// Only an E_d written by the seal commit of older controllers can
		// be set here, and it is an epoch the partition already had.
		return s, refuse(op, s.phase, to, ErrDisklessEpochDecrease, "diskless epoch %d, partition leader epoch %d",
			s.DisklessLeaderEpoch(), p.LeaderEpoch)
	}
	n := s
	n.phase = PhaseTwo
	n.lastClassicLeaderEpoch = epochOf(req.LastClassicLeaderEpoch)
	n.disklessLeaderEpoch = epochOf(p.LeaderEpoch + 1)
	return s.checked(n), nil
}

// StartPhaseTwo is the operator's recovery of a phase-1 partition whose
// classic prefix is lost on every replica (AlterDisklessSwitch with
// ClassicPrefixInRemoteStorage, `kafka-topic-switch.sh start-phase-2`,
// https://github.com/aiven/inkless/pull/855): phase 1 -> phase 2 at seal,
// which may be below the committed seal (the records between are lost).
// Like the flag commit the record bumps the leader epoch once, writes
// E_d = currentLeaderEpoch + 1 and records R = recordedEpoch; producer
// states are kept (the request may not clear them). No leader reports an
// epoch at seal-1 here, so the tool takes R from remote storage: the
// epoch of the remote record at seal-1 (PlanStartPhaseTwo), or -1 for an
// empty prefix. [INF] Inkless's tool leaves R at -1, so its brokers use
// the upstream rebuild and a replica whose log below the seal holds an
// uncommitted tail of an older epoch could lead with it; recording R
// makes every replica run the phase-2 replica check. Refused: classic
// (ErrNotSwitching), seal pending (ErrSealNotCommitted), phase 2
// (ErrInPhaseTwo), a negative seal (ErrInvalidSeal), a seal above the
// committed one (ErrSealIncrease), R outside [-1, currentLeaderEpoch]
// (ErrInvalidRecordedEpoch), R other than the seal lineage's epoch at
// seal-1 where it is known (ErrInvalidRecordedEpoch: the record remote
// storage holds at seal-1 is not the one the seal committed), an E_d
// that would fall (ErrDisklessEpochDecrease). A lowered seal keeps the
// lineage's entries below it, or learns R at seal-1 when they do not
// reach it: the record at the new seal-1 is remote storage's. At the
// committed seal the lineage stays, so the record is Inkless's flag
// commit.
//
// The tool's checks (no replica holds the whole prefix, the data-loss
// confirmation) need the replicas' descriptions and are not made here.
func (s State) StartPhaseTwo(seal int64, recordedEpoch, currentLeaderEpoch int32) (State, error) {
	const op = OpStartPhaseTwo
	to := PhaseTwo
	switch {
	case currentLeaderEpoch < 0 || currentLeaderEpoch == math.MaxInt32:
		return s, refuse(op, s.phase, to, ErrInvalidArgument, "partition leader epoch %d", currentLeaderEpoch)
	case s.phase == PhaseClassic:
		return s, refuse(op, s.phase, to, ErrNotSwitching, "seal %d", seal)
	case s.phase == PhaseSealPending:
		return s, refuse(op, s.phase, to, ErrSealNotCommitted, "seal %d", seal)
	case s.phase == PhaseTwo:
		return s, refuse(op, s.phase, to, ErrInPhaseTwo, "seal %d, request %d", s.seal, seal)
	case seal < 0:
		return s, refuse(op, s.phase, to, ErrInvalidSeal, "seal %d", seal)
	case seal > s.seal:
		return s, refuse(op, s.phase, to, ErrSealIncrease, "seal %d, request %d", s.seal, seal)
	case recordedEpoch < base.UndefinedEpoch || recordedEpoch > currentLeaderEpoch:
		return s, refuse(op, s.phase, to, ErrInvalidRecordedEpoch, "%d outside [-1, %d]", recordedEpoch, currentLeaderEpoch)
	case recordedEpoch != base.UndefinedEpoch && !s.ofSealedLineage(seal-1, recordedEpoch):
		e, _ := s.SealLineageEpochAt(seal - 1)
		return s, refuse(op, s.phase, to, ErrInvalidRecordedEpoch, "%d at %d, sealed in epoch %d there",
			recordedEpoch, seal-1, e)
	case currentLeaderEpoch+1 < s.DisklessLeaderEpoch():
		return s, refuse(op, s.phase, to, ErrDisklessEpochDecrease, "diskless epoch %d, partition leader epoch %d",
			s.DisklessLeaderEpoch(), currentLeaderEpoch)
	}
	n := s
	if seal != s.seal {
		n.sealLineage = encodeSealLineage(lineageAtSeal(s.SealLineage(), seal, recordedEpoch))
	}
	n.phase, n.seal = PhaseTwo, seal
	n.lastClassicLeaderEpoch = epochOf(recordedEpoch)
	n.disklessLeaderEpoch = epochOf(currentLeaderEpoch + 1)
	return s.checked(n), nil
}

// ValidateElectReplica checks the switch part of the operator's election of
// a replica outside the ISR (AlterDisklessSwitch with LeaderId,
// `kafka-topic-switch.sh elect --replica`,
// https://github.com/aiven/inkless/pull/855): it needs phase 1 and a
// request that names the committed seal. It changes no switch field.
// Refused: classic (ErrNotSwitching), seal pending (ErrSealNotCommitted),
// phase 2 (ErrInPhaseTwo: any replica can lead already), another seal
// (ErrSealMismatch). The replica's own checks (active, log directory
// online, HW == S, gap-free coverage) are not the State's.
func (s State) ValidateElectReplica(seal int64) error {
	const op = OpElectReplica
	switch {
	case s.phase == PhaseClassic:
		return refuse(op, s.phase, s.phase, ErrNotSwitching, "seal %d", seal)
	case s.phase == PhaseSealPending:
		return refuse(op, s.phase, s.phase, ErrSealNotCommitted, "seal %d", seal)
	case s.phase == PhaseTwo:
		return refuse(op, s.phase, s.phase, ErrInPhaseTwo, "seal %d", s.seal)
	case seal != s.seal:
		return refuse(op, s.phase, s.phase, ErrSealMismatch, "seal %d, request %d", s.seal, seal)
	}
	return nil
}

// checked asserts the invariants of a transition's result: the new State
// is valid, the phase moved forward unless an abort took a pending seal
// back to classic, and a committed seal never rose.
func (s State) checked(n State) State {
	if invariants.Enabled {
		invariants.Assertf(n.validate() == nil, "%s -> %s: %v", s, n, n.validate())
		invariants.Assertf(n.phase >= s.phase || (s.phase == PhaseSealPending && n.phase == PhaseClassic),
			"phase went back: %s -> %s", s, n)
		invariants.Assertf(!s.SealCommitted() || n.seal <= s.seal, "seal rose: %s -> %s", s, n)
		invariants.Assertf(!s.SealCommitted() || n.DisklessLeaderEpoch() >= s.DisklessLeaderEpoch(),
			"diskless epoch fell: %s -> %s", s, n)
	}
	return n
}

// ofSealedLineage reports whether a record of epoch at offset may be the
// sealed lineage's: the seal lineage does not cover offset, or has epoch
// there.
func (s State) ofSealedLineage(offset int64, epoch int32) bool {
	e, ok := s.SealLineageEpochAt(offset)
	return !ok || e == epoch || mutation.Disabled(mutation.SealEpochLineage)
}
