package consolidate

import (
	"fmt"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/internal/mutation"
)

// The endpoint's decisions (Inkless's DisklessLeaderEndPoint), as pure
// functions of plain values. Endpoint asks the WAL, the control plane and
// the remote metadata, and feeds the answers through these.

// DisklessStatus is how the WAL answered one partition's fetch.
type DisklessStatus int8

const (
	// DisklessOK: the WAL served the fetch (possibly no batch, at HW).
	DisklessOK DisklessStatus = iota
	// DisklessOutOfRange: the offset is below W or above HW
	// (OFFSET_OUT_OF_RANGE from the control plane).
	DisklessOutOfRange
	// DisklessError: any other error (unknown partition, a failed object
	// read, corruption); it is passed on unchanged.
	DisklessError
)

func (s DisklessStatus) String() string {
	switch s {
	case DisklessOK:
		return "none"
	case DisklessOutOfRange:
		return "out-of-range"
	case DisklessError:
		return "error"
	}
	return fmt.Sprintf("DisklessStatus(%d)", int8(s))
}

// Coverage says whether remote storage holds seal - 1, the last classic
// record: a COPY_SEGMENT_FINISHED segment that contains it, looked up in
// the recorded epoch R when the partition has one. It is never derived
// from the local log's highestOffsetInRemoteStorage, which is -1 on a
// recreated leader that has not rebuilt.
type Coverage int8

const (
	// CoverageUnknown: not looked up. DecideFetch asks for the lookup
	// (FetchAnswer.NeedsCoverage) only when its answer depends on it.
	CoverageUnknown Coverage = iota
	// CoverageHeld: remote storage holds seal - 1.
	CoverageHeld
	// CoverageMissing: it does not (the copy of the prefix has not
	// reached the seal).
	CoverageMissing
)

// FetchInput is what DecideFetch needs for one partition's fetch.
type FetchInput struct {
	// FetchOffset is O, the consolidation fetcher's offset (its log end).
	FetchOffset int64
	// Seal is S, the first diskless offset; negative when the partition
	// was born diskless (or its seal is pending).
	Seal int64
	// Status, WALStart and HighWatermark are the WAL's answer: its status,
	// W (the control plane's log start) and HW_d.
	Status        DisklessStatus
	WALStart      int64
	HighWatermark int64
	// LocalLogAvailable: the broker hosts the partition's local log.
	// LocalLogStart is that log's log start offset (Lloc) and
	// RemoteStorageEnabled whether it is tiered.
	LocalLogAvailable    bool
	LocalLogStart        int64
	RemoteStorageEnabled bool
	// CrossTierStart is X, the partition's cross-tier earliest offset,
	// when CrossTierKnown (the control plane may be unreachable).
	CrossTierStart int64
	CrossTierKnown bool
	// Coverage of seal - 1 in remote storage; CoverageUnknown until the
	// caller looked it up.
	Coverage Coverage
}

// FetchError is the error code an endpoint answer carries.
type FetchError int8

const (
	// FetchNone: no error; the WAL's records are served.
	FetchNone FetchError = iota
	// FetchDiskless: the WAL's own error, passed on unchanged (out of
	// range outside the redirect window, unknown partition, a failed
	// read).
	FetchDiskless
	// FetchOffsetOutOfRange: the deleted-prefix reset. Kafka:
	// OFFSET_OUT_OF_RANGE; the fetcher resets its log to the leader's
	// earliest offset (X).
	FetchOffsetOutOfRange
	// FetchNotLeaderOrFollower: remote storage does not hold seal - 1
	// yet. Kafka: NOT_LEADER_OR_FOLLOWER (retriable; back off).
	FetchNotLeaderOrFollower
	// FetchOffsetMovedToTieredStorage: the offset is below the lowest
	// diskless start and held remotely. Kafka:
	// OFFSET_MOVED_TO_TIERED_STORAGE; the fetcher rebuilds from remote
	// storage.
	FetchOffsetMovedToTieredStorage
	// FetchUnknownServerError: the local log starts above the WAL's high
	// watermark, which no consistent state allows. Kafka:
	// UNKNOWN_SERVER_ERROR.
	FetchUnknownServerError
)

func (e FetchError) String() string {
	switch e {
	case FetchNone:
		return "NONE"
	case FetchDiskless:
		return "DISKLESS_ERROR"
	case FetchOffsetOutOfRange:
		return "OFFSET_OUT_OF_RANGE"
	case FetchNotLeaderOrFollower:
		return "NOT_LEADER_OR_FOLLOWER"
	case FetchOffsetMovedToTieredStorage:
		return "OFFSET_MOVED_TO_TIERED_STORAGE"
	case FetchUnknownServerError:
		return "UNKNOWN_SERVER_ERROR"
	}
	return fmt.Sprintf("FetchError(%d)", int8(e))
}

// FetchAnswer is DecideFetch's answer for one partition.
type FetchAnswer struct {
	// NeedsCoverage: the answer depends on whether remote storage holds
	// seal - 1, and FetchInput.Coverage was CoverageUnknown. Look it up
	// and decide again; the other fields are unset.
	NeedsCoverage bool
	Error         FetchError
	// ServeRecords: the WAL's records go into the response (trimmed to
	// the budget, TrimBatches). Only with FetchNone or FetchDiskless.
	ServeRecords bool
	// LogStartOffset is the response's log start offset: L, or -1 where
	// it is unknown.
	LogStartOffset int64
	// DisklessStart is D, the lowest diskless start; WholeLogStart is L.
	// Reported for logs and tests; -1 when not computed.
	DisklessStart int64
	WholeLogStart int64
	// RemotePrefixUnknown raises Inkless's ConsolidationRemotePrefixUnknown
	// signal: a switched partition waits for remote storage to hold its
	// classic prefix.
	RemotePrefixUnknown bool
}

// DisklessStart returns D, the lowest offset the WAL serves for a
// consolidation fetch: max(W, S) for a switched partition, W otherwise.
// The control plane keeps W at the classic log start until the first
// prune moves it to the seal; without the bound a leader that lost its
// local log before that prune would read the first diskless batch at
// offset 0 and its local log would hide the remote prefix
// (github.com/aiven/inkless/pull/857).
func DisklessStart(walStart, seal int64) int64 {
	if seal >= 0 && !mutation.Disabled(mutation.FirstPruneBound) {
		return max(walStart, seal)
	}
	return walStart
}

// WholeLogStart returns L, the whole-log start the response reports:
// min(X, local log start) when X is known, the local log start otherwise.
func WholeLogStart(localLogStart, crossTierStart int64, crossTierKnown bool) int64 {
	if crossTierKnown {
		return min(crossTierStart, localLogStart)
	}
	return localLogStart
}

// DecideFetch answers one partition's consolidation fetch:
//
//  1. no local log: the WAL's answer, log start -1, never a redirect;
//  2. a WAL error other than out of range: passed on, log start -1;
//  3. L > HW_d: UNKNOWN_SERVER_ERROR, log start -1;
//  4. log start L; with remote storage and L <= O < D:
//     a. X known and X >= D (retention or DeleteRecords moved the
//     whole-log start to the diskless start or past it):
//     OFFSET_OUT_OF_RANGE, before any remote lookup;
//     b. switched, the classic prefix [X, S) not empty (X unknown or
//     below S), and remote storage lacks S-1: NOT_LEADER_OR_FOLLOWER
//     and the remote-prefix-unknown signal;
//     c. otherwise OFFSET_MOVED_TO_TIERED_STORAGE (also when the WAL said
//     out of range);
//  5. otherwise the WAL's answer (records, or its out-of-range error).
func DecideFetch(in FetchInput) FetchAnswer {
	a := FetchAnswer{LogStartOffset: base.UndefinedOffset, DisklessStart: base.UndefinedOffset, WholeLogStart: base.UndefinedOffset}
	wal := FetchNone
	if in.Status != DisklessOK {
		wal = FetchDiskless
	}
	if !in.LocalLogAvailable {
		a.Error, a.ServeRecords = wal, in.Status == DisklessOK
		return a
	}
	if in.Status == DisklessError {
		a.Error = FetchDiskless
		return a
	}
	d := DisklessStart(in.WALStart, in.Seal)
	l := WholeLogStart(in.LocalLogStart, in.CrossTierStart, in.CrossTierKnown)
	a.DisklessStart, a.WholeLogStart = d, l
	if l > in.HighWatermark {
		a.Error = FetchUnknownServerError
		return a
	}
	a.LogStartOffset = l
	if in.RemoteStorageEnabled && l <= in.FetchOffset && in.FetchOffset < d {
		// With X at or past S the classic prefix [X, S) is empty
		// (DeleteRecords or retention moved the whole-log start to the
		// seal before the switch): remote storage owes no S - 1, which
		// was deleted, and waiting for it would wait for ever.
		prefix := in.Seal >= 0 && !(in.CrossTierKnown && in.CrossTierStart >= in.Seal &&
			!mutation.Disabled(mutation.EmptyPrefixCoverage))
		switch {
		case in.CrossTierKnown && in.CrossTierStart >= d:
			a.Error = FetchOffsetOutOfRange
		case prefix && in.Coverage == CoverageUnknown:
			return FetchAnswer{NeedsCoverage: true, LogStartOffset: l, DisklessStart: d, WholeLogStart: l}
		case prefix && in.Coverage == CoverageMissing:
			a.Error, a.RemotePrefixUnknown = FetchNotLeaderOrFollower, true
		default:
			a.Error = FetchOffsetMovedToTieredStorage
		}
		return a
	}
	a.Error, a.ServeRecords = wal, in.Status == DisklessOK
	return a
}

// PartitionBudget is the most bytes one partition's consolidation fetch
// may return, so that the follower append of the answer fits one segment:
// min(fetchMaxBytes, segmentBytes - min(maxMessageBytes, segmentBytes-1)),
// at least 1 (Kafka: fetch.max.bytes, segment.bytes, max.message.bytes).
func PartitionBudget(fetchMaxBytes, segmentBytes, maxMessageBytes int64) int64 {
	return max(1, min(fetchMaxBytes, segmentBytes-min(maxMessageBytes, segmentBytes-1)))
}

// BatchSpan is one WAL batch: its offsets (inclusive) and size in bytes.
type BatchSpan struct {
	BaseOffset int64
	LastOffset int64
	Size       int64
}

// TrimBatches picks the batches of a WAL answer to serve: it drops the
// batches that end below fetchOffset, always keeps the first remaining
// one (so a batch larger than the budget still makes progress), and stops
// once the bytes kept reach budget. It returns the half-open index range
// [from, to) of batches to serve.
func TrimBatches(batches []BatchSpan, fetchOffset, budget int64) (from, to int) {
	for from < len(batches) && batches[from].LastOffset < fetchOffset {
		from++
	}
	var kept int64
	for to = from; to < len(batches); to++ {
		if to > from && kept >= budget {
			break
		}
		kept += batches[to].Size
	}
	return from, to
}

// EarliestLocalOffset answers FetchEarliestLocalOffset from the control
// plane's EARLIEST_LOCAL (W): raised to the seal for a switched partition
// (the first-prune bound, DisklessStart), with the epoch EpochAt gives.
func EarliestLocalOffset(walStart, seal int64, disklessEpoch int32) epochcache.OffsetAndEpoch {
	o := DisklessStart(walStart, seal)
	return epochcache.OffsetAndEpoch{Offset: o, Epoch: EpochAt(o, seal, disklessEpoch)}
}

// LatestOffset answers FetchLatestOffset from the control plane's LATEST
// (HW_d): raised to the seal when S > 0 and LATEST is below it (a
// placeholder row reports 0), with the epoch EpochAt gives.
func LatestOffset(latest, seal int64, disklessEpoch int32) epochcache.OffsetAndEpoch {
	o := RaiseToSeal(latest, seal)
	return epochcache.OffsetAndEpoch{Offset: o, Epoch: EpochAt(o, seal, disklessEpoch)}
}

// RaiseToSeal returns max(offset, seal) when seal > 0, offset otherwise.
func RaiseToSeal(offset, seal int64) int64 {
	if seal > 0 && offset < seal {
		return seal
	}
	return offset
}

// EpochAt is the leader epoch the endpoint reports for an offset: E_d at
// or above the seal when E_d is known, else 0 (the epoch consolidated
// batches of a born-diskless partition keep).
func EpochAt(offset, seal int64, disklessEpoch int32) int32 {
	if offset >= seal && disklessEpoch >= 0 {
		return disklessEpoch
	}
	return 0
}

// EpochEndQuery is how the endpoint answers OffsetsForLeaderEpoch(epoch).
type EpochEndQuery int8

const (
	// EpochEndNone: epoch -1; the answer has no epoch and no offset.
	EpochEndNone EpochEndQuery = iota
	// EpochEndAtSeal: a classic epoch (S >= 0, E_d known, epoch < E_d)
	// ends at the seal; no control-plane call.
	EpochEndAtSeal
	// EpochEndLatest: (epoch, LATEST raised to the seal).
	EpochEndLatest
)

// PlanEpochEnd decides how to answer OffsetsForLeaderEpoch(epoch), the
// E_d split: every epoch below E_d ends at the seal (consolidated records
// carry E_d, classic ones an older epoch), every other epoch at the WAL's
// end.
func PlanEpochEnd(epoch int32, seal int64, disklessEpoch int32) EpochEndQuery {
	switch {
	case epoch == base.UndefinedEpoch:
		return EpochEndNone
	case seal >= 0 && disklessEpoch >= 0 && epoch < disklessEpoch:
		return EpochEndAtSeal
	}
	return EpochEndLatest
}

// EpochEnd is the answer PlanEpochEnd's query gives; latest is the
// control plane's LATEST, read only for EpochEndLatest.
func EpochEnd(q EpochEndQuery, epoch int32, seal, latest int64) epochcache.EpochEndOffset {
	switch q {
	case EpochEndNone:
		return epochcache.UndefinedEpochEndOffset
	case EpochEndAtSeal:
		return epochcache.EpochEndOffset{Epoch: epoch, EndOffset: seal}
	}
	return epochcache.EpochEndOffset{Epoch: epoch, EndOffset: RaiseToSeal(latest, seal)}
}
