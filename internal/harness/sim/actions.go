package sim

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tierlog/tierlog/consolidate"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/logmanager"
	"github.com/tierlog/tierlog/tierstate"
	"github.com/tierlog/tierlog/wal"
)

// do runs one action as a numbered step: it moves the clock, runs f,
// writes the step's trace line (f's summary) and checks every
// invariant. An action whose precondition fails (ErrNotApplicable)
// takes no step and writes nothing. A violation is returned as a
// *Violation; other errors are the action's own.
func (c *Cluster) do(action string, broker int32, f func() (string, error)) error {
	c.step++
	c.nowMs += 10
	up, armed := c.armedBrokers()
	summary, err := f()
	if armed {
		// A crash armed at a file operation that this step reached.
		err = errors.Join(err, c.finishCuts(up))
	}
	c.rec.done(action, broker, !errors.Is(err, ErrNotApplicable))
	if errors.Is(err, ErrNotApplicable) {
		c.step--
		c.nowMs -= 10
		c.trace.dropDetails()
		return err
	}
	if err != nil {
		summary += " error: " + err.Error()
	}
	c.settleProducers()
	c.applyLatePuts()
	for _, b := range c.brokers {
		if b.up {
			if ferr := b.reporter.Flush(c.ctx); ferr != nil {
				c.trace.detail("b%d cross-tier flush: %v", b.ID, ferr)
			}
			// The log manager's background removal of deleted logs, run
			// by the step (no goroutine races the scheduler).
			if derr := b.logs.RunTask(logmanager.TaskDeleteLogs); derr != nil {
				c.trace.detail("b%d removal of deleted logs: %v", b.ID, derr)
			}
		}
	}
	c.trace.line(c.step, action, broker, summary)
	if v := c.Check(); v != nil {
		return v
	}
	return err
}

// leaderBroker is the running, unfenced leader with a log, or nil.
func (c *Cluster) leaderBroker() *Broker {
	b := c.Broker(c.ctrl.rec.Leader)
	if b == nil || !b.up || b.Log() == nil || b.Prior().Fenced || b.Prior().Offline {
		return nil
	}
	return b
}

func (c *Cluster) upBroker(id int32) (*Broker, error) {
	b := c.Broker(id)
	if b == nil || !b.up {
		return nil, notApplicable("broker %d is not running", id)
	}
	return b, nil
}

// Produce writes n records as one batch, with values "v<step>-<i>":
// classic, to the leader through its classic gate (refused while the
// seal is pending, and committed once the ISR has them: acks=all), or,
// once the phase-2 flag is committed, through the WAL (committed when the
// control plane answers). In phase 1 the diskless gate
// (consolidate.DisklessProduceAllowed) refuses it: not applicable, as a
// producer's retry writes nothing.
func (c *Cluster) Produce(n int) error {
	return c.do("produce", c.ctrl.rec.Leader, func() (string, error) {
		c.rec.note("n", n)
		if st := c.ctrl.rec.State; st.SealCommitted() {
			// Any broker takes diskless produce, on its metadata's
			// state: the library's gate refuses it before the
			// phase-2 flag (Kafka NOT_LEADER_OR_FOLLOWER, the
			// producer retries), so nothing is written.
			if err := consolidate.DisklessProduceAllowed(st); err != nil {
				return "", notApplicable("diskless produce refused: %v", err)
			}
			return c.produceDiskless(n)
		}
		b := c.leaderBroker()
		if b == nil || b.gate == nil {
			return "", notApplicable("no leader")
		}
		l := b.Log()
		info, err := b.gate.AppendAsLeader(c.batch(n), c.ctrl.rec.LeaderEpoch, log.OriginClient)
		if v := c.classicProduceRefused(err); v != nil {
			return "refused", v
		}
		if err != nil {
			return fmt.Sprintf("refused: %v", err), nil
		}
		c.advanceHW()
		return fmt.Sprintf("[%d, %d) epoch %d hw=%d", info.FirstOffset, info.LastOffset+1, c.ctrl.rec.LeaderEpoch, l.HighWatermark()), nil
	})
}

func (c *Cluster) batch(n int) []byte {
	return buildBatch(record.DefaultBuilderOptions(), c.nowMs, n, func(i int) []byte {
		return fmt.Appendf(nil, "v%d-%d", c.step, i)
	})
}

// builders keeps record builders for buildBatch: a new one allocates
// 64 KiB, far more than a batch here needs (4% of a random run's CPU in
// a profile, and collections besides).
var builders = sync.Pool{New: func() any { return record.NewBuilder(record.DefaultBuilderOptions()) }}

// buildBatch builds a batch of n records (values from value) with opts.
func buildBatch(opts record.BuilderOptions, timestampMs int64, n int, value func(i int) []byte) []byte {
	b := builders.Get().(*record.Builder)
	defer builders.Put(b)
	b.Reset(opts)
	for i := range n {
		b.Add(timestampMs, nil, value(i))
	}
	buf, err := b.Build() // a new slice: the builder is free to reuse
	if err != nil {
		panic(err) // a batch of small records always builds
	}
	return buf
}

func (c *Cluster) produceDiskless(n int) (string, error) {
	if _, _, ok := c.WAL(); !ok {
		return "", notApplicable("the WAL has no row yet")
	}
	_, hw0, _ := c.WAL()
	res, callErr := c.writer.Produce(c.ctx, []wal.ProduceRequest{{Partition: c.walTP(), Batches: c.batch(n)}})
	err := callErr
	if err == nil && res[0].Err != nil {
		err = res[0].Err
	}
	if err != nil {
		// The producer is told the write failed, but a commit whose
		// answer was lost (an ambiguous commit) took effect: the batch
		// is at [hw0, hw0+n), the only write since, and committed.
		if _, hw, _ := c.WAL(); hw == hw0+int64(n) {
			for i := range n {
				c.model.commit(hw0+int64(i), fmt.Sprintf("v%d-%d", c.step, i))
			}
			c.model.advance(hw)
			return fmt.Sprintf("WAL failed: %v; committed all the same: [%d, %d) hw_d=%d", err, hw0, hw, hw), nil
		}
		if callErr != nil {
			return "", callErr
		}
		return fmt.Sprintf("WAL refused: %v", err), nil
	}
	if err := res[0].Batches[0].Err; err != nil {
		return fmt.Sprintf("WAL rejected: %v", err), nil
	}
	base := res[0].Batches[0].BaseOffset
	for i := range n {
		c.model.commit(base+int64(i), fmt.Sprintf("v%d-%d", c.step, i))
	}
	_, hw, _ := c.WAL()
	c.model.advance(hw)
	return fmt.Sprintf("WAL [%d, %d) hw_d=%d", base, base+int64(n), hw), nil
}

// advanceHW is the classic leader's high watermark: the lowest log end
// of the ISR as the leader knows it (its own, and each follower's last
// fetch in this epoch). The records it passes are committed.
func (c *Cluster) advanceHW() {
	b := c.leaderBroker()
	if b == nil || c.ctrl.rec.State.SealCommitted() {
		return
	}
	l := b.Log()
	hw := l.LogEndOffset()
	for _, id := range c.ctrl.rec.ISR {
		if id == b.ID {
			continue
		}
		pos, ok := c.ctrl.fetched[id]
		if !ok {
			return
		}
		hw = min(hw, pos)
	}
	if hw <= l.HighWatermark() {
		return
	}
	if _, err := l.MaybeIncrementHighWatermark(hw); err != nil {
		c.trace.detail("hw %d: %v", hw, err)
		return
	}
	if hw > c.model.end {
		if err := c.model.commitFromLog(l, c.model.end, hw); err != nil {
			c.trace.detail("commit [%d, %d): %v", c.model.end, hw, err)
		}
	}
}

// ElectLeader makes broker id the leader in a new leader epoch (a clean
// election: id must be running and in the ISR).
func (c *Cluster) ElectLeader(id int32) error {
	return c.do("elect", id, func() (string, error) {
		b, err := c.upBroker(id)
		if err != nil {
			return "", err
		}
		if !c.ctrl.rec.inISR(id) || (c.ctrl.rec.Leader == id && c.leaderBroker() != nil) {
			return "", notApplicable("broker %d is the leader or not in the ISR %v", id, c.ctrl.rec.ISR)
		}
		c.ctrl.newLeader(id)
		err = c.publish("election")
		_, _, leo, hw := b.Offsets()
		return fmt.Sprintf("epoch %d leo=%d hw=%d", c.ctrl.rec.LeaderEpoch, leo, hw), err
	})
}

// ShrinkISR removes a lagging follower from the ISR (Kafka's
// replica.lag.time.max.ms).
func (c *Cluster) ShrinkISR(id int32) error {
	return c.do("shrink-isr", id, func() (string, error) {
		k := &c.ctrl
		if id == k.rec.Leader || !k.rec.inISR(id) || len(k.rec.ISR) < 2 {
			return "", notApplicable("broker %d cannot leave the ISR %v", id, k.rec.ISR)
		}
		if lb := c.leaderBroker(); lb != nil && k.fetched[id] >= lb.Log().LogEndOffset() {
			if _, ok := k.fetched[id]; ok {
				return "", notApplicable("broker %d is caught up", id)
			}
		}
		k.setISR(slices.DeleteFunc(slices.Clone(k.rec.ISR), func(x int32) bool { return x == id }))
		err := c.publish("isr shrink")
		c.advanceHW()
		return fmt.Sprintf("isr=%v", k.rec.ISR), err
	})
}

// fenceBroker is the controller's reaction to a broker that stopped
// heartbeating: out of the ISR (unless it is the last member, which
// Kafka keeps), and a new leader from the ISR if it led.
func (c *Cluster) fenceBroker(id int32) error {
	kind := c.ctrl.brokerFenced(id, c.running)
	err := c.publish(fmt.Sprintf("broker %d fenced%s", id, kind.note()))
	c.acceptLossAtElection(kind)
	return errors.Join(err, c.maybeRecovered())
}

// Crash kills broker id: its disk becomes a crash image that keeps 0,
// 50 or 100 % of the unsynced data (chosen by the cluster's seed).
func (c *Cluster) Crash(id int32) error {
	return c.crashKeeping(id, func() int { return []int{0, 50, 100}[c.rng.IntN(3)] })
}

// CrashKeeping is Crash with the share of unsynced data the crash image
// keeps given (0 to 100), for scripted runs.
func (c *Cluster) CrashKeeping(id int32, unsyncedPercent int) error {
	return c.crashKeeping(id, func() int { c.rec.note("unsynced", unsyncedPercent); return unsyncedPercent })
}

func (c *Cluster) crashKeeping(id int32, unsynced func() int) error {
	return c.do("crash", id, func() (string, error) {
		b, err := c.upBroker(id)
		if err != nil {
			return "", err
		}
		pct := unsynced()
		b.crash(pct, false)
		err = c.fenceBroker(id)
		return fmt.Sprintf("unsynced kept %d%%; leader=%d isr=%v", pct, c.ctrl.rec.Leader, c.ctrl.rec.ISR), err
	})
}

// LoseDisk kills broker id and replaces its disk with an empty one. It
// is refused for the last in-sync copy of a partition whose classic
// prefix is not yet in remote storage (that is an unclean loss no
// system survives): a member of the ISR, the ELR or the last known
// leader when no other running ISR or ELR member holds the records.
func (c *Cluster) LoseDisk(id int32) error {
	return c.do("lose-disk", id, func() (string, error) {
		b := c.Broker(id)
		if b == nil {
			return "", notApplicable("no broker %d", id)
		}
		rec := c.ctrl.rec
		inSync := rec.inISR(id) || slices.Contains(rec.ELR, id) || slices.Contains(rec.LastKnownELR, id)
		if inSync && c.upISR(id) == 0 && rec.State.Phase() != tierstate.PhaseTwo {
			return "", notApplicable("broker %d holds the only in-sync copy", id)
		}
		if b.up {
			b.crash(0, true)
		} else {
			b.fs = vfs.NewCrashableMem()
		}
		b.stateFrom, b.futureStateFrom = 0, 0
		err := c.fenceBroker(id)
		return fmt.Sprintf("leader=%d isr=%v", c.ctrl.rec.Leader, c.ctrl.rec.ISR), err
	})
}

// upISR counts the running ISR and ELR members other than id (each
// holds every committed record).
func (c *Cluster) upISR(id int32) int {
	n := 0
	for _, m := range union(c.ctrl.rec.ISR, c.ctrl.rec.ELR) {
		if m != id && c.Broker(m).up {
			n++
		}
	}
	return n
}

// Restart brings broker id back on its disk: log.Open recovers the log,
// a new driver gets the controller's record as a replica new to the
// broker. If the partition has no leader, the restarted broker is
// elected when it is in the ISR (Kafka elects the last ISR member when
// it returns).
func (c *Cluster) Restart(id int32) error {
	return c.do("restart", id, func() (string, error) {
		b := c.Broker(id)
		if b == nil || b.up {
			return "", notApplicable("broker %d is running", id)
		}
		if err := b.start(); err != nil {
			return "", err
		}
		if v := c.checkRestartedProducers(b); v != nil {
			return "", v
		}
		kind := c.ctrl.brokerRegistered(id, c.running)
		err := c.publish(fmt.Sprintf("broker %d restarted%s", id, kind.note()))
		c.acceptLossAtElection(kind)
		err = errors.Join(err, c.maybeRecovered())
		_, _, leo, hw := b.Offsets()
		return fmt.Sprintf("leo=%d hw=%d epochs=%s leader=%d", leo, hw, formatEpochs(b.Epochs()), c.ctrl.rec.Leader), err
	})
}

// SetFaults sets the probability of an injected fault per object-store
// Put and Delete (0 turns faults off).
func (c *Cluster) SetFaults(rate float64) error {
	return c.do("faults", -1, func() (string, error) {
		c.rec.note("rate", rate)
		c.store.setRate(rate)
		return fmt.Sprintf("rate=%.2f", rate), nil
	})
}

// ForceLeader elects broker id whether or not it is in the ISR, and
// makes it the only ISR member: an unclean or last-known-leader
// election, as an operator's election or KIP-966's recovery makes one.
// The broker may be down; it then leads from its restart. Before phase
// 2 this can lose committed records (the scheduler uses it only in phase
// 2, where remote storage and the WAL hold everything); scripted runs
// use it to give leadership to a replica that comes back.
func (c *Cluster) ForceLeader(id int32) error { return c.forceLeader(id, false) }

// ForceLeaderInPhaseTwo is ForceLeader where the scheduler takes it: in
// phase 2 only (not applicable otherwise). It is recorded with the flag
// phase-2, so that a replay keeps the precondition: a shrink that drops
// the steps before phase 2 must not turn it into an election that loses
// classic records.
func (c *Cluster) ForceLeaderInPhaseTwo(id int32) error { return c.forceLeader(id, true) }

func (c *Cluster) forceLeader(id int32, phaseTwoOnly bool) error {
	return c.do("force-leader", id, func() (string, error) {
		if phaseTwoOnly {
			if c.ctrl.rec.State.Phase() != tierstate.PhaseTwo {
				return "", notApplicable("not in phase 2")
			}
			c.rec.note("phase-2", "")
		}
		b := c.Broker(id)
		if b == nil || c.ctrl.rec.Leader == id {
			return "", notApplicable("broker %d leads already", id)
		}
		c.ctrl.newLeader(id)
		c.ctrl.setISR([]int32{id})
		err := c.publish("forced election")
		return fmt.Sprintf("epoch %d isr=%v up=%t", c.ctrl.rec.LeaderEpoch, c.ctrl.rec.ISR, b.up), err
	})
}

// CatchUp runs broker id's classic fetches until its log ends where the
// leader's does (at most 100 fetches), one step each.
func (c *Cluster) CatchUp(id int32) error {
	for range 100 {
		f, lb := c.Broker(id), c.leaderBroker()
		if f == nil || lb == nil || f.Log() == nil {
			return notApplicable("broker %d has no leader to catch up with", id)
		}
		if f.Log().LogEndOffset() == lb.Log().LogEndOffset() && f.Log().HighWatermark() == lb.Log().HighWatermark() {
			return nil
		}
		if err := c.Replicate(id); err != nil {
			return err
		}
	}
	return fmt.Errorf("sim: broker %d did not catch up", id)
}

// ElectLeaders is an ElectLeaders request for the partition
// (kafka-leader-election.sh --election-type PREFERRED|UNCLEAN): the
// controller's checks and choice (controller.electLeaders), then the
// record published. A refusal (ErrElectionNotNeeded,
// ErrPreferredLeaderNotAvailable, ErrEligibleLeadersNotAvailable) takes
// no step. An unclean or last-known-leader election accepts the loss of
// the committed records the new leader lacks, as acceptLossAtElection
// records.
func (c *Cluster) ElectLeaders(t ElectionType) error {
	return c.do("elect-leaders", -1, func() (string, error) {
		c.rec.note("type", t.String())
		return c.runElection(t.String(), func() (election, error) { return c.ctrl.electLeaders(t, c.running) })
	})
}

// RebalanceLeaders is the controller's automatic preferred-leader
// election (auto.leader.rebalance.enable, on by default): for a
// partition whose leader is not its preferred replica it runs the
// builder with Election.PREFERRED, as a PREFERRED ElectLeaders request
// does (so, with KIP-966, it also elects the last known leader of a
// leaderless partition: github.com/aiven/inkless/pull/871). A partition
// the election would not change is skipped.
func (c *Cluster) RebalanceLeaders() error {
	return c.do("rebalance", -1, func() (string, error) {
		return c.runElection("auto preferred", func() (election, error) {
			return c.ctrl.electLeaders(ElectPreferred, c.running)
		})
	})
}

// runElection runs choose on the controller and publishes the record it
// changed.
func (c *Cluster) runElection(name string, choose func() (election, error)) (string, error) {
	before := c.ctrl.rec.Leader
	kind, err := choose()
	if err != nil {
		return "", err
	}
	err = c.publish(fmt.Sprintf("%s request%s", name, kind.note()))
	c.acceptLossAtElection(kind)
	err = errors.Join(err, c.maybeRecovered())
	return fmt.Sprintf("%s: %s election, leader %d -> %d epoch %d; %s", name, kind, before, c.ctrl.rec.Leader,
		c.ctrl.rec.LeaderEpoch, c.ctrl.rec.electionView()), err
}
