package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/mutation"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/truncation"
	"go.uber.org/zap"
)

// PartitionLog is what the Manager reads and updates of a partition's
// local log. *log.UnifiedLog implements it.
type PartitionLog interface {
	// TruncationCount is read under the log lock before a task reads the
	// epoch cache or the segments (the Inkless truncation counter of
	// https://github.com/aiven/inkless/pull/857).
	TruncationCount() truncation.Count
	EpochEntries() []epochcache.Entry
	EpochEntriesInRange(start, end int64) []epochcache.Entry
	EndOffsetForEpoch(epoch int32) epochcache.EpochEndOffset
	EpochForOffset(offset int64) (int32, bool)
	LogStartOffset() int64
	LocalLogStartOffset() int64
	LogEndOffset() int64
	LastStableOffset() int64
	HighestOffsetInRemoteStorage() int64
	// UpdateHighestOffsetInRemoteStorage installs offset only if no
	// truncation happened since count was read.
	UpdateHighestOffsetInRemoteStorage(offset int64, count truncation.Count) bool
	// CapHighestOffsetInRemoteStorage lowers the highest offset of this
	// lineage that local retention counts as copied, only if no
	// truncation happened since count was read.
	CapHighestOffsetInRemoteStorage(offset int64, count truncation.Count) bool
	// FenceRemoteProgress makes every count read before it stale, as a
	// truncation does, without changing the log.
	FenceRemoteProgress()
	HighestOffsetInRemoteStorageInLineage() int64
	UpdateLogStartOffsetFromRemoteTier(n int64) (bool, error)
	Segments(from int64) ([]log.SegmentInfo, error)
	OpenSegment(base int64) (*log.SegmentFiles, error)
	ProducerSnapshotWithBatches(offset int64) (snap, batches []byte, err error)
	CollectAbortedTransactions(fetchOffset, upper int64) ([]log.AbortedTxn, error)
	Retention() (ms, bytes int64)
	Delete() error
}

var _ PartitionLog = (*log.UnifiedLog)(nil)

// SegmentStorage is the data plane the Manager drives. *StorageManager
// implements it; tests substitute failing ones.
type SegmentStorage interface {
	CopySegment(ctx context.Context, m *SegmentMetadata, data SegmentData) (customMetadata []byte, err error)
	FetchSegment(ctx context.Context, m *SegmentMetadata, start, length int64) (io.ReadCloser, error)
	FetchIndex(ctx context.Context, m *SegmentMetadata, t IndexType) ([]byte, error)
	DeleteSegment(ctx context.Context, m *SegmentMetadata) error
}

var _ SegmentStorage = (*StorageManager)(nil)

// ConsolidationState tells the expiration task whether a partition is
// consolidating (phase 2 of the classic-to-diskless switch) and its
// cross-tier log start, the partition's authoritative log start: the
// expiration task's reclaim floor and the bound of its epoch-cache cleanup
// (Inkless, https://github.com/aiven/inkless/pull/857). The diskless
// control plane answers it.
type ConsolidationState interface {
	// CrossTierLogStart returns (consolidating, start, known): known is
	// false when the control plane has no cross-tier start yet.
	CrossTierLogStart(tp TopicIDPartition) (consolidating bool, start int64, known bool)
}

// Partition is one partition the Manager runs tasks for.
type Partition struct {
	TopicIDPartition TopicIDPartition
	Log              PartitionLog
	// SealCommitted and Seal: the partition switched from classic to
	// diskless and its seal S is committed (docs/switch.md). A remote
	// read below S then returns no record at or above S (Read): after an
	// unclean election a remote segment can cross the seal with records
	// the partition discarded (github.com/aiven/inkless/pull/857). The
	// replica driver sets them from each delta's switch state; registering
	// the same partition, role and log again with another seal changes
	// only the cap, not the tasks.
	SealCommitted bool
	Seal          int64
}

// noReadCap is partitionTasks.readCap of a partition without a seal.
const noReadCap = -1

// readCap is the offset remote reads below it stop at: the seal, or
// noReadCap.
func (p Partition) readCap() int64 {
	if !p.SealCommitted || p.Seal < 0 {
		return noReadCap
	}
	return p.Seal
}

// StopPartition asks StopPartitions to stop one partition. Kafka:
// StopPartition, plus Inkless's KeepRemoteLogMetadata.
type StopPartition struct {
	TopicIDPartition TopicIDPartition
	// DeleteLocalLog deletes the local log (after the tasks stopped).
	DeleteLocalLog bool
	// DeleteRemoteLog deletes every remote segment of the partition.
	DeleteRemoteLog bool
	// KeepRemoteLogMetadata keeps the partition registered (remote reads
	// and lookups keep working) while its tasks stop: a recreate deletes
	// the logs but the rebuild needs the remote metadata (Inkless,
	// https://github.com/aiven/inkless/pull/857).
	KeepRemoteLogMetadata bool
}

// ManagerOptions configures a Manager. The zero value is valid.
type ManagerOptions struct {
	// BrokerID is recorded in the metadata events this broker writes.
	BrokerID int32
	// TaskInterval is the delay between two runs of a task
	// (remote.log.manager.task.interval.ms); the first run starts at
	// once. Default 30s. Negative: no background runs; the caller drives
	// the tasks with RunCopy, RunFollower and RunExpiration.
	TaskInterval time.Duration
	// CopyDisabled stops leaders from copying (remote.log.copy.disable).
	CopyDisabled bool
	// Consolidation answers the cross-tier log start of consolidating
	// partitions; nil: every partition is classic.
	Consolidation ConsolidationState
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Logger; default zap.NewNop().
	Logger *zap.Logger
	// Listener receives events; callbacks run on the task's goroutine,
	// never under a lock of the Manager or of a log.
	Listener ManagerListener
}

// DefaultTaskInterval is Kafka's remote.log.manager.task.interval.ms.
const DefaultTaskInterval = 30 * time.Second

// Manager runs the remote-log tasks of the partitions this broker hosts and
// serves reads below the local log (Kafka: RemoteLogManager). Leaders get a
// copy task and an expiration task, followers a follower task. Each task
// keeps its state across runs; runs of one task never overlap.
//
// Lock order: Manager.mu -> nothing (it guards the partition map and is
// never held across I/O or a task run); partitionTasks.{copyMu,
// expireMu, followerMu} -> log.UnifiedLog.mu (via the log's methods) and
// MetadataManager locks; Manager.copyingMu is a leaf.
type Manager struct {
	meta    *MetadataManager
	storage SegmentStorage
	opts    ManagerOptions
	logger  *zap.Logger
	metrics managerCounters

	mu struct {
		sync.Mutex
		partitions map[TopicIDPartition]*partitionTasks
		closed     bool
	}
	// copying holds the ids of segments being uploaded now: the
	// expiration task stops at them, as Kafka's does.
	copyingMu sync.Mutex
	copying   map[SegmentID]struct{}
	// indexes caches remote offset indexes for reads.
	indexes indexCache
}

// NewManager returns a Manager over the metadata and data planes.
func NewManager(meta *MetadataManager, storage SegmentStorage, opts ManagerOptions) (*Manager, error) {
	if meta == nil || storage == nil {
		return nil, fmt.Errorf("%w: NewManager needs a metadata manager and a storage", ErrInvalidArgument)
	}
	if opts.TaskInterval == 0 {
		opts.TaskInterval = DefaultTaskInterval
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	m := &Manager{meta: meta, storage: storage, opts: opts, logger: opts.Logger, copying: map[SegmentID]struct{}{}}
	m.mu.partitions = map[TopicIDPartition]*partitionTasks{}
	return m, nil
}

// taskKind names the three tasks.
type taskKind int8

const (
	taskCopy taskKind = iota
	taskExpiration
	taskFollower
)

func (k taskKind) String() string {
	return [...]string{"copy", "expiration", "follower"}[k]
}

// partitionTasks is one registered partition: its log, its role and the
// state of its tasks. A leadership change replaces it with a new one
// (fresh task state, as Kafka creates new task objects).
type partitionTasks struct {
	p      Partition
	leader bool
	// stopped: tasks cancelled, partition kept for lookups
	// (KeepRemoteLogMetadata).
	stopped bool
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup // background task goroutines

	copyMu sync.Mutex
	copy   copyState
	// copyCancelled is set when the copy task cancelled itself (custom
	// metadata too large).
	copyCancelled bool
	// stallGauge is 1 + the base offset in copy.stalled, 0 when nil:
	// written with copyMu held, read by Metrics without it (which must
	// not wait for an upload).
	stallGauge atomic.Int64
	// readCap is p's readCap, replaced when the partition is registered
	// again with the same log and role (read without Manager.mu).
	readCap atomic.Int64

	expireMu   sync.Mutex
	followerMu sync.Mutex

	lag copyLag
}

// OnLeadershipChange registers leaders and followers and (re)starts their
// tasks: leaders get copy (unless CopyDisabled) and expiration, followers
// the follower task. A partition whose role or log changed gets new
// tasks; the old ones are cancelled and waited for first.
func (m *Manager) OnLeadershipChange(leaders, followers []Partition) error {
	var errs []error
	for _, set := range []struct {
		ps     []Partition
		leader bool
	}{{leaders, true}, {followers, false}} {
		for _, p := range set.ps {
			if err := m.register(p, set.leader); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func (m *Manager) register(p Partition, leader bool) error {
	if p.Log == nil {
		return fmt.Errorf("%w: partition %s without a log", ErrInvalidArgument, p.TopicIDPartition)
	}
	m.mu.Lock()
	if m.mu.closed {
		m.mu.Unlock()
		return ErrClosed
	}
	old := m.mu.partitions[p.TopicIDPartition]
	if old != nil && !old.stopped && old.leader == leader && old.p.Log == p.Log {
		old.readCap.Store(p.readCap())
		m.mu.Unlock()
		return nil
	}
	pt := &partitionTasks{p: p, leader: leader}
	pt.readCap.Store(p.readCap())
	pt.lag.oldestMs = -1
	pt.ctx, pt.cancel = context.WithCancel(context.Background())
	m.mu.partitions[p.TopicIDPartition] = pt
	m.mu.Unlock()
	if old != nil {
		old.stop()
	}
	m.capUnheld(p)
	m.startBackground(pt)
	return nil
}

// capUnheld lowers what local retention counts as copied to what remote
// storage holds of the log's lineage now, before the new role's first
// task runs. The highest offset a task installed earlier may name
// segments a leader of another lineage has deleted since (its epoch
// cleanup after an unclean election): when an unclean election makes
// this lineage the partition's again, local retention must not take
// them for copies and delete the only ones left. Only the local records
// need it: the cap stays at or above the local log start - 1, so a log
// whose local records begin past remote storage's (a consolidating log
// reset at the seal, whose cache has no classic epoch) keeps the
// progress the WAL pruner reads until its copy task derives it. A failed
// lookup is logged and left to the tasks, which run the same check.
//
// The log's remote progress is fenced first (FenceRemoteProgress): an
// offset a task looked up before the check, before another lineage's
// leader deleted what it names, is then dropped at its install instead
// of undoing the cap. The old role's tasks are stopped already; this
// covers a task run by the broker outside the Manager's lifecycle.
func (m *Manager) capUnheld(p Partition) {
	if mutation.Disabled(mutation.RemoteRegistrationCap) {
		return
	}
	l := p.Log
	l.FenceRemoteProgress()
	count := l.TruncationCount()
	off, _, err := m.findHighestRemoteOffset(p.TopicIDPartition, l)
	if err != nil {
		m.logger.Warn("remote log manager: highest offset held by remote storage not checked at registration",
			zap.Stringer("partition", p.TopicIDPartition), zap.Error(err))
		return
	}
	capUnheldRemoteOffset(l, max(off, l.LocalLogStartOffset()-1), count)
}

// stop cancels the partition's tasks and waits until none runs.
func (pt *partitionTasks) stop() {
	pt.cancel()
	pt.wg.Wait()
	// A manual run holds a task mutex: taking each one waits it out.
	for _, mu := range []*sync.Mutex{&pt.copyMu, &pt.expireMu, &pt.followerMu} {
		mu.Lock()
		//lint:ignore SA2001 an empty critical section waits for the holder.
		mu.Unlock()
	}
}

func (m *Manager) startBackground(pt *partitionTasks) {
	if m.opts.TaskInterval < 0 {
		return
	}
	kinds := []taskKind{taskFollower}
	if pt.leader {
		kinds = []taskKind{taskCopy, taskExpiration}
		if m.opts.CopyDisabled {
			kinds = []taskKind{taskExpiration}
		}
	}
	for _, k := range kinds {
		pt.wg.Add(1)
		go m.loop(pt, k)
	}
}

// loop runs one task at fixed delay until the partition's tasks are
// cancelled. Errors are logged, counted and reported; the next run
// retries.
func (m *Manager) loop(pt *partitionTasks, k taskKind) {
	defer pt.wg.Done()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-pt.ctx.Done():
			return
		case <-t.C:
		}
		res, err := m.run(pt.ctx, pt, k)
		if err != nil && !errors.Is(err, ErrTaskCancelled) {
			m.logger.Warn("remote task failed", zap.Stringer("task", k),
				zap.Stringer("partition", pt.p.TopicIDPartition), zap.Stringer("result", res), zap.Error(err))
		} else if ce := m.logger.Check(zap.DebugLevel, "remote task ran"); ce != nil {
			ce.Write(zap.Stringer("task", k), zap.Stringer("partition", pt.p.TopicIDPartition), zap.Stringer("result", res))
		}
		t.Reset(m.opts.TaskInterval)
	}
}

// taskResult is the result of one run of a task: the field of its kind.
type taskResult struct {
	kind     taskKind
	copy     CopyResult
	expire   ExpirationResult
	follower FollowerResult
}

func (r taskResult) String() string {
	switch r.kind {
	case taskCopy:
		return r.copy.String()
	case taskExpiration:
		return r.expire.String()
	}
	return r.follower.String()
}

// run runs one task of pt once, with ctx also cancelled when pt's tasks
// are.
func (m *Manager) run(ctx context.Context, pt *partitionTasks, k taskKind) (taskResult, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stopAfter := context.AfterFunc(pt.ctx, func() { cancel(ErrTaskCancelled) })
	defer stopAfter()
	res := taskResult{kind: k}
	var err error
	switch k {
	case taskCopy:
		res.copy, err = m.runCopy(ctx, pt)
	case taskExpiration:
		res.expire, err = m.runExpiration(ctx, pt)
	case taskFollower:
		res.follower, err = m.runFollower(ctx, pt)
	}
	if err != nil && context.Cause(ctx) == ErrTaskCancelled {
		err = fmt.Errorf("%w: %w", ErrTaskCancelled, err)
		if k == taskCopy {
			res.copy.Stop = CopyCancelled
		}
	}
	if err != nil && !errors.Is(err, ErrTaskCancelled) {
		m.metrics.taskErrors.Add(1)
	}
	return res, err
}

// task returns the registered partition for a manual run of kind k, or an
// error when it is not registered in a role that has that task.
func (m *Manager) task(tp TopicIDPartition, k taskKind) (*partitionTasks, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return nil, ErrClosed
	}
	pt := m.mu.partitions[tp]
	switch {
	case pt == nil:
		return nil, fmt.Errorf("%w: %s", ErrPartitionNotReady, tp)
	case pt.stopped:
		return nil, fmt.Errorf("%w: %s's tasks are stopped", ErrTaskCancelled, tp)
	case pt.leader != (k != taskFollower):
		return nil, fmt.Errorf("%w: %s has no %s task in its role", ErrInvalidArgument, tp, k)
	case k == taskCopy && m.opts.CopyDisabled:
		return nil, fmt.Errorf("%w: copy is disabled", ErrInvalidArgument)
	}
	return pt, nil
}

// RunCopy runs the copy task of leader partition tp once, now (Kafka:
// RLMCopyTask), and says what it copied and why it stopped. The result
// is filled as far as the run got, also when it returns an error; it is
// the zero CopyResult when the run did not start (tp not a registered
// leader, copy disabled, the Manager closed).
func (m *Manager) RunCopy(ctx context.Context, tp TopicIDPartition) (CopyResult, error) {
	pt, err := m.task(tp, taskCopy)
	if err != nil {
		return CopyResult{}, err
	}
	res, err := m.run(ctx, pt, taskCopy)
	return res.copy, err
}

// RunExpiration runs the expiration task of leader partition tp once,
// now (Kafka: RLMExpirationTask), and says what it deleted and why. The
// result is filled as far as the run got, also when it returns an error
// (the failed deletions are in Failed); it is the zero ExpirationResult
// when the run did not start.
func (m *Manager) RunExpiration(ctx context.Context, tp TopicIDPartition) (ExpirationResult, error) {
	pt, err := m.task(tp, taskExpiration)
	if err != nil {
		return ExpirationResult{}, err
	}
	res, err := m.run(ctx, pt, taskExpiration)
	return res.expire, err
}

// RunFollower runs the follower task of follower partition tp once, now
// (Kafka: RemoteLogManager's follower task), and says what highest remote
// offset it found. It is the zero FollowerResult when the run did not
// start.
func (m *Manager) RunFollower(ctx context.Context, tp TopicIDPartition) (FollowerResult, error) {
	pt, err := m.task(tp, taskFollower)
	if err != nil {
		return FollowerResult{}, err
	}
	res, err := m.run(ctx, pt, taskFollower)
	return res.follower, err
}

// StopPartitions stops the tasks of each partition, then deletes its
// remote segments and its local log when asked, and unregisters it
// unless KeepRemoteLogMetadata (Kafka: RemoteLogManager.stopPartitions;
// KeepRemoteLogMetadata is the Inkless addition of
// https://github.com/aiven/inkless/pull/857). The tasks are cancelled and
// waited for before anything is deleted, and even when a deletion fails:
// a copy task that kept running would keep the progress of a deleted log.
// Errors of all partitions are joined.
func (m *Manager) StopPartitions(ctx context.Context, stops []StopPartition) error {
	var errs []error
	for _, s := range stops {
		m.mu.Lock()
		pt := m.mu.partitions[s.TopicIDPartition]
		if pt != nil {
			if s.KeepRemoteLogMetadata {
				// A stopped entry keeps the partition ready for reads and
				// lookups, with no tasks.
				kept := &partitionTasks{p: pt.p, leader: pt.leader, stopped: true}
				kept.ctx, kept.cancel = context.WithCancel(context.Background())
				kept.cancel()
				m.mu.partitions[s.TopicIDPartition] = kept
			} else {
				delete(m.mu.partitions, s.TopicIDPartition)
			}
		}
		m.mu.Unlock()
		if pt == nil {
			errs = append(errs, fmt.Errorf("%w: stop %s", ErrPartitionNotReady, s.TopicIDPartition))
			continue
		}
		pt.stop()
		if s.DeleteRemoteLog {
			if err := m.deleteRemoteLog(ctx, s.TopicIDPartition); err != nil {
				errs = append(errs, fmt.Errorf("remote: delete remote log of %s: %w", s.TopicIDPartition, err))
			}
		}
		if s.DeleteLocalLog {
			if err := pt.p.Log.Delete(); err != nil {
				errs = append(errs, fmt.Errorf("remote: delete local log of %s: %w", s.TopicIDPartition, err))
			}
		}
	}
	return errors.Join(errs...)
}

// deleteRemoteLog deletes every remote segment of tp, recording the
// partition's deletion (MARKED, STARTED, then FINISHED once every segment
// is gone; a retry resumes from the recorded state).
func (m *Manager) deleteRemoteLog(ctx context.Context, tp TopicIDPartition) error {
	put := func(to PartitionDeleteState) error {
		from, err := m.meta.PartitionDeleteState(tp)
		if err != nil || (from != NoPartitionDeleteState && from >= to) {
			return err
		}
		return m.meta.PutPartitionDeleteMetadata(ctx, PartitionDeleteMetadata{
			TopicIDPartition: tp, State: to, EventTimestampMs: m.opts.Now().UnixMilli(), BrokerID: m.opts.BrokerID,
		})
	}
	if err := put(DeletePartitionMarked); err != nil {
		return err
	}
	if err := put(DeletePartitionStarted); err != nil {
		return err
	}
	segs, err := m.meta.ListSegments(tp)
	if err != nil {
		return err
	}
	for i := range segs {
		if err := m.deleteSegment(ctx, &segs[i]); err != nil {
			return err
		}
	}
	return put(DeletePartitionFinished)
}

// deleteSegment runs a segment's deletion: DELETE_SEGMENT_STARTED
// (durable), the objects, DELETE_SEGMENT_FINISHED. A crash or an error in
// between leaves DELETE_SEGMENT_STARTED, which the next expiration run
// retries; object deletion is idempotent.
func (m *Manager) deleteSegment(ctx context.Context, seg *SegmentMetadata) error {
	if seg.State != DeleteSegmentStarted {
		if err := m.meta.UpdateSegment(ctx, SegmentMetadataUpdate{
			SegmentID: seg.SegmentID, State: DeleteSegmentStarted,
			EventTimestampMs: m.opts.Now().UnixMilli(), BrokerID: m.opts.BrokerID,
		}); err != nil {
			return err
		}
	}
	if err := m.storage.DeleteSegment(ctx, seg); err != nil {
		m.metrics.deleteErrors.Add(1)
		return err
	}
	if err := m.meta.UpdateSegment(ctx, SegmentMetadataUpdate{
		SegmentID: seg.SegmentID, State: DeleteSegmentFinished,
		EventTimestampMs: m.opts.Now().UnixMilli(), BrokerID: m.opts.BrokerID,
	}); err != nil {
		return err
	}
	m.metrics.segmentsDeleted.Add(1)
	m.metrics.bytesDeleted.Add(seg.SizeBytes)
	return nil
}

// partition returns the registered partition tp (tasks stopped or not).
func (m *Manager) partition(tp TopicIDPartition) (*partitionTasks, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return nil, ErrClosed
	}
	pt := m.mu.partitions[tp]
	if pt == nil {
		return nil, fmt.Errorf("%w: %s", ErrPartitionNotReady, tp)
	}
	return pt, nil
}

// IsPartitionReady reports whether tp is registered (Kafka:
// isPartitionReady).
func (m *Manager) IsPartitionReady(tp TopicIDPartition) bool {
	_, err := m.partition(tp)
	return err == nil
}

// FetchSegmentMetadata returns the finished remote segment holding offset
// in epoch (Kafka: fetchRemoteLogSegmentMetadata).
func (m *Manager) FetchSegmentMetadata(tp TopicIDPartition, epoch int32, offset int64) (SegmentMetadata, bool, error) {
	if _, err := m.partition(tp); err != nil {
		return SegmentMetadata{}, false, err
	}
	return m.meta.SegmentFor(tp, epoch, offset)
}

// Close stops every task and waits for them. The metadata manager and the
// storage stay open: they are the caller's.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.mu.closed {
		m.mu.Unlock()
		return nil
	}
	m.mu.closed = true
	pts := m.mu.partitions
	m.mu.partitions = nil
	m.mu.Unlock()
	for _, pt := range pts {
		pt.stop()
	}
	return nil
}

// beginCopy and endCopy track the segments being uploaded.
func (m *Manager) beginCopy(id SegmentID) {
	m.copyingMu.Lock()
	m.copying[id] = struct{}{}
	m.copyingMu.Unlock()
}

func (m *Manager) endCopy(id SegmentID) {
	m.copyingMu.Lock()
	delete(m.copying, id)
	m.copyingMu.Unlock()
}

func (m *Manager) beingCopied(id SegmentID) bool {
	m.copyingMu.Lock()
	defer m.copyingMu.Unlock()
	_, ok := m.copying[id]
	return ok
}
