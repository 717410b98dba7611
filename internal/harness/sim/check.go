package sim

import (
	"errors"
	"fmt"
	"slices"

	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/wal"
)

// ErrViolation is what every *Violation unwraps to.
var ErrViolation = errors.New("sim: invariant violated")

// Kind names the invariant a Violation breaks.
type Kind int8

const (
	// LostRecord: a committed offset is held by no tier the leader
	// serves from (its local log, remote storage, the WAL), or a classic
	// leader's log ends below the committed end.
	LostRecord Kind = iota + 1
	// Conflict: a replica's record below its high watermark (the
	// leader's below the committed end), or a remote segment, holds
	// another value than the one committed at that offset, or remote
	// storage holds an offset never committed.
	Conflict
	// UncommittedRead: a consumer was served a record at or past the
	// committed end, or with another value than the committed one.
	UncommittedRead
	// PrunedPastRemote: the WAL's start moved past the highest offset in
	// remote storage + 1.
	PrunedPastRemote
	// LineageDiverged: an in-sync follower's leader epochs disagree with
	// the leader's on the offsets both hold.
	LineageDiverged
	// ConsolidatingOutsideISR: a running follower of a switched partition
	// consolidates while the controller's ISR does not hold it. It never
	// sends the leader the follower fetch at the seal that would readmit it,
	// so it stays outside the ISR for good
	// (github.com/aiven/inkless/pull/760: a switched follower leaves the
	// classic fetcher only once the leader admitted it at the seal).
	ConsolidatingOutsideISR
	// ClassicBroken: a classic partition (never switched, or its switch
	// undone; the simulation has no born-diskless topic) is consolidated by a
	// running broker, or its leader refuses a classic produce. After an undo
	// the partition keeps taking classic produce and replicating it on the
	// classic fetchers.
	ClassicBroken
	// Duplicate: a record of an idempotent producer is committed at two
	// offsets (a retried batch was appended again), or a duplicate answer
	// names offsets that do not hold the retried batch.
	Duplicate
	// SequenceGap: a producer's committed records skip sequences (a batch was
	// accepted out of order) or go back.
	SequenceGap
	// Stuck: with every fault off and every broker running, the catch-up
	// rounds of Settle stopped moving the replicas before an in-sync
	// follower reached the leader's log end and high watermark (and the
	// leader's high watermark its log end), or before the consolidating
	// leader of a phase-2 partition reached the WAL's high watermark. The
	// other invariants check safety only: a replica that refuses every
	// answer (a misplaced batch, a fetch that never validates) breaks none
	// of them, and a partition stuck that way serves nothing new. So is a
	// copy task that refuses the segment metadata it built (Cluster.Copy):
	// it refuses it on every run, and the partition is never tiered again.
	Stuck
	// OrphanObject: at the end of a step, the object store holds a remote
	// segment object of no segment the remote metadata knows: it was
	// written after the cleanup of its failed copy (a late PUT), so
	// nothing will ever delete it but an orphan sweep.
	OrphanObject
)

func (k Kind) String() string {
	switch k {
	case LostRecord:
		return "lost-record"
	case Conflict:
		return "conflict"
	case UncommittedRead:
		return "uncommitted-read"
	case PrunedPastRemote:
		return "pruned-past-remote"
	case LineageDiverged:
		return "lineage-diverged"
	case ConsolidatingOutsideISR:
		return "consolidating-outside-isr"
	case ClassicBroken:
		return "classic-broken"
	case Duplicate:
		return "duplicate"
	case SequenceGap:
		return "sequence-gap"
	case Stuck:
		return "stuck"
	case OrphanObject:
		return "orphan-object"
	}
	return fmt.Sprintf("Kind(%d)", int8(k))
}

// Violation is a broken invariant: which, at which step, on which
// broker (-1: the cluster) and offset (-1: none).
type Violation struct {
	Step   int
	Kind   Kind
	Broker int32
	Offset int64
	Detail string
}

func (v *Violation) Error() string {
	return fmt.Sprintf("step %d: %s on broker %d at offset %d: %s", v.Step, v.Kind, v.Broker, v.Offset, v.Detail)
}

func (v *Violation) Unwrap() error { return ErrViolation }

func (c *Cluster) violation(k Kind, broker int32, offset int64, format string, args ...any) *Violation {
	return &Violation{Step: c.step, Kind: k, Broker: broker, Offset: offset, Detail: fmt.Sprintf(format, args...)}
}

// Check runs every invariant on the cluster as it is now and returns
// the first violation, nil if none. Actions call it after each step.
func (c *Cluster) Check() *Violation {
	if c.unserved != nil {
		return c.unserved
	}
	if v := c.observeWAL(); v != nil {
		return v
	}
	for _, f := range []func() *Violation{c.checkReplicas, c.checkRemote, c.checkLost, c.checkPrune, c.checkLineage,
		c.checkConsolidatingInISR, c.checkClassic, c.checkProducers, c.checkOrphans} {
		if v := f(); v != nil {
			return v
		}
	}
	return nil
}

// observeWAL advances the committed end to the WAL's high watermark and
// remembers the WAL's first start.
func (c *Cluster) observeWAL() *Violation {
	w, hw, ok := c.WAL()
	if !ok {
		return nil
	}
	if c.model.walStart0 < 0 {
		c.model.walStart0 = w
	}
	c.model.advance(hw)
	prev := c.model.walHW
	c.model.walHW = hw
	if prev >= w && hw > prev {
		return c.checkWALRun(prev, hw)
	}
	return nil
}

// checkWALRun: the offsets [from, to) the WAL's high watermark moved by
// in a step are held by its batches, one after the other. Only commits
// move it, and each assigns its batches the offsets from the high
// watermark on: a hole is a commit that moved it without its batches (a
// failed step of a group commit whose change the group kept). LostRecord:
// the hole's offsets count as committed, and no tier holds them.
func (c *Cluster) checkWALRun(from, to int64) *Violation {
	next := from
	for next < to {
		res, err := c.cp.FindBatches(c.ctx, wal.FindBatchesRequest{
			Partitions: []wal.FindPartition{{Partition: c.walTP(), Offset: next, MaxPartitionBytes: 1 << 20}},
			MaxBytes:   1 << 20,
		})
		if err != nil || len(res) != 1 || res[0].Err != nil {
			return nil // the read path's faults are checked where they are served
		}
		if len(res[0].Batches) == 0 || res[0].Batches[0].BaseOffset > next {
			end := to
			if len(res[0].Batches) > 0 {
				end = res[0].Batches[0].BaseOffset
			}
			return c.violation(LostRecord, -1, next, "the WAL's high watermark moved from %d to %d, and no batch holds [%d, %d)",
				from, to, next, end)
		}
		for _, b := range res[0].Batches {
			if b.BaseOffset > next {
				return c.violation(LostRecord, -1, next, "the WAL's high watermark moved from %d to %d, and no batch holds [%d, %d)",
					from, to, next, b.BaseOffset)
			}
			next = max(next, b.LastOffset+1)
		}
	}
	return nil
}

// checkReplicas compares every running replica's records with the
// committed values: below its high watermark for a follower, below the
// committed end for the leader. Offsets the WAL committed without the
// simulation seeing the value (a lost answer) take the first value any
// replica shows; every later one must agree.
func (c *Cluster) checkReplicas() *Violation {
	for _, b := range c.brokers {
		l := b.Log()
		if l == nil {
			continue
		}
		bound := min(l.HighWatermark(), c.model.end)
		if b.ID == c.ctrl.rec.Leader && !b.Prior().Fenced {
			bound = min(l.LogEndOffset(), c.model.end)
		}
		if cut, ok := c.model.staleFrom[b.ID]; ok {
			if c.ctrl.rec.inISR(b.ID) {
				delete(c.model.staleFrom, b.ID)
			} else {
				bound = min(bound, cut)
			}
		}
		var v *Violation
		err := readLocal(l, l.LocalLogStartOffset(), bound, func(o int64, val string) error {
			want, ok := c.model.values[o]
			if !ok {
				c.model.values[o] = val
				return nil
			}
			if want != val {
				v = c.violation(Conflict, b.ID, o, "holds %q, committed %q (hw %d, leo %d, committed end %d, epochs %s)",
					val, want, l.HighWatermark(), l.LogEndOffset(), c.model.end, formatEpochs(l.EpochEntries()))
				return v
			}
			return nil
		})
		if v != nil {
			return v
		}
		if err != nil {
			c.trace.detail("b%d scan: %v", b.ID, err)
		}
	}
	return nil
}

func (c *Cluster) finishedSegments() []remote.SegmentMetadata {
	segs, err := c.meta.ListSegments(c.tp)
	if err != nil {
		return nil
	}
	segs = slices.DeleteFunc(segs, func(s remote.SegmentMetadata) bool { return s.State != remote.CopySegmentFinished })
	slices.SortFunc(segs, func(a, b remote.SegmentMetadata) int { return int(a.StartOffset - b.StartOffset) })
	return segs
}

// checkRemote: remote storage holds only committed offsets.
func (c *Cluster) checkRemote() *Violation {
	for _, s := range c.validSegments() {
		if s.EndOffset >= c.model.end {
			return c.violation(Conflict, s.BrokerID, s.EndOffset, "remote segment [%d, %d] ends past the committed end %d",
				s.StartOffset, s.EndOffset, c.model.end)
		}
	}
	return nil
}

// checkLost: while the partition has a running leader, every committed
// offset is in a tier the leader serves from. Before the seal, the
// leader's own log must reach the committed end (a clean election never
// loses a committed record); after it, the prefix may be in remote
// storage only (a recreated leader) and the diskless records in the WAL.
func (c *Cluster) checkLost() *Violation {
	b := c.leaderBroker()
	if b == nil {
		return nil
	}
	l := b.Log()
	st := c.ctrl.rec.State
	if !st.SealCommitted() {
		if l.LogEndOffset() < c.model.end && !c.model.given(l.LogEndOffset(), c.model.end) {
			return c.violation(LostRecord, b.ID, l.LogEndOffset(), "classic leader's log ends at %d, committed end %d",
				l.LogEndOffset(), c.model.end)
		}
		return nil
	}
	var spans [][2]int64 // [start, end)
	spans = append(spans, [2]int64{l.LocalLogStartOffset(), l.LogEndOffset()})
	for _, s := range c.validSegments() {
		spans = append(spans, [2]int64{s.StartOffset, s.EndOffset + 1})
	}
	if w, hw, ok := c.WAL(); ok {
		spans = append(spans, [2]int64{max(w, st.Seal()), hw})
	}
	spans = append(spans, c.model.lost...)
	spans = append(spans, [2]int64{0, c.model.deletedBelow})
	slices.SortFunc(spans, func(a, b [2]int64) int { return int(a[0] - b[0]) })
	covered := int64(0)
	for _, s := range spans {
		if s[0] > covered {
			break
		}
		covered = max(covered, s[1])
	}
	if covered < c.model.end {
		return c.violation(LostRecord, b.ID, covered, "no tier holds offset %d (committed end %d): local [%d, %d), remote to %d",
			covered, c.model.end, l.LocalLogStartOffset(), l.LogEndOffset(), c.HighestRemoteOffset())
	}
	return nil
}

// checkPrune: once a prune moved the WAL's start, it is at most the
// highest offset in remote storage + 1, or at most the partition's log
// start where DeleteRecords deleted everything below it. The offsets
// under both the deletion (the model's deletedBelow) and the control
// plane's cross-tier log start X are no hole: the partition's log start
// says they are gone, so a consumer is sent to X, and remote storage may
// have expired them (a leader that never learnt of the deletion may
// tier them and expire them again once a copy task reports X). Both
// bounds, not either: an X a bug raised is no deletion, and records a
// deletion dropped on one replica while the log start the control plane
// reports is still below them are offsets the partition claims to hold.
func (c *Cluster) checkPrune() *Violation {
	info, err := c.cp.LogInfo(c.ctx, c.walTP())
	w := info.LogStartOffset
	if err != nil || w <= c.model.walStart0 {
		return nil
	}
	gone := min(c.model.deletedBelow, rowCrossTierStart(info))
	if h := c.HighestRemoteOffset(); w > max(h+1, gone) {
		return c.violation(PrunedPastRemote, c.ctrl.rec.Leader, w, "WAL start %d, highest offset in remote storage %d", w, h)
	}
	return nil
}

// rowCrossTierStart is X of a WAL's row: the partition's log start as
// the control plane reports it, COALESCE(remote_log_start_offset,
// log_start_offset).
func rowCrossTierStart(info wal.LogInfo) int64 {
	if info.CrossTierLogStartOffset >= 0 {
		return info.CrossTierLogStartOffset
	}
	return info.LogStartOffset
}

// firstRecordFrom is the first offset at or past o, below to, that a or
// b holds a record at (to if none).
func firstRecordFrom(a, b *log.UnifiedLog, o, to int64) int64 {
	first := to
	for _, l := range []*log.UnifiedLog{a, b} {
		errFound := errors.New("found")
		_ = readLocal(l, o, first, func(off int64, _ string) error {
			first = off
			return errFound
		})
	}
	return first
}

// checkLineage: each in-sync running follower's leader epochs agree
// with the leader's on the offsets both logs hold (its lineage is a
// prefix of the leader's there).
func (c *Cluster) checkLineage() *Violation {
	lb := c.leaderBroker()
	if lb == nil {
		return nil
	}
	ll := lb.Log()
	for _, b := range c.brokers {
		l := b.Log()
		if b == lb || l == nil || !c.ctrl.rec.inISR(b.ID) || b.Prior().Fenced {
			continue
		}
		from := max(l.LocalLogStartOffset(), ll.LocalLogStartOffset())
		to := min(l.HighWatermark(), ll.LogEndOffset())
		if from >= to {
			continue
		}
		points := []int64{from}
		for _, e := range append(l.EpochEntries(), ll.EpochEntries()...) {
			if e.StartOffset > from && e.StartOffset < to {
				points = append(points, e.StartOffset)
			}
		}
		for _, o := range points {
			// An epoch may start where no record is: Kafka's leader
			// assigns its epoch at its log end when it is elected
			// (Partition.makeLeader), before any append, and a seal
			// lowered below the WAL's first batch leaves a hole the
			// diskless epoch starts in on the replicas that consolidate
			// across it, while a follower copying the batches starts the
			// epoch at the first batch. The lineages are compared at the
			// first record either log holds from there.
			if o = firstRecordFrom(l, ll, o, to); o >= to {
				continue
			}
			fe, _ := l.EpochForOffset(o)
			le, _ := ll.EpochForOffset(o)
			if fe != le {
				return c.violation(LineageDiverged, b.ID, o, "epoch %d at %d, the leader's is %d (follower %s, leader %s)",
					fe, o, le, formatEpochs(l.EpochEntries()), formatEpochs(ll.EpochEntries()))
			}
		}
	}
	return nil
}
