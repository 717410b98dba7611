package replica

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tierlog/tierlog/consolidate"
	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/tierstate"
	"github.com/tierlog/tierlog/wal"
	"go.uber.org/zap"
)

// ErrInvalidArgument marks a driver built without a required dependency.
var ErrInvalidArgument = fmt.Errorf("replica: invalid argument: %w", base.ErrInvalidArgument)

// ErrOffline is returned by Apply and the fetch hooks for a replica that
// is offline (a failed recreate, a storage error, a log directory
// failure): later deltas skip it.
var ErrOffline = errors.New("replica: replica offline")

// Log is what the driver needs of a partition's current log.
// *log.UnifiedLog satisfies it.
type Log interface {
	remote.PartitionLog
	HighWatermark() int64
	LatestEpoch() (int32, bool)
	TruncateTo(offset int64) (bool, error)
	MaybeIncrementHighWatermark(hw int64) (bool, error)
	// HighestOffsetInRemoteStorageInLineage is what the WAL pruner trusts
	// (consolidate.PruneLog).
	HighestOffsetInRemoteStorageInLineage() int64
}

// LogManager creates and deletes the partition's logs in the broker's log
// directories (Kafka: LogManager). A broker implements it.
type LogManager interface {
	// CreateLog creates an empty current log (log end 0, highest offset in
	// remote storage -1, truncation count 0).
	CreateLog(ctx context.Context, tp remote.TopicIDPartition) (Log, error)
	// DeleteLog deletes l and forgets it.
	DeleteLog(ctx context.Context, tp remote.TopicIDPartition, l Log) error
	// DeleteFutureLog deletes the future log of a log directory move.
	DeleteFutureLog(ctx context.Context, tp remote.TopicIDPartition) error
}

// ClassicFetcher is the broker's replica fetcher (Kafka:
// ReplicaFetcherManager).
type ClassicFetcher interface {
	// AddPartition starts fetching the partition from leader at offset.
	AddPartition(ctx context.Context, tp remote.TopicIDPartition, leader int32, offset int64) error
	// RemovePartition stops fetching it and returns once no fetch runs
	// for it. Idempotent.
	RemovePartition(ctx context.Context, tp remote.TopicIDPartition) error
}

// ConsolidationFetcher is the broker's consolidation fetcher (Inkless:
// ConsolidationFetcherManager; consolidate.Fetcher runs one partition).
type ConsolidationFetcher interface {
	// AddPartition starts copying the partition's diskless batches into
	// start.Log at start.Offset (or replaces an added partition's log,
	// state and epoch).
	AddPartition(ctx context.Context, start ConsolidationStart) error
	// RemovePartition stops it and returns once no copy runs for it.
	// Idempotent.
	RemovePartition(ctx context.Context, tp remote.TopicIDPartition) error
}

// ConsolidationStart is what the consolidation fetcher needs to run a
// partition (consolidate.FetcherPartition plus the start offset).
type ConsolidationStart struct {
	Partition remote.TopicIDPartition
	// Log is the current log; *log.UnifiedLog, which the driver got from
	// the LogManager, is also a consolidate.ConsolidationLog.
	Log Log
	// State is the switch state of the delta: its seal, diskless epoch and
	// recorded epoch select the rebuild and the epoch stamped on batches.
	State tierstate.State
	// LeaderEpoch is the delta's leader epoch, sent with the rebuild's
	// questions.
	LeaderEpoch int32
	// Offset is the first offset to fetch: the log end after a seal, the
	// high watermark (Kafka's initial fetch offset) when born diskless.
	Offset int64
	// Leader: this broker leads the partition (the leader's first fetch
	// below the seal rebuilds it; consolidate.PlanStart).
	Leader bool
}

// RemoteLogManager is the remote log manager. *remote.Manager satisfies
// it.
type RemoteLogManager interface {
	tierstate.RemoteTaskStopper
	OnLeadershipChange(leaders, followers []remote.Partition) error
}

var _ RemoteLogManager = (*remote.Manager)(nil)

// Event is one action the driver performed: the delta (or fetch) that
// led to it, the action with its offsets and epochs, and its error.
type Event struct {
	Partition remote.TopicIDPartition
	Action    Action
	Err       error
	// Check and Recreate are the replica check's decision and the
	// recreate's result, for a CheckReplica action (zero otherwise).
	Check    tierstate.ReplicaDecision
	Recreate tierstate.RecreateResult
}

func (e Event) String() string {
	s := e.Action.String()
	if e.Err != nil {
		s += " error: " + e.Err.Error()
	}
	return s
}

// Options configures a Replica. Partition, Logs, Classic, Consolidation
// and Remote are required.
type Options struct {
	Partition     remote.TopicIDPartition
	Logs          LogManager
	Classic       ClassicFetcher
	Consolidation ConsolidationFetcher
	Remote        RemoteLogManager
	// Log is the current log found at startup, nil when there is none.
	Log Log
	// Logger receives one line per action. Default zap.NewNop().
	Logger *zap.Logger
	// OnEvent, if set, is called with every action performed, on the
	// caller's goroutine, with no lock of the driver held.
	OnEvent func(Event)

	// The leader's switch steps (DecideSwitch; optional). Without a
	// Controller the driver runs none and the broker drives
	// consolidate.LeaderSwitch itself.
	//
	// Controller carries the seal proposal and the phase-2 request to
	// the controller. Its calls run under the driver's lock, so they must
	// not call back into the driver: the controller's answer arrives as
	// a later delta.
	Controller consolidate.SwitchController
	// ControlPlane is the WAL's control plane, where InitDisklessLog
	// creates the partition's row. Required with Controller.
	ControlPlane wal.ControlPlane
	// BrokerID is this broker's id, sent with the phase-2 request.
	BrokerID int32
	// NowMs is the clock of the seal's abort markers and of the wait at
	// the seal for ISR admission (HandOff). Default: the wall clock.
	NowMs func() int64
	// Pruner, if set, is armed for a consolidating leader at or past the
	// seal and disarmed when that ends (*consolidate.Pruner).
	Pruner PrunerArming

	// Move is the broker's alter-log-dir fetcher, FutureLogs the log
	// manager's promotion of a future log (both optional; StartMove and
	// CancelMove need Move, MaybePromoteFutureLog needs FutureLogs).
	Move       MoveFetcher
	FutureLogs FutureLogManager
}

// Replica drives one partition of this broker through metadata deltas:
// it owns the partition's current log (and its future log, during a log
// directory move) and calls the broker's fetchers, log manager and
// remote log manager. Methods are safe for concurrent use; each holds
// mu for its whole run, so deltas and fetch hooks apply one at a time.
// Events are reported after mu is released.
type Replica struct {
	opts Options
	mu   struct {
		sync.Mutex
		log     Log
		future  tierstate.FutureReplicaLog
		prior   Prior
		delta   Delta
		metrics Metrics
		switchp SwitchProgress
		// gateState is the switch state the gates are in (that of the
		// delta being applied, from its check on).
		gateState tierstate.State
		// isrWait is the follower's wait at the seal for ISR admission
		// (HandOff), reset when the classic fetcher gains or loses the
		// partition.
		isrWait isrWait
	}
	// app is the leader's classic append path (AppendAsLeader). It is
	// never held with mu waited for: Apply and the hooks take app
	// exclusively while holding mu (a new log, a promotion), appends take
	// it shared without mu.
	app struct {
		sync.RWMutex
		// gate is the current log's ClassicGate, nil when there is no
		// log or the replica is offline.
		gate *consolidate.ClassicGate
	}
}

// New returns the driver of one partition.
func New(opts Options) (*Replica, error) {
	if opts.Logs == nil || opts.Classic == nil || opts.Consolidation == nil || opts.Remote == nil {
		return nil, fmt.Errorf("replica: %s needs a log manager, both fetchers and a remote log manager: %w",
			opts.Partition, ErrInvalidArgument)
	}
	if opts.Controller != nil && opts.ControlPlane == nil {
		return nil, fmt.Errorf("replica: %s: a switch controller needs the WAL's control plane: %w",
			opts.Partition, ErrInvalidArgument)
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.NowMs == nil {
		opts.NowMs = func() int64 { return time.Now().UnixMilli() }
	}
	r := &Replica{opts: opts}
	r.mu.prior.LeaderEpoch = base.UndefinedEpoch
	r.mu.switchp = SwitchProgress{}.forgetSteps()
	// No gate until the first delta: the switch state is unknown before
	// it, so AppendAsLeader refuses (ErrNoLog).
	r.mu.log = opts.Log
	return r, nil
}

// Log returns the current log, nil when there is none.
func (r *Replica) Log() Log {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.log
}

// SetFutureLog records the future log of a log directory move (nil: the
// move finished or was cancelled) for a broker that runs its move fetcher
// itself; StartMove is the driver's own move. The phase-2 check reads it;
// a future log that is also a Log can be promoted by
// MaybePromoteFutureLog.
func (r *Replica) SetFutureLog(f tierstate.FutureReplicaLog) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.future = f
}

// FutureLog returns the future log, nil when there is none.
func (r *Replica) FutureLog() tierstate.FutureReplicaLog {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.future
}

// Prior returns what the driver remembers of the partition.
func (r *Replica) Prior() Prior {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.prior
}

// Metrics counts what the driver did (monotonic counters) and holds its
// current flags.
type Metrics struct {
	Deltas, Checks, Recreates, Fences, Unfences, Offlines, HandOffs, Admissions int64
	// SwitchSteps counts the leader's switch steps performed
	// (Seal, ProposeSeal, InitDisklessLog, RequestPhaseTwo),
	// SwitchFailures those that failed (retried by the next call).
	SwitchSteps, SwitchFailures int64
	// Removals counts the removal deltas applied, Promotions the future
	// logs promoted.
	Removals, Promotions int64
	// Offline and Fenced are the replica's current state.
	Offline, Fenced bool
	// IsrWaitMs is how long this follower has been waiting at the seal
	// for ISR admission (HandOff's HandOffWaitForIsr), 0 when it is not:
	// the partition-level signal of a replica stuck outside the ISR
	// (https://github.com/aiven/inkless/pull/760). IsrWaitWarnings counts
	// the warnings logged about it (the first after a minute, then one
	// a minute).
	IsrWaitMs       int64
	IsrWaitWarnings int64
}

// Metrics returns a snapshot.
func (r *Replica) Metrics() Metrics {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.mu.metrics
	m.Offline, m.Fenced = r.mu.prior.Offline, r.mu.prior.Fenced
	m.IsrWaitMs = r.mu.isrWait.waitedMs(r.opts.NowMs())
	return m
}

// countLocked counts one performed action. REQUIRES: r.mu held.
func (r *Replica) countLocked(k Kind) {
	m := &r.mu.metrics
	switch k {
	case CheckReplica:
		m.Checks++
	case Fence:
		m.Fences++
	case Unfence:
		m.Unfences++
	case GoOffline:
		m.Offlines++
	case Admit:
		m.Admissions++
	case PromoteFutureLog:
		m.Promotions++
	}
}

// events collects the actions of one call, reported after mu is released.
type events struct {
	r   *Replica
	out []Event
	// logs are log lines to write after mu is released.
	logs []func()
}

// add records one performed action. REQUIRES: e.r.mu held.
func (e *events) add(a Action, err error) {
	e.r.countLocked(a.Kind)
	ev := Event{Partition: e.r.opts.Partition, Action: a, Err: err}
	e.out = append(e.out, ev)
	f := []zap.Field{zap.Stringer("partition", ev.Partition), zap.String("action", a.Kind.String()),
		zap.Int64("offset", a.Offset), zap.String("reason", a.Reason)}
	if err != nil {
		e.r.opts.Logger.Error("replica action failed", append(f, zap.Error(err))...)
		return
	}
	e.r.opts.Logger.Info("replica action", f...)
}

// setCheck attaches the check's decision and result to the last event.
func (e *events) setCheck(d tierstate.ReplicaDecision, res tierstate.RecreateResult) {
	last := &e.out[len(e.out)-1]
	last.Check, last.Recreate = d, res
}

func (e *events) report() {
	for _, l := range e.logs {
		l()
	}
	if e.r.opts.OnEvent == nil {
		return
	}
	for _, ev := range e.out {
		e.r.opts.OnEvent(ev)
	}
}

// Apply applies one metadata delta: DecideCheck, the check and recreate
// it asks for, then DecideTransition on the log the check left, and each
// action's effect. It returns the actions performed. A failed effect
// takes the replica offline (later deltas skip it) and is returned;
// ErrOffline for a replica already offline.
//
// A context already cancelled applies nothing and returns its error; a
// cancellation that fails an effect midway takes the replica offline like
// any failed effect (the delta is half applied).
func (r *Replica) Apply(ctx context.Context, d Delta) (Plan, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ev := &events{r: r}
	defer ev.report()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.metrics.Deltas++
	if d.Removal != NotRemoved {
		return r.removeLocked(ctx, d, ev)
	}
	var done Plan
	checked := false
	for _, a := range DecideCheck(r.mu.prior, d) {
		switch a.Kind {
		case SkipOffline:
			ev.add(a, nil)
			return append(done, a), ErrOffline
		case Unfence:
			r.mu.prior.Fenced = false
			r.mu.prior.Hosted = false
			ev.add(a, nil)
		case CheckReplica:
			var err error
			if a, err = r.checkLocked(ctx, d, a, ev); err != nil {
				return append(done, a), err
			}
			checked = true
		}
		done = append(done, a)
	}
	// The gate refuses what the new state refuses before anything reads
	// the log end (the seal, the truncation to it).
	r.setGateStateLocked(d.State)
	var view ViewLog
	if r.mu.log != nil {
		view = r.mu.log
	}
	for _, a := range DecideTransition(d, view) {
		err := r.performLocked(ctx, d, a)
		ev.add(a, err)
		done = append(done, a)
		if err != nil {
			r.mu.metrics.Offlines++
			r.goOfflineLocked(ctx, ev)
			return done, err
		}
	}
	if !d.Leader || d.LeaderEpoch != r.mu.prior.LeaderEpoch {
		r.mu.switchp = r.mu.switchp.forgetSteps()
	}
	r.mu.prior.Hosted = true
	r.mu.prior.LeaderEpoch = d.LeaderEpoch
	r.mu.delta = d
	// A failed switch step leaves the replica as it is: the event and the
	// log carry it, StepSwitch retries it.
	sw, _ := r.switchLocked(ctx, d, ev)
	done = append(done, sw...)
	if checked {
		// The check stopped the move fetcher; a kept future log resumes
		// (Kafka's applyDelta ends with maybeAddLogDirFetchers).
		if a, ok := r.resumeMoveLocked(ctx, ev); ok {
			done = append(done, a)
		}
	}
	return done, nil
}

// checkLocked runs the phase-2 check and recreate, and returns a with the
// decision in its reason. REQUIRES: r.mu held.
func (r *Replica) checkLocked(ctx context.Context, d Delta, a Action, ev *events) (Action, error) {
	tp := r.opts.Partition
	cur, fut := r.mu.log, r.mu.future
	deps := tierstate.RecreateDeps{Partition: tp, Fetchers: fetcherStopper{r}, RemoteTasks: r.opts.Remote,
		Logger: r.opts.Logger}
	if cur != nil {
		deps.DeleteCurrentLog = func() error { return r.opts.Logs.DeleteLog(ctx, tp, cur) }
	}
	if fut != nil {
		deps.DeleteFutureLog = func() error { return r.opts.Logs.DeleteFutureLog(ctx, tp) }
	}
	var current tierstate.ReplicaLog = emptyReplicaLog{}
	if cur != nil {
		current = cur
	}
	dec, res := tierstate.CheckAndRecreate(ctx, d.State, current, fut, deps)
	a.Reason += ": " + dec.String()
	switch res.Outcome {
	case tierstate.Recreated:
		r.mu.metrics.Recreates++
		r.setLogLocked(nil)
		r.mu.future = nil
		a.Reason += "; recreated"
	case tierstate.RecreateOffline:
		r.mu.metrics.Offlines++
		if res.CurrentLogDeleted {
			r.setLogLocked(nil)
		}
		if res.FutureLogDeleted {
			r.mu.future = nil
		}
		r.mu.prior.Offline = true
		ev.add(a, res.Err)
		ev.setCheck(dec, res)
		r.closeGateLocked()
		r.disarmEventLocked(ev, "offline after a failed recreate")
		return a, res.Err
	}
	ev.add(a, nil)
	ev.setCheck(dec, res)
	if res.Outcome == tierstate.Recreated {
		r.disarmEventLocked(ev, "recreated: no prune before the rebuild")
	}
	return a, nil
}

// remotePartition is the partition as the remote log manager registers
// it: with the committed seal, which caps its remote reads
// (remote.Partition.Seal).
func remotePartition(tp remote.TopicIDPartition, l Log, s tierstate.State) remote.Partition {
	return remote.Partition{TopicIDPartition: tp, Log: l, SealCommitted: s.SealCommitted(), Seal: s.Seal()}
}

// performLocked is one action's effect.
// REQUIRES: r.mu held.
func (r *Replica) performLocked(ctx context.Context, d Delta, a Action) error {
	tp := r.opts.Partition
	switch a.Kind {
	case CreateLog:
		l, err := r.opts.Logs.CreateLog(ctx, tp)
		if err != nil {
			return err
		}
		r.setLogLocked(l)
	case TruncateToSeal:
		_, err := r.mu.log.TruncateTo(a.Offset)
		return err
	case RaiseHighWatermark:
		_, err := r.mu.log.MaybeIncrementHighWatermark(a.Offset)
		return err
	case Fence:
		// The fetchers stop in the next action (StopFetching). Registered as a follower: no copy or expiration task runs, and
		// the describe RPC can read its remote coverage.
		if err := r.opts.Remote.OnLeadershipChange(nil, []remote.Partition{remotePartition(tp, r.mu.log, d.State)}); err != nil {
			return err
		}
		r.mu.prior.Fenced = true
	case GoOffline:
		r.mu.prior.Offline = true
	case BecomeLeader:
		// The classic fetcher stops in the plan's last action
		// (StartConsolidation or StopFetching).
		return r.opts.Remote.OnLeadershipChange([]remote.Partition{remotePartition(tp, r.mu.log, d.State)}, nil)
	case BecomeFollower:
		return r.opts.Remote.OnLeadershipChange(nil, []remote.Partition{remotePartition(tp, r.mu.log, d.State)})
	case StartClassic:
		r.mu.isrWait.reset() // a new stay on the classic fetcher
		if err := r.opts.Consolidation.RemovePartition(ctx, tp); err != nil {
			return err
		}
		return r.opts.Classic.AddPartition(ctx, tp, d.LeaderID, a.Offset)
	case StartConsolidation:
		r.mu.isrWait.reset()
		if err := r.opts.Classic.RemovePartition(ctx, tp); err != nil {
			return err
		}
		return r.opts.Consolidation.AddPartition(ctx, r.consolidationStartLocked(d, a.Offset))
	case StopFetching:
		return r.stopFetchersLocked(ctx)
	default:
		return fmt.Errorf("replica: action %s is not a transition: %w", a.Kind, ErrInvalidArgument)
	}
	return nil
}

// consolidationStartLocked is the consolidation fetcher's view of the
// partition. REQUIRES: r.mu held.
func (r *Replica) consolidationStartLocked(d Delta, offset int64) ConsolidationStart {
	return ConsolidationStart{Partition: r.opts.Partition, Log: r.mu.log, State: d.State,
		LeaderEpoch: d.LeaderEpoch, Offset: offset, Leader: d.Leader}
}

// stopFetchersLocked removes the partition from both fetchers.
// REQUIRES: r.mu held.
func (r *Replica) stopFetchersLocked(ctx context.Context) error {
	r.mu.isrWait.reset()
	tp := r.opts.Partition
	return errors.Join(r.opts.Classic.RemovePartition(ctx, tp), r.opts.Consolidation.RemovePartition(ctx, tp))
}

// stopAllFetchersLocked also stops the move fetcher, when the driver runs
// it (the phase-2 check, a removal, going offline). Stopping it waits for
// a copy into the future log in progress; a promotion runs under mu, so
// none is in progress here. REQUIRES: r.mu held.
func (r *Replica) stopAllFetchersLocked(ctx context.Context) error {
	err := r.stopFetchersLocked(ctx)
	if r.opts.Move != nil {
		err = errors.Join(err, r.opts.Move.RemovePartition(ctx, r.opts.Partition))
	}
	return err
}

// goOfflineLocked marks the replica offline after a failed effect, stops
// its fetchers (best effort: the replica is offline either way), refuses
// appends and disarms the pruner. REQUIRES: r.mu held.
func (r *Replica) goOfflineLocked(ctx context.Context, ev *events) {
	r.mu.prior.Offline = true
	r.mu.prior.Fenced = false
	_ = r.stopAllFetchersLocked(ctx)
	r.closeGateLocked()
	r.disarmEventLocked(ev, "offline")
}

// disarmEventLocked disarms the pruner if the driver armed it, and
// reports it. REQUIRES: r.mu held.
func (r *Replica) disarmEventLocked(ev *events, why string) {
	if !r.mu.switchp.PrunerArmed {
		return
	}
	r.disarmLocked()
	ev.add(act(DisarmPruner, -1, "%s", why), nil)
}

// LogDirFailure handles the failure of the log directory holding the
// current log: the replica goes offline, its fetchers stop, and a fenced
// record is cleared (https://github.com/aiven/inkless/pull/855): the
// partition stays offline instead of coming back on the next delta.
func (r *Replica) LogDirFailure(ctx context.Context) error {
	ev := &events{r: r}
	defer ev.report()
	r.mu.Lock()
	defer r.mu.Unlock()
	wasFenced := r.mu.prior.Fenced
	r.goOfflineLocked(ctx, ev)
	ev.add(act(GoOffline, -1, "log directory failure (fenced record cleared: %t)", wasFenced), nil)
	return nil
}

// fetcherStopper adapts the driver's fetchers to tierstate.FetcherStopper.
type fetcherStopper struct{ r *Replica }

func (f fetcherStopper) StopFetchers(ctx context.Context, _ remote.TopicIDPartition) error {
	return f.r.stopAllFetchersLocked(ctx)
}

// emptyReplicaLog is a replica with no log for the check: it passes.
type emptyReplicaLog struct{}

func (emptyReplicaLog) LogEndOffset() int64                 { return 0 }
func (emptyReplicaLog) LocalLogStartOffset() int64          { return 0 }
func (emptyReplicaLog) EpochForOffset(int64) (int32, bool)  { return base.UndefinedEpoch, false }
func (emptyReplicaLog) EpochEntries() []epochcache.Entry    { return nil }
func (emptyReplicaLog) HighestOffsetInRemoteStorage() int64 { return base.UndefinedOffset }
