package logmanager

import (
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/tierlog/tierlog/internal/atomicfile"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/remote"
)

// PromotedFutureFile, in a future log's directory, marks it as the
// partition's current log (PromoteFutureInPlace); it holds the
// promotion's generation, one above the promoted-over log's own (0 for a
// log in its "<topic>-<partition>" directory). Open renames the
// directory of the highest generation to "<topic>-<partition>" before it
// opens it, and deletes every other current log of the partition.
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
// at most the old log beside the marked one: Open deletes the old one
// (a log promoted in place before included: its generation is lower),
// renames the marked one into place, and opens it as the current log.
func (m *Manager) PromoteFutureInPlace(tp remote.TopicIDPartition) (*log.UnifiedLog, error) {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	cur, fut, err := m.currentAndFuture(tp)
	if err != nil {
		return nil, err
	}
	gen := cur.promotedGen + 1
	marker := m.fs.PathJoin(fut.path, PromotedFutureFile)
	if err := atomicfile.Write(m.fs, marker, []byte(strconv.Itoa(gen)+"\n")); err != nil {
		return nil, m.failDir(fut.dir, fmt.Errorf("logmanager: promote %s: %w", fut.path, err))
	}
	k := cur.key()
	id := fut.tp
	if id.TopicID == (remote.UUID{}) {
		id.TopicID = cur.tp.TopicID
	}
	promoted := &managed{tp: id, dir: fut.dir, path: fut.path, log: fut.log, promotedGen: gen}
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

// readPromotedFuture returns the generation in the future log directory
// path's PromotedFutureFile, 0 without one. A marker that does not parse
// is an error: it is written atomically.
func (m *Manager) readPromotedFuture(path string) (int, error) {
	name := m.fs.PathJoin(path, PromotedFutureFile)
	f, err := m.fs.Open(name)
	if errors.Is(err, iofs.ErrNotExist) {
		return 0, nil
	} else if err != nil {
		return 0, fmt.Errorf("logmanager: open %s: %w", name, err)
	}
	data, err := io.ReadAll(f)
	if err = errors.Join(err, f.Close()); err != nil {
		return 0, fmt.Errorf("logmanager: read %s: %w", name, err)
	}
	gen, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || gen <= 0 {
		return 0, fmt.Errorf("logmanager: %s holds %q, not a promotion generation: %w", name, data, ErrCorruption)
	}
	return gen, nil
}

// finishPromotions completes the promotions of PromoteFutureInPlace that
// Open found (entries marked promoted by listDir): for each partition,
// every current log but the one of the highest generation, in every
// listed directory, is renamed for deletion (durably), then the winner's
// directory is renamed to "<topic>-<partition>" (durably) and its marker
// removed. Each rename is a commit point: a crash in between leaves a
// state this repeats. A directory whose rename fails goes offline (its
// scan's err).
func (m *Manager) finishPromotions(scans []dirScan) {
	type at struct{ scan, entry int }
	winners := map[key]at{}
	for i := range scans {
		for j, e := range scans[i].entries {
			// A winner in a directory that failed after it was listed
			// still supersedes the others (the partition is offline
			// there), though it is not renamed.
			if e.promoted == 0 {
				continue
			}
			if w, ok := winners[e.k]; !ok || e.promoted > scans[w.scan].entries[w.entry].promoted {
				winners[e.k] = at{i, j}
			}
		}
	}
	for k, w := range winners {
		for i := range scans {
			m.dropSuperseded(&scans[i], k, w.scan == i, w.entry)
		}
		s := &scans[w.scan]
		if s.err != nil {
			continue
		}
		e := &s.entries[w.entry]
		from, to := m.fs.PathJoin(s.dir, e.name), m.fs.PathJoin(s.dir, k.String())
		if err := m.fs.Rename(from, to); err != nil {
			s.err = fmt.Errorf("logmanager: promote %s: %w", from, err)
			continue
		}
		if err := atomicfile.SyncDir(m.fs, s.dir); err != nil {
			s.err = fmt.Errorf("logmanager: promote %s: %w", from, err)
			continue
		}
		// A marker left by a crash here is ignored: only "-future"
		// directories are checked for one.
		if err := m.fs.Remove(m.fs.PathJoin(to, PromotedFutureFile)); err != nil {
			s.err = fmt.Errorf("logmanager: promote %s: %w", from, err)
			continue
		}
		e.name, e.promoted = k.String(), 0
		m.logger.Info("promoted future log renamed into place", zap.String("dir", s.dir), zap.String("partition", k.String()))
	}
}

// dropSuperseded renames s's current logs of k, superseded by a promoted
// future log (entry winner of s when inS), for deletion.
func (m *Manager) dropSuperseded(s *dirScan, k key, inS bool, winner int) {
	if s.err != nil {
		return
	}
	for j := range s.entries {
		e := &s.entries[j]
		if e.kind != kindCurrent || e.k != k || (inS && j == winner) {
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
		e.name, e.kind, e.promoted = gone, kindDelete, 0
		m.logger.Info("log superseded by a promoted future log renamed for deletion", zap.String("path", from))
	}
}
