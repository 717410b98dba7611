package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/internal/harness/demo"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/tierstate"
	"github.com/tierlog/tierlog/truncation"
)

// fetchBytes bounds one classic fetch (a few batches).
const fetchBytes = 1 << 10

// Replicate runs one fetch of broker id's classic fetcher against the
// leader, as a broker's replica fetcher thread does, synchronously: the
// leader's check (tierstate.ValidateFetch), then the read and the
// follower append, the truncation of a diverging tail
// (truncation.PlanDivergence), the reset of an out-of-range fetch
// (truncation.PlanOutOfRangeReset) or the rebuild from remote storage
// (tierstate.Machine). The leader learns the follower's log end, may
// add it to the ISR and advance its high watermark. At or past a
// committed seal the fetch is the at-seal one (fetchAtSeal).
func (c *Cluster) Replicate(id int32) error {
	return c.do("replicate", id, func() (string, error) {
		f, err := c.upBroker(id)
		if err != nil {
			return "", err
		}
		lb := c.leaderBroker()
		fl := f.Log()
		if lb == nil || lb == f || f.classic == nil || fl == nil || f.classic.leader != lb.ID {
			return "", notApplicable("broker %d fetches from no running leader", id)
		}
		if c.cutOff(id, lb.ID) {
			return "", notApplicable("broker %d is cut off from leader %d", id, lb.ID)
		}
		rec := c.ctrl.rec
		offset := fl.LogEndOffset()
		if tierstate.IsFetchAtSeal(rec.State, tierstate.FetchRequest{Fetcher: tierstate.FetcherFollower, FetchOffset: offset}) {
			return c.fetchAtSeal(lb, f)
		}
		return c.fetchClassic(lb, f)
	})
}

func (c *Cluster) fetchClassic(lb, f *Broker) (string, error) {
	ll, fl := lb.Log(), f.Log()
	epoch := c.ctrl.rec.LeaderEpoch
	offset := fl.LogEndOffset()
	last, ok := fl.LatestEpoch()
	if !ok {
		last = base.UndefinedEpoch
	}
	v := tierstate.ValidateFetch(ll, epoch, tierstate.FetchRequest{Fetcher: tierstate.FetcherFollower,
		FetchOffset: offset, LastFetchedEpoch: last, CurrentLeaderEpoch: epoch})
	switch v.Outcome {
	case tierstate.FetchRead:
		fd, err := ll.Read(nil, offset, fetchBytes, log.IsolationLogEnd, true)
		if err != nil {
			return "", err
		}
		restart := ""
		if len(fd.Records) > 0 {
			if restart, err = f.appendAsFollower(fl, fd.Records, epoch); err != nil {
				return restart, err
			}
		}
		fl.UpdateHighWatermark(min(fd.HighWatermark, fl.LogEndOffset()))
		c.ctrl.fetched[f.ID] = fl.LogEndOffset()
		note := restart + c.maybeExpandISR(lb, f)
		c.advanceHW()
		fl.UpdateHighWatermark(min(ll.HighWatermark(), fl.LogEndOffset()))
		if err := followLogStart(ll, fl); err != nil {
			note += fmt.Sprintf(" log start: %v", err)
		}
		if c.ctrl.rec.State.SealCommitted() {
			if h, err := f.driver.HandOff(c.ctx); err == nil && h.Evicts() {
				note += " hand-off: " + h.Action.String()
			}
		}
		return fmt.Sprintf("read [%d, %d) hw=%d leader-hw=%d%s", offset, fl.LogEndOffset(), fl.HighWatermark(), ll.HighWatermark(), note), nil
	case tierstate.FetchDiverging:
		plan := truncation.PlanDivergence(truncation.EpochEndOffset{Epoch: v.DivergingEpoch, EndOffset: v.DivergingEndOffset},
			fl.EndOffsetForEpoch, fl.LogEndOffset(), fl.HighWatermark())
		if _, err := truncateLog(fl, plan.TruncateTo, &f.stateFrom); err != nil {
			return "", err
		}
		f.markMoveTruncation(fl.LogEndOffset())
		return fmt.Sprintf("diverging at %d (epoch %d ends at %d): truncate to %d", offset, v.DivergingEpoch,
			v.DivergingEndOffset, plan.TruncateTo), nil
	case tierstate.FetchOffsetOutOfRange:
		plan := truncation.PlanOutOfRangeReset(v.LogEndOffset, v.LogStartOffset, offset)
		var err error
		switch plan.Action {
		case truncation.TruncateToLeaderEnd:
			_, err = truncateLog(fl, plan.Offset, &f.stateFrom)
		case truncation.StartAtLeaderStart:
			err = f.startLogAt(fl, plan.Offset)
		}
		f.markMoveTruncation(fl.LogEndOffset())
		return fmt.Sprintf("out of range at %d: %s", offset, plan), err
	case tierstate.FetchOffsetMovedToTieredStorage:
		m, err := tierstate.NewMachine(tierstate.MachineOptions{Leader: demo.Endpoint{Log: ll, Epoch: epoch},
			Metadata: c.meta, Data: c.storage, Listener: f.rebuildListener()})
		if err != nil {
			return "", err
		}
		res, err := m.Rebuild(c.ctx, tierstate.RebuildRequest{Partition: c.tp, Log: fl, State: c.ctrl.rec.State,
			CurrentLeaderEpoch: epoch, LeaderLogStartOffset: v.LogStartOffset})
		f.markMoveTruncation(fl.LogEndOffset())
		if err != nil {
			return fmt.Sprintf("moved to tiered storage at %d: rebuild failed: %v", offset, err), nil
		}
		return fmt.Sprintf("moved to tiered storage at %d: rebuilt to %d epochs=%s", offset, res.NextOffset,
			formatEpochs(fl.EpochEntries())), nil
	}
	return fmt.Sprintf("fetch at %d: %s", offset, v), nil
}

// appendAsFollower appends a fetch's records to the follower log fl and
// notes a restart of the log. The leader's log start can lie inside a
// batch (DeleteRecords), and a follower reset to it by an out-of-range
// fetch (an empty log at that log start) is then sent the whole batch,
// which starts below its log end: Kafka's
// Partition.appendRecordsToFollowerOrFutureReplica catches that
// UnexpectedAppendOffsetException when the log is empty at its log start
// and the batch holds its log end, starts the log afresh at the batch's
// base offset (truncateFullyAndStartAt) and appends again; the fetch's
// log start raise (followLogStart) then moves the log start back up.
// Without it the follower refuses the batch at every fetch.
func (f *Broker) appendAsFollower(fl *log.UnifiedLog, records []byte, epoch int32) (string, error) {
	from := fl.LogEndOffset()
	at, last, err := appendRestarting(fl, records, epoch, func(base int64) error { return f.startLogAt(fl, base) })
	if at < 0 {
		return "", err
	}
	return fmt.Sprintf(" (log start %d inside the batch [%d, %d]: restarted at %d)", from, at, last, at), err
}

// appendRestarting appends records to fl as a follower (or future)
// replica does in Kafka's Partition.appendRecordsToFollowerOrFutureReplica:
// an UnexpectedAppendOffsetException on a log empty at its log start,
// whose first batch holds that offset, restarts the log at the batch's
// base (restart) and appends again. at is that base and last the
// batch's last offset, at -1 when the log was not restarted.
func appendRestarting(fl *log.UnifiedLog, records []byte, epoch int32, restart func(base int64) error) (at, last int64, err error) {
	_, err = fl.AppendAsFollower(records, epoch)
	if !errors.Is(err, log.ErrUnexpectedAppendOffset) {
		return -1, -1, err
	}
	b, berr := record.ReadBatch(records)
	leo := fl.LogEndOffset()
	if berr != nil || leo != fl.LogStartOffset() || b.BaseOffset() >= leo || b.LastOffset() < leo {
		return -1, -1, err
	}
	at, last = b.BaseOffset(), b.LastOffset()
	if err := restart(at); err != nil {
		return at, last, err
	}
	_, err = fl.AppendAsFollower(records, epoch)
	return at, last, err
}

// maybeExpandISR adds a caught-up follower to the ISR (Kafka's
// maybeExpandIsr: its log end reached the leader's high watermark and
// the start of the leader's current epoch).
func (c *Cluster) maybeExpandISR(lb, f *Broker) string {
	k := &c.ctrl
	if k.rec.inISR(f.ID) {
		return ""
	}
	ll, leo := lb.Log(), f.Log().LogEndOffset()
	start := ll.EndOffsetForEpoch(k.rec.LeaderEpoch - 1).EndOffset
	if lb.epochStart.epoch == k.rec.LeaderEpoch {
		start = max(start, lb.epochStart.offset)
	}
	if leo < ll.HighWatermark() || leo < start {
		return ""
	}
	k.setISR(append(slices.Clone(k.rec.ISR), f.ID))
	if err := c.publish("isr expand"); err != nil {
		return " isr-expand: " + err.Error()
	}
	return fmt.Sprintf(" isr=%v", k.rec.ISR)
}

// fetchAtSeal is a classic follower's fetch at or past the seal, as
// the leader's at-seal branch answers it (tierstate.ValidateFetchAtSeal)
// and the follower's fetcher handles the answer: it reads no records; a
// diverging epoch truncates the follower (truncation.PlanDivergence, the
// next fetch is below the seal again), OFFSET_OUT_OF_RANGE resets it
// (truncation.PlanOutOfRangeReset against the leader's offsets), and a
// validated answer raises the follower's high watermark to the seal,
// records its position, may admit it to the ISR (Replica.AdmitAtSeal)
// and runs the follower's hand-off hook (Replica.HandOff).
func (c *Cluster) fetchAtSeal(lb, f *Broker) (string, error) {
	k := &c.ctrl
	ll, fl := lb.Log(), f.Log()
	epoch, seal := k.rec.LeaderEpoch, k.rec.State.Seal()
	leo := fl.LogEndOffset()
	last, ok := fl.LatestEpoch()
	if !ok {
		last = base.UndefinedEpoch
	}
	inISR := k.rec.inISR(f.ID)
	d, err := tierstate.ValidateFetchAtSeal(
		tierstate.SealLeader{Log: ll, State: k.rec.State, LeaderEpoch: epoch, IsLeader: true},
		tierstate.SealReplica{Assigned: true, InIsr: inISR, RegisteredBrokerEpoch: 1},
		tierstate.SealFetchRequest{FetchRequest: tierstate.FetchRequest{Fetcher: tierstate.FetcherFollower,
			FetchOffset: leo, LastFetchedEpoch: last, CurrentLeaderEpoch: epoch},
			ReplicaID: f.ID, BrokerEpoch: tierstate.NoBrokerEpoch})
	if err != nil {
		return "", err
	}
	head := fmt.Sprintf("at seal %d: leo=%d %s", seal, leo, d.Step)
	switch {
	case d.Diverging():
		plan := truncation.PlanDivergence(truncation.EpochEndOffset{Epoch: d.DivergingEpoch, EndOffset: d.DivergingEndOffset},
			fl.EndOffsetForEpoch, leo, fl.HighWatermark())
		if _, err := truncateLog(fl, plan.TruncateTo, &f.stateFrom); err != nil {
			return "", err
		}
		f.markMoveTruncation(fl.LogEndOffset())
		return fmt.Sprintf("%s diverging (epoch %d ends at %d): truncate to %d", head, d.DivergingEpoch,
			d.DivergingEndOffset, plan.TruncateTo), nil
	case d.Error == tierstate.SealErrorOffsetOutOfRange:
		plan := truncation.PlanOutOfRangeReset(ll.LogEndOffset(), ll.LogStartOffset(), leo)
		switch plan.Action {
		case truncation.TruncateToLeaderEnd:
			_, err = truncateLog(fl, plan.Offset, &f.stateFrom)
		case truncation.StartAtLeaderStart:
			err = f.startLogAt(fl, plan.Offset)
		}
		f.markMoveTruncation(fl.LogEndOffset())
		return fmt.Sprintf("%s %s: %s", head, d.Error, plan), err
	case d.Error != tierstate.SealErrorNone:
		return fmt.Sprintf("%s %s (%s)", head, d.Error, d.Reason), nil
	}
	// The follower's high watermark only moves forward (Kafka's
	// maybeUpdateHighWatermark); the answer's is the seal.
	if hw := min(d.HighWatermark, leo); hw > fl.HighWatermark() {
		fl.UpdateHighWatermark(hw)
	}
	note := ""
	if d.TryAdmission {
		k.fetched[f.ID] = d.RecordOffset
		if !inISR {
			admitted, why, err := lb.driver.AdmitAtSeal(c.ctx, f.ID, tierstate.SealAdmission{RecordedEndOffset: d.RecordOffset,
				RecordedBrokerEpoch: tierstate.NoBrokerEpoch,
				Replica:             tierstate.SealReplica{Assigned: true, RegisteredBrokerEpoch: 1}}, isrExpander{})
			if err != nil {
				return "", err
			}
			note = fmt.Sprintf(" admit=%t (%s)", admitted, why)
			if admitted {
				// The expansion is published after the hook returns: the
				// hook holds the leader driver's lock.
				k.setISR(append(slices.Clone(k.rec.ISR), f.ID))
				if err := c.publish("isr expand at the seal"); err != nil {
					return "", err
				}
			}
		}
	}
	h, err := f.driver.HandOff(c.ctx)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s hw=%d%s hand-off %s", head, fl.HighWatermark(), note, h.Action), nil
}

// isrExpander is the leader's AlterPartition adding a follower; the
// simulation publishes the new ISR once the hook returns.
type isrExpander struct{}

func (isrExpander) ExpandIsr(context.Context, int32) error { return nil }

// truncateLog truncates l to t (log.UnifiedLog.TruncateTo). A t below
// its first local segment starts the log afresh at t (Kafka's truncateTo
// calls truncateFullyAndStartAt), and its producer state with it: then
// *stateFrom (the broker's Broker.stateFrom for l) becomes t.
func truncateLog(l *log.UnifiedLog, t int64, stateFrom *int64) (bool, error) {
	segs, err := l.Segments(0)
	if err != nil {
		return false, err
	}
	full := len(segs) > 0 && segs[0].BaseOffset > t
	changed, err := l.TruncateTo(t)
	if err == nil && full {
		*stateFrom = t
	}
	return changed, err
}

// startLogAt empties f's current log fl and starts it at offset (a
// follower reset at the leader's log start): its producer state is
// built from offset on (Broker.stateFrom).
func (f *Broker) startLogAt(fl *log.UnifiedLog, offset int64) error {
	f.stateFrom = offset
	return fl.TruncateFullyAndStartAt(offset, offset)
}
