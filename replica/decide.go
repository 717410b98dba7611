package replica

import (
	"fmt"
	"strings"

	"github.com/tierlog/tierlog/internal/mutation"
	"github.com/tierlog/tierlog/tierstate"
)

// Delta is what one metadata delta says about the partition on this
// broker: its role, epochs, ISR membership and switch state (tags 100 to
// 104, decoded by tierstate.FromPartitionRecord or State.ApplyChange,
// with the consolidating property set).
type Delta struct {
	// Leader: this broker leads the partition after the delta.
	Leader bool
	// LeaderID is the partition leader's broker id (the classic fetcher
	// fetches from it when this broker follows).
	LeaderID int32
	// LeaderEpoch and PartitionEpoch are the partition record's.
	LeaderEpoch    int32
	PartitionEpoch int32
	// InIsr: this broker is in the KRaft ISR after the delta.
	InIsr bool
	// State is the partition's switch state after the delta.
	State tierstate.State
	// Removal: the delta takes the partition off this broker (Kafka: the
	// delta's local deletes); DecideRemoval then replaces the check and
	// the transition.
	Removal Removal
}

// Removal says why a delta takes the partition off this broker.
type Removal int8

const (
	// NotRemoved: the broker keeps hosting the partition.
	NotRemoved Removal = iota
	// ReassignedAway: a reassignment removed this broker from the
	// replicas; the remote log stays (the other replicas serve it).
	ReassignedAway
	// TopicDeleted: the topic was deleted; the broker that led the
	// partition also deletes its remote log.
	TopicDeleted
)

func (r Removal) String() string {
	switch r {
	case NotRemoved:
		return "not removed"
	case ReassignedAway:
		return "reassigned away"
	case TopicDeleted:
		return "topic deleted"
	}
	return fmt.Sprintf("Removal(%d)", int8(r))
}

func (d Delta) String() string {
	role := fmt.Sprintf("follower of %d", d.LeaderID)
	if d.Leader {
		role = "leader"
	}
	s := fmt.Sprintf("%s leader-epoch=%d partition-epoch=%d in-isr=%t %s",
		role, d.LeaderEpoch, d.PartitionEpoch, d.InIsr, d.State)
	if d.Removal != NotRemoved {
		s += " removed: " + d.Removal.String()
	}
	return s
}

// Prior is what the driver remembers of the partition between deltas.
type Prior struct {
	// Hosted: a delta was applied before (false: the replica is new to
	// the broker: a new replica, a reassignment, the first delta after a
	// restart).
	Hosted bool
	// LeaderEpoch is the leader epoch of the last applied delta.
	LeaderEpoch int32
	// Offline: a failed recreate or a storage error took the replica
	// offline (keyed by topic id: a recreated topic of the same name is
	// another replica). Later deltas skip it.
	Offline bool
	// Fenced: a phase-1 leader below the seal was fenced
	// (https://github.com/aiven/inkless/pull/855). The next delta brings
	// it back.
	Fenced bool
}

// Kind names one action of a plan.
type Kind int8

const (
	// SkipOffline: the replica is offline; the delta does nothing.
	SkipOffline Kind = iota + 1
	// Unfence: the fenced record is cleared and the delta applies as to a
	// replica new to the broker, on the log the fence kept.
	Unfence
	// CheckReplica: stop the fetchers, run the phase-2 replica check
	// (tierstate.CheckAndRecreate) and recreate the replica if it fails.
	CheckReplica
	// CreateLog: the partition has no log; create an empty one.
	CreateLog
	// TruncateToSeal: a log past the seal without a consolidated diskless
	// suffix is truncated to the seal (Inkless
	// maybeTruncateSwitchedFollower, maybeReconcileSwitchedLeader).
	TruncateToSeal
	// RaiseHighWatermark: a leader at or past the seal whose high
	// watermark is below it (a stale checkpoint) raises it to the seal.
	RaiseHighWatermark
	// Fence: a phase-1 leader of a consolidating topic whose log ends
	// below the seal registers with the remote log manager as a follower
	// and is recorded as fenced; it neither leads nor fetches.
	Fence
	// GoOffline: a leader of a non-consolidating topic whose log ends
	// below the seal goes offline (nothing can rebuild its prefix); so
	// does a replica whose log directory failed.
	GoOffline
	// BecomeLeader: register with the remote log manager as leader. A
	// leader's plan ends with StartConsolidation or StopFetching, either
	// of which stops the classic fetcher.
	BecomeLeader
	// BecomeFollower: register with the remote log manager as follower.
	BecomeFollower
	// StartClassic: the classic fetcher replicates the partition from
	// the leader at Offset; the consolidation fetcher drops it.
	StartClassic
	// StartConsolidation: the consolidation fetcher copies the
	// partition's diskless batches from Offset; the classic fetcher drops
	// it.
	StartConsolidation
	// StopFetching: neither fetcher runs for the partition.
	StopFetching
	// Admit: the leader submits an ISR expansion for a follower at the
	// seal (fetch hook, not a delta action).
	Admit

	// The leader's switch steps (DecideSwitch), after the transition and
	// from the StepSwitch hook.

	// Seal: a seal-pending leader aborts its undecided transactions,
	// rolls and flushes its log (consolidate.SealLeader); once HW = LEO
	// ProposeSeal follows.
	Seal
	// ProposeSeal: the leader sends InitDisklessLog with S = LEO and its
	// producer states to the controller (SwitchController.ProposeSeal).
	ProposeSeal
	// InitDisklessLog: the seal is committed and the leader's log ends at
	// it; the leader creates the WAL's row (consolidate.InitDisklessLog).
	InitDisklessLog
	// RequestPhaseTwo: remote storage holds S-1; the leader sends
	// SetClassicPrefixInRemoteStorage with its recorded epoch.
	RequestPhaseTwo
	// ArmPruner: a consolidating leader at or past the seal arms the WAL
	// pruner at S-1 (consolidate.Pruner.Arm).
	ArmPruner
	// DisarmPruner: the pruner forgets the partition (leadership lost, a
	// recreate, a log below the seal awaiting its rebuild, a removal).
	DisarmPruner

	// A removal (DecideRemoval).

	// StopRemote: the remote log manager stops the partition's tasks and
	// forgets it, deleting its remote log for a deleted topic this broker
	// led (remote.Manager.StopPartitions).
	StopRemote
	// DeleteLog: the log manager deletes the current log.
	DeleteLog
	// DeleteFutureLog: the log manager deletes the future log.
	DeleteFutureLog

	// A log directory move (StartMove, CancelMove, MaybePromoteFutureLog,
	// FutureLogDirFailure).

	// StartMove: the move fetcher copies the current log into the future
	// log from the future log's end.
	StartMove
	// CancelMove: the move fetcher stops and the future log is deleted.
	CancelMove
	// PromoteFutureLog: the future log caught up; it replaces the current
	// log (Kafka: Partition.maybeReplaceCurrentWithFutureReplica).
	PromoteFutureLog
	// DropFutureLog: the future log's directory failed; the future log is
	// forgotten (not deleted) and the current log stays.
	DropFutureLog

	// RollAtSeal (a leader's switch step, listed last so that the kinds
	// above keep their values): a phase-1 leader whose log ends at the
	// seal rolls its active segment, so the segment holding S-1 is a
	// finished segment the remote-log manager copies (it copies rolled
	// segments only) and phase 2 can be asked for.
	RollAtSeal
)

func (k Kind) String() string {
	switch k {
	case SkipOffline:
		return "skip-offline"
	case Unfence:
		return "unfence"
	case CheckReplica:
		return "check-replica"
	case CreateLog:
		return "create-log"
	case TruncateToSeal:
		return "truncate-to-seal"
	case RaiseHighWatermark:
		return "raise-high-watermark"
	case Fence:
		return "fence"
	case GoOffline:
		return "go-offline"
	case BecomeLeader:
		return "become-leader"
	case BecomeFollower:
		return "become-follower"
	case StartClassic:
		return "start-classic"
	case StartConsolidation:
		return "start-consolidation"
	case StopFetching:
		return "stop-fetching"
	case Admit:
		return "admit"
	case Seal:
		return "seal"
	case ProposeSeal:
		return "propose-seal"
	case InitDisklessLog:
		return "init-diskless-log"
	case RequestPhaseTwo:
		return "request-phase-two"
	case ArmPruner:
		return "arm-pruner"
	case DisarmPruner:
		return "disarm-pruner"
	case StopRemote:
		return "stop-remote"
	case DeleteLog:
		return "delete-log"
	case DeleteFutureLog:
		return "delete-future-log"
	case StartMove:
		return "start-move"
	case CancelMove:
		return "cancel-move"
	case PromoteFutureLog:
		return "promote-future-log"
	case DropFutureLog:
		return "drop-future-log"
	case RollAtSeal:
		return "roll-at-seal"
	}
	return fmt.Sprintf("Kind(%d)", int8(k))
}

// Action is one step of a plan: what to do, the offset it acts at (-1
// when none), and the offsets and epochs that led to it.
type Action struct {
	Kind   Kind
	Offset int64
	Reason string
}

func (a Action) String() string {
	s := a.Kind.String()
	if a.Offset >= 0 {
		s += fmt.Sprintf(" at %d", a.Offset)
	}
	return s + " (" + a.Reason + ")"
}

func act(k Kind, offset int64, format string, args ...any) Action {
	return Action{Kind: k, Offset: offset, Reason: fmt.Sprintf(format, args...)}
}

// Plan is a decision: actions in the order the driver performs them.
type Plan []Action

func (p Plan) String() string {
	parts := make([]string, len(p))
	for i, a := range p {
		parts[i] = a.String()
	}
	return strings.Join(parts, "\n")
}

// Has reports whether the plan holds an action of kind k.
func (p Plan) Has(k Kind) bool {
	for _, a := range p {
		if a.Kind == k {
			return true
		}
	}
	return false
}

// ViewLog is what the transition decision reads of the current log.
// *log.UnifiedLog satisfies it.
type ViewLog interface {
	tierstate.ConsolidatedSuffixLog
	HighWatermark() int64
	LatestEpoch() (int32, bool)
}

// DecideCheck is the first half of applying a delta, decided before the
// leader and follower transitions: skip an offline replica, bring a
// fenced one back, and whether the phase-2 replica check runs
// (tierstate.ShouldCheckReplica; https://github.com/aiven/inkless/pull/857).
// An unfenced replica counts as new to the broker, so a phase-2 delta
// checks it.
//
// Pure.
func DecideCheck(p Prior, d Delta) Plan {
	if p.Offline {
		return Plan{act(SkipOffline, -1, "replica offline")}
	}
	var plan Plan
	newToBroker := !p.Hosted
	if p.Fenced {
		plan = append(plan, act(Unfence, -1, "fenced in phase 1; metadata changed: leader epoch %d -> %d",
			p.LeaderEpoch, d.LeaderEpoch))
		newToBroker = true
	}
	run, why := tierstate.ShouldCheckReplica(d.State, tierstate.ReplicaDelta{NewToBroker: newToBroker,
		PreviousLeaderEpoch: p.LeaderEpoch, LeaderEpoch: d.LeaderEpoch})
	if run {
		plan = append(plan, act(CheckReplica, -1, "%s, seal %d, recorded epoch %d", why, d.State.Seal(),
			d.State.LastClassicLeaderEpoch()))
	}
	return plan
}

// DecideTransition is the second half: the leader or follower
// transition on the log as the check left it (l nil: no log, for example
// after a recreate). It applies a committed seal (truncate a classic
// tail, raise a stale high watermark), fences a phase-1 leader below the
// seal (https://github.com/aiven/inkless/pull/855), makes the replica
// leader or follower and chooses its fetcher:
//
//	leader, seal pending                    classic leader, no consolidation yet
//	leader, consolidating, no seal          consolidation at the high watermark
//	leader, consolidating, phase 1          no consolidation before the phase-2
//	                                        flag (tierstate.State.TakesDisklessRecords)
//	leader, consolidating, phase 2          consolidation at the log end (below
//	                                        the seal: the first fetch rebuilds)
//	follower                                tierstate.RouteFollowerFetcher
//
// Pure: it reads l and changes nothing.
func DecideTransition(d Delta, l ViewLog) Plan {
	var plan Plan
	s := d.State
	leo, hw := int64(0), int64(0)
	if l == nil {
		plan = append(plan, act(CreateLog, 0, "no log"))
	} else {
		leo, hw = l.LogEndOffset(), l.HighWatermark()
	}
	if s.SealCommitted() {
		seal := s.Seal()
		if l != nil && leo > seal && !tierstate.HasConsolidatedDisklessSuffixFromSeal(s, l) &&
			!mutation.Disabled(mutation.SealTruncation) {
			plan = append(plan, act(TruncateToSeal, seal, "log end %d past seal %d without a consolidated diskless suffix (diskless epoch %d)",
				leo, seal, s.DisklessLeaderEpoch()))
			leo = seal
			hw = min(hw, seal)
		}
		if d.Leader && leo >= seal && hw < seal {
			plan = append(plan, act(RaiseHighWatermark, seal, "leader at log end %d, high watermark %d below seal %d", leo, hw, seal))
			hw = seal
		}
		switch {
		case !d.Leader || leo >= seal:
		case !s.Consolidating():
			if l == nil {
				plan = plan[1:] // no CreateLog: an offline replica gets no log
			}
			return append(plan,
				act(GoOffline, leo, "%s leader in epoch %d with log end %d below seal %d, not consolidating: nothing rebuilds it",
					s.Phase(), d.LeaderEpoch, leo, seal),
				act(StopFetching, -1, "offline"))
		case s.Phase() == tierstate.PhaseOne:
			return append(plan,
				act(Fence, leo, "phase-1 leader in epoch %d with log end %d below seal %d: the prefix is not in remote storage yet",
					d.LeaderEpoch, leo, seal),
				act(StopFetching, -1, "fenced"))
		}
	}
	if d.Leader {
		plan = append(plan, act(BecomeLeader, -1, "leader epoch %d", d.LeaderEpoch))
		switch {
		case !s.Consolidating():
			return append(plan, act(StopFetching, -1, "leader, not consolidating"))
		case s.Phase() == tierstate.PhaseSealPending:
			return append(plan, act(StopFetching, -1, "leader, seal pending: consolidation waits for the seal"))
		case !s.TakesDisklessRecords():
			return append(plan, act(StopFetching, -1, "leader in %s at seal %d: consolidation waits for the phase-2 flag and its diskless epoch",
				s.Phase(), s.Seal()))
		case s.Phase() == tierstate.PhaseClassic:
			return append(plan, act(StartConsolidation, hw, "leader, born diskless: no seal, high watermark %d", hw))
		case leo < s.Seal():
			return append(plan, act(StartConsolidation, leo, "leader with log end %d below seal %d in %s: the first fetch rebuilds the prefix from remote storage",
				leo, s.Seal(), s.Phase()))
		}
		return append(plan, act(StartConsolidation, leo, "leader with log end %d at or past seal %d", leo, s.Seal()))
	}
	plan = append(plan, act(BecomeFollower, -1, "follower of %d in leader epoch %d", d.LeaderID, d.LeaderEpoch))
	var r tierstate.FollowerRoute
	if l == nil {
		r = tierstate.RouteFollowerFetcher(s, emptyLog{}, d.InIsr)
	} else {
		r = tierstate.RouteFollowerFetcher(s, truncatedView{l, leo, hw}, d.InIsr)
	}
	if r.Fetcher == tierstate.ConsolidationFetcher {
		return append(plan, act(StartConsolidation, r.StartOffset, "%s", r.Reason))
	}
	return append(plan, act(StartClassic, r.StartOffset, "%s", r.Reason))
}

// emptyLog is the log a CreateLog action creates: no records, no epoch.
type emptyLog struct{}

func (emptyLog) LogEndOffset() int64        { return 0 }
func (emptyLog) HighWatermark() int64       { return 0 }
func (emptyLog) LatestEpoch() (int32, bool) { return -1, false }

// truncatedView is l as the plan leaves it before the fetcher starts (a
// TruncateToSeal action lowers its end and high watermark).
type truncatedView struct {
	l       ViewLog
	leo, hw int64
}

func (v truncatedView) LogEndOffset() int64        { return v.leo }
func (v truncatedView) HighWatermark() int64       { return v.hw }
func (v truncatedView) LatestEpoch() (int32, bool) { return v.l.LatestEpoch() }
