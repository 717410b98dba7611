package logmanager

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/tierlog/tierlog/internal/mutation"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/remote"
)

// Task is one of the background tasks Open starts.
type Task int

const (
	// TaskFlush calls MaybeFlush on every log (FlushCheckInterval).
	TaskFlush Task = iota
	// TaskHighWatermarkCheckpoint writes every online directory's
	// replication-offset-checkpoint (HighWatermarkCheckpointInterval).
	TaskHighWatermarkCheckpoint
	// TaskOffsetCheckpoint writes the recovery-point and log-start
	// checkpoints (OffsetCheckpointInterval).
	TaskOffsetCheckpoint
	// TaskRetention calls DeleteOldSegments on every current log
	// (RetentionCheckInterval).
	TaskRetention
	// TaskProducerExpiration calls RemoveExpiredProducers on every
	// current log (ProducerIDExpirationCheckInterval).
	TaskProducerExpiration
	// TaskDeleteLogs removes the renamed directories of deleted logs
	// whose FileDeleteDelay passed (checked every second, or every
	// FileDeleteDelay if shorter).
	TaskDeleteLogs
	numTasks
)

func (t Task) String() string {
	return [...]string{"flush", "high-watermark-checkpoint", "offset-checkpoint", "retention", "producer-expiration", "delete-logs"}[t]
}

func (m *Manager) interval(t Task) time.Duration {
	switch t {
	case TaskFlush:
		return m.opts.FlushCheckInterval
	case TaskHighWatermarkCheckpoint:
		return m.opts.HighWatermarkCheckpointInterval
	case TaskOffsetCheckpoint:
		return m.opts.OffsetCheckpointInterval
	case TaskRetention:
		return m.opts.RetentionCheckInterval
	case TaskProducerExpiration:
		return m.opts.ProducerIDExpirationCheckInterval
	}
	return max(min(m.opts.FileDeleteDelay, time.Second), time.Millisecond)
}

func (m *Manager) startTasks() {
	for t := range numTasks {
		d := m.interval(t)
		if d <= 0 {
			continue
		}
		m.tasks.Go(func() {
			tick := time.NewTicker(d)
			defer tick.Stop()
			for {
				select {
				case <-m.stop:
					return
				case <-tick.C:
					_ = m.RunTask(t)
				}
			}
		})
	}
}

// RunTask runs one task once over every log now and returns its errors
// joined (ErrClosed after Close, but for TaskDeleteLogs). Each error is also logged and counted (Metrics.Tasks); an I/O
// error takes its directory offline. The background tasks call it.
func (m *Manager) RunTask(t Task) error {
	if t < 0 || t >= numTasks {
		return fmt.Errorf("logmanager: unknown task %d: %w", t, ErrInvalidArgument)
	}
	m.mu.Lock()
	closed := m.mu.closed
	m.mu.Unlock()
	if closed && t != TaskDeleteLogs {
		// Close wrote the last checkpoints: one from the emptied books
		// would erase them. Tasks running when Close began finish first.
		return ErrClosed
	}
	m.counters.taskRuns[t].Add(1)
	var errs []error
	switch t {
	case TaskFlush, TaskRetention, TaskProducerExpiration:
		for _, e := range m.logs(t == TaskFlush) {
			var err error
			switch t {
			case TaskFlush:
				err = e.log.MaybeFlush()
			case TaskRetention:
				_, err = e.log.DeleteOldSegments()
			default:
				_, err = e.log.RemoveExpiredProducers()
			}
			if err == nil || errors.Is(err, log.ErrClosed) {
				continue // closed: deleted or promoted meanwhile
			}
			err = fmt.Errorf("logmanager: %s of %s: %w", t, e.path, err)
			if errors.Is(err, log.ErrIO) {
				_ = m.failDir(e.dir, err)
			}
			errs = append(errs, err)
		}
	case TaskHighWatermarkCheckpoint, TaskOffsetCheckpoint:
		which := hwCheckpoint
		if t == TaskOffsetCheckpoint {
			which = offsetCheckpoints
		}
		m.opMu.Lock()
		for _, dir := range m.opts.Dirs {
			if !m.isOffline(dir) {
				errs = append(errs, m.writeDirCheckpointsOpLocked(dir, which))
			}
		}
		m.opMu.Unlock()
	case TaskDeleteLogs:
		errs = append(errs, m.deleteDue())
	}
	err := errors.Join(errs...)
	if err != nil {
		m.counters.taskErrors[t].Add(1)
		m.logger.Warn("background task failed", zap.Stringer("task", t), zap.Error(err))
	}
	return err
}

// logs returns the current logs, and the future ones if asked.
func (m *Manager) logs(withFuture bool) []*managed {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*managed, 0, len(m.mu.current)+len(m.mu.future))
	for _, e := range m.mu.current {
		out = append(out, e)
	}
	if withFuture {
		for _, e := range m.mu.future {
			out = append(out, e)
		}
	}
	return out
}

// deleteDue removes the renamed directories whose delay passed.
func (m *Manager) deleteDue() error {
	now := m.opts.Now()
	m.mu.Lock()
	var due []pendingDelete
	keep := m.mu.deletes[:0]
	for _, p := range m.mu.deletes {
		if !p.due.After(now) {
			due = append(due, p)
		} else {
			keep = append(keep, p)
		}
	}
	m.mu.deletes = keep
	m.mu.Unlock()
	var errs []error
	for _, p := range due {
		if err := m.fs.RemoveAll(p.path); err != nil {
			errs = append(errs, m.failDir(p.dir, fmt.Errorf("logmanager: remove %s: %w", p.path, err)))
			continue
		}
		m.counters.dirsRemoved.Add(1)
	}
	return errors.Join(errs...)
}

// checkpointSet selects checkpoint files.
type checkpointSet int

const (
	hwCheckpoint checkpointSet = 1 << iota
	offsetCheckpoints
	allCheckpoints = hwCheckpoint | offsetCheckpoints
)

// logEntries are one log's lines in the three files.
type logEntries struct {
	hw, recoveryPoint, logStart CheckpointEntry
	logEnd                      int64
}

func snapshotEntries(e *managed) logEntries {
	k := e.key()
	entry := func(o int64) CheckpointEntry {
		return CheckpointEntry{Topic: k.topic, Partition: k.partition, Offset: o}
	}
	lm := e.log.Metrics()
	return logEntries{hw: entry(lm.HighWatermark), recoveryPoint: entry(lm.RecoveryPoint),
		logStart: entry(lm.LogStartOffset), logEnd: lm.LogEndOffset}
}

// dirEntries are one directory's lines.
type dirEntries struct {
	hw, recoveryPoint, logStart []CheckpointEntry
}

func (d *dirEntries) add(e logEntries) {
	d.hw = append(d.hw, e.hw)
	d.recoveryPoint = append(d.recoveryPoint, e.recoveryPoint)
	d.logStart = append(d.logStart, e.logStart)
}

// highWatermarkLowered rewrites the high-watermark checkpoint of the
// directories holding tp's logs (current or future) after a truncation
// lowered a high watermark, before that truncation returns: the records
// appended later at the truncated offsets are not committed, and the old
// value, restored after a crash, would cover them (a replica reopened
// with it serves them as committed). Kafka checkpoints high watermarks
// only every few seconds (ReplicaManager.checkpointHighWatermarks); only
// an unclean leader change truncates below one, so the write is rare.
// A failed write takes the directory offline (writeEntriesOpLocked).
func (m *Manager) highWatermarkLowered(tp remote.TopicIDPartition) {
	if mutation.Disabled(mutation.TruncationRewritesHWCheckpoint) {
		return
	}
	k := keyOf(tp)
	m.opMu.Lock()
	defer m.opMu.Unlock()
	var dirs []string
	for _, e := range m.logs(true) {
		if e.key() == k && !slices.Contains(dirs, e.dir) && !m.isOffline(e.dir) {
			dirs = append(dirs, e.dir)
		}
	}
	for _, dir := range dirs {
		if err := m.writeDirCheckpointsOpLocked(dir, hwCheckpoint); err != nil {
			m.logger.Warn("high-watermark checkpoint after a truncation failed", zapPartition(tp), zap.Error(err))
		}
	}
}

// writeDirCheckpointsOpLocked writes dir's checkpoints from its logs now.
// REQUIRES: m.opMu held (checkpoint writes of a directory are ordered).
func (m *Manager) writeDirCheckpointsOpLocked(dir string, which checkpointSet) error {
	var de dirEntries
	for _, e := range m.logs(true) {
		if e.dir == dir {
			de.add(snapshotEntries(e))
		}
	}
	return m.writeEntriesOpLocked(dir, de, which)
}

// writeEntriesOpLocked writes the files; a failure takes dir offline.
// REQUIRES: m.opMu held.
func (m *Manager) writeEntriesOpLocked(dir string, de dirEntries, which checkpointSet) error {
	files := []struct {
		set     checkpointSet
		name    string
		entries []CheckpointEntry
	}{
		{hwCheckpoint, HighWatermarkCheckpointFile, de.hw},
		{offsetCheckpoints, RecoveryPointCheckpointFile, de.recoveryPoint},
		{offsetCheckpoints, LogStartOffsetCheckpointFile, de.logStart},
	}
	for _, f := range files {
		if which&f.set == 0 {
			continue
		}
		if err := writeCheckpoint(m.fs, dir, f.name, f.entries); err != nil {
			m.counters.checkpointWriteErrors.Add(1)
			return m.failDir(dir, err)
		}
		m.counters.checkpointsWritten.Add(1)
	}
	return nil
}
