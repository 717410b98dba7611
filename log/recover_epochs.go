package log

import (
	"errors"
	"fmt"
	"io"
	"io/fs"

	"go.uber.org/zap"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/atomicfile"
	"github.com/tierlog/tierlog/internal/mutation"
)

// epochCheckpointDamagedSuffix names a leader-epoch checkpoint that Open
// moved aside because it could not be trusted.
const epochCheckpointDamagedSuffix = ".damaged"

// openEpochs opens the leader-epoch cache of the log directory.
//
// The checkpoint is a cache of what the batches say: every batch carries
// the leader epoch that wrote it. A checkpoint that does not parse, or
// whose entries are not strictly increasing in both epoch and start
// offset (tierlog and Kafka only ever write such lists; Kafka's
// LeaderEpochFileCache would silently drop the entries the list
// contradicts), is therefore damage that can be repaired: it is renamed
// to leader-epoch-checkpoint.damaged (kept for the operator), the
// directory is fsynced, the cache starts empty, and rebuild is true, which
// makes Open recover the whole log, assigning each epoch at the first
// batch that carries it. Trusting such a list instead would answer
// OffsetsForLeaderEpoch wrongly, and a follower would truncate to the
// wrong offset.
func (l *UnifiedLog) openEpochs() (cache *epochcache.Cache, rebuild bool, err error) {
	path := l.fs.PathJoin(l.dir, epochcache.CheckpointFileName)
	if damage := l.checkEpochCheckpoint(path); damage != nil {
		if !errors.Is(damage, ErrCorruption) {
			return nil, false, damage
		}
		if err := l.moveEpochCheckpointAside(damage); err != nil {
			return nil, false, err
		}
		rebuild = true
		l.epochsRebuilt = true
	}
	cache, err = epochcache.Open(l.fs, path)
	if err != nil {
		return nil, false, fmt.Errorf("log: %w", err)
	}
	return cache, rebuild, nil
}

// checkEpochCheckpoint returns an error wrapping ErrCorruption if the
// checkpoint at path exists and is not a strictly increasing list, an
// I/O error if it cannot be read, and nil otherwise.
func (l *UnifiedLog) checkEpochCheckpoint(path string) error {
	f, err := l.fs.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("log: open %s: %w", path, err)
	}
	data, err := io.ReadAll(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("log: read %s: %w", path, err)
	}
	entries, err := epochcache.ParseCheckpoint(path, data)
	if err != nil {
		return err
	}
	for i := 1; i < len(entries); i++ {
		if entries[i].Epoch <= entries[i-1].Epoch || entries[i].StartOffset <= entries[i-1].StartOffset {
			return fmt.Errorf("log: %s: entry %d (%d@%d) does not follow %d@%d: %w", path, i,
				entries[i].Epoch, entries[i].StartOffset, entries[i-1].Epoch, entries[i-1].StartOffset, ErrCorruption)
		}
	}
	return nil
}

// moveEpochCheckpointAside renames the damaged checkpoint to
// leader-epoch-checkpoint.damaged and fsyncs the directory (the commit
// point: after it, a reopen rebuilds the epochs again rather than trusting
// the file), counting and logging the damage.
func (l *UnifiedLog) moveEpochCheckpointAside(damage error) error {
	path := l.fs.PathJoin(l.dir, epochcache.CheckpointFileName)
	l.counters.corruptionsFound.Add(1)
	l.logger.Error("damaged leader-epoch checkpoint; moving it aside and rebuilding the epochs from the log",
		zap.String("path", path), zap.Error(damage))
	if err := l.fs.Rename(path, path+epochCheckpointDamagedSuffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("log: move damaged %s aside: %w", path, err)
	}
	if err := atomicfile.SyncDir(l.fs, l.dir); err != nil {
		return fmt.Errorf("log: move damaged %s aside: %w", path, err)
	}
	return nil
}

// checkEpochsAgainst compares the cache with the last sound batch of the
// active segment, which a clean open reads anyway: the epoch the cache
// gives its base offset must be the epoch the batch carries. A cache that
// lost its entries (an empty or missing checkpoint beside a written log)
// or names epochs the log never had fails this, and is rebuilt from the
// log as a damaged checkpoint is (openEpochs); l.epochsRebuilt tells the
// caller to recover every segment. Batches without an epoch (-1) prove
// nothing and are not checked. Only the newest batch is compared: older
// entries are covered by the follower's divergence check, which asks the
// leader, not this cache. The batch [base, last] is compared at the log
// start when the log start lies inside it (a raise of the log start
// truncated the cache from the start, moving the entry that covered the
// batch up to the log start), and not at all when it lies wholly below
// the log start: the cache then legitimately holds no entry for it (a
// DeleteRecords to the log end leaves one entry at the log end, which the
// open's truncation from the end drops).
func (l *UnifiedLog) checkEpochsAgainst(base, last int64, epoch int32, logStart int64) error {
	if epoch < 0 {
		return nil
	}
	at := base
	if !mutation.Disabled(mutation.EpochCheckAtLogStart) {
		if last < logStart {
			return nil
		}
		at = max(base, logStart)
	}
	if got, ok := l.epochs.EpochForOffset(at); ok && got == epoch {
		return nil
	}
	damage := fmt.Errorf("log: the leader-epoch checkpoint does not give epoch %d to offset %d, the last batch's: %w",
		epoch, base, ErrCorruption)
	if err := l.moveEpochCheckpointAside(damage); err != nil {
		return err
	}
	cache, err := epochcache.Open(l.fs, l.fs.PathJoin(l.dir, epochcache.CheckpointFileName))
	if err != nil {
		return fmt.Errorf("log: %w", err)
	}
	l.epochs = cache
	l.epochsRebuilt = true
	return nil
}
