package logmanager

import (
	"sync/atomic"
	"time"
)

type counters struct {
	taskRuns, taskErrors                      [numTasks]atomic.Int64
	checkpointsWritten, checkpointWriteErrors atomic.Int64
	checkpointReadErrors                      atomic.Int64
	strays, offlineDirs                       atomic.Int64
	created, deleted, promoted, dirsRemoved   atomic.Int64
	openNanos                                 atomic.Int64
}

// TaskMetrics counts one background task's runs and failed runs.
type TaskMetrics struct {
	Runs, Errors int64
}

// Metrics is a snapshot of the manager's state and counters.
type Metrics struct {
	// Logs and FutureLogs held now; OnlineDirs and OfflineDirs now, and
	// OfflinePartitions (current logs of offline directories).
	Logs, FutureLogs, OnlineDirs, OfflineDirs, OfflinePartitions int
	// PendingDeletes: renamed directories waiting for FileDeleteDelay.
	PendingDeletes int
	// Counters since Open.
	DirsWentOffline       int64
	StrayDirs             int64 // found by Open, left alone
	LogsCreated           int64
	LogsDeleted           int64
	FuturesPromoted       int64
	DeletedDirsRemoved    int64
	CheckpointsWritten    int64
	CheckpointWriteErrors int64
	// CheckpointReadErrors counts damaged recovery-point and log-start
	// checkpoints Open ignored (a damaged high watermark checkpoint takes
	// its directory offline instead).
	CheckpointReadErrors int64
	// Tasks is indexed by Task.
	Tasks [numTasks]TaskMetrics
	// OpenDuration is how long Open took.
	OpenDuration time.Duration
}

// Metrics returns a snapshot.
func (m *Manager) Metrics() Metrics {
	m.mu.Lock()
	out := Metrics{Logs: len(m.mu.current), FutureLogs: len(m.mu.future), OfflineDirs: len(m.mu.offline),
		OnlineDirs: len(m.opts.Dirs) - len(m.mu.offline), OfflinePartitions: len(m.mu.offlineParts),
		PendingDeletes: len(m.mu.deletes)}
	m.mu.Unlock()
	c := &m.counters
	out.DirsWentOffline = c.offlineDirs.Load()
	out.StrayDirs = c.strays.Load()
	out.LogsCreated, out.LogsDeleted, out.FuturesPromoted = c.created.Load(), c.deleted.Load(), c.promoted.Load()
	out.DeletedDirsRemoved = c.dirsRemoved.Load()
	out.CheckpointsWritten, out.CheckpointWriteErrors = c.checkpointsWritten.Load(), c.checkpointWriteErrors.Load()
	out.CheckpointReadErrors = c.checkpointReadErrors.Load()
	for t := range numTasks {
		out.Tasks[t] = TaskMetrics{Runs: c.taskRuns[t].Load(), Errors: c.taskErrors[t].Load()}
	}
	out.OpenDuration = time.Duration(c.openNanos.Load())
	return out
}
