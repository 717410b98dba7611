package consolidate

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/wal"
)

// The cross-tier log start X of a consolidating partition: the first
// offset readable anywhere (remote, local or WAL), its authoritative log
// start. The leader's remote-log manager reports its remote log start
// (expiration moves it); a Reporter coalesces the reports and flushes them
// to the control plane forward-only, about once a second; a CrossTierCache
// serves X to every caller (the endpoint, the retention guard of
// remote.Manager) from a short-lived cache, stale only on the low side.

// ReporterOptions configures a Reporter. ControlPlane is required.
type ReporterOptions struct {
	ControlPlane wal.ControlPlane
	// Interval is Run's flush period. Default 1s.
	Interval time.Duration
	// Clock times Run. Default: the system clock.
	Clock wal.Clock
	// Cache, if not nil, learns each stored value at once.
	Cache *CrossTierCache
	// Logger; default zap.NewNop().
	Logger *zap.Logger
}

// Reporter coalesces a leader's remote log start reports per partition
// and flushes the strictly advancing ones (Inkless's cross-tier log start
// reporter).
//
// Concurrency: safe for concurrent use; mu guards the pending and flushed
// values and is never held across the control-plane call; flushMu
// serialises flushes.
type Reporter struct {
	opts    ReporterOptions
	flushMu sync.Mutex
	mu      struct {
		sync.Mutex
		// pending holds the highest reported value not flushed yet.
		pending map[remote.TopicIDPartition]int64
		// flushed holds the last value the control plane stored.
		flushed map[remote.TopicIDPartition]int64
	}
}

// NewReporter returns a Reporter.
func NewReporter(opts ReporterOptions) (*Reporter, error) {
	if opts.ControlPlane == nil {
		return nil, fmt.Errorf("consolidate: reporter needs a control plane: %w", ErrInvalidArgument)
	}
	if opts.Interval == 0 {
		opts.Interval = time.Second
	}
	if opts.Interval < 0 {
		return nil, fmt.Errorf("consolidate: negative reporter interval: %w", ErrInvalidArgument)
	}
	if opts.Clock == nil {
		opts.Clock = wal.SystemClock{}
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	r := &Reporter{opts: opts}
	r.mu.pending = map[remote.TopicIDPartition]int64{}
	r.mu.flushed = map[remote.TopicIDPartition]int64{}
	return r, nil
}

// Report records tp's remote log start. A value not above the pending or
// the flushed one is dropped (X only advances).
func (r *Reporter) Report(tp remote.TopicIDPartition, start int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f, ok := r.mu.flushed[tp]; ok && start <= f {
		return
	}
	if p, ok := r.mu.pending[tp]; ok && start <= p {
		return
	}
	r.mu.pending[tp] = start
}

// Flush sends the pending values in one AdvanceCrossTierLogStart call. A
// partition whose advance failed stays pending (unless a higher value
// arrived meanwhile, which replaces it).
func (r *Reporter) Flush(ctx context.Context) error {
	r.flushMu.Lock()
	defer r.flushMu.Unlock()
	r.mu.Lock()
	var reqs []wal.AdvanceCrossTierLogStartRequest
	var tps []remote.TopicIDPartition
	for tp, x := range r.mu.pending {
		reqs = append(reqs, wal.AdvanceCrossTierLogStartRequest{Partition: walTP(tp), CrossTierLogStart: x})
		tps = append(tps, tp)
	}
	r.mu.Unlock()
	if len(reqs) == 0 {
		return nil
	}
	res, err := r.opts.ControlPlane.AdvanceCrossTierLogStart(ctx, reqs)
	if err != nil {
		return err
	}
	if len(res) != len(reqs) {
		return fmt.Errorf("consolidate: %d cross-tier answers for %d requests: %w", len(res), len(reqs), wal.ErrInconsistentAnswer)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, tp := range tps {
		if res[i].Err != nil {
			r.opts.Logger.Warn("cross-tier log start not advanced", zap.Stringer("partition", tp), zap.Error(res[i].Err))
			continue
		}
		stored := res[i].CrossTierLogStart
		if f, ok := r.mu.flushed[tp]; !ok || stored > f {
			r.mu.flushed[tp] = stored
		}
		if p := r.mu.pending[tp]; p <= stored {
			delete(r.mu.pending, tp)
		}
		if c := r.opts.Cache; c != nil {
			c.learn(tp, stored)
		}
	}
	return nil
}

// Run flushes every Interval until ctx ends, then flushes once more with
// a fresh context bounded by Interval, and returns ctx's error.
func (r *Reporter) Run(ctx context.Context) error {
	for {
		wake := make(chan struct{})
		t := r.opts.Clock.AfterFunc(r.opts.Interval, func() { close(wake) })
		select {
		case <-ctx.Done():
			t.Stop()
			fctx, cancel := context.WithTimeout(context.Background(), r.opts.Interval)
			_ = r.Flush(fctx)
			cancel()
			return ctx.Err()
		case <-wake:
		}
		if err := r.Flush(ctx); err != nil && ctx.Err() == nil {
			r.opts.Logger.Warn("cross-tier log start flush failed", zap.Error(err))
		}
	}
}

// ReportingLog wraps a remote.PartitionLog so that the remote-log
// manager's log start reports (expiration, and the first copy run after
// a restart) also reach a Reporter.
type ReportingLog struct {
	remote.PartitionLog
	Partition remote.TopicIDPartition
	Reporter  *Reporter
}

// UpdateLogStartOffsetFromRemoteTier passes n to the log and reports it.
func (l ReportingLog) UpdateLogStartOffsetFromRemoteTier(n int64) (bool, error) {
	changed, err := l.PartitionLog.UpdateLogStartOffsetFromRemoteTier(n)
	if err == nil {
		l.Reporter.Report(l.Partition, n)
	}
	return changed, err
}

// CrossTierCacheOptions configures a CrossTierCache. ControlPlane and
// Partitions are required.
type CrossTierCacheOptions struct {
	ControlPlane wal.ControlPlane
	// Partitions says which partitions consolidate.
	Partitions PartitionSource
	// TTL is how long a value is served before the control plane is
	// asked again. Default 1s.
	TTL time.Duration
	// LookupTimeout bounds one control-plane question. Default 5s.
	LookupTimeout time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// CrossTierCache serves X from the control plane (the log row's reported
// cross-tier log start; unknown until one is reported) through a
// short-lived cache. It satisfies remote.ConsolidationState, so
// the expiration task's retention guard and the Endpoint read the same X.
// A failed refresh keeps serving the old value: X only advances, so an old
// value is stale only on the low side (the guard keeps more, the endpoint
// may redirect a fetch whose prefix was deleted, which then retries).
//
// Concurrency: safe for concurrent use; mu is never held across the
// control-plane call.
type CrossTierCache struct {
	opts CrossTierCacheOptions
	mu   struct {
		sync.Mutex
		entries map[remote.TopicIDPartition]crossTierEntry
	}
}

type crossTierEntry struct {
	x       int64
	fetched time.Time
}

var _ remote.ConsolidationState = (*CrossTierCache)(nil)

// NewCrossTierCache returns an empty cache.
func NewCrossTierCache(opts CrossTierCacheOptions) (*CrossTierCache, error) {
	if opts.ControlPlane == nil || opts.Partitions == nil {
		return nil, fmt.Errorf("consolidate: cross-tier cache needs a control plane and a partition source: %w", ErrInvalidArgument)
	}
	if opts.TTL == 0 {
		opts.TTL = time.Second
	}
	if opts.LookupTimeout == 0 {
		opts.LookupTimeout = 5 * time.Second
	}
	if opts.TTL < 0 || opts.LookupTimeout < 0 {
		return nil, fmt.Errorf("consolidate: negative cache duration: %w", ErrInvalidArgument)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	c := &CrossTierCache{opts: opts}
	c.mu.entries = map[remote.TopicIDPartition]crossTierEntry{}
	return c, nil
}

// learn raises tp's cached value (a flush stored it).
func (c *CrossTierCache) learn(tp remote.TopicIDPartition, x int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.mu.entries[tp]; !ok || x > e.x {
		c.mu.entries[tp] = crossTierEntry{x: x, fetched: c.opts.Now()}
	}
}

// CrossTierLogStart implements remote.ConsolidationState: whether tp
// consolidates and its X (known false while the control plane has never
// answered for it).
func (c *CrossTierCache) CrossTierLogStart(tp remote.TopicIDPartition) (consolidating bool, start int64, known bool) {
	s, _, ok := c.opts.Partitions.Partition(tp)
	if !ok || !s.Consolidating() {
		return false, 0, false
	}
	now := c.opts.Now()
	c.mu.Lock()
	e, cached := c.mu.entries[tp]
	c.mu.Unlock()
	if cached && now.Sub(e.fetched) < c.opts.TTL {
		return true, e.x, true
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.LookupTimeout)
	defer cancel()
	// The row's reported X, not ListOffsets EARLIEST: EARLIEST answers W
	// while no X was ever reported, and once a prune moved W to the seal
	// that would make the classic prefix in remote storage look expired
	// (retention would delete it). Never reported is unknown.
	info, err := c.opts.ControlPlane.LogInfo(ctx, walTP(tp))
	if err != nil || info.CrossTierLogStartOffset < 0 {
		return true, e.x, cached
	}
	x := info.CrossTierLogStartOffset
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur, ok := c.mu.entries[tp]; ok && cur.x > x {
		x = cur.x // a concurrent learn stored a higher value
	}
	c.mu.entries[tp] = crossTierEntry{x: x, fetched: now}
	return true, x, true
}
