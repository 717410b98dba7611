package sim

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// The actions below are the brokers' side of the controller's elections
// (KIP-966 and github.com/aiven/inkless/pull/871): a controlled
// shutdown, a restart reported as unclean, a leader's log losing its
// tail, and a lost disk with no other in-sync copy. The
// random scheduler does not use them; scripted runs do.

// Stop shuts broker id down cleanly (a controlled shutdown: the log
// manager closes the log and checkpoints its high watermark, Kafka's
// replication-offset-checkpoint, which a follower restarted without would
// report as 0 and fail the elect check of
// github.com/aiven/inkless/pull/855). If loseTailFrom >= 0 the log first loses its
// records from that offset on (a disk that lost writes the broker had
// acknowledged; github.com/aiven/inkless/pull/871 truncates the leader's
// log before it stops). The controller then fences the broker: it leaves
// the ISR, for the ELR when the ISR falls below min.insync.replicas,
// and another replica leads if it led.
func (c *Cluster) Stop(id int32, loseTailFrom int64) error {
	return c.do("stop", id, func() (string, error) {
		if loseTailFrom >= 0 {
			c.rec.note("lose-tail-from", loseTailFrom)
		}
		b, err := c.upBroker(id)
		if err != nil {
			return "", err
		}
		note := ""
		if l := b.Log(); l != nil && loseTailFrom >= 0 && loseTailFrom < l.LogEndOffset() {
			note = fmt.Sprintf("log loses [%d, %d); ", loseTailFrom, l.LogEndOffset())
			if _, err := l.TruncateTo(loseTailFrom); err != nil {
				return note, err
			}
		}
		_, _, leo, hw := b.Offsets()
		// The log manager's Close checkpoints the high watermark, which
		// the restart restores (Broker.openLogs).
		if err := b.stop(); err != nil {
			return note, err
		}
		b.forgetRole()
		c.ctrl.cleanStop[id] = true
		err = c.fenceBroker(id)
		return note + fmt.Sprintf("leo=%d hw=%d; %s", leo, hw, c.ctrl.rec.electionView()), err
	})
}

// RestartUnclean restarts broker id as after an unclean shutdown (its
// clean-shutdown marker gone): the controller removes it from the ELR
// before it elects. Restart after Stop is a clean return.
func (c *Cluster) RestartUnclean(id int32) error {
	if b := c.Broker(id); b == nil || b.up {
		return notApplicable("broker %d is running", id)
	}
	c.ctrl.cleanStop[id] = false
	return c.Restart(id)
}

// WipeDisk is LoseDisk without its guard: broker id loses its disk even
// when it holds the only in-sync copy of records remote storage does not
// hold yet (github.com/aiven/inkless/pull/855: the leader, the only ISR
// member, loses its disk). Only an operator's recovery brings such a
// partition back.
func (c *Cluster) WipeDisk(id int32) error {
	return c.do("wipe-disk", id, func() (string, error) {
		b := c.Broker(id)
		if b == nil {
			return "", notApplicable("no broker %d", id)
		}
		if b.up {
			b.crash(0, true)
		} else {
			b.fs = vfs.NewCrashableMem()
		}
		err := c.fenceBroker(id)
		return c.ctrl.rec.electionView(), err
	})
}

// electionView prints what KIP-966's table shows of the record.
func (r partRecord) electionView() string {
	s := fmt.Sprintf("isr=%v elr=%v last-known-elr=%v leader=%d", r.ISR, r.ELR, r.LastKnownELR, r.Leader)
	if r.Recovering {
		s += " RECOVERING"
	}
	return s
}

// LogDirFailure fails broker id's log directory for the partition
// (replica.Replica.LogDirFailure): the replica goes offline and a fenced
// record is cleared, so later deltas skip it
// (github.com/aiven/inkless/pull/855: a partition in a failed directory
// stays offline). The controller is not told.
func (c *Cluster) LogDirFailure(id int32) error {
	return c.do("log-dir-failure", id, func() (string, error) {
		b, err := c.upBroker(id)
		if err != nil {
			return "", err
		}
		fenced := b.Prior().Fenced
		if err := b.driver.LogDirFailure(c.ctx); err != nil {
			return "", err
		}
		b.forgetRole()
		p := b.Prior()
		return fmt.Sprintf("was fenced=%t; offline=%t fenced=%t", fenced, p.Offline, p.Fenced), nil
	})
}
