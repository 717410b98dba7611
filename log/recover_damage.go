package log

import (
	"errors"

	"github.com/tierlog/tierlog/internal/atomicfile"
	"github.com/tierlog/tierlog/log/record"
	"go.uber.org/zap"
)

// This file holds what Open does about damage beyond a torn tail: the
// cheap checks of the segments it does not recover, and recovery's move
// of damaged bytes and later segments aside (renamed, never deleted).

// checkTrustedSegments runs Open's cheap checks of the segments it would
// not recover: every segment below the first one to recover (all but the
// active one after a clean shutdown) must have a .log at least as long as
// its offset index says (segment.CheckIndexBounds: one index entry read
// per segment). Damage there is counted, logged and reported through
// Listener.DamageFound; the segment stays, and reads of it return the
// same *CorruptionError, because moving it and every later segment aside
// would drop records that are still good.
//
// After a clean shutdown (verifyTail) the active segment's tail is also
// verified (segment.VerifyTail): a torn or corrupt tail makes Open
// recover from the active segment, so the append position is the end of
// the valid data, never the end of garbage.
func (l *UnifiedLog) checkTrustedSegments(verifyTail bool, recoverFrom int64, recover bool, logStart int64,
	ev *events) (int64, bool, error) {
	segs := l.mu.segments
	for i, s := range segs {
		// Recovery starts at the last segment at or below its point.
		if i == len(segs)-1 || (recover && segs[i+1].BaseOffset() > recoverFrom) {
			break
		}
		err := s.CheckIndexBounds()
		if !isCorruption(err) {
			if err != nil {
				return 0, false, err
			}
			continue
		}
		ce := newCorruptionError(s.BaseOffset(), s.BaseOffset(), err)
		l.counters.corruptionsFound.Add(1)
		l.logger.Error("damaged segment; reads of it will fail", zap.Int64("base", s.BaseOffset()), zap.Error(err))
		ev.damaged = append(ev.damaged, ce)
	}
	if !verifyTail || len(segs) == 0 {
		return recoverFrom, recover, nil
	}
	active := segs[len(segs)-1]
	// The last sound batch's offset and epoch, copied: the batch itself
	// aliases the walk's buffer.
	lastBase, lastEnd, lastEpoch := int64(-1), int64(-1), int32(-1)
	tail, err := active.VerifyTailFunc(func(b record.Batch) {
		lastBase, lastEnd, lastEpoch = b.BaseOffset(), b.LastOffset(), b.PartitionLeaderEpoch()
	})
	if err != nil {
		return recoverFrom, recover, err
	}
	if tail == nil {
		if lastBase >= 0 {
			if err := l.checkEpochsAgainst(lastBase, lastEnd, lastEpoch, logStart); err != nil {
				return 0, false, err
			}
			if l.epochsRebuilt {
				return segs[0].BaseOffset(), true, nil
			}
		}
		return recoverFrom, recover, nil
	}
	l.logger.Warn("clean shutdown marker, but the active segment's tail is damaged; recovering it",
		zap.Int64("base", active.BaseOffset()), zap.Int64("position", tail.Pos), zap.Error(tail))
	if isCorruption(tail) && tail.Pos >= active.Size() {
		// The .log lost bytes its index knew of: recovery has nothing to
		// cut and would report nothing, so the loss is reported here.
		l.counters.corruptionsFound.Add(1)
		ev.damaged = append(ev.damaged, newCorruptionError(active.BaseOffset(), active.BaseOffset(), tail.Err))
	}
	return active.BaseOffset(), true, nil
}

// movedAside collects what one recovery step moved aside.
type movedAside struct {
	files    []string
	segments int
	end      int64 // best known next offset of the last segment moved
}

// moveAside keeps the bytes recovery is about to drop (when keep): the
// damaged segment's original .log is hard-linked to "<name>.damaged" (its
// valid prefix is then rewritten as usual) and every later segment's files
// are renamed to "<name>.damaged"; then the directory is fsynced, the
// commit point of the move: only after it does recovery rewrite the
// damaged segment. A crash before it leaves the log as it was (the next
// recovery moves again, maybe under ".1.damaged" names: a second link to
// the same file costs no space); after it, the moved files are durable
// under their new names and the live names are gone.
//
// damaged may be nil (the segment lost its end but has nothing to cut).
func (l *UnifiedLog) moveAside(m *movedAside, damaged *segmentRef, later []*segmentRef, keep bool) error {
	if !keep {
		return nil
	}
	if damaged != nil {
		p, err := damaged.LinkAside()
		if err != nil {
			return err
		}
		m.files = append(m.files, p)
		l.counters.movedAside.Add(1)
	}
	if n := len(later); n > 0 {
		last := later[n-1]
		m.end = last.BaseOffset()
		if next, err := last.ReadNextOffset(); err == nil {
			m.end = next
		}
	}
	var errs []error
	for _, s := range later {
		files, err := s.MoveAside()
		m.files = append(m.files, files...)
		errs = append(errs, err)
		m.segments++
		l.counters.movedAside.Add(1)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if len(m.files) == 0 {
		return nil
	}
	if err := atomicfile.SyncDir(l.fs, l.dir); err != nil {
		return err
	}
	return nil
}
