package consolidate

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/tierstate"
	"github.com/tierlog/tierlog/wal"
)

// Errors of the Endpoint. A partition's answer carries one of these (or
// the WAL's own error); errors.Is recognises them.
var (
	// ErrOffsetMovedToTieredStorage: the offset is below the lowest
	// diskless start and remote storage holds it; rebuild from remote
	// storage (tierstate.Machine.Rebuild). The same sentinel as package
	// log's. Kafka: OFFSET_MOVED_TO_TIERED_STORAGE.
	ErrOffsetMovedToTieredStorage = log.ErrOffsetMovedToTieredStorage
	// ErrOffsetOutOfRange: the deleted-prefix reset; the fetcher resets
	// its log to the endpoint's earliest offset. Kafka: OFFSET_OUT_OF_RANGE.
	ErrOffsetOutOfRange = base.ErrOffsetOutOfRange
	// ErrNotLeaderOrFollower: remote storage does not hold the classic
	// prefix up to the seal yet. Retriable. Kafka: NOT_LEADER_OR_FOLLOWER.
	ErrNotLeaderOrFollower = errors.New("consolidate: remote storage does not hold the classic prefix yet")
	// ErrUnknownServerError: the local log starts above the WAL's high
	// watermark. Kafka: UNKNOWN_SERVER_ERROR.
	ErrUnknownServerError = errors.New("consolidate: local log start above the diskless high watermark")
	// ErrUnknownTopicOrPartition: the endpoint does not know the
	// partition, or it is not diskless. Kafka: UNKNOWN_TOPIC_OR_PARTITION.
	ErrUnknownTopicOrPartition = errors.New("consolidate: unknown topic or partition")
	// ErrInvalidArgument is base.ErrInvalidArgument.
	ErrInvalidArgument = base.ErrInvalidArgument
)

// WALFetcher reads diskless batches. *wal.Reader satisfies it.
type WALFetcher interface {
	Fetch(ctx context.Context, req wal.FindBatchesRequest) ([]wal.FetchResult, error)
}

// walReleaser is a WALFetcher that takes the buffers of its results back
// for later fetches (*wal.Reader: wal.Reader.Release).
type walReleaser interface {
	Release(res ...wal.FetchResult)
}

// RemoteSegments finds remote segments. *remote.MetadataManager
// satisfies it.
type RemoteSegments interface {
	// SegmentFor returns the finished segment holding offset in epoch.
	SegmentFor(tp remote.TopicIDPartition, epoch int32, offset int64) (remote.SegmentMetadata, bool, error)
	// ListSegments returns every segment not yet deleted, in any state.
	ListSegments(tp remote.TopicIDPartition) ([]remote.SegmentMetadata, error)
}

// LocalLog is what the endpoint reads of a partition's local log.
// *log.UnifiedLog satisfies it.
type LocalLog interface {
	LogStartOffset() int64
	RemoteStorageEnabled() bool
}

var _ LocalLog = (*log.UnifiedLog)(nil)

// PartitionSource tells the endpoint what the broker knows of a
// partition: its switch state (from the cluster metadata) and its local
// log, nil when the broker has none.
type PartitionSource interface {
	// Partition returns ok false for a partition the broker does not host.
	Partition(tp remote.TopicIDPartition) (state tierstate.State, local LocalLog, ok bool)
}

// EndpointOptions configures an Endpoint. ControlPlane, WAL, Remote and
// Partitions are required.
type EndpointOptions struct {
	ControlPlane wal.ControlPlane
	WAL          WALFetcher
	Remote       RemoteSegments
	Partitions   PartitionSource
	// CrossTier answers X, the cross-tier earliest offset; nil: X is
	// never known (the whole-log start is the local log start).
	CrossTier remote.ConsolidationState
	// FetchMaxBytes bounds one fetch's answer. Default 50 MiB. Kafka:
	// fetch.max.bytes.
	FetchMaxBytes int64
	// SegmentBytes and MaxMessageBytes are the local log's; one
	// partition's answer is trimmed so that it fits a segment
	// (PartitionBudget). Defaults 1 GiB (segment.bytes) and 1048588
	// (max.message.bytes).
	SegmentBytes    int64
	MaxMessageBytes int64
	// Logger; default zap.NewNop().
	Logger *zap.Logger
}

// Defaults of EndpointOptions.
const (
	DefaultFetchMaxBytes   int64 = 50 << 20
	DefaultSegmentBytes    int64 = 1 << 30
	DefaultMaxMessageBytes int64 = 1048588
)

// Endpoint is the consolidation fetcher's leader: it serves a switched or
// born-diskless partition's records from the WAL and redirects fetches
// below the lowest diskless start to remote storage (Inkless's
// DisklessLeaderEndPoint). It satisfies tierstate.LeaderEndpoint.
//
// Concurrency: safe for concurrent use; it holds no lock.
type Endpoint struct {
	opts    EndpointOptions
	budget  int64
	metrics endpointCounters
}

var _ tierstate.LeaderEndpoint = (*Endpoint)(nil)

// NewEndpoint returns an Endpoint.
func NewEndpoint(opts EndpointOptions) (*Endpoint, error) {
	if opts.ControlPlane == nil || opts.WAL == nil || opts.Remote == nil || opts.Partitions == nil {
		return nil, fmt.Errorf("consolidate: endpoint needs a control plane, a WAL reader, remote metadata and a partition source: %w", ErrInvalidArgument)
	}
	if opts.FetchMaxBytes == 0 {
		opts.FetchMaxBytes = DefaultFetchMaxBytes
	}
	if opts.SegmentBytes == 0 {
		opts.SegmentBytes = DefaultSegmentBytes
	}
	if opts.MaxMessageBytes == 0 {
		opts.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if opts.FetchMaxBytes < 0 || opts.SegmentBytes < 0 || opts.MaxMessageBytes < 0 {
		return nil, fmt.Errorf("consolidate: negative byte limit: %w", ErrInvalidArgument)
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	return &Endpoint{opts: opts, budget: PartitionBudget(opts.FetchMaxBytes, opts.SegmentBytes, opts.MaxMessageBytes)}, nil
}

// FetchPartition is one partition of a consolidation fetch.
type FetchPartition struct {
	Partition remote.TopicIDPartition
	// Offset is the fetch offset (the local log's end).
	Offset int64
}

// PartitionResponse answers one FetchPartition.
type PartitionResponse struct {
	Partition remote.TopicIDPartition
	// Code is the decision; Err is nil for FetchNone, else an error
	// wrapping the code's sentinel, or the WAL's error for FetchDiskless.
	Code FetchError
	Err  error
	// Records are whole batches from the fetch offset with their assigned
	// offsets, trimmed to the partition budget. The leader epoch in them
	// is the producer's; the fetcher stamps E_d. Never nil: empty when
	// nothing is served, so an encoder writes an empty record set, not a
	// null one (size -1, which consumers refuse).
	Records []byte
	// HighWatermark is the WAL's (HW_d), LogStartOffset the whole-log
	// start L (-1 when unknown).
	HighWatermark  int64
	LogStartOffset int64
	// RemotePrefixUnknown is Inkless's ConsolidationRemotePrefixUnknown
	// signal (with ErrNotLeaderOrFollower).
	RemotePrefixUnknown bool
	// walResult is the WAL's answer Records were cut from: Release
	// gives its buffer back to the WAL reader.
	walResult wal.FetchResult
}

// walTP is tp's WAL identity.
func walTP(tp remote.TopicIDPartition) wal.TopicIDPartition {
	return wal.TopicIDPartition{TopicID: wal.TopicID(tp.TopicID), Partition: tp.Partition}
}

// Fetch answers a consolidation fetch of several partitions with one WAL
// read. The returned error is for the whole call (the control plane
// failed, ctx ended); each partition's outcome is in its response.
func (e *Endpoint) Fetch(ctx context.Context, parts []FetchPartition) ([]PartitionResponse, error) {
	req := wal.FindBatchesRequest{MaxBytes: e.opts.FetchMaxBytes, Partitions: make([]wal.FindPartition, len(parts))}
	for i, p := range parts {
		req.Partitions[i] = wal.FindPartition{Partition: walTP(p.Partition), Offset: p.Offset, MaxPartitionBytes: e.budget}
	}
	found, err := e.opts.WAL.Fetch(ctx, req)
	if err != nil {
		return nil, err
	}
	if len(found) != len(parts) {
		return nil, fmt.Errorf("consolidate: %d WAL answers for %d partitions: %w", len(found), len(parts), wal.ErrInconsistentAnswer)
	}
	out := make([]PartitionResponse, len(parts))
	for i, p := range parts {
		out[i] = e.answer(p, found[i])
		out[i].walResult = found[i]
	}
	e.metrics.fetches.Add(1)
	return out, nil
}

// Release gives the buffers of Fetch's responses back to the WAL reader
// (when it takes them back: wal.Reader.Release), which reads later
// fetches' answers into them. The caller must not use the responses'
// Records, or slices of them, after the call, and releases each response
// at most once; a response never released is garbage collected. The
// Fetcher releases each answer once its batches are appended
// (AppendAsFollower writes them to the log's file and keeps no
// reference) or dropped.
func (e *Endpoint) Release(res ...PartitionResponse) {
	rel, ok := e.opts.WAL.(walReleaser)
	for i := range res {
		if ok {
			rel.Release(res[i].walResult)
		}
		res[i].walResult = wal.FetchResult{}
	}
}

// answer runs DecideFetch for one partition over the WAL's result f.
func (e *Endpoint) answer(p FetchPartition, f wal.FetchResult) PartitionResponse {
	tp := p.Partition
	r := PartitionResponse{Partition: tp, Records: []byte{}, HighWatermark: f.HighWatermark, LogStartOffset: base.UndefinedOffset}
	state, local, ok := e.opts.Partitions.Partition(tp)
	if !ok {
		r.Code, r.Err = FetchDiskless, f.Err
		if r.Err == nil {
			r.Err = fmt.Errorf("%w: %s", ErrUnknownTopicOrPartition, tp)
		}
		return r
	}
	in := FetchInput{FetchOffset: p.Offset, Seal: state.Seal(), WALStart: f.LogStartOffset, HighWatermark: f.HighWatermark}
	switch {
	case f.Err == nil:
	case errors.Is(f.Err, wal.ErrOffsetOutOfRange):
		in.Status = DisklessOutOfRange
	default:
		in.Status = DisklessError
	}
	if local != nil {
		in.LocalLogAvailable, in.LocalLogStart, in.RemoteStorageEnabled = true, local.LogStartOffset(), local.RemoteStorageEnabled()
	}
	if ct := e.opts.CrossTier; ct != nil {
		if _, x, known := ct.CrossTierLogStart(tp); known {
			in.CrossTierStart, in.CrossTierKnown = x, true
		}
	}
	a := DecideFetch(in)
	if a.NeedsCoverage {
		cov, err := e.coverage(tp, state)
		if err != nil {
			r.Code, r.Err = FetchDiskless, fmt.Errorf("consolidate: remote lookup of %d for %s: %w", state.Seal()-1, tp, err)
			return r
		}
		in.Coverage = cov
		a = DecideFetch(in)
	}
	r.Code, r.LogStartOffset, r.RemotePrefixUnknown = a.Error, a.LogStartOffset, a.RemotePrefixUnknown
	window := func(sentinel error) error {
		return fmt.Errorf("%w: %s offset %d, window [%d, %d)", sentinel, tp, p.Offset, a.WholeLogStart, a.DisklessStart)
	}
	switch a.Error {
	case FetchDiskless:
		r.Err = f.Err
	case FetchOffsetOutOfRange:
		r.Err = window(ErrOffsetOutOfRange)
		e.metrics.resets.Add(1)
	case FetchNotLeaderOrFollower:
		r.Err = window(ErrNotLeaderOrFollower)
		e.metrics.prefixUnknown.Add(1)
		e.opts.Logger.Warn("consolidation waits for remote storage to hold the classic prefix",
			zap.Stringer("partition", tp), zap.Int64("seal", state.Seal()), zap.Int64("fetchOffset", p.Offset))
	case FetchOffsetMovedToTieredStorage:
		r.Err = window(ErrOffsetMovedToTieredStorage)
		e.metrics.redirects.Add(1)
	case FetchUnknownServerError:
		r.Err = fmt.Errorf("%w: %s local log start %d, high watermark %d", ErrUnknownServerError, tp, in.LocalLogStart, in.HighWatermark)
	}
	if a.ServeRecords {
		r.Records = trimRecords(f.Records, p.Offset, e.budget)
		e.metrics.servedBytes.Add(int64(len(r.Records)))
	}
	return r
}

// coverage looks up whether remote storage holds seal - 1: in the
// recorded epoch R when the partition has one, else in any epoch. It
// never reads the local log's highestOffsetInRemoteStorage (-1 on a
// recreated leader).
func (e *Endpoint) coverage(tp remote.TopicIDPartition, state tierstate.State) (Coverage, error) {
	e.metrics.coverageLookups.Add(1)
	target := state.Seal() - 1
	if target < 0 {
		return CoverageHeld, nil // an empty prefix is held trivially
	}
	if r := state.LastClassicLeaderEpoch(); r >= 0 {
		_, ok, err := e.opts.Remote.SegmentFor(tp, r, target)
		if err != nil {
			return CoverageUnknown, err
		}
		if ok {
			return CoverageHeld, nil
		}
		return CoverageMissing, nil
	}
	segs, err := e.opts.Remote.ListSegments(tp)
	if err != nil {
		return CoverageUnknown, err
	}
	for _, s := range segs {
		if s.State == remote.CopySegmentFinished && s.HeldStartOffset() <= target && target <= s.EndOffset {
			return CoverageHeld, nil
		}
	}
	return CoverageMissing, nil
}

// trimRecords applies TrimBatches to whole batches in buf (the WAL
// reader's answer: framed and checked batches).
func trimRecords(buf []byte, fetchOffset, budget int64) []byte {
	var spans []BatchSpan
	var ends []int
	for pos := 0; pos < len(buf); {
		b, err := record.ReadBatch(buf[pos:])
		if err != nil {
			break // the reader checked every batch; nothing past a bad one
		}
		spans = append(spans, BatchSpan{BaseOffset: b.BaseOffset(), LastOffset: b.LastOffset(), Size: int64(b.Size())})
		pos += b.Size()
		ends = append(ends, pos)
	}
	from, to := TrimBatches(spans, fetchOffset, budget)
	if from == to {
		return []byte{}
	}
	start := 0
	if from > 0 {
		start = ends[from-1]
	}
	return buf[start:ends[to-1]]
}

// listOffset asks the control plane one ListOffsets question.
func (e *Endpoint) listOffset(ctx context.Context, tp remote.TopicIDPartition, ts int64) (int64, error) {
	res, err := e.opts.ControlPlane.ListOffsets(ctx, []wal.ListOffsetsRequest{{Partition: walTP(tp), Timestamp: ts}})
	if err != nil {
		return 0, err
	}
	if len(res) != 1 {
		return 0, fmt.Errorf("consolidate: %d ListOffsets answers for 1 question: %w", len(res), wal.ErrInconsistentAnswer)
	}
	if res[0].Err != nil {
		return 0, res[0].Err
	}
	return res[0].Offset, nil
}

func (e *Endpoint) state(tp remote.TopicIDPartition) (tierstate.State, error) {
	s, _, ok := e.opts.Partitions.Partition(tp)
	if !ok {
		return tierstate.State{}, fmt.Errorf("%w: %s", ErrUnknownTopicOrPartition, tp)
	}
	return s, nil
}

// FetchEarliestLocalOffset returns the WAL start W (control-plane
// EARLIEST_LOCAL), raised to the seal for a switched partition, and E_d
// at or above the seal (else 0). Kafka: fetchEarliestLocalOffset.
func (e *Endpoint) FetchEarliestLocalOffset(ctx context.Context, tp remote.TopicIDPartition, _ int32) (epochcache.OffsetAndEpoch, error) {
	s, err := e.state(tp)
	if err != nil {
		return epochcache.OffsetAndEpoch{}, err
	}
	w, err := e.listOffset(ctx, tp, wal.EarliestLocalTimestamp)
	if err != nil {
		return epochcache.OffsetAndEpoch{}, err
	}
	return EarliestLocalOffset(w, s.Seal(), s.DisklessLeaderEpoch()), nil
}

// FetchLatestOffset returns the WAL's end (control-plane LATEST), raised
// to the seal when a placeholder row reports less. Kafka:
// fetchLatestOffset.
func (e *Endpoint) FetchLatestOffset(ctx context.Context, tp remote.TopicIDPartition, _ int32) (epochcache.OffsetAndEpoch, error) {
	s, err := e.state(tp)
	if err != nil {
		return epochcache.OffsetAndEpoch{}, err
	}
	latest, err := e.listOffset(ctx, tp, wal.LatestTimestamp)
	if err != nil {
		return epochcache.OffsetAndEpoch{}, err
	}
	return LatestOffset(latest, s.Seal(), s.DisklessLeaderEpoch()), nil
}

// FetchEarliestOffset returns X, the cross-tier earliest offset
// (control-plane EARLIEST). Kafka: fetchEarliestOffset.
func (e *Endpoint) FetchEarliestOffset(ctx context.Context, tp remote.TopicIDPartition, _ int32) (epochcache.OffsetAndEpoch, error) {
	s, err := e.state(tp)
	if err != nil {
		return epochcache.OffsetAndEpoch{}, err
	}
	x, err := e.listOffset(ctx, tp, wal.EarliestTimestamp)
	if err != nil {
		return epochcache.OffsetAndEpoch{}, err
	}
	return epochcache.OffsetAndEpoch{Offset: x, Epoch: EpochAt(x, s.Seal(), s.DisklessLeaderEpoch())}, nil
}

// FetchEpochEndOffset answers OffsetsForLeaderEpoch(epoch) with the E_d
// split (PlanEpochEnd): classic epochs end at the seal without a
// control-plane call, E_d and later at the WAL's end. Kafka:
// fetchEpochEndOffsets.
func (e *Endpoint) FetchEpochEndOffset(ctx context.Context, tp remote.TopicIDPartition, _ int32, epoch int32) (epochcache.EpochEndOffset, error) {
	s, err := e.state(tp)
	if err != nil {
		return epochcache.UndefinedEpochEndOffset, err
	}
	q := PlanEpochEnd(epoch, s.Seal(), s.DisklessLeaderEpoch())
	if q == EpochEndAtSeal && s.LastClassicLeaderEpoch() == base.UndefinedEpoch {
		// No recorded epoch (an operator's start-phase-2): the epochs
		// between the last classic record and E_d may have no records
		// (the fence's elections), and Kafka answers the largest epoch
		// <= epoch the lineage has. Remote storage holds the prefix up
		// to the seal, so its epoch at seal - 1 is that epoch.
		if e, ok, err := e.remoteEpochBelowSeal(tp, s.Seal(), epoch); err != nil {
			return epochcache.UndefinedEpochEndOffset, err
		} else if ok {
			return epochcache.EpochEndOffset{Epoch: e, EndOffset: s.Seal()}, nil
		}
	}
	var latest int64
	if q == EpochEndLatest {
		if latest, err = e.listOffset(ctx, tp, wal.LatestTimestamp); err != nil {
			if errors.Is(err, wal.ErrUnknownTopicOrPartition) {
				return epochcache.UndefinedEpochEndOffset, fmt.Errorf("%w: %s is not diskless: %w", ErrUnknownTopicOrPartition, tp, err)
			}
			return epochcache.UndefinedEpochEndOffset, err
		}
	}
	return EpochEnd(q, epoch, s.Seal(), latest), nil
}

// remoteEpochBelowSeal returns the leader epoch of offset seal-1 in the
// finished remote segments that hold it (the highest one at or below
// epoch, when overlapping copies disagree), ok false when none does.
func (e *Endpoint) remoteEpochBelowSeal(tp remote.TopicIDPartition, seal int64, epoch int32) (int32, bool, error) {
	if seal <= 0 {
		return 0, false, nil
	}
	segs, err := e.opts.Remote.ListSegments(tp)
	if err != nil {
		return 0, false, err
	}
	found, ok := int32(0), false
	for _, m := range segs {
		if m.State != remote.CopySegmentFinished || m.HeldStartOffset() > seal-1 || m.EndOffset < seal-1 {
			continue
		}
		at := base.UndefinedEpoch
		for _, le := range m.SegmentLeaderEpochs {
			if le.StartOffset <= seal-1 {
				at = le.Epoch
			}
		}
		if at != base.UndefinedEpoch && at <= epoch && (!ok || at > found) {
			found, ok = at, true
		}
	}
	return found, ok, nil
}

// EndpointMetrics is a snapshot of an Endpoint's counters.
type EndpointMetrics struct {
	Fetches int64
	// Redirects counts OFFSET_MOVED_TO_TIERED_STORAGE answers, Resets the
	// deleted-prefix OFFSET_OUT_OF_RANGE answers, PrefixUnknown the
	// NOT_LEADER_OR_FOLLOWER waits for remote storage.
	Redirects     int64
	Resets        int64
	PrefixUnknown int64
	// CoverageLookups counts lookups of seal - 1 in the remote metadata.
	CoverageLookups int64
	// ServedBytes counts record bytes served from the WAL.
	ServedBytes int64
}

type endpointCounters struct {
	fetches, redirects, resets, prefixUnknown, coverageLookups, servedBytes atomic.Int64
}

// Metrics returns a snapshot of the counters.
func (e *Endpoint) Metrics() EndpointMetrics {
	c := &e.metrics
	return EndpointMetrics{Fetches: c.fetches.Load(), Redirects: c.redirects.Load(), Resets: c.resets.Load(),
		PrefixUnknown: c.prefixUnknown.Load(), CoverageLookups: c.coverageLookups.Load(), ServedBytes: c.servedBytes.Load()}
}
