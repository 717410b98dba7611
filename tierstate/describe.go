package tierstate

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/internal/mutation"
	"github.com/tierlog/tierlog/remote"
)

// The operator recovery of a phase-1 partition that lost its classic prefix
// (https://github.com/aiven/inkless/pull/855). In phase 1 the part of the
// classic prefix [X, S) that remote storage does not hold yet lives only on
// the replicas' local disks. When the only ISR member loses its log, the
// broker fences the partition (its leader is below the seal), the
// controller elects only ISR members and unclean election is blocked in
// phase 1, so the partition cannot recover by itself. The operator has two
// ways out, which kafka-topic-switch.sh checks against what every replica
// reports:
//
//	describe        DescribeDisklessSwitchReplica (API key 504) on each
//	                replica's broker: Describe, one ReplicaDescription each
//	elect --replica a replica that holds the whole prefix leads, with
//	                ISR = {it}: CheckElectReplica, then AlterDisklessSwitch
//	                with LeaderId (State.ValidateElectReplica)
//	start-phase-2   nobody holds the prefix: phase 2 at the end of the
//	                prefix in remote storage, losing the rest:
//	                PlanStartPhaseTwo, then AlterDisklessSwitch with
//	                ClassicPrefixInRemoteStorage (State.StartPhaseTwo)
//
// What a replica covers, S = 1000, X = 0:
//
//	offset          0                    600                   1000 = S
//	remote run      [=====================)                       finished segments from X
//	replica 1 log   (empty: lost its disk; fenced)                missing [600, 1000)
//	replica 2 log   [=============================================)  hw 1000: holds it, electable
//	replica 3 log   [=============================================)  hw  990: holds it, not electable
//
// start-phase-2 would lose [600, 1000) (the remote end becomes the seal),
// so it is refused while replica 2 or 3 holds the prefix (replica 3 too,
// although elect refuses it: only its log and remote storage count, as
// describe reports them); without them it needs --accept-data-loss.
//
// All of it is pure: Describe reads a log's offsets and one listing of the
// remote metadata; the rest are functions of the descriptions.

// OpDescribeReplica names Describe in a RecoveryError (the other two
// checks report OpElectReplica and OpStartPhaseTwo).
const OpDescribeReplica = "describe-replica"

// noReplica is RecoveryError.BrokerID when a refusal concerns no single
// replica.
const noReplica int32 = -1

// Errors of the operator recovery checks. A refusal is a *RecoveryError
// that unwraps to ErrRecoveryRefused and to its reason: one of the
// sentinels below, or ErrNotSwitching, ErrSealNotCommitted,
// ErrSealMismatch, ErrRemoteStorageNotReady or ErrInvalidArgument. A
// refusal of the switch rules themselves (State.ValidateElectReplica,
// State.StartPhaseTwo) is returned as that method's *TransitionError.
var (
	// ErrRecoveryRefused is the umbrella of every *RecoveryError.
	ErrRecoveryRefused = errors.New("tierstate: operator recovery refused")

	// ErrReplicaNotHosted: the broker has no log for the partition, so it
	// cannot describe it. Kafka: UNKNOWN_TOPIC_OR_PARTITION ("this server
	// does not host this topic-partition") [INF:
	// https://github.com/aiven/inkless/pull/855 names no code].
	ErrReplicaNotHosted = errors.New("tierstate: broker does not host the replica")

	// ErrHighWatermarkNotAtSeal: elect --replica needs the replica's high
	// watermark at the seal. Only that shows the replica has the
	// committed prefix: a replica outside the ISR may hold an uncommitted
	// tail, so one with HW < S is refused even if it holds every committed
	// record (a documented limitation of
	// https://github.com/aiven/inkless/pull/855). Refused by
	// kafka-topic-switch.sh before any request (no Kafka error code).
	ErrHighWatermarkNotAtSeal = errors.New("tierstate: replica high watermark not at the seal")

	// ErrSealLineageMismatch: the replica's record at S-1 has another
	// leader epoch than the record the seal committed (State.SealEpoch):
	// its log is a lineage an unclean election discarded, so electing it
	// would serve records no consumer was given in place of committed
	// ones. Refused by elect --replica [INF: a tierlog extension; Inkless
	// records no epoch with the seal].
	ErrSealLineageMismatch = errors.New("tierstate: replica's record before the seal is of another lineage")

	// ErrClassicPrefixGap: the replica's log and remote storage leave a
	// gap in the classic prefix [X, S), so electing it would lose the
	// records in the gap. Refused by kafka-topic-switch.sh elect.
	ErrClassicPrefixGap = errors.New("tierstate: log and remote storage leave a gap in the classic prefix")

	// ErrReplicaHoldsClassicPrefix: start-phase-2 gives up records, and a
	// replica's log and remote storage still cover the whole prefix
	// (https://github.com/aiven/inkless/pull/855: it "fails while a
	// replica has the whole prefix"). The refusal says whether elect
	// takes that replica (its high watermark at the seal) or refuses it
	// too (ErrHighWatermarkNotAtSeal's limitation). Refused by
	// kafka-topic-switch.sh start-phase-2.
	ErrReplicaHoldsClassicPrefix = errors.New("tierstate: a replica holds the whole classic prefix")

	// ErrDataLossNotAccepted: start-phase-2 at the remote end loses
	// records and --accept-data-loss was not given.
	ErrDataLossNotAccepted = errors.New("tierstate: start-phase-2 loses records and data loss is not accepted")

	// ErrReplicaNotDescribed: start-phase-2 needs at least one
	// replica's description: the new seal is the remote end a replica
	// reports (https://github.com/aiven/inkless/pull/855: it "needs a
	// replica that reports the remote copy of the prefix"). A replica
	// whose broker does not answer does not block it; the plan names it
	// (StartPhaseTwoPlan.NotDescribed).
	ErrReplicaNotDescribed = errors.New("tierstate: replica not described")
)

// RecoveryError reports an operator recovery check that refused.
// errors.Is matches ErrRecoveryRefused and Reason.
type RecoveryError struct {
	// Op is OpDescribeReplica, OpElectReplica or OpStartPhaseTwo.
	Op string
	// BrokerID is the replica the refusal is about, or -1 when it is
	// about none in particular.
	BrokerID int32
	// Reason is one of the package's sentinels.
	Reason error
	// Detail gives the offsets involved.
	Detail string
}

func (e *RecoveryError) Error() string {
	msg := "tierstate: " + e.Op + " refused"
	if e.BrokerID != noReplica {
		msg += fmt.Sprintf(" for replica %d", e.BrokerID)
	}
	msg += ": " + reasonText(e.Reason)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// Unwrap returns ErrRecoveryRefused and the reason.
func (e *RecoveryError) Unwrap() []error { return []error{ErrRecoveryRefused, e.Reason} }

func refuseRecovery(op string, broker int32, reason error, format string, args ...any) *RecoveryError {
	return &RecoveryError{Op: op, BrokerID: broker, Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// OffsetRange is the half-open offset range [Start, End); it is empty
// when End <= Start.
type OffsetRange struct {
	Start, End int64
}

// Empty reports whether the range holds no offset.
func (r OffsetRange) Empty() bool { return r.End <= r.Start }

// String prints "[600, 1000)", or "none" for an empty range.
func (r OffsetRange) String() string {
	if r.Empty() {
		return "none"
	}
	return fmt.Sprintf("[%d, %d)", r.Start, r.End)
}

// DescribeLog is what Describe reads of a replica's local log. The broker
// reads it from its log manager, so a partition the phase-1 fence took
// offline still answers. *log.UnifiedLog satisfies it.
type DescribeLog interface {
	LocalLogStartOffset() int64
	LogEndOffset() int64
	HighWatermark() int64
	// EpochForOffset is the leader epoch of the record at offset by the
	// log's epoch cache (which covers its tiered records too), false when
	// no entry covers it.
	EpochForOffset(offset int64) (int32, bool)
}

// RemoteSegmentLister lists a partition's remote segments as this
// broker's remote log metadata sees them. *remote.MetadataManager
// satisfies it.
type RemoteSegmentLister interface {
	// ListSegments returns every segment not yet DELETE_SEGMENT_FINISHED,
	// in any state (Kafka: listRemoteLogSegments).
	ListSegments(tp remote.TopicIDPartition) ([]remote.SegmentMetadata, error)
}

// DescribeRequest is one partition of a DescribeDisklessSwitchReplica
// request, with what the answering broker knows of it.
type DescribeRequest struct {
	Partition remote.TopicIDPartition
	// BrokerID is the answering broker (the replica described).
	BrokerID int32
	// State is the partition's switch state as the broker applied it.
	State State
	// Log is the replica's log, nil (or a nil *log.UnifiedLog) when the
	// broker does not host it.
	Log DescribeLog
	// FencedByBroker: the broker took the partition offline because its log
	// ends below the seal in phase 1
	// (https://github.com/aiven/inkless/pull/855).
	FencedByBroker bool
	// CrossTierLogStartOffset is X, the control plane's
	// COALESCE(remote_log_start_offset, log_start_offset): the earliest
	// offset readable from remote storage, local logs or the WAL.
	CrossTierLogStartOffset int64
	// Remote is this broker's view of the remote log metadata.
	Remote RemoteSegmentLister
	// RemoteReady reports whether the remote log manager has loaded the
	// partition's metadata (Kafka: RemoteLogManager.isPartitionReady;
	// *remote.Manager's IsPartitionReady). Nil: always ready.
	RemoteReady func(tp remote.TopicIDPartition) bool
}

// ReplicaDescription is what DescribeDisklessSwitchReplica answers for one
// replica, plus the seal it was computed under. Offsets: starts inclusive,
// ends exclusive. The tool's conclusions (coverage, holding the prefix,
// loss) are methods, so a description received over the wire gives the same
// answers as one made locally.
type ReplicaDescription struct {
	BrokerID int32
	// Seal is the committed seal S; the classic prefix is [X, S).
	Seal                int64
	LocalLogStartOffset int64
	LogEndOffset        int64
	HighWatermark       int64
	FencedByBroker      bool
	// CrossTierLogStartOffset is X, as given to Describe.
	CrossTierLogStartOffset int64
	// RemoteEndOffset is the exclusive end of the gap-free run of
	// COPY_SEGMENT_FINISHED remote segments starting at X, capped at the
	// seal: remote storage holds every offset of [X, RemoteEndOffset).
	// min(X, S) when no finished segment holds X.
	RemoteEndOffset int64
	// SealEpoch is the committed seal epoch (State.SealEpoch) the
	// description was made under, absent when unknown. CheckElectReplica
	// and PlanStartPhaseTwo take it from the State they are given, as
	// they take SealedEpochAtRemoteEnd.
	SealEpoch Optional[int32]
	// SealedEpochAtRemoteEnd is the sealed lineage's epoch at
	// RemoteEndOffset - 1 (State.SealLineageEpochAt), absent when the
	// seal lineage does not cover that offset or the run is empty.
	SealedEpochAtRemoteEnd Optional[int32]
	// EpochBeforeSeal is the leader epoch of the replica's record at S-1
	// by its epoch cache, absent when its log ends below the seal or no
	// entry covers S-1.
	EpochBeforeSeal Optional[int32]
	// RemoteEndEpoch is the leader epoch of the remote record at
	// RemoteEndOffset - 1 (the segment's leader-epoch map; of the finished
	// segments holding that offset, the highest epoch there: a later
	// leader's copy supersedes an earlier lineage's), or -1 when the run
	// is empty. start-phase-2 records it as the phase-2 recorded epoch,
	// so the replica check compares every replica's log with the records
	// remote storage holds below the new seal.
	RemoteEndEpoch int32
}

// ClassicPrefix returns [X, S), empty when X >= S (retention or
// DeleteRecords moved the log start past the seal).
func (d ReplicaDescription) ClassicPrefix() OffsetRange {
	return OffsetRange{Start: min(d.CrossTierLogStartOffset, d.Seal), End: d.Seal}
}

// RemoteRange returns the part of the prefix remote storage holds without
// a gap from X, in the sealed lineage: [min(X, S), RemoteEndOffset), or
// empty when the run is of another lineage (RemoteOfSealedLineage).
func (d ReplicaDescription) RemoteRange() OffsetRange {
	start := d.ClassicPrefix().Start
	if !d.RemoteOfSealedLineage() {
		return OffsetRange{Start: start, End: start}
	}
	return OffsetRange{Start: start, End: d.RemoteEndOffset}
}

// RemoteOfSealedLineage reports whether the remote run may be the sealed
// lineage: its last record's epoch is the sealed lineage's epoch at that
// offset (SealedEpochAtRemoteEnd); where the seal lineage does not cover
// it, with a known seal epoch E, its record at S-1 is of epoch E, or,
// when it ends below the seal, its last record's epoch is at most E (a
// lineage's epochs never fall). A run an unclean election discarded,
// copied before it, fails: its records would be served in place of the
// committed ones. Without a remote end epoch or anything of the sealed
// lineage nothing is known, and the run counts.
func (d ReplicaDescription) RemoteOfSealedLineage() bool {
	e, r := optionalEpoch(d.SealEpoch), d.RemoteEndEpoch
	if r < 0 || mutation.Disabled(mutation.SealEpochLineage) {
		return true
	}
	switch {
	case d.SealedEpochAtRemoteEnd.Present:
		return r == d.SealedEpochAtRemoteEnd.Value
	case e < 0:
		return true
	case d.RemoteEndOffset == d.Seal:
		return r == e
	}
	return r <= e
}

// withSealLineage is d with what the committed State knows of the sealed
// lineage (SealEpoch, SealedEpochAtRemoteEnd), not the broker's view.
func (d ReplicaDescription) withSealLineage(s State) ReplicaDescription {
	d.SealEpoch, d.SealedEpochAtRemoteEnd = Optional[int32]{}, Optional[int32]{}
	if e := s.SealEpoch(); e != base.UndefinedEpoch {
		d.SealEpoch = Some(e)
	}
	if d.RemoteEndOffset > d.ClassicPrefix().Start {
		if e, ok := s.SealLineageEpochAt(d.RemoteEndOffset - 1); ok {
			d.SealedEpochAtRemoteEnd = Some(e)
		}
	}
	return d
}

// LogOfSealedLineage reports whether the replica's log may be the sealed
// lineage: its record at S-1 is of the seal epoch, or one of the two is
// unknown.
func (d ReplicaDescription) LogOfSealedLineage() bool {
	e, l := optionalEpoch(d.SealEpoch), optionalEpoch(d.EpochBeforeSeal)
	return e < 0 || l < 0 || l == e || mutation.Disabled(mutation.SealEpochLineage)
}

// LocalRange returns the records of the replica's local log:
// [LocalLogStartOffset, LogEndOffset).
func (d ReplicaDescription) LocalRange() OffsetRange {
	return OffsetRange{Start: d.LocalLogStartOffset, End: d.LogEndOffset}
}

// MissingRanges returns the offsets of the classic prefix [X, S) that
// neither remote storage (the gap-free run from X) nor the local log
// holds, in offset order; none when the replica covers the prefix.
// Remote segments past a gap in the run do not count: the
// run is what the broker reports.
func (d ReplicaDescription) MissingRanges() []OffsetRange {
	prefix := d.ClassicPrefix()
	if prefix.Empty() {
		return nil
	}
	local := OffsetRange{Start: max(d.LocalLogStartOffset, prefix.Start), End: min(d.LogEndOffset, prefix.End)}
	if !d.LogOfSealedLineage() {
		local.End = local.Start // another lineage holds nothing of the prefix
	}
	covered := []OffsetRange{d.RemoteRange(), local}
	sort.Slice(covered, func(i, j int) bool { return covered[i].Start < covered[j].Start })
	var missing []OffsetRange
	pos := prefix.Start
	for _, c := range covered {
		if c.Empty() {
			continue
		}
		if c.Start > pos {
			missing = append(missing, OffsetRange{Start: pos, End: c.Start})
		}
		pos = max(pos, c.End)
	}
	if pos < prefix.End {
		missing = append(missing, OffsetRange{Start: pos, End: prefix.End})
	}
	return missing
}

// CoversClassicPrefix reports whether the replica's log plus remote
// storage cover [X, S) without a gap (kafka-topic-switch.sh describe).
func (d ReplicaDescription) CoversClassicPrefix() bool { return len(d.MissingRanges()) == 0 }

// HoldsClassicPrefix reports whether the replica has the whole classic
// prefix: its log reaches the seal and, with remote storage, covers [X, S)
// without a gap. [INF] A replica whose log ends below the seal does not
// hold it even when remote storage alone covers the prefix: then every
// replica's remote view does, nothing is lost, and start-phase-2 at the
// remote end (= S) is the way out for a partition whose replicas all lost
// their logs (https://github.com/aiven/inkless/pull/855, "when it loses
// records", "when the seal changes"). This is the predicate start-phase-2
// refuses on; HoldsClassicPrefix does not look at the high watermark.
func (d ReplicaDescription) HoldsClassicPrefix() bool {
	return d.LogEndOffset >= d.Seal && d.CoversClassicPrefix()
}

// StartPhaseTwoLoss returns the offsets start-phase-2 would lose if this
// replica's remote view decided the new seal: [RemoteRange().End, S).
// PlanStartPhaseTwo uses the highest remote end of all replicas.
func (d ReplicaDescription) StartPhaseTwoLoss() OffsetRange {
	return OffsetRange{Start: d.RemoteRange().End, End: d.Seal}
}

// String prints the description on one line, for example
// "replica 1: seal=1000 log=none hw=0 fenced x=0 remote=[0, 600)
// missing=[600, 1000) holds-prefix=false start-phase-2-loses=[600, 1000)".
func (d ReplicaDescription) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "replica %d: seal=%d log=%s hw=%d", d.BrokerID, d.Seal, d.LocalRange(), d.HighWatermark)
	if d.FencedByBroker {
		b.WriteString(" fenced")
	}
	fmt.Fprintf(&b, " x=%d remote=%s missing=", d.CrossTierLogStartOffset, d.RemoteRange())
	missing := d.MissingRanges()
	if len(missing) == 0 {
		b.WriteString("none")
	}
	for i, r := range missing {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(r.String())
	}
	fmt.Fprintf(&b, " holds-prefix=%t start-phase-2-loses=%s", d.HoldsClassicPrefix(), d.StartPhaseTwoLoss())
	if f := d.SealEpoch; f.Present {
		fmt.Fprintf(&b, " seal-epoch=%d", f.Value)
		if !d.LogOfSealedLineage() {
			fmt.Fprintf(&b, " log-lineage=%d", d.EpochBeforeSeal.Value)
		}
		if !d.RemoteOfSealedLineage() {
			fmt.Fprintf(&b, " remote-lineage=%d", d.RemoteEndEpoch)
		}
	}
	return b.String()
}

// validate checks a description's fields against each other; one from
// the wire may be anything.
func (d ReplicaDescription) validate() error {
	prefix := d.ClassicPrefix()
	switch {
	case d.Seal < 0 || d.CrossTierLogStartOffset < 0:
		return fmt.Errorf("seal %d, cross-tier log start %d", d.Seal, d.CrossTierLogStartOffset)
	case d.LocalLogStartOffset < 0 || d.LocalLogStartOffset > d.LogEndOffset:
		return fmt.Errorf("local log start %d, log end %d", d.LocalLogStartOffset, d.LogEndOffset)
	case d.HighWatermark < 0 || d.HighWatermark > d.LogEndOffset:
		return fmt.Errorf("high watermark %d, log end %d", d.HighWatermark, d.LogEndOffset)
	case d.RemoteEndOffset < prefix.Start || d.RemoteEndOffset > prefix.End:
		return fmt.Errorf("remote end %d outside [%d, %d]", d.RemoteEndOffset, prefix.Start, prefix.End)
	case d.RemoteEndEpoch < base.UndefinedEpoch || optionalEpoch(d.SealEpoch) < base.UndefinedEpoch ||
		optionalEpoch(d.EpochBeforeSeal) < base.UndefinedEpoch || optionalEpoch(d.SealedEpochAtRemoteEnd) < base.UndefinedEpoch:
		return fmt.Errorf("epochs: remote end %d, seal %d, before the seal %d", d.RemoteEndEpoch,
			optionalEpoch(d.SealEpoch), optionalEpoch(d.EpochBeforeSeal))
	}
	return nil
}

// Describe answers DescribeDisklessSwitchReplica (API key 504, DESCRIBE on
// the cluster) for one replica (https://github.com/aiven/inkless/pull/855):
// the log's local log start, log end offset and high watermark, whether the
// broker fenced the partition, the cross-tier log start X, and the end of
// the gap-free run of COPY_SEGMENT_FINISHED remote segments starting at X,
// capped at the seal. Segments in any other state (COPY_SEGMENT_STARTED,
// DELETE_SEGMENT_STARTED) do not count; overlapping segments (copies by
// different leaders) count as the union of their offsets [INF: their epochs
// are not compared; in phase 1 unclean election is blocked].
//
// It works on a fenced partition: it only reads the log's offsets,
// lock-free. Refusals (*RecoveryError): no committed seal (classic:
// ErrNotSwitching, pending: ErrSealNotCommitted), no log
// (ErrReplicaNotHosted), remote log metadata not loaded
// (ErrRemoteStorageNotReady), X < 0 or no Remote (ErrInvalidArgument). An
// error listing the segments is returned wrapped, as it is.
func Describe(req DescribeRequest) (ReplicaDescription, error) {
	const op = OpDescribeReplica
	s, x, id := req.State, req.CrossTierLogStartOffset, req.BrokerID
	switch {
	case s.Phase() == PhaseClassic:
		return ReplicaDescription{}, refuseRecovery(op, id, ErrNotSwitching, "%s is classic", req.Partition)
	case !s.SealCommitted():
		return ReplicaDescription{}, refuseRecovery(op, id, ErrSealNotCommitted, "%s is %s", req.Partition, s.Phase())
	case isNilLog(req.Log):
		return ReplicaDescription{}, refuseRecovery(op, id, ErrReplicaNotHosted, "%s", req.Partition)
	case isNilLog(req.Remote):
		return ReplicaDescription{}, refuseRecovery(op, id, ErrInvalidArgument, "no remote log metadata")
	case x < 0:
		return ReplicaDescription{}, refuseRecovery(op, id, ErrInvalidArgument, "cross-tier log start %d", x)
	case req.RemoteReady != nil && !req.RemoteReady(req.Partition):
		return ReplicaDescription{}, refuseRecovery(op, id, ErrRemoteStorageNotReady, "%s", req.Partition)
	}
	segs, err := req.Remote.ListSegments(req.Partition)
	if err != nil {
		return ReplicaDescription{}, fmt.Errorf("tierstate: describe replica %d of %s: list remote segments: %w",
			id, req.Partition, err)
	}
	// Each getter is lock-free and a live follower's log may move
	// meanwhile. The log end only grows outside a truncation, so reading
	// it last keeps local start <= LEO and HW <= LEO; the clamps cover a
	// truncation in between.
	l := req.Log
	localStart := l.LocalLogStartOffset()
	hw := l.HighWatermark()
	leo := l.LogEndOffset()
	seal := s.Seal()
	d := ReplicaDescription{
		BrokerID:                id,
		Seal:                    seal,
		LocalLogStartOffset:     min(localStart, leo),
		LogEndOffset:            leo,
		HighWatermark:           min(hw, leo),
		FencedByBroker:          req.FencedByBroker,
		CrossTierLogStartOffset: x,
		RemoteEndOffset:         gapFreeRemoteEnd(segs, x, seal),
		RemoteEndEpoch:          base.UndefinedEpoch,
	}
	if seal > 0 && leo >= seal {
		if e, ok := l.EpochForOffset(seal - 1); ok {
			d.EpochBeforeSeal = Some(e)
		}
	}
	if d.RemoteEndOffset > d.ClassicPrefix().Start {
		d.RemoteEndEpoch = remoteEpochAt(segs, d.RemoteEndOffset-1)
	}
	return d.withSealLineage(s), nil
}

// gapFreeRemoteEnd is the exclusive end of the run of
// COPY_SEGMENT_FINISHED segments that holds every offset from x without a
// gap, capped at seal; min(x, seal) when no finished segment holds x.
func gapFreeRemoteEnd(segs []remote.SegmentMetadata, x, seal int64) int64 {
	end := min(x, seal)
	if end >= seal {
		return seal
	}
	finished := make([]OffsetRange, 0, len(segs))
	for _, seg := range segs {
		if seg.State != remote.CopySegmentFinished || seg.EndOffset < seg.HeldStartOffset() {
			continue
		}
		// seal - 1 >= end >= 0 here, so neither side overflows.
		finished = append(finished, OffsetRange{Start: seg.HeldStartOffset(), End: min(seg.EndOffset, seal-1) + 1})
	}
	// ListSegments sorts by start offset already; a lister need not.
	sort.Slice(finished, func(i, j int) bool { return finished[i].Start < finished[j].Start })
	for _, r := range finished {
		if r.Start > end {
			break // a gap: later segments start later still
		}
		end = max(end, r.End) // a segment wholly below end adds nothing
	}
	return end
}

// remoteEpochAt is the leader epoch of the remote record at offset: of
// the COPY_SEGMENT_FINISHED segments holding it, the highest epoch their
// leader-epoch maps give it; -1 when none holds it. Two finished segments
// hold one offset only when leaders of different lineages copied it (an
// unclean election before the switch); the later leader's epoch is the
// higher one and its records replaced the earlier ones.
func remoteEpochAt(segs []remote.SegmentMetadata, offset int64) int32 {
	best := base.UndefinedEpoch
	for _, seg := range segs {
		if seg.State != remote.CopySegmentFinished || offset < seg.HeldStartOffset() || offset > seg.EndOffset {
			continue
		}
		if e, ok := epochcache.EpochForOffsetIn(seg.SegmentLeaderEpochs, offset); ok && e > best {
			best = e
		}
	}
	return best
}

// CheckElectReplica is kafka-topic-switch.sh elect --replica
// (https://github.com/aiven/inkless/pull/855): before it sends
// AlterDisklessSwitch with LeaderId (elect the replica with ISR = {it},
// even from outside the ISR), it requires
//
//  1. the switch rules of the request, State.ValidateElectReplica with
//     the seal the description was made under: phase 1 and that seal
//     committed (its *TransitionError is returned as it is; a stale
//     description fails with ErrSealMismatch);
//  2. the replica's high watermark at the seal (HW == S,
//     ErrHighWatermarkNotAtSeal): HW < S is refused even if the replica
//     holds every committed record (https://github.com/aiven/inkless/pull/855 limitation: outside the ISR
//     it cannot tell its committed prefix from an uncommitted tail);
//     [INF] HW > S is refused too: the rule is HW == S;
//  3. [INF] its record at S-1 is of the sealed lineage: with a known
//     seal epoch, a replica whose epoch cache gives S-1 another epoch is
//     refused (ErrSealLineageMismatch). The high watermark cannot tell:
//     a replica of a lineage an unclean election discarded, truncated to
//     the seal, has HW = S too;
//  4. its log plus remote storage cover [X, S) without a gap
//     (ErrClassicPrefixGap, with the first missing range), remote
//     storage counting only in the sealed lineage (RemoteRange).
//
// The controller's own checks (the replica is active, its log directory
// for the partition online) need the cluster's metadata and are not made
// here.
func CheckElectReplica(s State, d ReplicaDescription) error {
	const op = OpElectReplica
	if err := s.ValidateElectReplica(d.Seal); err != nil {
		return err
	}
	if err := d.validate(); err != nil {
		return refuseRecovery(op, d.BrokerID, ErrInvalidArgument, "description: %v", err)
	}
	d = d.withSealLineage(s)
	if d.HighWatermark != d.Seal {
		why := "past"
		if d.HighWatermark < d.Seal {
			why = "below"
		}
		return refuseRecovery(op, d.BrokerID, ErrHighWatermarkNotAtSeal, "high watermark %d %s the seal %d (log %s)",
			d.HighWatermark, why, d.Seal, d.LocalRange())
	}
	if !d.LogOfSealedLineage() {
		return refuseRecovery(op, d.BrokerID, ErrSealLineageMismatch, "epoch at %d is %d, sealed in epoch %d",
			d.Seal-1, d.EpochBeforeSeal.Value, d.SealEpoch.Value)
	}
	if missing := d.MissingRanges(); len(missing) > 0 {
		return refuseRecovery(op, d.BrokerID, ErrClassicPrefixGap, "prefix %s: remote %s, log %s, missing %s",
			d.ClassicPrefix(), d.RemoteRange(), d.LocalRange(), missing[0])
	}
	return nil
}

// StartPhaseTwoRequest is what kafka-topic-switch.sh start-phase-2 works
// from.
type StartPhaseTwoRequest struct {
	// Replicas is the partition's replica assignment (broker ids).
	Replicas []int32
	// Descriptions holds the descriptions of the replicas whose brokers
	// answered (Describe on each replica's broker), at most one each, in
	// any order; at least one.
	Descriptions []ReplicaDescription
	// CurrentLeaderEpoch is the partition's leader epoch in the
	// metadata; the record bumps it once (State.StartPhaseTwo).
	CurrentLeaderEpoch int32
	// AcceptDataLoss is --accept-data-loss.
	AcceptDataLoss bool
}

// StartPhaseTwoPlan is what start-phase-2 sends and tells the operator.
type StartPhaseTwoPlan struct {
	// PreviousSeal is the committed seal; Seal the new one: the highest
	// remote end any replica reported.
	PreviousSeal, Seal int64
	// RemoteEndFrom is the replica whose remote view gave Seal (the
	// lowest broker id among equals).
	RemoteEndFrom int32
	// RecordedEpoch is the epoch of the remote record at Seal - 1 as that
	// replica reported it (ReplicaDescription.RemoteEndEpoch), -1 when
	// the new prefix is empty: the phase-2 recorded epoch R the record
	// writes. With R every replica runs the phase-2 replica check, so one
	// whose log below the new seal is not the lineage remote storage holds
	// (an uncommitted tail of an older epoch) is recreated from remote
	// storage instead of leading with records no consumer was given.
	RecordedEpoch int32
	// Lost is [Seal, PreviousSeal): the records phase 2 gives up; empty
	// when remote storage holds the whole prefix. Consumers reading
	// inside it receive the diskless records from PreviousSeal on.
	Lost OffsetRange
	// NotDescribed are the assigned replicas without a description
	// (their brokers did not answer), in assignment order: what they
	// hold was not checked. Nil when every replica was described.
	NotDescribed []int32
	// Next is the State the controller commits: State.StartPhaseTwo(Seal,
	// RecordedEpoch, CurrentLeaderEpoch) of the State planned from (phase
	// 2, flag set, E_d = CurrentLeaderEpoch + 1). The controller runs
	// StartPhaseTwo on its own State; --dry-run prints this one.
	Next State
}

// RepairNeeded reports whether the seal changes, so the operator must run
// kafka-topic-switch.sh repair (RepairDisklessLog): until then the
// control plane's diskless_start_offset keeps the old seal.
func (p StartPhaseTwoPlan) RepairNeeded() bool { return p.Seal != p.PreviousSeal }

// Reminder is the tool's closing message: the repair step when the seal
// changes, or "" when it does not.
func (p StartPhaseTwoPlan) Reminder() string {
	if !p.RepairNeeded() {
		return ""
	}
	return fmt.Sprintf("run kafka-topic-switch.sh repair: the control plane's diskless_start_offset keeps the old seal %d until then",
		p.PreviousSeal)
}

func (p StartPhaseTwoPlan) String() string {
	msg := fmt.Sprintf("start phase 2 at seal %d (was %d, remote end from replica %d, epoch %d there), lost %s",
		p.Seal, p.PreviousSeal, p.RemoteEndFrom, p.RecordedEpoch, p.Lost)
	if len(p.NotDescribed) > 0 {
		msg += fmt.Sprintf(", replicas not described %v", p.NotDescribed)
	}
	msg += fmt.Sprintf(": %s", p.Next)
	if r := p.Reminder(); r != "" {
		msg += "; " + r
	}
	return msg
}

// PlanStartPhaseTwo is kafka-topic-switch.sh start-phase-2
// (https://github.com/aiven/inkless/pull/855): the recovery of a phase-1
// partition whose replicas all lost part of the classic prefix. In order:
//
//  1. the switch rules of State.StartPhaseTwo at the committed seal
//     (phase 1, a valid leader epoch; its *TransitionError is returned as
//     it is);
//  2. valid descriptions made under the committed seal, at least one
//     (ErrReplicaNotDescribed: the new seal is a replica's report); a
//     stale one is ErrSealMismatch (describe again); no replicas, a
//     description twice or of a broker outside the assignment, or one
//     whose offsets contradict each other is ErrInvalidArgument. A
//     replica without a description (its broker did not answer) does
//     not block: the PR's rule is about the replicas that report, and
//     the loss such a replica might have prevented still needs
//     AcceptDataLoss; the plan names it (NotDescribed);
//  3. no described replica has the whole prefix (HoldsClassicPrefix:
//     its log reaches the seal and, with remote storage, covers it;
//     ErrReplicaHoldsClassicPrefix). The high watermark does not enter
//     the rule; the refusal says "elect it instead" only when elect
//     would take the replica (HW at the seal), and otherwise that elect
//     refuses it too;
//  4. the new seal is the highest remote end reported by any replica
//     (brokers read the remote log metadata at different speeds), a
//     remote run counting only in the sealed lineage (RemoteRange: with
//     a known seal epoch, a copy of a lineage an unclean election
//     discarded covers nothing); when it
//     is below the committed seal, [new seal, S) is lost and needs
//     AcceptDataLoss (ErrDataLossNotAccepted).
//
// The plan's Next is State.StartPhaseTwo at the new seal. When the seal
// changes the operator must run repair next (StartPhaseTwoPlan.Reminder).
func PlanStartPhaseTwo(s State, req StartPhaseTwoRequest) (StartPhaseTwoPlan, error) {
	const op = OpStartPhaseTwo
	if _, err := s.StartPhaseTwo(s.Seal(), base.UndefinedEpoch, req.CurrentLeaderEpoch); err != nil {
		return StartPhaseTwoPlan{}, err
	}
	seal := s.Seal()
	if err := checkDescriptions(seal, req.Replicas, req.Descriptions); err != nil {
		return StartPhaseTwoPlan{}, err
	}
	descs := slices.Clone(req.Descriptions)
	for i := range descs {
		descs[i] = descs[i].withSealLineage(s)
	}
	best := descs[0]
	for _, d := range descs {
		if d.HoldsClassicPrefix() {
			advice := "elect it instead"
			if d.HighWatermark != d.Seal {
				advice = fmt.Sprintf("elect refuses it too (%v)", ErrHighWatermarkNotAtSeal)
			}
			return StartPhaseTwoPlan{}, refuseRecovery(op, d.BrokerID, ErrReplicaHoldsClassicPrefix,
				"log %s hw %d and remote %s cover %s: %s", d.LocalRange(), d.HighWatermark, d.RemoteRange(),
				d.ClassicPrefix(), advice)
		}
		if end, bestEnd := d.RemoteRange().End, best.RemoteRange().End; end > bestEnd ||
			(end == bestEnd && d.BrokerID < best.BrokerID) {
			best = d
		}
	}
	plan := StartPhaseTwoPlan{
		PreviousSeal:  seal,
		Seal:          best.RemoteRange().End,
		RemoteEndFrom: best.BrokerID,
		RecordedEpoch: base.UndefinedEpoch,
		Lost:          best.StartPhaseTwoLoss(),
		NotDescribed:  notDescribed(req.Replicas, req.Descriptions),
	}
	if !best.RemoteRange().Empty() && !mutation.Disabled(mutation.StartPhaseTwoRecordedEpoch) {
		plan.RecordedEpoch = best.RemoteEndEpoch
	}
	if !plan.Lost.Empty() && !req.AcceptDataLoss {
		unchecked := ""
		if len(plan.NotDescribed) > 0 {
			unchecked = fmt.Sprintf(" (replicas not described %v)", plan.NotDescribed)
		}
		return StartPhaseTwoPlan{}, refuseRecovery(op, noReplica, ErrDataLossNotAccepted,
			"new seal %d (remote end from replica %d) loses %s%s", plan.Seal, plan.RemoteEndFrom, plan.Lost, unchecked)
	}
	next, err := s.StartPhaseTwo(plan.Seal, plan.RecordedEpoch, req.CurrentLeaderEpoch)
	if err != nil {
		// Step 1 passed and 0 <= the new seal <= the committed one; a
		// remote end epoch above the leader epoch is ErrInvalidRecordedEpoch.
		return StartPhaseTwoPlan{}, err
	}
	plan.Next = next
	return plan, nil
}

// checkDescriptions is PlanStartPhaseTwo's step 2.
func checkDescriptions(seal int64, replicas []int32, descs []ReplicaDescription) error {
	const op = OpStartPhaseTwo
	if len(replicas) == 0 {
		return refuseRecovery(op, noReplica, ErrInvalidArgument, "no replicas")
	}
	described := make(map[int32]bool, len(replicas))
	for _, id := range replicas {
		described[id] = false
	}
	for _, d := range descs {
		done, assigned := described[d.BrokerID]
		switch err := d.validate(); {
		case !assigned:
			return refuseRecovery(op, d.BrokerID, ErrInvalidArgument, "not a replica of the partition")
		case done:
			return refuseRecovery(op, d.BrokerID, ErrInvalidArgument, "described twice")
		case err != nil:
			return refuseRecovery(op, d.BrokerID, ErrInvalidArgument, "description: %v", err)
		case d.Seal != seal:
			return refuseRecovery(op, d.BrokerID, ErrSealMismatch, "described under seal %d, committed seal %d",
				d.Seal, seal)
		}
		described[d.BrokerID] = true
	}
	if len(descs) == 0 {
		return refuseRecovery(op, noReplica, ErrReplicaNotDescribed, "no replica of %v answered (seal %d)", replicas, seal)
	}
	return nil
}

// notDescribed returns the replicas without a description, in
// assignment order (nil when none).
func notDescribed(replicas []int32, descs []ReplicaDescription) []int32 {
	var out []int32
	for _, id := range replicas {
		found := false
		for _, d := range descs {
			found = found || d.BrokerID == id
		}
		if !found {
			out = append(out, id)
		}
	}
	return out
}
