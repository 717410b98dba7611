package consolidate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/tierlog/tierlog/internal/mutation"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/tierstate"
	"github.com/tierlog/tierlog/truncation"
	"github.com/tierlog/tierlog/wal"
)

// ConsolidationLog is the local log a consolidation fetcher appends to
// and rebuilds. *log.UnifiedLog satisfies it. AppendAsFollower must not
// keep batches (or a slice of it) once it returns: the Fetcher gives the
// buffer back to the WAL reader (Endpoint.Release), which reads a later
// fetch into it. *log.UnifiedLog writes the batches to its file and
// keeps no reference.
type ConsolidationLog interface {
	tierstate.RebuildLog
	AppendAsFollower(batches []byte, leaderEpoch int32) (log.AppendInfo, error)
	UpdateHighWatermark(hw int64) int64
	TruncateTo(t int64) (bool, error)
	TruncateFullyAndStartAt(n, logStart int64) error
}

var _ ConsolidationLog = (*log.UnifiedLog)(nil)

// FetcherPartition is one partition a Fetcher consolidates.
type FetcherPartition struct {
	Partition remote.TopicIDPartition
	Log       ConsolidationLog
	// State is the partition's switch state: its seal, E_d and recorded
	// epoch select the rebuild and the epoch stamped on batches.
	State tierstate.State
	// CurrentLeaderEpoch is sent with the rebuild's questions.
	CurrentLeaderEpoch int32
}

// FetcherOptions configures a Fetcher. Endpoint and Machine are required;
// the Machine's leader should be the same Endpoint.
type FetcherOptions struct {
	Endpoint *Endpoint
	Machine  *tierstate.Machine
	// Workers is the number of goroutines Run uses for all partitions.
	// Default 1 (Inkless: one consolidation fetcher thread per broker
	// by default).
	Workers int
	// MaxPartitionsPerFetch bounds the partitions of one endpoint fetch.
	// Default 32.
	MaxPartitionsPerFetch int
	// Backoff is the wait after a retriable error. Default 1s. Kafka:
	// replica.fetch.backoff.ms.
	Backoff time.Duration
	// IdleInterval is the wait after a fetch that returned no record (the
	// partition is caught up with the WAL). Default 500ms.
	IdleInterval time.Duration
	// DisablePrefetch makes Run's workers fetch, append, then fetch
	// again. Default false: while a worker appends one fetch's answers
	// it already fetches the next round (Run; Step never does), so that
	// reading the WAL and appending to the local logs overlap.
	DisablePrefetch bool
	// Clock times the waits. Default: the system clock.
	Clock wal.Clock
	// Logger; default zap.NewNop().
	Logger *zap.Logger
}

// Defaults of FetcherOptions.
const (
	DefaultFetcherBackoff      = time.Second
	DefaultFetcherIdleInterval = 500 * time.Millisecond
	defaultMaxPartitions       = 32
)

// Fetcher copies diskless records from the Endpoint into the local logs of
// many partitions (Inkless's ConsolidationFetcherThread): per partition it
// fetches at the log end, stamps E_d into each batch (outside the CRC)
// and appends as a follower the batches that start at the log end and
// follow on from each other (appendablePrefix: a batch past a hole is
// refused with ErrNotAtLogEnd, counted and backed off, never appended);
// an OFFSET_MOVED_TO_TIERED_STORAGE answer runs
// the tier state machine, OFFSET_OUT_OF_RANGE the follower's reset
// (truncation.PlanOutOfRangeReset against the endpoint's latest and
// earliest offsets), and other errors back off.
//
// A switched partition whose state has no phase-2 flag yet
// (tierstate.State.TakesDisklessRecords) is held: it stays in the table
// but is never fetched, until Add brings the flag's state.
//
// A partition's progress is its log: Run can stop (ctx) and run again and
// every partition resumes at its log end. Partitions at rest hold no
// goroutine: Workers goroutines share them, each fetch taking up to
// MaxPartitionsPerFetch ready ones in round-robin order. A Run worker
// fetches its next round while it appends the last (pipelined), so
// reading the WAL and appending use two CPUs; a prefetched answer is
// used only where the append before it ended where it starts. A
// partition answered nothing because the fetch's byte budget went to
// the partitions before it is fetched again at once, not after
// IdleInterval.
//
// Concurrency: safe for concurrent use. mu guards the partition table and
// is never held across a fetch, an append or a rebuild; a partition is
// worked on by one goroutine at a time (its busy flag), so its log has
// one writer.
type Fetcher struct {
	opts FetcherOptions
	wake chan struct{}
	mu   struct {
		sync.Mutex
		parts map[remote.TopicIDPartition]*fetchState
		// order is the round-robin order of parts.
		order []remote.TopicIDPartition
		next  int
	}
	appendedBytes, appends, rebuilds, resets, backoffs atomic.Int64
	notAtLogEnd, prefetches, droppedPrefetches         atomic.Int64
}

// fetchState is one partition's place in the Fetcher. Guarded by
// Fetcher.mu.
type fetchState struct {
	p FetcherPartition
	// cur is p as of the claim that made the partition busy: the busy
	// turn works on it whatever Add does meanwhile. Written by claim
	// (mu held, the partition not busy); read by the claiming goroutine
	// without mu, race-free because claim's unlock orders the write
	// before the reads and nothing writes it again until the turn ends.
	cur FetcherPartition
	// gen counts Add's replacements of p, curGen is gen at the claim: a
	// pipelined turn goes on only while they agree.
	gen, curGen uint64
	notBefore   time.Time
	// busy: a goroutine is fetching for the partition; claim skips it.
	busy bool
	// removed: Remove was called while busy; release forgets it.
	removed bool
	failed  error
	// released is closed when the busy turn ends (made by claim), so
	// that Remove can wait out a fetch in progress.
	released chan struct{}
}

// NewFetcher returns a Fetcher with no partition.
func NewFetcher(opts FetcherOptions) (*Fetcher, error) {
	if opts.Endpoint == nil || opts.Machine == nil {
		return nil, fmt.Errorf("consolidate: fetcher needs an endpoint and a tier state machine: %w", ErrInvalidArgument)
	}
	if opts.Workers == 0 {
		opts.Workers = 1
	}
	if opts.MaxPartitionsPerFetch == 0 {
		opts.MaxPartitionsPerFetch = defaultMaxPartitions
	}
	if opts.Backoff == 0 {
		opts.Backoff = DefaultFetcherBackoff
	}
	if opts.IdleInterval == 0 {
		opts.IdleInterval = DefaultFetcherIdleInterval
	}
	if opts.Workers < 0 || opts.MaxPartitionsPerFetch < 0 || opts.Backoff < 0 || opts.IdleInterval < 0 {
		return nil, fmt.Errorf("consolidate: negative fetcher option: %w", ErrInvalidArgument)
	}
	if opts.Clock == nil {
		opts.Clock = wal.SystemClock{}
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	f := &Fetcher{opts: opts, wake: make(chan struct{}, 1)}
	f.mu.parts = map[remote.TopicIDPartition]*fetchState{}
	return f, nil
}

type systemClock struct{}

func (systemClock) Now() time.Time                                { return time.Now() }
func (systemClock) AfterFunc(d time.Duration, f func()) wal.Timer { return time.AfterFunc(d, f) }

// Add starts consolidating p at its log end (or replaces p's log, state
// and epoch if already added; a failed partition is retried). A
// partition whose fetch is in progress keeps it: the new values apply
// from its next fetch, so its log never has two writers.
func (f *Fetcher) Add(p FetcherPartition) error {
	if p.Log == nil {
		return fmt.Errorf("consolidate: partition %s without a log: %w", p.Partition, ErrInvalidArgument)
	}
	f.mu.Lock()
	if s, ok := f.mu.parts[p.Partition]; ok {
		s.p, s.failed, s.notBefore, s.removed = p, nil, time.Time{}, false
		s.gen++
	} else {
		f.mu.order = append(f.mu.order, p.Partition)
		f.mu.parts[p.Partition] = &fetchState{p: p}
	}
	f.mu.Unlock()
	f.signal()
	return nil
}

// Remove stops consolidating tp and returns once no fetch for it is in
// progress: a fetch already running finishes first (its append may
// land), none starts later, so after Remove the caller may truncate,
// delete or recreate the log without a second writer. It must not be
// called from the Fetcher's own goroutines (its Machine or log hooks),
// which would wait for themselves.
func (f *Fetcher) Remove(tp remote.TopicIDPartition) {
	f.mu.Lock()
	s, ok := f.mu.parts[tp]
	if !ok {
		f.mu.Unlock()
		return
	}
	s.removed = true
	if !s.busy {
		f.forgetLocked(tp)
		f.mu.Unlock()
		return
	}
	released := s.released
	f.mu.Unlock()
	<-released
}

// forgetLocked drops tp from the table. REQUIRES: f.mu held.
func (f *Fetcher) forgetLocked(tp remote.TopicIDPartition) {
	delete(f.mu.parts, tp)
	for i, o := range f.mu.order {
		if o == tp {
			f.mu.order = append(f.mu.order[:i], f.mu.order[i+1:]...)
			break
		}
	}
}

// Failed returns the error that took tp out of consolidation (a fenced
// leader epoch, a log that refuses writes), nil if it is running.
func (f *Fetcher) Failed(tp remote.TopicIDPartition) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.mu.parts[tp]; ok {
		return s.failed
	}
	return nil
}

func (f *Fetcher) signal() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// claim marks up to MaxPartitionsPerFetch ready partitions busy, in
// round-robin order, and returns them with the earliest time a
// not-ready partition becomes ready (zero when none waits).
func (f *Fetcher) claim(now time.Time) ([]*fetchState, time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*fetchState
	var earliest time.Time
	n := len(f.mu.order)
	for i := 0; i < n && len(out) < f.opts.MaxPartitionsPerFetch; i++ {
		s := f.mu.parts[f.mu.order[(f.mu.next+i)%n]]
		switch {
		case s.busy || s.removed || s.failed != nil:
		case !s.p.State.TakesDisklessRecords():
			// A switched partition before its phase-2 flag: held
			// until Add brings the flag's state.
		case s.notBefore.After(now):
			if earliest.IsZero() || s.notBefore.Before(earliest) {
				earliest = s.notBefore
			}
		default:
			f.claimLocked(s)
			out = append(out, s)
		}
	}
	if n > 0 {
		f.mu.next = (f.mu.next + 1) % n
	}
	return out, earliest
}

// claimLocked makes s busy for the caller's turn. REQUIRES: f.mu held,
// s not busy.
func (f *Fetcher) claimLocked(s *fetchState) {
	s.busy, s.released = true, make(chan struct{})
	s.cur, s.curGen = s.p, s.gen
}

// release ends a partition's turn: ready again at notBefore, or failed.
func (f *Fetcher) release(s *fetchState, notBefore time.Time, failed error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s.busy, s.notBefore = false, notBefore
	close(s.released)
	if s.removed {
		f.forgetLocked(s.p.Partition)
		return
	}
	if failed != nil {
		s.failed = failed
	}
}

// Step runs one fetch for up to MaxPartitionsPerFetch ready partitions
// and handles each answer. It returns how many partitions it served, 0
// when none was ready. Run calls it in a loop; tests call it directly.
func (f *Fetcher) Step(ctx context.Context) (int, error) {
	now := f.opts.Clock.Now()
	claimed, _ := f.claim(now)
	if len(claimed) == 0 {
		return 0, nil
	}
	return len(claimed), f.fetch(ctx, claimed, now)
}

func (f *Fetcher) fetch(ctx context.Context, claimed []*fetchState, now time.Time) error {
	offsets := make([]int64, len(claimed))
	for i, s := range claimed {
		offsets[i] = s.cur.Log.LogEndOffset()
	}
	res, err := f.fetchAt(ctx, claimed, offsets)
	if err != nil {
		return f.failRound(ctx, claimed, now, err)
	}
	served := anyServed(res)
	for i, s := range claimed {
		wait, failed := f.handle(ctx, s.cur, res[i], served)
		f.endTurn(s, now, wait, failed)
	}
	f.releaseAnswers(res)
	return ctx.Err()
}

// fetchAt asks the endpoint for the claimed partitions' records from
// offsets.
func (f *Fetcher) fetchAt(ctx context.Context, claimed []*fetchState, offsets []int64) ([]PartitionResponse, error) {
	parts := make([]FetchPartition, len(claimed))
	for i, s := range claimed {
		parts[i] = FetchPartition{Partition: s.cur.Partition, Offset: offsets[i]}
	}
	res, err := f.opts.Endpoint.Fetch(ctx, parts)
	if err == nil && len(res) != len(parts) {
		err = fmt.Errorf("consolidate: the endpoint answered %d partitions for %d: %w", len(res), len(parts), ErrInvalidArgument)
	}
	return res, err
}

// failRound ends the turn of every claimed partition after a failed
// fetch: each backs off. It returns ctx's error, if any.
func (f *Fetcher) failRound(ctx context.Context, claimed []*fetchState, now time.Time, err error) error {
	for _, s := range claimed {
		f.release(s, now.Add(f.opts.Backoff), nil)
	}
	f.backoffs.Add(int64(len(claimed)))
	if ctx.Err() != nil {
		return ctx.Err()
	}
	f.opts.Logger.Warn("consolidation fetch failed", zap.Error(err))
	return nil
}

// endTurn releases s after handle answered wait and failed.
func (f *Fetcher) endTurn(s *fetchState, now time.Time, wait time.Duration, failed error) {
	var notBefore time.Time
	if wait > 0 {
		notBefore = now.Add(wait)
		if wait == f.opts.Backoff {
			f.backoffs.Add(1)
		}
	}
	f.release(s, notBefore, failed)
	if failed != nil {
		f.opts.Logger.Error("partition leaves consolidation", zap.Stringer("partition", s.cur.Partition), zap.Error(failed))
	}
}

// anyServed reports whether an answer served records: a partition
// answered nothing below the WAL's high watermark then had the fetch's
// byte budget spent before it (wal.FindBatchesRequest) and is fetched
// again at once rather than idle (Kafka's fetcher keeps such a partition
// in its next fetch).
func anyServed(res []PartitionResponse) bool {
	for _, r := range res {
		if r.Code == FetchNone && len(r.Records) > 0 {
			return true
		}
	}
	return false
}

// answerEnd returns the offset a partition's log ends at once r's
// records are appended, when the WAL holds more past it (r's high
// watermark): where the next fetch of the partition starts.
func answerEnd(r PartitionResponse) (int64, bool) {
	if r.Code != FetchNone || len(r.Records) == 0 {
		return 0, false
	}
	end := int64(-1)
	for pos := 0; pos < len(r.Records); {
		b, err := record.ReadBatch(r.Records[pos:])
		if err != nil {
			return 0, false
		}
		end = b.LastOffset() + 1
		pos += b.Size()
	}
	return end, r.HighWatermark > end
}

// pipelined runs a worker's fetches back to back, starting from the
// claimed (busy) partitions: while one round's answers are appended the
// next round is already being fetched, so that reading the WAL (the
// GETs and the batch checks) and appending to the local logs overlap.
// The next round holds what claimNext picks in the round-robin order:
// ready partitions, and this round's that go on (records served, the
// WAL holds more: answerEnd; no Add or Remove since their claim),
// fetched at the offset their answer ends at. A partition's prefetched
// answer is used only if its append succeeded and left the log ending
// exactly there; otherwise it is dropped, unread, and the partition's
// turn ends as Step's would. The loop ends when a round has nothing to
// fetch next, or with ctx.
func (f *Fetcher) pipelined(ctx context.Context, claimed []*fetchState) error {
	now := f.opts.Clock.Now()
	cur := claimed
	offsets := make([]int64, len(cur))
	for i, s := range cur {
		offsets[i] = s.cur.Log.LogEndOffset()
	}
	res, err := f.fetchAt(ctx, cur, offsets)
	if err != nil {
		return f.failRound(ctx, cur, now, err)
	}
	type prefetched struct {
		res []PartitionResponse
		err error
	}
	for {
		ends := map[*fetchState]int64{}
		var next []*fetchState
		if ctx.Err() == nil {
			for i, s := range cur {
				if end, more := answerEnd(res[i]); more {
					ends[s] = end
				}
			}
			next = f.claimNext(now, ends)
		}
		var pre chan prefetched
		if len(next) > 0 {
			offsets := make([]int64, len(next))
			for i, s := range next {
				if end, ok := ends[s]; ok {
					offsets[i] = end
				} else {
					offsets[i] = s.cur.Log.LogEndOffset() // newly claimed: not written by anyone
				}
			}
			f.prefetches.Add(1)
			pre = make(chan prefetched, 1)
			go func() {
				r, err := f.fetchAt(ctx, next, offsets)
				pre <- prefetched{r, err}
			}()
		}
		inNext := make(map[*fetchState]bool, len(next))
		for _, s := range next {
			inNext[s] = true
		}
		served := anyServed(res)
		dropped := map[*fetchState]bool{}
		for i, s := range cur {
			wait, failed := f.handle(ctx, s.cur, res[i], served)
			if inNext[s] {
				if failed == nil && wait == 0 && s.cur.Log.LogEndOffset() == ends[s] {
					continue // its prefetched answer follows on: still busy
				}
				dropped[s] = true
				f.droppedPrefetches.Add(1)
			}
			f.endTurn(s, now, wait, failed)
		}
		f.releaseAnswers(res) // appended: the log keeps no reference
		if pre == nil {
			return ctx.Err()
		}
		p := <-pre
		now = f.opts.Clock.Now()
		var keep []*fetchState
		var keepRes []PartitionResponse
		for i, s := range next {
			if dropped[s] {
				if p.err == nil {
					f.releaseAnswers(p.res[i : i+1])
				}
				continue // released above; nothing of its answer is used
			}
			keep = append(keep, s)
			if p.err == nil {
				keepRes = append(keepRes, p.res[i])
			}
		}
		if p.err != nil {
			return f.failRound(ctx, keep, now, p.err)
		}
		if ctx.Err() != nil {
			for _, s := range keep {
				f.release(s, time.Time{}, nil)
			}
			f.releaseAnswers(keepRes)
			return ctx.Err()
		}
		if len(keep) == 0 {
			return nil
		}
		cur, res = keep, keepRes
	}
}

// releaseAnswers gives a round's answer buffers back to the endpoint's
// WAL reader once nothing reads them any more (Endpoint.Release).
func (f *Fetcher) releaseAnswers(res []PartitionResponse) {
	f.opts.Endpoint.Release(res...)
}

// claimNext picks the next round of a pipelined worker, up to
// MaxPartitionsPerFetch in the round-robin order: the partitions of ends
// (this worker's, still busy) that still go on (not removed, no Add
// since their claim), and ready partitions, which it claims.
func (f *Fetcher) claimNext(now time.Time, ends map[*fetchState]int64) []*fetchState {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*fetchState
	n := len(f.mu.order)
	for i := 0; i < n && len(out) < f.opts.MaxPartitionsPerFetch; i++ {
		s := f.mu.parts[f.mu.order[(f.mu.next+i)%n]]
		if _, mine := ends[s]; mine {
			if !s.removed && s.gen == s.curGen {
				out = append(out, s)
			}
			continue
		}
		if s.busy || s.removed || s.failed != nil || !s.p.State.TakesDisklessRecords() || s.notBefore.After(now) {
			continue
		}
		f.claimLocked(s)
		out = append(out, s)
	}
	if n > 0 {
		f.mu.next = (f.mu.next + 1) % n
	}
	return out
}

// handle acts on one partition's answer and returns how long the
// partition waits before its next fetch, or the error that fails it.
// served says whether the fetch served records to any partition.
func (f *Fetcher) handle(ctx context.Context, p FetcherPartition, r PartitionResponse, served bool) (time.Duration, error) {
	switch r.Code {
	case FetchNone:
		if len(r.Records) == 0 {
			p.Log.UpdateHighWatermark(r.HighWatermark)
			return idleWait(served, r.HighWatermark, p.Log.LogEndOffset(), f.opts.IdleInterval), nil
		}
		epoch, err := StampEpoch(p.State)
		if err != nil {
			// Held until the phase-2 flag: claim skips such a
			// partition, so only a state changed under a fetch
			// gets here.
			return f.opts.Backoff, nil
		}
		if err := stampEpoch(r.Records, epoch); err != nil {
			return f.opts.Backoff, nil
		}
		n, notAtEnd := appendablePrefix(p, r.Records)
		if notAtEnd != nil {
			f.notAtLogEnd.Add(1)
			f.opts.Logger.Warn("consolidation refuses records not at the log end", zap.Stringer("partition", p.Partition), zap.Error(notAtEnd))
			if n == 0 {
				return f.opts.Backoff, nil
			}
		}
		records := r.Records[:n]
		if err := maybeStartEpochAtSeal(p, records, epoch); err != nil {
			if errors.Is(err, log.ErrIO) || errors.Is(err, log.ErrClosed) {
				return 0, err
			}
			return f.opts.Backoff, nil
		}
		info, err := p.Log.AppendAsFollower(records, epoch)
		if err != nil {
			if errors.Is(err, log.ErrIO) || errors.Is(err, log.ErrClosed) {
				return 0, err
			}
			f.opts.Logger.Warn("consolidation append refused", zap.Stringer("partition", p.Partition), zap.Error(err))
			return f.opts.Backoff, nil
		}
		f.appends.Add(1)
		f.appendedBytes.Add(int64(len(records)))
		_ = info
		p.Log.UpdateHighWatermark(r.HighWatermark)
		if notAtEnd != nil {
			return f.opts.Backoff, nil
		}
		return 0, nil
	case FetchOffsetMovedToTieredStorage:
		f.rebuilds.Add(1)
		_, err := f.opts.Machine.Rebuild(ctx, tierstate.RebuildRequest{Partition: p.Partition, Log: p.Log, State: p.State,
			CurrentLeaderEpoch: p.CurrentLeaderEpoch, LeaderLogStartOffset: r.LogStartOffset})
		switch tierstate.RebuildAction(err) {
		case tierstate.ActionNone, tierstate.ActionStop:
			return 0, nil
		case tierstate.ActionMarkFailed, tierstate.ActionOffline:
			return 0, err
		}
		return f.opts.Backoff, nil
	case FetchOffsetOutOfRange:
		f.resets.Add(1)
		if err := f.reset(ctx, p); err != nil {
			if errors.Is(err, log.ErrIO) || errors.Is(err, log.ErrClosed) {
				return 0, err
			}
			f.opts.Logger.Warn("consolidation reset failed", zap.Stringer("partition", p.Partition), zap.Error(err))
			return f.opts.Backoff, nil
		}
		return 0, nil
	}
	return f.opts.Backoff, nil
}

// idleWait is how long a partition answered no record waits: not at all
// when the WAL holds records past its log end and the same fetch served
// records to others (the fetch's byte budget ran out before it: caught
// up it is not), else idleInterval (caught up, or nothing served at all:
// fetching again at once could spin).
func idleWait(served bool, highWatermark, logEndOffset int64, idleInterval time.Duration) time.Duration {
	if served && highWatermark > logEndOffset {
		return 0
	}
	return idleInterval
}

// reset is the follower's answer to OFFSET_OUT_OF_RANGE against the
// endpoint: its latest offset and its earliest (X) decide
// (truncation.PlanOutOfRangeReset).
func (f *Fetcher) reset(ctx context.Context, p FetcherPartition) error {
	latest, err := f.opts.Endpoint.FetchLatestOffset(ctx, p.Partition, p.CurrentLeaderEpoch)
	if err != nil {
		return err
	}
	earliest, err := f.opts.Endpoint.FetchEarliestOffset(ctx, p.Partition, p.CurrentLeaderEpoch)
	if err != nil {
		return err
	}
	plan := truncation.PlanOutOfRangeReset(latest.Offset, earliest.Offset, p.Log.LogEndOffset())
	f.opts.Logger.Info("consolidation reset", zap.Stringer("partition", p.Partition), zap.Stringer("plan", plan))
	switch plan.Action {
	case truncation.TruncateToLeaderEnd:
		_, err = p.Log.TruncateTo(plan.Offset)
	case truncation.StartAtLeaderStart:
		err = p.Log.TruncateFullyAndStartAt(plan.Offset, plan.Offset)
	}
	return err
}

// ErrNotAtLogEnd marks fetched records that the Fetcher refuses to
// append because a batch does not start at the log's end offset (the
// first) or right after the batch before it: appended, it would leave a
// hole in the consolidated log that nothing ever fills (a follower append
// accepts gaps, as Kafka's does for compacted logs).
var ErrNotAtLogEnd = errors.New("consolidate: fetched batch does not start at the log end")

// NotAtLogEndError is a refused batch: it had to start at Want and
// starts at BaseOffset. It unwraps to ErrNotAtLogEnd.
type NotAtLogEndError struct {
	Partition  remote.TopicIDPartition
	Want       int64
	BaseOffset int64
	LastOffset int64
}

func (e *NotAtLogEndError) Error() string {
	return fmt.Sprintf("%v: partition %s: batch [%d, %d] where %d was due", ErrNotAtLogEnd, e.Partition, e.BaseOffset, e.LastOffset, e.Want)
}

func (e *NotAtLogEndError) Unwrap() error { return ErrNotAtLogEnd }

// appendablePrefix returns how many bytes of batches (framed: stampEpoch
// read them all) may be appended to p's log: the batches that each start
// at the log end, then one past the batch before. The first batch that
// does not is refused with a *NotAtLogEndError; the Fetcher appends the
// prefix before it and backs off.
//
// One exception, for the first batch only: on a log that ends at its
// committed seal, the first batch may start past it. A seal lowered below
// the WAL's first batch (github.com/aiven/inkless/pull/855) leaves
// [seal, first batch) holding no offset anywhere, and FindBatches answers
// a fetch there with the first batch after it (FindBatchesResult);
// maybeStartEpochAtSeal then starts E_d at the seal. Everywhere else the
// WAL holds every offset from W to HW, so a first batch past the log end
// is a skipped batch.
func appendablePrefix(p FetcherPartition, batches []byte) (int, error) {
	leo := p.Log.LogEndOffset()
	next := leo
	for pos := 0; pos < len(batches); {
		b, err := record.ReadBatch(batches[pos:])
		if err != nil {
			return len(batches), nil // the append reports it
		}
		ok := b.BaseOffset() == next
		if !ok && pos == 0 && b.BaseOffset() > next && p.State.SealCommitted() && leo == p.State.Seal() {
			ok = true
		}
		if !ok && !mutation.Disabled(mutation.WALReadGap) {
			return pos, &NotAtLogEndError{Partition: p.Partition, Want: next, BaseOffset: b.BaseOffset(), LastOffset: b.LastOffset()}
		}
		next = b.LastOffset() + 1
		pos += b.Size()
	}
	return len(batches), nil
}

// epochAssigner is the optional capability of a ConsolidationLog to
// start a leader epoch at an offset. *log.UnifiedLog has it.
type epochAssigner interface {
	AssignEpochStartOffset(epoch int32, startOffset int64) error
}

// maybeStartEpochAtSeal starts E_d at the seal when the first diskless
// batch lands past it on a log that ends at it: a seal lowered below the
// WAL's first batch (start-phase-2 or a downward re-seal,
// github.com/aiven/inkless/pull/855 and /pull/871) leaves [seal, first
// batch) without records. Without the entry the epoch cache gives the
// seal the last classic epoch, and
// tierstate.HasConsolidatedDisklessSuffixFromSeal, which reads the epoch
// at the seal, would take the diskless records for a classic tail.
func maybeStartEpochAtSeal(p FetcherPartition, batches []byte, epoch int32) error {
	s := p.State
	if !s.SealCommitted() || p.Log.LogEndOffset() != s.Seal() || epoch != s.DisklessLeaderEpoch() {
		return nil
	}
	b, err := record.ReadBatch(batches)
	if err != nil || b.BaseOffset() <= s.Seal() {
		return nil // the append reports a bad batch
	}
	a, ok := p.Log.(epochAssigner)
	if !ok {
		return nil
	}
	return a.AssignEpochStartOffset(epoch, s.Seal())
}

// StampEpoch is the leader epoch consolidation writes into every batch:
// E_d of a phase-2 partition, 0 for a partition that never switched
// (born diskless). A switched partition before its phase-2 flag has no
// epoch to stamp (tierstate.State.TakesDisklessRecords), also when an
// older controller wrote E_d with the seal: a *DisklessHeldError.
func StampEpoch(s tierstate.State) (int32, error) {
	if !s.TakesDisklessRecords() {
		return 0, &DisklessHeldError{Phase: s.Phase(), Seal: s.Seal(), DisklessLeaderEpoch: s.DisklessLeaderEpoch()}
	}
	if e := s.DisklessLeaderEpoch(); e >= 0 {
		return e, nil
	}
	return 0, nil
}

// stampEpoch writes epoch into each batch of buf (the partition leader
// epoch field, outside the CRC).
func stampEpoch(buf []byte, epoch int32) error {
	for pos := 0; pos < len(buf); {
		b, err := record.ReadBatch(buf[pos:])
		if err != nil {
			return err
		}
		b.SetPartitionLeaderEpoch(epoch)
		pos += b.Size()
	}
	return nil
}

// Run consolidates until ctx ends, with Workers goroutines sharing every
// partition. It returns ctx's error; partitions keep their place, and a
// later Run resumes them.
func (f *Fetcher) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for range f.opts.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.work(ctx)
		}()
	}
	wg.Wait()
	return ctx.Err()
}

func (f *Fetcher) work(ctx context.Context) {
	for ctx.Err() == nil {
		now := f.opts.Clock.Now()
		claimed, earliest := f.claim(now)
		if len(claimed) > 0 {
			if f.opts.DisablePrefetch {
				_ = f.fetch(ctx, claimed, now)
			} else {
				_ = f.pipelined(ctx, claimed)
			}
			f.signal() // another worker may find more ready partitions
			continue
		}
		var t wal.Timer
		if !earliest.IsZero() {
			t = f.opts.Clock.AfterFunc(earliest.Sub(now), f.signal)
		}
		select {
		case <-ctx.Done():
		case <-f.wake:
		}
		if t != nil {
			t.Stop()
		}
	}
}

// FetcherMetrics is a snapshot of a Fetcher's counters.
type FetcherMetrics struct {
	// Appends and AppendedBytes count follower appends of WAL records.
	Appends, AppendedBytes int64
	// Rebuilds counts OFFSET_MOVED_TO_TIERED_STORAGE answers acted on,
	// Resets OFFSET_OUT_OF_RANGE ones, Backoffs waits after an error.
	Rebuilds, Resets, Backoffs int64
	// NotAtLogEnd counts answers whose records were refused (from the
	// first batch that does not start at the log end or right after the
	// batch before: ErrNotAtLogEnd); each also backs off.
	NotAtLogEnd int64
	// Prefetches counts fetches Run's workers started while appending
	// (FetcherOptions.DisablePrefetch); DroppedPrefetches the partitions'
	// answers among them left unused because the append before did not
	// end where they start.
	Prefetches, DroppedPrefetches int64
}

// Metrics returns a snapshot of the counters.
func (f *Fetcher) Metrics() FetcherMetrics {
	return FetcherMetrics{Appends: f.appends.Load(), AppendedBytes: f.appendedBytes.Load(),
		Rebuilds: f.rebuilds.Load(), Resets: f.resets.Load(), Backoffs: f.backoffs.Load(),
		NotAtLogEnd: f.notAtLogEnd.Load(), Prefetches: f.prefetches.Load(), DroppedPrefetches: f.droppedPrefetches.Load()}
}

// StartAction is what the consolidation reconciler does with a partition
// (Inkless's ConsolidationReconciler).
type StartAction int8

const (
	// StartReady: consolidate from StartDecision.FetchOffset.
	StartReady StartAction = iota
	// StartRetry: not yet (the seal is pending, or a follower below the
	// seal catches up over classic replication first); decide again on
	// the next metadata change or retry.
	StartRetry
	// StartFailed: a switched partition without remote storage, which
	// the switch never produces; the partition stays online, not
	// consolidated.
	StartFailed
)

func (a StartAction) String() string {
	switch a {
	case StartReady:
		return "ready"
	case StartRetry:
		return "retry"
	case StartFailed:
		return "failed"
	}
	return fmt.Sprintf("StartAction(%d)", int8(a))
}

// StartDecision is PlanStart's answer.
type StartDecision struct {
	Action StartAction
	// FetchOffset is where consolidation starts (StartReady).
	FetchOffset int64
	// PruneFloor is the floor the pruner is armed with (InitialFloor of
	// the seal; NoFloor when none applies).
	PruneFloor int64
}

// PlanStart decides whether a consolidating partition's consolidation
// starts (Inkless's ConsolidationReconciler):
//
//	seal                    log end     role      answer
//	none (born diskless)    any         any       ready at the high watermark
//	pending                 any         any       retry
//	S >= 0, phase 1         any         any       retry (no diskless epoch before the phase-2 flag)
//	S >= 0, no remote       any         any       failed
//	S >= 0, phase 2         LEO < S     leader    ready at LEO (the fetch is redirected: rebuild)
//	S >= 0, phase 2         LEO < S     follower  retry (classic catch-up first)
//	S >= 0, phase 2         LEO >= S    any       ready at LEO
//
// A ready switched partition arms the pruner at S - 1 (Inkless arms it at
// max(S, log start); the first prune at S - 1 is
// github.com/aiven/inkless/pull/857's bound, docs/consolidation.md).
func PlanStart(s tierstate.State, logEndOffset, highWatermark int64, leader, remoteStorageEnabled bool) StartDecision {
	seal := s.Seal()
	switch {
	case s.Phase() == tierstate.PhaseSealPending:
		return StartDecision{Action: StartRetry, FetchOffset: NoFloor, PruneFloor: NoFloor}
	case s.SealCommitted() && !s.TakesDisklessRecords():
		return StartDecision{Action: StartRetry, FetchOffset: NoFloor, PruneFloor: NoFloor}
	case !s.SealCommitted():
		return StartDecision{Action: StartReady, FetchOffset: highWatermark, PruneFloor: NoFloor}
	case !remoteStorageEnabled:
		return StartDecision{Action: StartFailed, FetchOffset: NoFloor, PruneFloor: NoFloor}
	case logEndOffset < seal && !leader:
		return StartDecision{Action: StartRetry, FetchOffset: NoFloor, PruneFloor: NoFloor}
	}
	return StartDecision{Action: StartReady, FetchOffset: logEndOffset, PruneFloor: InitialFloor(seal)}
}

// Reconcile applies PlanStart to p: a ready partition is added to the
// fetcher (at its log end) and, when this broker leads it, pruner (if
// not nil) is armed with the decision's floor. A partition not ready is
// removed from the fetcher.
func (f *Fetcher) Reconcile(p FetcherPartition, highWatermark int64, leader bool, pruner *Pruner) (StartDecision, error) {
	if p.Log == nil {
		return StartDecision{}, fmt.Errorf("consolidate: partition %s without a log: %w", p.Partition, ErrInvalidArgument)
	}
	d := PlanStart(p.State, p.Log.LogEndOffset(), highWatermark, leader, p.Log.RemoteStorageEnabled())
	if d.Action != StartReady {
		f.Remove(p.Partition)
		if d.Action == StartFailed {
			f.opts.Logger.Error("switched partition without remote storage is not consolidated", zap.Stringer("partition", p.Partition))
		}
		return d, nil
	}
	if err := f.Add(p); err != nil {
		return d, err
	}
	if leader && pruner != nil && d.PruneFloor != NoFloor {
		pruner.Arm(p.Partition, p.State.Seal())
	}
	return d, nil
}
