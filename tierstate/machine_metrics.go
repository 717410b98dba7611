package tierstate

import "sync/atomic"

// MachineMetrics is a snapshot of a Machine's rebuild counters since
// NewMachine (plain values, read with Machine.Metrics). Kafka counts the
// same events as BuildRemoteLogAuxStateRequestsPerSec and
// BuildRemoteLogAuxStateErrorsPerSec (KIP-963).
//
// RebuildsStarted = RebuildsCompleted + the four error counts + the
// rebuilds still running.
type MachineMetrics struct {
	// RebuildsStarted counts Rebuild calls that began a rebuild (a call
	// without a log is refused before it starts and is not counted).
	RebuildsStarted int64
	// RebuildsCompleted counts rebuilds that restored the local log.
	RebuildsCompleted int64
	// The failed rebuilds, by what RebuildAction tells the fetcher to do:
	// retry (the remote tier or the source was not ready), mark the
	// partition failed (fenced epoch), stop (the context ended), or take
	// the log offline (the restore itself failed).
	RebuildRetries       int64
	RebuildsMarkedFailed int64
	RebuildsStopped      int64
	RebuildsOffline      int64
	// ProducerSnapshotsRestored counts completed rebuilds that restored
	// the segment's producer snapshot (the others start with an empty
	// producer state).
	ProducerSnapshotsRestored int64
}

// machineCounters are the counters behind MachineMetrics, updated
// without a lock: a Machine serves many partitions concurrently.
type machineCounters struct {
	started, completed, snapshots           atomic.Int64
	retries, markedFailed, stopped, offline atomic.Int64
}

// Metrics returns a snapshot of the Machine's rebuild counters.
func (m *Machine) Metrics() MachineMetrics {
	c := &m.counters
	return MachineMetrics{
		RebuildsStarted:           c.started.Load(),
		RebuildsCompleted:         c.completed.Load(),
		RebuildRetries:            c.retries.Load(),
		RebuildsMarkedFailed:      c.markedFailed.Load(),
		RebuildsStopped:           c.stopped.Load(),
		RebuildsOffline:           c.offline.Load(),
		ProducerSnapshotsRestored: c.snapshots.Load(),
	}
}

// observeRebuild counts the end of one rebuild.
func (c *machineCounters) observeRebuild(res RebuildResult, err error) {
	switch RebuildAction(err) {
	case ActionNone:
		c.completed.Add(1)
		if res.ProducerSnapshotRestored {
			c.snapshots.Add(1)
		}
	case ActionRetry:
		c.retries.Add(1)
	case ActionMarkFailed:
		c.markedFailed.Add(1)
	case ActionStop:
		c.stopped.Add(1)
	case ActionOffline:
		c.offline.Add(1)
	}
}
