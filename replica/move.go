package replica

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/tierlog/tierlog/internal/mutation"
	"github.com/tierlog/tierlog/remote"
)

// MoveFetcher is the broker's alter-log-dir fetcher (Kafka:
// ReplicaAlterLogDirsManager): it copies the current log into the future
// log of a log directory move, and after each append into the future log
// calls Replica.MaybePromoteFutureLog.
type MoveFetcher interface {
	// AddPartition starts copying current into future from offset (the
	// future log's end).
	AddPartition(ctx context.Context, tp remote.TopicIDPartition, current, future Log, offset int64) error
	// RemovePartition stops the copy and returns once none runs for the
	// partition. Idempotent. The fetcher must call MaybePromoteFutureLog
	// outside the copy RemovePartition waits for: the driver calls
	// RemovePartition under its lock, which the promotion takes.
	RemovePartition(ctx context.Context, tp remote.TopicIDPartition) error
}

// FutureLogManager is the log manager's half of a log directory move
// (Kafka: LogManager.replaceCurrentWithFutureLog). A broker implements it.
type FutureLogManager interface {
	// ReplaceCurrentWithFutureLog makes future the partition's current
	// log in the log manager's books (its directory renamed into place)
	// and deletes current. The driver calls it with every fetcher of the
	// partition stopped and every leader append held.
	ReplaceCurrentWithFutureLog(ctx context.Context, tp remote.TopicIDPartition, current, future Log) error
}

// ErrNoMove: the operation needs a future log, or a driver configured
// with a move fetcher and a future log manager.
var ErrNoMove = errors.New("replica: no log directory move")

// DecidePromotion decides whether the future log replaces the current
// one (Kafka: Partition.maybeReplaceCurrentWithFutureReplica): only once
// its log end equals the current log's. The swap is framed by the
// fetchers: StopFetching (no follower append during it), the promotion,
// the registration of the new log with the remote log manager in the
// role of the delta last applied (a fenced leader as a follower), and the
// fetcher that delta's transition gives the new log. An offline replica
// promotes nothing.
//
// Pure.
func DecidePromotion(p Prior, d Delta, current, future ViewLog) Plan {
	if p.Offline || current == nil || future == nil {
		return nil
	}
	f, l := future.LogEndOffset(), current.LogEndOffset()
	if f != l || !sameEpochAtEnd(current, future) {
		return nil
	}
	plan := Plan{
		act(StopFetching, -1, "promote the future log: no append during the swap"),
		act(PromoteFutureLog, l, "the future log caught up with the log end %d (high watermark %d)", l, current.HighWatermark()),
	}
	if !p.Hosted {
		return plan
	}
	if !Leads(p, d) {
		plan = append(plan, act(BecomeFollower, -1, "the promoted log, follower of %d in leader epoch %d", d.LeaderID, d.LeaderEpoch))
	} else {
		plan = append(plan, act(BecomeLeader, -1, "the promoted log, leader epoch %d", d.LeaderEpoch))
	}
	if p.Fenced {
		return plan
	}
	t := DecideTransition(d, future)
	if last := t[len(t)-1]; last.Kind == StartClassic || last.Kind == StartConsolidation {
		last.Reason = "on the promoted log: " + last.Reason
		plan = append(plan, last)
	}
	return plan
}

// sameEpochAtEnd reports whether the logs' last offsets are in the same
// leader epoch (where both caches know it): equal log ends are not
// enough, as the current log may have been truncated and regrown in a
// newer epoch to the same end while the future log kept the old records
// (its fetcher had not run since). The move fetcher truncates such a
// future log at the divergence (Kafka's ReplicaAlterLogDirsThread
// validates the future log's epochs against the current log's); until
// then it is not promoted. Logs that agree on the epoch of their last
// offset hold the same records (Kafka's log matching property).
func sameEpochAtEnd(current, future ViewLog) bool {
	end := current.LogEndOffset()
	if end == 0 || mutation.Disabled(mutation.PromoteLineage) {
		return true
	}
	ce, cok := current.EpochForOffset(end - 1)
	fe, fok := future.EpochForOffset(end - 1)
	return !cok || !fok || ce == fe
}

// StartMove starts a log directory move into future, which the broker
// created in the destination directory: the driver records it (the
// phase-2 check reads it) and the move fetcher copies the current log into
// it from its end. A move in progress is cancelled first (CancelMove;
// Kafka's alterReplicaLogDirs replaces a future log in another directory),
// unless it already copies into future: then nothing changes.
func (r *Replica) StartMove(ctx context.Context, future Log) error {
	ev := &events{r: r}
	defer ev.report()
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.mu.prior.Offline:
		return ErrOffline
	case r.opts.Move == nil || future == nil:
		return fmt.Errorf("replica: move of %s needs a move fetcher and a future log: %w", r.opts.Partition, ErrInvalidArgument)
	case r.mu.log == nil:
		return fmt.Errorf("replica: move of %s: %w", r.opts.Partition, ErrNoLog)
	}
	if cur, ok := r.mu.future.(Log); ok && sameLog(cur, future) {
		// The move in progress already copies into this log (an
		// alter-log-dirs request repeated for the same directory, whose
		// log manager hands back the existing future log): cancelling
		// it would delete the log the move goes on with.
		return nil
	}
	if r.mu.future != nil {
		if err := r.cancelMoveLocked(ctx, ev, "replaced by a new move"); err != nil {
			return err
		}
	}
	r.mu.future = future
	_, err := r.startMoveLocked(ctx, future, ev, "move started")
	return err
}

// sameLog reports whether a and b are the same log value (comparable
// implementations only, such as *log.UnifiedLog).
func sameLog(a, b Log) bool {
	ta := reflect.TypeOf(a)
	return ta != nil && ta == reflect.TypeOf(b) && ta.Comparable() && a == b
}

// startMoveLocked adds the partition to the move fetcher at the future
// log's end. REQUIRES: r.mu held.
func (r *Replica) startMoveLocked(ctx context.Context, future Log, ev *events, why string) (Action, error) {
	f := future.LogEndOffset()
	a := act(StartMove, f, "%s: copy into the future log from %d (log end %d)", why, f, r.mu.log.LogEndOffset())
	err := r.opts.Move.AddPartition(ctx, r.opts.Partition, r.mu.log, future, f)
	ev.add(a, err)
	return a, err
}

// resumeMoveLocked restarts the move fetcher after the phase-2 check
// stopped it, when the check kept a future log. REQUIRES: r.mu held.
func (r *Replica) resumeMoveLocked(ctx context.Context, ev *events) (Action, bool) {
	future, ok := r.mu.future.(Log)
	if r.opts.Move == nil || !ok || future == nil || r.mu.log == nil {
		return Action{}, false
	}
	a, _ := r.startMoveLocked(ctx, future, ev, "the check kept the future log")
	return a, true
}

// CancelMove stops a log directory move: the move fetcher stops and the
// future log is deleted. Without a move it does nothing.
func (r *Replica) CancelMove(ctx context.Context) error {
	ev := &events{r: r}
	defer ev.report()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.future == nil {
		return nil
	}
	return r.cancelMoveLocked(ctx, ev, "move cancelled")
}

// cancelMoveLocked: a fetcher that does not stop keeps the future log (a
// copy could still write it). REQUIRES: r.mu held.
func (r *Replica) cancelMoveLocked(ctx context.Context, ev *events, why string) error {
	tp := r.opts.Partition
	a := act(CancelMove, r.mu.future.LogEndOffset(), "%s: future log end %d", why, r.mu.future.LogEndOffset())
	var err error
	if r.opts.Move != nil {
		err = r.opts.Move.RemovePartition(ctx, tp)
	}
	if err == nil {
		if err = r.opts.Logs.DeleteFutureLog(ctx, tp); err == nil {
			r.mu.future = nil
		}
	}
	ev.add(a, err)
	return err
}

// MaybePromoteFutureLog is the move fetcher's hook after each append into
// the future log: once the future log caught up (DecidePromotion) the
// fetchers stop, leader appends are held, the log ends are compared again
// (an append may have landed before the fetchers stopped: then the
// fetchers restart and the move goes on), and the log manager swaps the
// logs; the new log keeps the old high watermark, is registered with the
// remote log manager, gets the fetcher of the delta last applied and a
// new ClassicGate. true: the future log is the current log now; the move
// fetcher drops the partition. A failed swap takes the replica offline.
func (r *Replica) MaybePromoteFutureLog(ctx context.Context) (bool, error) {
	ev := &events{r: r}
	defer ev.report()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.prior.Offline {
		return false, ErrOffline
	}
	future, ok := r.mu.future.(Log)
	if r.mu.future == nil || r.mu.log == nil {
		return false, nil
	}
	if !ok || future == nil || r.opts.FutureLogs == nil {
		return false, fmt.Errorf("replica: promotion of %s needs a future Log and a future log manager: %w", r.opts.Partition, ErrNoMove)
	}
	d := r.mu.delta
	plan := DecidePromotion(r.mu.prior, d, r.mu.log, future)
	for i, a := range plan {
		var err error
		switch a.Kind {
		case StopFetching:
			err = r.stopFetchersLocked(ctx)
		case PromoteFutureLog:
			var promoted bool
			if promoted, err = r.swapLocked(ctx, future); err == nil && !promoted {
				// An append landed first: restart what ran and go on.
				ev.add(act(PromoteFutureLog, -1, "deferred: the log end moved to %d, the future log is at %d",
					r.mu.log.LogEndOffset(), future.LogEndOffset()), nil)
				return false, r.restartLocked(ctx, d, ev)
			}
		default:
			err = r.performLocked(ctx, d, a)
		}
		ev.add(a, err)
		if err != nil {
			r.mu.metrics.Offlines++
			r.goOfflineLocked(ctx, ev)
			return i > 1, err
		}
	}
	return len(plan) > 0, nil
}

// swapLocked replaces the current log by future with every leader append
// held, if their ends still match. REQUIRES: r.mu held.
func (r *Replica) swapLocked(ctx context.Context, future Log) (bool, error) {
	r.app.Lock()
	defer r.app.Unlock()
	cur := r.mu.log
	if cur.LogEndOffset() != future.LogEndOffset() {
		return false, nil
	}
	hw := cur.HighWatermark()
	if err := r.opts.FutureLogs.ReplaceCurrentWithFutureLog(ctx, r.opts.Partition, cur, future); err != nil {
		return false, err
	}
	if _, err := future.MaybeIncrementHighWatermark(hw); err != nil {
		return false, err
	}
	r.mu.log, r.mu.future = future, nil
	r.app.gate = newGate(future, r.mu.gateState)
	return true, nil
}

// restartLocked starts the fetcher the delta last applied gives the
// current log (after a deferred promotion). REQUIRES: r.mu held.
func (r *Replica) restartLocked(ctx context.Context, d Delta, ev *events) error {
	if !r.mu.prior.Hosted || r.mu.prior.Fenced {
		return nil
	}
	t := DecideTransition(d, r.mu.log)
	last := t[len(t)-1]
	if last.Kind != StartClassic && last.Kind != StartConsolidation {
		return nil
	}
	last.Reason = "after the deferred promotion: " + last.Reason
	err := r.performLocked(ctx, d, last)
	ev.add(last, err)
	return err
}

// FutureLogDirFailure handles the failure of the log directory holding
// the future log: the move fetcher stops and the future log is forgotten,
// not deleted (its directory is gone; Kafka:
// removeFutureLocalReplica(deleteFromLogDir = false)). The current log and
// the replica's role stay.
func (r *Replica) FutureLogDirFailure(ctx context.Context) error {
	ev := &events{r: r}
	defer ev.report()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.future == nil {
		return nil
	}
	var err error
	if r.opts.Move != nil {
		err = r.opts.Move.RemovePartition(ctx, r.opts.Partition)
	}
	a := act(DropFutureLog, r.mu.future.LogEndOffset(), "log directory of the future log failed at future log end %d; the current log stays",
		r.mu.future.LogEndOffset())
	r.mu.future = nil
	ev.add(a, err)
	return err
}
