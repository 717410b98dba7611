package replica

import (
	"context"
	"errors"

	"github.com/tierlog/tierlog/logmanager"
	"github.com/tierlog/tierlog/remote"
)

// ManagedLogs returns the driver's LogManager over a *logmanager.Manager:
// CreateLog is GetOrCreate in the online directory with the fewest logs
// (Kafka's getOrCreateLog: the manager's log if it holds one, which the
// broker passes as Options.Log), DeleteLog is Delete (a log the manager
// does not hold is deleted in place), DeleteFutureLog is DeleteFuture.
//
// It is not a FutureLogManager: logmanager.Manager.PromoteFuture reopens
// the promoted log under its new directory name and returns a new
// *log.UnifiedLog, while ReplaceCurrentWithFutureLog's caller keeps using
// the future log's value.
func ManagedLogs(m *logmanager.Manager) LogManager { return managedLogs{m} }

type managedLogs struct{ m *logmanager.Manager }

var _ LogManager = managedLogs{}

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

func (a managedLogs) DeleteFutureLog(_ context.Context, tp remote.TopicIDPartition) error {
	return a.m.DeleteFuture(tp)
}
