package logmanager

import (
	"errors"
	"fmt"
	iofs "io/fs"

	"go.uber.org/zap"

	"github.com/tierlog/tierlog/internal/atomicfile"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/remote"
)

// PromotedFutureFile, in a future log's directory, marks it as the
// partition's current log (PromoteFutureInPlace): Open renames such a
// directory to "<topic>-<partition>" before it opens it, and deletes any
// other current log of the partition.
const PromotedFutureFile = "promoted-future"

// PromoteFutureInPlace makes the partition's future log its current log,
// as PromoteFuture does, without closing it: the returned log is the
// future log's *log.UnifiedLog value, which its holders go on using (the
// replica driver's FutureLogManager contract; Kafka renames the open log,
// UnifiedLog.renameDir, which a log.UnifiedLog does not do). The caller
// has stopped every writer of both logs and checked that the future log
// caught up.
//
// Steps: a PromotedFutureFile is written durably into the future log's
// directory (the commit point), the books make the future log current
// (Get returns it from then on, with no gap), its high watermark is raised
// to the old log's, the old log is closed and renamed for deletion, and
// both directories' checkpoints are rewritten. The promoted log keeps its
// "-future" directory name while it stays open (PartitionInfo.Path); the
// next Open renames it into place. A crash after the commit point leaves
// at most the old log beside the marked one: Open deletes the old one,
// renames the marked one into place, and opens it as the current log.
func (m *Manager) PromoteFutureInPlace(tp remote.TopicIDPartition) (*log.UnifiedLog, error) {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	m.mu.Lock()
	cur, err := m.lookupLocked(tp, false)
	if err != nil {
		m.mu.Unlock()
		return nil, err
	}
	fut, err := m.lookupLocked(tp, true)
	m.mu.Unlock()
	if err != nil {
		return nil, err
	}
	marker := m.fs.PathJoin(fut.path, PromotedFutureFile)
	if err := atomicfile.Write(m.fs, marker, nil); err != nil {
		return nil, m.failDir(fut.dir, fmt.Errorf("logmanager: promote %s: %w", fut.path, err))
	}
	k := cur.key()
	id := fut.tp
	if id.TopicID == (remote.UUID{}) {
		id.TopicID = cur.tp.TopicID
	}
	promoted := &managed{tp: id, dir: fut.dir, path: fut.path, log: fut.log}
	m.mu.Lock()
	delete(m.mu.future, k)
	m.mu.current[k] = promoted
	m.mu.Unlock()
	if hw := cur.log.HighWatermark(); hw > fut.log.HighWatermark() {
		fut.log.UpdateHighWatermark(hw)
	}
	// The old log goes (deleteOpLocked leaves the promoted entry in the
	// books); a failure takes its directory offline and leaves the
	// promoted log current.
	delErr := m.deleteOpLocked(cur)
	m.counters.promoted.Add(1)
	return fut.log, errors.Join(delErr, m.writeDirCheckpointsOpLocked(fut.dir, allCheckpoints))
}

// isPromotedFuture reports whether the future log directory path holds a
// PromotedFutureFile.
func (m *Manager) isPromotedFuture(path string) (bool, error) {
	_, err := m.fs.Stat(m.fs.PathJoin(path, PromotedFutureFile))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, iofs.ErrNotExist):
		return false, nil
	}
	return false, fmt.Errorf("logmanager: stat %s: %w", m.fs.PathJoin(path, PromotedFutureFile), err)
}

// finishPromotions completes the promotions of PromoteFutureInPlace that
// Open found (entries marked promoted by listDir): every other current
// log of the partition in a listed directory is renamed for deletion
// (durably), then the promoted directory is renamed to
// "<topic>-<partition>" (durably) and its marker removed. Each rename is
// a commit point: a crash in between leaves a state this repeats. A
// directory whose rename fails goes offline (its scan's err).
func (m *Manager) finishPromotions(scans []dirScan) {
	for i := range scans {
		s := &scans[i]
		for j := range s.entries {
			e := &s.entries[j]
			if !e.promoted || s.err != nil {
				continue
			}
			for o := range scans {
				if o != i {
					m.dropSuperseded(&scans[o], e.k)
				}
			}
			from, to := m.fs.PathJoin(s.dir, e.name), m.fs.PathJoin(s.dir, e.k.String())
			if err := m.fs.Rename(from, to); err != nil {
				s.err = fmt.Errorf("logmanager: promote %s: %w", from, err)
				break
			}
			if err := atomicfile.SyncDir(m.fs, s.dir); err != nil {
				s.err = fmt.Errorf("logmanager: promote %s: %w", from, err)
				break
			}
			// A marker left by a crash here is ignored: only "-future"
			// directories are checked for one.
			if err := m.fs.Remove(m.fs.PathJoin(to, PromotedFutureFile)); err != nil {
				s.err = fmt.Errorf("logmanager: promote %s: %w", from, err)
				break
			}
			e.name, e.promoted = e.k.String(), false
			m.logger.Info("promoted future log renamed into place", zap.String("dir", s.dir), zap.String("partition", e.k.String()))
		}
	}
}

// dropSuperseded renames s's current log of k, superseded by a promoted
// future log in another directory, for deletion.
func (m *Manager) dropSuperseded(s *dirScan, k key) {
	if s.err != nil {
		return
	}
	for j := range s.entries {
		e := &s.entries[j]
		if e.kind != kindCurrent || e.promoted || e.k != k {
			continue
		}
		from := m.fs.PathJoin(s.dir, e.name)
		gone := suffixedName(k, DeleteDirSuffix)
		if err := m.fs.Rename(from, m.fs.PathJoin(s.dir, gone)); err != nil {
			s.err = fmt.Errorf("logmanager: delete superseded %s: %w", from, err)
			return
		}
		if err := atomicfile.SyncDir(m.fs, s.dir); err != nil {
			s.err = fmt.Errorf("logmanager: delete superseded %s: %w", from, err)
			return
		}
		e.name, e.kind = gone, kindDelete
		m.logger.Info("log superseded by a promoted future log renamed for deletion", zap.String("path", from))
	}
}
