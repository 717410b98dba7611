package sim

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tierlog/tierlog/consolidate"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/tierstate"
)

// ArmSwitch is the controller arming the classic-to-diskless switch
// (the topic becomes consolidating; the seal is pending). After an undo
// (UndoSwitch, undo.go) the partition is classic again and the switch
// can be armed anew.
func (c *Cluster) ArmSwitch() error {
	return c.do("arm-switch", -1, func() (string, error) {
		k := &c.ctrl
		if k.rec.State.Phase() != tierstate.PhaseClassic {
			return "", notApplicable("switch already armed: %s", k.rec.State)
		}
		st, err := k.rec.State.WithConsolidating(true).ArmSwitch()
		if err != nil {
			return "", err
		}
		k.rec.State = st
		k.rec.PartitionEpoch++
		err = c.publish("switch armed")
		return st.String(), err
	})
}

// SwitchStep runs the leader's switch steps for the current state
// (consolidate.LeaderSwitch.Step): sealing and the seal proposal while
// pending, InitDisklessLog once committed, the phase-2 request once
// remote storage holds S-1. The controller commits what it accepts at
// once and publishes it.
func (c *Cluster) SwitchStep() error {
	return c.do("switch-step", c.ctrl.rec.Leader, func() (string, error) {
		st := c.ctrl.rec.State
		b := c.leaderBroker()
		if b == nil || b.sw == nil || st.Phase() == tierstate.PhaseClassic || st.Phase() == tierstate.PhaseTwo && b.sw != nil && c.walReady() {
			return "", notApplicable("no switch step to run")
		}
		res, err := b.sw.Step(c.ctx, st)
		var parts []string
		if res.Seal.Ready || len(res.Seal.Aborted) > 0 || res.Seal.Rolled {
			parts = append(parts, fmt.Sprintf("sealed: aborted=%d rolled=%t ready=%t", len(res.Seal.Aborted), res.Seal.Rolled, res.Seal.Ready))
		}
		if res.Proposed {
			parts = append(parts, fmt.Sprintf("proposed; seal=%d", c.Seal()))
		}
		if res.Init != nil {
			parts = append(parts, fmt.Sprintf("InitDisklessLog W=%d S=%d", res.Init.LogStartOffset, res.Init.DisklessStartOffset))
		}
		if res.Rolled {
			parts = append(parts, fmt.Sprintf("rolled at seal %d", c.Seal()))
		}
		if res.PrefixSent != nil {
			parts = append(parts, fmt.Sprintf("phase 2: R=%d E_d=%d", c.ctrl.rec.State.LastClassicLeaderEpoch(), c.ctrl.rec.State.DisklessLeaderEpoch()))
		}
		if len(parts) == 0 {
			parts = append(parts, "nothing to do")
		}
		if err != nil {
			// A refused step (the log past the seal, a stale epoch) is
			// retried by the next call, as the broker retries it.
			parts = append(parts, "refused: "+err.Error())
		}
		return strings.Join(parts, "; ") + " " + c.ctrl.rec.State.String(), nil
	})
}

// walReady: the WAL has a row for the partition.
func (c *Cluster) walReady() bool {
	_, _, ok := c.WAL()
	return ok
}

// Copy runs broker id's remote-log manager once: the copy task on the
// leader, the follower task on a follower.
func (c *Cluster) Copy(id int32) error {
	return c.do("copy", id, func() (string, error) {
		b, err := c.upBroker(id)
		if err != nil {
			return "", err
		}
		l := b.Log()
		if l == nil || b.Prior().Offline {
			return "", notApplicable("broker %d has no log", id)
		}
		if c.ctrl.rec.Leader == id && !b.Prior().Fenced {
			res, err := b.mgr.RunCopy(c.ctx, c.tp)
			var segs []string
			for _, s := range res.Copied {
				segs = append(segs, fmt.Sprintf("[%d, %d]", s.StartOffset, s.EndOffset))
			}
			note := fmt.Sprintf("copied %s h=%d", strings.Join(segs, " "), l.HighestOffsetInRemoteStorage())
			if err != nil {
				note += " failed: " + err.Error()
			}
			// Metadata the copy task built from its own log and refused
			// fails every later run the same way: the partition is never
			// tiered again (DeleteRecords inside a segment did once).
			if sme := (*remote.SegmentMetadataError)(nil); errors.As(err, &sme) {
				return note, c.violation(Stuck, id, l.LocalLogStartOffset(), "the copy task refuses the metadata it built: %v", err)
			}
			return note, nil
		}
		_, err = b.mgr.RunFollower(c.ctx, c.tp)
		note := fmt.Sprintf("follower task h=%d", l.HighestOffsetInRemoteStorage())
		if err != nil {
			note += " failed: " + err.Error()
		}
		return note, nil
	})
}

// Expire runs broker id's retention: the remote expiration task on the
// leader, then local retention (tiered segments leave the disk).
func (c *Cluster) Expire(id int32) error {
	return c.do("expire", id, func() (string, error) {
		b, err := c.upBroker(id)
		if err != nil {
			return "", err
		}
		l := b.Log()
		if l == nil || b.Prior().Offline {
			return "", notApplicable("broker %d has no log", id)
		}
		note := ""
		if c.ctrl.rec.Leader == id && !b.Prior().Fenced {
			res, err := b.mgr.RunExpiration(c.ctx, c.tp)
			if err != nil {
				note = "expiration failed: " + err.Error() + "; "
			}
			for _, d := range res.Deleted {
				note += fmt.Sprintf("remote [%d, %d] deleted (%s); ", d.Segment.StartOffset, d.Segment.EndOffset, d.Reason)
			}
		}
		n, err := l.DeleteOldSegments()
		if err != nil {
			return note, err
		}
		return fmt.Sprintf("%sdeleted %d local segment(s): local start %d", note, n, l.LocalLogStartOffset()), nil
	})
}

// Prune runs the leader's WAL pruner once (consolidate.Pruner), capped
// by the leader's highest offset in remote storage.
func (c *Cluster) Prune() error {
	return c.do("prune", c.ctrl.rec.Leader, func() (string, error) {
		b := c.leaderBroker()
		st := c.ctrl.rec.State
		if b == nil || !st.SealCommitted() || !c.walReady() {
			return "", notApplicable("nothing to prune")
		}
		l := b.Log()
		out, err := b.pruner.Run(c.ctx, []consolidate.PrunePartition{{Partition: c.tp, State: st, Log: l,
			AwaitingRebuild: l.LogEndOffset() < st.Seal()}})
		if err != nil {
			return "", err
		}
		w, _, _ := c.WAL()
		o := out[0]
		note := fmt.Sprintf("%v h=%d floor=%d W=%d", o.Decision.Reason, l.HighestOffsetInRemoteStorage(), o.Floor, w)
		if o.Err != nil {
			note += " failed: " + o.Err.Error()
		}
		return note, nil
	})
}

// Consolidate runs one round of broker id's consolidation fetcher
// (consolidate.Fetcher.Step: one endpoint fetch at the log end and its
// answer: append, rebuild, reset or back off).
func (c *Cluster) Consolidate(id int32) error {
	return c.do("consolidate", id, func() (string, error) {
		b, err := c.upBroker(id)
		if err != nil {
			return "", err
		}
		l := b.Log()
		if l == nil || !b.consolidating {
			return "", notApplicable("broker %d does not consolidate", id)
		}
		from := l.LogEndOffset()
		c.nowMs += 10 // past any back-off of the last round
		m0 := b.endpoint.Metrics()
		if _, err := b.fetcher.Step(c.ctx); err != nil {
			return "", err
		}
		note := fmt.Sprintf("%d -> %d local start %d hw=%d epochs=%s", from, l.LogEndOffset(), l.LocalLogStartOffset(),
			l.HighWatermark(), formatEpochs(l.EpochEntries()))
		note += endpointAnswers(m0, b.endpoint.Metrics())
		if err := b.fetcher.Failed(c.tp); err != nil {
			note += " failed: " + err.Error()
		}
		return note, nil
	})
}
