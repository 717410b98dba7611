package replica

import (
	"context"
	"errors"
	"fmt"

	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/remote"
)

// Holding is what this broker holds of a partition, as DecideRemoval
// reads it.
type Holding struct {
	// Log is the current log, nil when there is none.
	Log ViewLog
	// FutureLog: a log directory move left a future log.
	FutureLog bool
	// Leader: the delta last applied made this broker the leader (Kafka
	// reads it from the metadata image, fenced or not).
	Leader bool
	// PrunerArmed: the driver armed the WAL pruner.
	PrunerArmed bool
}

// DeletesRemoteLog reports whether a removal deletes the partition's
// remote log: only for a deleted topic, and only on the broker that led
// it (Kafka's applyDelta: deleteRemoteLog = topicWasDeleted &&
// isCurrentLeader), so one broker deletes it.
func DeletesRemoteLog(d Delta, h Holding) bool {
	return d.Removal == TopicDeleted && h.Leader
}

// DecideRemoval is a delta that takes the partition off this broker
// (Kafka: ReplicaManager.stopPartitions for the delta's local deletes,
// with deleteLocalLog): stop every fetcher, the classic, the consolidation
// and the move fetcher (it applies to an offline replica too: a removal
// is how its logs go), disarm the pruner, stop the remote log manager's
// tasks and forget the partition there (its remote log deleted for a
// deleted topic this broker led), delete the current log and the future
// log through the log manager.
//
// Pure.
func DecideRemoval(d Delta, h Holding) Plan {
	plan := Plan{act(StopFetching, -1, "%s: stop the classic, consolidation and move fetchers", d.Removal)}
	if h.PrunerArmed {
		plan = append(plan, act(DisarmPruner, -1, "%s", d.Removal))
	}
	plan = append(plan, act(StopRemote, -1, "%s: stop the remote log tasks, forget the partition, delete the remote log: %t (led it: %t)",
		d.Removal, DeletesRemoteLog(d, h), h.Leader))
	if h.Log != nil {
		plan = append(plan, act(DeleteLog, h.Log.LogEndOffset(), "%s: log end %d, high watermark %d",
			d.Removal, h.Log.LogEndOffset(), h.Log.HighWatermark()))
	}
	if h.FutureLog {
		plan = append(plan, act(DeleteFutureLog, -1, "%s: the move ends with the partition", d.Removal))
	}
	return plan
}

// errFetchersRunning marks the deletions a removal skips because a
// fetcher did not stop.
var errFetchersRunning = errors.New("replica: skipped: a fetcher did not stop and could still write the log")

// removeLocked performs DecideRemoval. The steps follow the recreate's
// rules (tierstate.Recreate): the remote tasks are stopped even if a
// fetcher did not stop, the logs are deleted only once the fetchers are
// stopped, and the future log even if the current one could not be. A
// removal that fails leaves the replica offline with what is left; one
// that succeeds leaves a driver with no log, as new to the broker (a
// reassignment back creates a log). REQUIRES: r.mu held.
func (r *Replica) removeLocked(ctx context.Context, d Delta, ev *events) (Plan, error) {
	tp := r.opts.Partition
	h := Holding{FutureLog: r.mu.future != nil, Leader: r.mu.delta.Leader, PrunerArmed: r.mu.switchp.PrunerArmed}
	if r.mu.log != nil {
		h.Log = r.mu.log
	}
	var done Plan
	var errs []error
	fetchersStopped := true
	for _, a := range DecideRemoval(d, h) {
		var err error
		switch a.Kind {
		case StopFetching:
			err = r.stopAllFetchersLocked(ctx)
			fetchersStopped = err == nil
		case DisarmPruner:
			r.disarmLocked()
		case StopRemote:
			err = r.opts.Remote.StopPartitions(ctx, []remote.StopPartition{{TopicIDPartition: tp,
				DeleteRemoteLog: DeletesRemoteLog(d, h)}})
			if errors.Is(err, remote.ErrPartitionNotReady) && !errors.Is(err, context.Canceled) {
				err = nil // never registered: no task runs
			}
		case DeleteLog:
			if err = errFetchersRunning; fetchersStopped {
				if err = r.opts.Logs.DeleteLog(ctx, tp, r.mu.log); err == nil {
					r.setLogLocked(nil)
				}
			}
		case DeleteFutureLog:
			if err = errFetchersRunning; fetchersStopped {
				if err = r.opts.Logs.DeleteFutureLog(ctx, tp); err == nil {
					r.mu.future = nil
				}
			}
		}
		ev.add(a, err)
		done = append(done, a)
		if err != nil {
			errs = append(errs, fmt.Errorf("replica: remove %s: %s: %w", tp, a.Kind, err))
		}
	}
	r.mu.metrics.Removals++
	if err := errors.Join(errs...); err != nil {
		r.mu.metrics.Offlines++
		r.mu.prior.Offline, r.mu.prior.Fenced = true, false
		r.closeGateLocked()
		return done, err
	}
	r.mu.prior = Prior{LeaderEpoch: base.UndefinedEpoch}
	r.mu.delta = Delta{}
	r.mu.switchp = SwitchProgress{}.forgetSteps()
	return done, nil
}
