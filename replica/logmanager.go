package replica

import (
	"context"
	"errors"
	"fmt"

	"github.com/tierlog/tierlog/logmanager"
	"github.com/tierlog/tierlog/remote"
)

// LogManagers is both of the driver's log-manager interfaces (what
// ManagedLogs returns): Options.Logs and Options.FutureLogs.
type LogManagers interface {
	LogManager
	FutureLogManager
}

// ManagedLogs returns the driver's LogManager and FutureLogManager over a
// *logmanager.Manager: CreateLog is GetOrCreate in the online directory
// with the fewest logs (Kafka's getOrCreateLog: the manager's log if it
// holds one, which the broker passes as Options.Log), DeleteLog is Delete
// (which deletes the future log too; a log the manager does not hold is
// deleted in place), DeleteFutureLog is DeleteFuture (but for a future log
// in an offline directory), and
// ReplaceCurrentWithFutureLog is PromoteFutureInPlace, which keeps the
// future log's *log.UnifiedLog value open as the current log (the broker
// creates the future log with CreateFuture and passes it to StartMove).
//
// The manager holds at most one future log per partition: a broker
// replacing a move cancels it (CancelMove) before it creates the new
// future log.
func ManagedLogs(m *logmanager.Manager) LogManagers { return managedLogs{m} }

type managedLogs struct{ m *logmanager.Manager }

var _ LogManagers = managedLogs{}

func (a managedLogs) CreateLog(_ context.Context, tp remote.TopicIDPartition) (Log, error) {
	l, err := a.m.GetOrCreate(tp, "")
	if err != nil {
		return nil, err
	}
	return l, nil
}

func (a managedLogs) DeleteLog(_ context.Context, tp remote.TopicIDPartition, l Log) error {
	err := a.m.Delete(tp)
	if errors.Is(err, logmanager.ErrNotFound) && l != nil {
		return l.Delete()
	}
	return err
}

// DeleteFutureLog leaves a future log of an offline directory alone: the
// driver forgot it (FutureLogDirFailure; Kafka:
// removeFutureLocalReplica(deleteFromLogDir = false)), and its files stay
// with the directory; the next Open finds it again.
func (a managedLogs) DeleteFutureLog(_ context.Context, tp remote.TopicIDPartition) error {
	if _, err := a.m.GetFuture(tp); errors.Is(err, logmanager.ErrLogDirOffline) {
		return nil
	}
	return a.m.DeleteFuture(tp)
}

// ReplaceCurrentWithFutureLog refuses logs the manager does not hold as
// the partition's current and future logs (ErrInvalidArgument).
func (a managedLogs) ReplaceCurrentWithFutureLog(_ context.Context, tp remote.TopicIDPartition, current, future Log) error {
	cur, err := a.m.Get(tp)
	if err != nil {
		return err
	}
	fut, err := a.m.GetFuture(tp)
	if err != nil {
		return err
	}
	if Log(cur) != current || Log(fut) != future {
		return fmt.Errorf("replica: promotion of %s: the logs are not the log manager's current and future logs: %w", tp, ErrInvalidArgument)
	}
	_, err = a.m.PromoteFutureInPlace(tp)
	return err
}
