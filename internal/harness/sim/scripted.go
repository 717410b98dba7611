package sim

import (
	"fmt"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/truncation"
)

// Actions for scripted runs: steps a worked example names that the
// random scheduler does not take.

// UncleanElection makes running broker id the leader in a new leader
// epoch and the only ISR member, and declares the committed records past
// its log end lost: an unclean leader election before the switch
// (unclean.leader.election.enable, or an ElectLeaders request of type
// UNCLEAN). The model forgets the discarded offsets, so the invariants
// hold the partition to what it kept, and remote segments uploaded
// before the election count only below the new leader's log end
// (github.com/aiven/inkless/pull/857: "an unclean leader election
// before the switch ... can still discard uploaded records").
func (c *Cluster) UncleanElection(id int32) error {
	return c.do("unclean-elect", id, func() (string, error) {
		b, err := c.upBroker(id)
		if err != nil {
			return "", err
		}
		if c.ctrl.rec.Leader == id || b.Log() == nil || c.ctrl.rec.State.SealCommitted() {
			return "", notApplicable("broker %d leads already, has no log, or the seal is committed", id)
		}
		leo, end := b.Log().LogEndOffset(), c.model.end
		c.model.discardFrom(leo, c.finishedSegments())
		c.ctrl.newLeader(id)
		c.ctrl.setISR([]int32{id})
		err = c.publish("unclean election")
		return fmt.Sprintf("epoch %d isr=%v; [%d, %d) discarded", c.ctrl.rec.LeaderEpoch, c.ctrl.rec.ISR, leo, max(leo, end)), err
	})
}

// Roll rolls broker id's active segment (a segment boundary a worked
// example names; the copy task uploads only rolled segments).
func (c *Cluster) Roll(id int32) error {
	return c.do("roll", id, func() (string, error) {
		_, l, err := c.upLog(id)
		if err != nil {
			return "", err
		}
		if err := l.Roll(); err != nil {
			return "", err
		}
		return fmt.Sprintf("new segment at %d", l.LogEndOffset()), nil
	})
}

// discardFrom forgets the committed records at and past offset (an
// unclean election's loss) and remembers the finished remote segments of
// the time, which may hold the discarded records.
func (m *model) discardFrom(offset int64, segs []remote.SegmentMetadata) {
	for o := range m.values {
		if o >= offset {
			delete(m.values, o)
		}
	}
	m.end = min(m.end, offset)
	m.cuts = append(m.cuts, offset)
	if m.discarded == nil {
		m.discarded = map[remote.SegmentID]int64{}
	}
	for _, s := range segs {
		// A later election may discard from lower down: the segment
		// counts only below the lowest cut.
		if cut, ok := m.discarded[s.SegmentID]; !ok || offset < cut {
			m.discarded[s.SegmentID] = offset
		}
	}
}

// restoreLineage raises the cuts of the segments a leader whose log spans
// [logStart, logEnd) with epoch entries epochs holds in its lineage: a segment's
// records up to the first offset where its leader epoch differs from
// that leader's are that leader's records, which are the partition's
// again (Kafka's leader reads a remote offset from the segment of its
// own epoch there).
func (m *model) restoreLineage(segs []remote.SegmentMetadata, logStart, logEnd int64, epochs []epochcache.Entry) {
	for _, s := range segs {
		cut, ok := m.discarded[s.SegmentID]
		if !ok {
			continue
		}
		// Below the leader's first epoch entry, its log start (raised by
		// DeleteRecords or retention), it has no epoch to compare with,
		// and it serves nothing there: compare from there.
		agree := s.StartOffset
		if len(epochs) > 0 && epochs[0].StartOffset > agree {
			if epochs[0].StartOffset > cut && logStart < epochs[0].StartOffset {
				continue // records it could serve without an epoch
			}
			agree = epochs[0].StartOffset
		}
		// Nor does the segment below its own first epoch entry: a
		// DeleteRecords inside the segment before its copy left those
		// records without an epoch (below the log start, never served).
		// Compared from there, the segment counts up to where it agrees,
		// if it agrees anywhere.
		from := agree
		if len(s.SegmentLeaderEpochs) > 0 {
			from = max(from, s.SegmentLeaderEpochs[0].StartOffset)
		}
		end := from
		for ; end <= s.EndOffset && end < logEnd; end++ {
			se, sok := epochcache.EpochForOffsetIn(s.SegmentLeaderEpochs, end)
			le, lok := epochcache.EpochForOffsetIn(epochs, end)
			if !sok || !lok || se != le {
				break
			}
		}
		if end > from {
			agree = end
		}
		if agree > cut {
			m.discarded[s.SegmentID] = agree
		}
	}
}

// validSegments are the finished remote segments as far as they hold
// records the partition kept: a segment uploaded before an unclean
// election is cut at the offset the election discarded from (dropped if
// it starts there or past it).
func (c *Cluster) validSegments() []remote.SegmentMetadata {
	segs := c.finishedSegments()
	out := segs[:0]
	for _, s := range segs {
		// Its records below its first epoch entry (DeleteRecords inside
		// the segment before its copy) have no epoch and are never
		// served: it holds records from that entry on.
		s.StartOffset = s.HeldStartOffset()
		if cut, ok := c.model.discarded[s.SegmentID]; ok {
			if s.StartOffset >= cut {
				continue
			}
			s.EndOffset = min(s.EndOffset, cut-1)
		}
		out = append(out, s)
	}
	return out
}

// remoteTaskLookup is a remote log task's lookup held between the two
// halves of RemoteTaskLookup and RemoteTaskInstall: the offset it found
// and the log's truncation count it read first.
type remoteTaskLookup struct {
	l      *log.UnifiedLog
	offset int64
	count  truncation.Count
}

// RemoteTaskLookup is the first half of a remote log task on broker id
// (the follower or copy task computing the highest offset in remote
// storage without the log lock): it reads the log's truncation count
// and finds offset. RemoteTaskInstall is the second half; other actions
// may run between them, as the task runs concurrently with the broker.
func (c *Cluster) RemoteTaskLookup(id int32, offset int64) error {
	return c.remoteTaskLookup(id, offset, true)
}

// remoteTaskLookup is RemoteTaskLookup; check false skips deriving the
// offset again, for a caller that just derived it (the random row).
func (c *Cluster) remoteTaskLookup(id int32, offset int64, check bool) error {
	return c.do("task-lookup", id, func() (string, error) {
		c.rec.note("offset", offset)
		b, l, err := c.upLog(id)
		if err != nil {
			return "", err
		}
		// A lookup finds what remote storage holds of the log's lineage
		// now: a script (or a shrunk schedule that dropped the steps
		// behind its answer) may not make one up.
		if check {
			if found, err := c.remoteTaskOffset(id); err != nil || found != offset {
				return "", notApplicable("broker %d's lookup finds %d, not %d (%v)", id, found, offset, err)
			}
		}
		b.task = &remoteTaskLookup{l: l, offset: offset, count: l.TruncationCount()}
		return fmt.Sprintf("found %d at truncation count %d", offset, b.task.count), nil
	})
}

// RemoteTaskInstall is the task's second half: it installs the offset it
// found with the count it read (log.UnifiedLog.UpdateHighestOffsetInRemoteStorage),
// on the log it read them from.
func (c *Cluster) RemoteTaskInstall(id int32) error {
	return c.do("task-install", id, func() (string, error) {
		b, err := c.upBroker(id)
		if err != nil {
			return "", err
		}
		t := b.task
		if t == nil {
			return "", notApplicable("broker %d has no task lookup", id)
		}
		b.task = nil
		ok := t.l.UpdateHighestOffsetInRemoteStorage(t.offset, t.count)
		note := fmt.Sprintf("installed %d: %t; h=%d", t.offset, ok, t.l.HighestOffsetInRemoteStorage())
		if t.l != b.Log() {
			note += " (on a log the broker no longer has)"
		}
		return note, nil
	})
}

// upLog is broker id, running, and its current log; ErrNotApplicable
// when either is missing.
func (c *Cluster) upLog(id int32) (*Broker, *log.UnifiedLog, error) {
	b, err := c.upBroker(id)
	if err != nil {
		return nil, nil, err
	}
	l := b.Log()
	if l == nil {
		return nil, nil, notApplicable("broker %d has no log", id)
	}
	return b, l, nil
}
