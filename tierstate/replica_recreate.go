package tierstate

import (
	"context"
	"errors"
	"fmt"

	"github.com/tierlog/tierlog/remote"
	"go.uber.org/zap"
)

// FetcherStopper stops a partition's fetchers on this broker. A broker
// implements it.
type FetcherStopper interface {
	// StopFetchers removes the partition from the replica fetcher, the
	// alter-log-dir (move) fetcher and the consolidation fetcher, and
	// returns once none of them runs for it. Stopping the move fetcher
	// waits for a running promotion of the future log
	// (https://github.com/aiven/inkless/pull/857), so the future log the
	// check reads is not swapped in afterwards. Idempotent.
	StopFetchers(ctx context.Context, tp remote.TopicIDPartition) error
}

// RemoteTaskStopper cancels the remote log manager's tasks of a
// partition. *remote.Manager satisfies it.
type RemoteTaskStopper interface {
	// StopPartitions cancels the tasks of each partition and waits for them
	// (Kafka: RemoteLogManager.stopPartitions). A recreate asks for
	// KeepRemoteLogMetadata: the partition stays registered (topic id,
	// metadata subscription) since the rebuild reads its remote metadata.
	StopPartitions(ctx context.Context, stops []remote.StopPartition) error
}

// RecreateDeps is what Recreate and CheckAndRecreate act on. Partition,
// Fetchers and RemoteTasks are required.
type RecreateDeps struct {
	Partition   remote.TopicIDPartition
	Fetchers    FetcherStopper
	RemoteTasks RemoteTaskStopper
	// DeleteCurrentLog and DeleteFutureLog delete the replica's logs and
	// remove them from the broker's log manager (for *log.UnifiedLog,
	// its Delete method plus the broker's bookkeeping). Nil: there is no
	// such log.
	DeleteCurrentLog func() error
	DeleteFutureLog  func() error
	// Logger receives one line per recreate. Default zap.NewNop().
	Logger *zap.Logger
	// OnRecreate, if set, is called with every recreate's result (not for
	// a kept replica), on the caller's goroutine.
	OnRecreate func(RecreateResult)
}

// RecreateOutcome is how a recreate ended.
type RecreateOutcome int8

const (
	// RecreateNotRun: the replica was kept; nothing was deleted.
	RecreateNotRun RecreateOutcome = iota
	// Recreated: the fetchers and remote tasks are stopped and both logs
	// deleted. The leader or follower transition of the same delta
	// creates an empty log (LEO 0, highest offset in remote storage -1,
	// truncation count 0), which the fetch protocol rebuilds from remote
	// storage (Machine, RebuildPhaseTwo).
	Recreated
	// RecreateOffline: a step failed. Mark the replica offline with its
	// topic id; later deltas skip it (no check, no recreate, no fetcher),
	// so a half-deleted replica never restarts a move or a fetch.
	RecreateOffline
)

func (o RecreateOutcome) String() string {
	switch o {
	case RecreateNotRun:
		return "kept"
	case Recreated:
		return "recreated"
	case RecreateOffline:
		return "offline"
	}
	return fmt.Sprintf("RecreateOutcome(%d)", int8(o))
}

// RecreateResult describes a recreate: which steps succeeded, and the
// joined errors of those that failed.
type RecreateResult struct {
	Outcome         RecreateOutcome
	FetchersStopped bool
	TasksCancelled  bool
	// CurrentLogDeleted and FutureLogDeleted are true when the log was
	// deleted or there was none.
	CurrentLogDeleted bool
	FutureLogDeleted  bool
	Err               error
}

func (r RecreateResult) String() string {
	s := fmt.Sprintf("%s: fetchers-stopped=%t tasks-cancelled=%t current-deleted=%t future-deleted=%t",
		r.Outcome, r.FetchersStopped, r.TasksCancelled, r.CurrentLogDeleted, r.FutureLogDeleted)
	if r.Err != nil {
		s += " error: " + r.Err.Error()
	}
	return s
}

// Recreate deletes a replica so that the delta's leader or follower
// transition creates it empty (https://github.com/aiven/inkless/pull/857,
// "Recreate instead of truncate"):
//
//  1. stop the replica, move and consolidation fetchers;
//  2. cancel the remote log manager's tasks, keeping the remote log
//     metadata (StopPartitions with KeepRemoteLogMetadata); attempted even
//     if step 1 failed: a copy task that keeps running also keeps the copy
//     progress of the log;
//  3. delete the current log, then the future log; the future log is
//     deleted even if the current one could not be (a surviving future
//     log would restart the move on the new log), and both even if step 2
//     failed. Skipped if step 1 failed [INF]: a fetcher still running
//     could append to the log or promote the future log under the
//     deletion; the logs stay as they were for an offline replica.
//
// The log is never truncated in place: a truncation would leave the
// highest offset in remote storage (which only grows), a future log that
// can still be promoted, and remote tasks that computed offsets before it.
// A deleted log takes all of it along.
//
// If any step fails the outcome is RecreateOffline with the joined errors
// (a failed fetcher stop counts too [INF]). A partition
// the remote log manager does not know (remote.ErrPartitionNotReady: no
// tasks to cancel) counts as cancelled.
func Recreate(ctx context.Context, deps RecreateDeps) RecreateResult {
	var res RecreateResult
	if err := deps.validate(); err != nil {
		res.Outcome, res.Err = RecreateOffline, err
		return res
	}
	err := deps.Fetchers.StopFetchers(ctx, deps.Partition)
	res.FetchersStopped = err == nil
	return deps.finish(ctx, res, wrapStep("stop fetchers", err))
}

// CheckAndRecreate is the replica check of one partition as applyDelta runs
// it (https://github.com/aiven/inkless/pull/857), for a delta
// ShouldCheckReplica selected: stop the fetchers, CheckReplica, and if the
// replica fails, Recreate's steps 2 and
// 3. A failed fetcher stop skips the check and takes the replica offline
// as in Recreate (tasks cancelled, logs kept) [INF]: the logs could still
// move under the check. The RecreateResult is RecreateNotRun when the log
// is kept. future may be nil, or a nil *log.UnifiedLog, for no future log.
func CheckAndRecreate(ctx context.Context, s State, current ReplicaLog, future FutureReplicaLog,
	deps RecreateDeps) (ReplicaDecision, RecreateResult) {
	var res RecreateResult
	if err := deps.validate(); err != nil {
		res.Outcome, res.Err = RecreateOffline, err
		return ReplicaDecision{Skipped: "invalid arguments"}, res
	}
	if err := deps.Fetchers.StopFetchers(ctx, deps.Partition); err != nil {
		return ReplicaDecision{Skipped: "fetchers not stopped"}, deps.finish(ctx, res, wrapStep("stop fetchers", err))
	}
	res.FetchersStopped = true
	d := CheckReplica(s, current, future)
	if !d.Recreate {
		return d, res
	}
	deps.logger().Info("phase-2 replica fails the check; recreating it", zap.Stringer("partition", deps.Partition),
		zap.Stringer("decision", d))
	return d, deps.finish(ctx, res, nil)
}

func (deps RecreateDeps) validate() error {
	if deps.Fetchers == nil || deps.RemoteTasks == nil {
		return fmt.Errorf("tierstate: recreate of %s needs a fetcher stopper and a remote task stopper: %w",
			deps.Partition, ErrInvalidArgument)
	}
	return nil
}

func (deps RecreateDeps) logger() *zap.Logger {
	if deps.Logger == nil {
		return zap.NewNop()
	}
	return deps.Logger
}

// finish runs Recreate's steps 2 and 3 after the fetcher stop (whose error,
// if any, is stopErr) and reports.
func (deps RecreateDeps) finish(ctx context.Context, res RecreateResult, stopErr error) RecreateResult {
	errs := []error{stopErr}
	err := deps.RemoteTasks.StopPartitions(ctx, []remote.StopPartition{{
		TopicIDPartition: deps.Partition, KeepRemoteLogMetadata: true}})
	if errors.Is(err, remote.ErrPartitionNotReady) && !errors.Is(err, context.Canceled) {
		err = nil // not registered: no task runs
	}
	res.TasksCancelled = err == nil
	errs = append(errs, wrapStep("cancel remote log tasks", err))
	if stopErr == nil {
		res.CurrentLogDeleted, err = deleteLog(deps.DeleteCurrentLog)
		errs = append(errs, wrapStep("delete current log", err))
		res.FutureLogDeleted, err = deleteLog(deps.DeleteFutureLog)
		errs = append(errs, wrapStep("delete future log", err))
	}
	res.Err = errors.Join(errs...)
	res.Outcome = Recreated
	log := deps.logger()
	if res.Err != nil {
		res.Outcome = RecreateOffline
		log.Error("recreate of a phase-2 replica failed; the replica goes offline",
			zap.Stringer("partition", deps.Partition), zap.Stringer("result", res), zap.Error(res.Err))
	} else {
		log.Info("recreated a phase-2 replica", zap.Stringer("partition", deps.Partition))
	}
	if deps.OnRecreate != nil {
		deps.OnRecreate(res)
	}
	return res
}

func deleteLog(del func() error) (bool, error) {
	if del == nil {
		return true, nil
	}
	err := del()
	return err == nil, err
}

func wrapStep(step string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("tierstate: recreate: %s: %w", step, err)
}
