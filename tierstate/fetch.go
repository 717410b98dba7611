package tierstate

import (
	"fmt"

	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/internal/mutation"
)

// FetchLog is what ValidateFetch reads of the leader's local log.
// *log.UnifiedLog satisfies it. Every method must be safe to call
// concurrently with the log's writer.
type FetchLog interface {
	LogStartOffset() int64
	LocalLogStartOffset() int64
	LogEndOffset() int64
	HighWatermark() int64
	// EndOffsetForEpoch answers OffsetsForLeaderEpoch from the log's epoch
	// cache: the largest epoch <= epoch and its exclusive end offset;
	// Undefined when there is no answer (Kafka's
	// LeaderEpochFileCache.endOffsetFor).
	EndOffsetForEpoch(epoch int32) EpochEndOffset
	// EarliestEpoch is the epoch of the cache's first entry, false when
	// the cache is empty (Kafka's LeaderEpochFileCache.earliestEntry).
	EarliestEpoch() (int32, bool)
	RemoteStorageEnabled() bool
}

// Fetcher says who sent a fetch.
type Fetcher int8

const (
	// FetcherConsumer is a client: replica id -1 (Kafka:
	// FetchParams.isFromConsumer).
	FetcherConsumer Fetcher = iota
	// FetcherFollower is another broker's replica fetcher (isFromFollower).
	FetcherFollower
	// FetcherFuture is this broker's future replica of a log directory
	// move (isFromFuture).
	FetcherFuture
)

func (f Fetcher) String() string {
	switch f {
	case FetcherConsumer:
		return "consumer"
	case FetcherFollower:
		return "follower"
	case FetcherFuture:
		return "future"
	}
	return fmt.Sprintf("Fetcher(%d)", int8(f))
}

// FetchRequest is one partition of a fetch as the leader validates it.
type FetchRequest struct {
	Fetcher     Fetcher
	FetchOffset int64
	// LastFetchedEpoch is the epoch of the last batch the fetcher holds
	// (KIP-595 truncation on fetch), or record.UndefinedEpoch when the
	// request carries none (consumers do not send it).
	LastFetchedEpoch int32
	// CurrentLeaderEpoch is the leader epoch the fetcher believes current
	// (KIP-320), or record.UndefinedEpoch to skip the fencing check.
	CurrentLeaderEpoch int32
}

// FetchOutcome is the leader's decision for one partition of a fetch.
type FetchOutcome int8

const (
	// FetchRead: no error; read the local log at the fetch offset.
	FetchRead FetchOutcome = iota
	// FetchDiverging: no error, no records, and the response's
	// divergingEpoch set to (DivergingEpoch, DivergingEndOffset); the
	// follower truncates there (KIP-595).
	FetchDiverging
	// FetchOffsetMovedToTieredStorage: Kafka OFFSET_MOVED_TO_TIERED_STORAGE
	// (109), with the leader's high watermark, log start and log end; the
	// follower rebuilds its auxiliary state from remote storage (Kafka's
	// TierStateMachine).
	FetchOffsetMovedToTieredStorage
	// FetchRemoteRead: no error; the consumer's read is served from remote
	// storage (Kafka's delayed remote fetch).
	FetchRemoteRead
	// FetchOffsetOutOfRange: Kafka OFFSET_OUT_OF_RANGE (1).
	FetchOffsetOutOfRange
	// FetchFencedLeaderEpoch: Kafka FENCED_LEADER_EPOCH (74), the request's
	// current leader epoch is older than the leader's.
	FetchFencedLeaderEpoch
	// FetchUnknownLeaderEpoch: Kafka UNKNOWN_LEADER_EPOCH (75), the
	// request's current leader epoch is newer than the leader's.
	FetchUnknownLeaderEpoch
)

func (o FetchOutcome) String() string {
	switch o {
	case FetchRead:
		return "read"
	case FetchDiverging:
		return "diverging"
	case FetchOffsetMovedToTieredStorage:
		return "OFFSET_MOVED_TO_TIERED_STORAGE"
	case FetchRemoteRead:
		return "remote-read"
	case FetchOffsetOutOfRange:
		return "OFFSET_OUT_OF_RANGE"
	case FetchFencedLeaderEpoch:
		return "FENCED_LEADER_EPOCH"
	case FetchUnknownLeaderEpoch:
		return "UNKNOWN_LEADER_EPOCH"
	}
	return fmt.Sprintf("FetchOutcome(%d)", int8(o))
}

// FetchValidation is ValidateFetch's answer.
type FetchValidation struct {
	Outcome FetchOutcome
	// DivergingEpoch and DivergingEndOffset are the leader's end of the
	// fetcher's last fetched epoch, set for FetchDiverging only
	// (record.UndefinedEpoch and record.UndefinedOffset otherwise).
	DivergingEpoch     int32
	DivergingEndOffset int64
	// The leader's offsets, read once at the start of the validation (as
	// Kafka reads them before the read), for the response: the high
	// watermark, log start and log end offsets; record.UndefinedOffset for
	// an epoch-fencing error, whose response carries none.
	HighWatermark  int64
	LogStartOffset int64
	LogEndOffset   int64
	// LocalLogStartOffset is the local log start read with them, for logs
	// and tests.
	LocalLogStartOffset int64
	// Reason names the rule that decided, for logs and tests.
	Reason string
}

func (v FetchValidation) String() string {
	s := v.Outcome.String()
	if v.Outcome == FetchDiverging {
		s += fmt.Sprintf(" epoch=%d end=%d", v.DivergingEpoch, v.DivergingEndOffset)
	}
	if v.Outcome != FetchFencedLeaderEpoch && v.Outcome != FetchUnknownLeaderEpoch {
		s += fmt.Sprintf(" hw=%d log-start=%d log-end=%d", v.HighWatermark, v.LogStartOffset, v.LogEndOffset)
	}
	return s + " (" + v.Reason + ")"
}

// checkLeaderEpoch is Kafka's leader-epoch fencing of a fetch
// (Partition.localLogWithEpochOrThrow): a request epoch older than the
// leader's is FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH, and an
// undefined one skips the check. FetchRead means it passes.
func checkLeaderEpoch(current, leader int32) (FetchOutcome, string) {
	switch {
	case current == base.UndefinedEpoch:
	case current < leader:
		return FetchFencedLeaderEpoch, fmt.Sprintf("request epoch %d older than leader epoch %d", current, leader)
	case current > leader:
		return FetchUnknownLeaderEpoch, fmt.Sprintf("request epoch %d newer than leader epoch %d", current, leader)
	}
	return FetchRead, ""
}

// ValidateFetch decides what the leader answers to one partition of a fetch
// before it reads records (Kafka's Partition.fetchRecords checks and
// ReplicaManager.handleOffsetOutOfRangeError), from its log l and its
// current leader epoch. It reads the log's offsets once (a concurrent
// append or retention may move them right after; Kafka reads them the same
// way) and applies Kafka's checks in Kafka's order. With E the last fetched
// epoch, O the fetch offset and (Le, Lo) = l.EndOffsetForEpoch(E):
//
//	step  condition                                answer
//	1     current leader epoch sent, older         FENCED_LEADER_EPOCH
//	      current leader epoch sent, newer         UNKNOWN_LEADER_EPOCH
//	2     E sent, no (Le, Lo)                      out of range (step 4)
//	      E sent, O < log start                    out of range (step 4), even if diverging
//	      E sent, Le < E or Lo < O                 diverging at (Le, Lo), no records
//	      E sent, E < earliest cached epoch, O > 0 out of range (step 4); not Kafka's,
//	                                                 see below
//	3     O < log start, O > LEO, O < local start  out of range (step 4)
//	      otherwise                                read
//	4     out of range, remote storage enabled,    follower, future replica:
//	      log start <= O < local log start           OFFSET_MOVED_TO_TIERED_STORAGE
//	                                                 with the leader's HW, log start, LEO
//	                                               consumer: remote read
//	      any other out of range                   OFFSET_OUT_OF_RANGE
//
// Step 1 is Kafka's Partition.localLogWithEpochOrThrow, step 2
// Partition.readRecords (Le can only be <= E: the cache answers the
// floor epoch, or E itself below its earliest entry, so "Le < E" is
// "the epoch found differs from E"), step 3 UnifiedLog.read and
// LocalLog.read, step 4 ReplicaManager.handleOffsetOutOfRangeError, which
// every OffsetOutOfRangeException reaches, the ones of step 2 included.
// The one rule Kafka does not have: below its earliest entry the cache
// answers (E, log start), which vouches for none of the follower's records
// of E (all below the log start, maybe a tail another leader replaced);
// Kafka reads on and the follower keeps them, tierlog answers out of range
// so that the follower starts over at the log start.
//
// A consumer fetch between the high watermark (or LSO) and the log end is
// a read that returns nothing, not an error; the isolation bound is the
// read's. This validates only; the caller reads with l.Read.
func ValidateFetch(l FetchLog, leaderEpoch int32, req FetchRequest) FetchValidation {
	if o, reason := checkLeaderEpoch(req.CurrentLeaderEpoch, leaderEpoch); o != FetchRead {
		return epochError(o, reason)
	}
	v := FetchValidation{
		DivergingEpoch:      base.UndefinedEpoch,
		DivergingEndOffset:  base.UndefinedOffset,
		HighWatermark:       l.HighWatermark(),
		LogStartOffset:      l.LogStartOffset(),
		LogEndOffset:        l.LogEndOffset(),
		LocalLogStartOffset: l.LocalLogStartOffset(),
	}
	offset := req.FetchOffset
	if e := req.LastFetchedEpoch; e != base.UndefinedEpoch {
		ans := l.EndOffsetForEpoch(e)
		end, found, ok := ans.EndOffset, ans.Epoch, !ans.Undefined()
		switch {
		case !ok:
			return v.outOfRange(l, req, fmt.Sprintf("no end offset for last fetched epoch %d", e))
		case offset < v.LogStartOffset:
			return v.outOfRange(l, req, fmt.Sprintf("offset %d below log start %d", offset, v.LogStartOffset))
		case found < e || end < offset:
			v.Outcome, v.DivergingEpoch, v.DivergingEndOffset = FetchDiverging, found, end
			v.Reason = fmt.Sprintf("last fetched epoch %d: leader has epoch %d ending at %d, fetch offset %d", e, found, end, offset)
			return v
		case offset > 0 && precedesEarliest(l, e) && !mutation.Disabled(mutation.FetchEpochBelowEarliest):
			// The leader's cache was truncated from the start past every
			// record of epoch e: it answered e ending where its first
			// entry starts, the log start, which vouches for nothing. The
			// follower's records of e lie below the log start and may
			// be a tail another leader replaced before DeleteRecords
			// removed its own: kept, their producer state would answer
			// a retry DUPLICATE with offsets that hold other records.
			// Out of range at the log start, the follower starts over
			// there (truncation.PlanOutOfRangeReset). Kafka keeps them.
			// At offset 0 the follower holds no record to doubt.
			earliest, _ := l.EarliestEpoch()
			return v.outOfRange(l, req, fmt.Sprintf("last fetched epoch %d precedes the leader's earliest epoch %d: "+
				"the follower's records below the log start %d cannot be verified", e, earliest, v.LogStartOffset))
		}
	}
	switch {
	case offset < v.LogStartOffset:
		return v.outOfRange(l, req, fmt.Sprintf("offset %d below log start %d", offset, v.LogStartOffset))
	case offset > v.LogEndOffset:
		return v.outOfRange(l, req, fmt.Sprintf("offset %d above log end %d", offset, v.LogEndOffset))
	case offset < v.LocalLogStartOffset:
		return v.outOfRange(l, req, fmt.Sprintf("offset %d below local log start %d", offset, v.LocalLogStartOffset))
	}
	v.Outcome = FetchRead
	v.Reason = fmt.Sprintf("offset %d in [%d, %d]", offset, v.LocalLogStartOffset, v.LogEndOffset)
	return v
}

// outOfRange is Kafka's handleOffsetOutOfRangeError: the tiered range
// [log start, local log start) of a remote-enabled log is served from
// remote storage, anything else is OFFSET_OUT_OF_RANGE.
func (v FetchValidation) outOfRange(l FetchLog, req FetchRequest, why string) FetchValidation {
	offset := req.FetchOffset
	if !l.RemoteStorageEnabled() || offset < v.LogStartOffset || offset >= v.LocalLogStartOffset {
		v.Outcome, v.Reason = FetchOffsetOutOfRange, why
		return v
	}
	tiered := fmt.Sprintf("%s; offset in tiered range [%d, %d)", why, v.LogStartOffset, v.LocalLogStartOffset)
	if req.Fetcher == FetcherConsumer {
		v.Outcome, v.Reason = FetchRemoteRead, tiered
	} else {
		v.Outcome, v.Reason = FetchOffsetMovedToTieredStorage, tiered
	}
	return v
}

func epochError(o FetchOutcome, reason string) FetchValidation {
	return FetchValidation{
		Outcome:             o,
		DivergingEpoch:      base.UndefinedEpoch,
		DivergingEndOffset:  base.UndefinedOffset,
		HighWatermark:       base.UndefinedOffset,
		LogStartOffset:      base.UndefinedOffset,
		LogEndOffset:        base.UndefinedOffset,
		LocalLogStartOffset: base.UndefinedOffset,
		Reason:              reason,
	}
}

// precedesEarliest reports whether epoch e is older than every epoch of
// l's cache.
func precedesEarliest(l FetchLog, e int32) bool {
	earliest, ok := l.EarliestEpoch()
	return ok && e < earliest
}
