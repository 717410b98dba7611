package log

import (
	"errors"
	"fmt"
	"io/fs"
)

// StartAsFutureOf empties l, the future log of a log directory move, and
// starts it at offset s of current, the partition's current log, from
// which the move fetcher then copies current into l (Kafka: the
// alter-log-dirs fetcher starts an empty future log with
// truncateFullyAndStartAt). l takes current's log start (at most s) and
// current's leader epochs below s, so its lineage is current's.
//
// A log with remote storage keeps its records below the local log start
// in remote storage only, and a move copies from the local log start:
// then l also takes current's producer state at s (the producer
// snapshot and batches file current keeps there, as a rebuild from
// remote storage restores a follower's, TruncateFullyAndRestore).
// Without it, once promoted, l would forget the producers whose batches
// lie below s and append their retries again. Kafka's
// ReplicaAlterLogDirsTierStateMachine refuses to move a tiered log
// instead. When current keeps no producer snapshot at s (s is not where
// a segment starts), the error wraps fs.ErrNotExist and l is unchanged;
// s = 0 needs none.
func (l *UnifiedLog) StartAsFutureOf(current *UnifiedLog, s int64) error {
	if current == nil || current == l {
		return fmt.Errorf("log: future log started from %v: %w", current, ErrInvalidArgument)
	}
	start := min(s, current.LogStartOffset())
	epochs := current.EpochEntriesInRange(-1, s)
	if s == 0 || !l.opts.RemoteStorageEnabled {
		if err := l.TruncateFullyAndStartAt(s, start); err != nil {
			return err
		}
		for _, e := range epochs {
			if err := l.AssignEpochStartOffset(e.Epoch, max(e.StartOffset, start)); err != nil {
				return err
			}
		}
		return nil
	}
	snap, batches, err := current.ProducerSnapshotWithBatches(s)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("log: future log at %d: no producer snapshot of the current log there: %w", s, err)
		}
		return err
	}
	return l.TruncateFullyAndRestore(RemoteRestore{NextOffset: s, LogStartOffset: start,
		Epochs: epochs, ProducerSnapshot: snap, ProducerBatches: batches})
}
