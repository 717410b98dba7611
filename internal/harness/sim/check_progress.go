package sim

import (
	"errors"
	"fmt"
	"slices"

	"github.com/tierlog/tierlog/tierstate"
	"github.com/tierlog/tierlog/wal"
)

// Settle's bounds. A round is one classic fetch of every follower and
// one consolidation step of every consolidating broker. Rounds go on
// while they move some replica (its log end, high watermark or local log
// start) and the partition is unsettled; stillRounds rounds in a row
// that move nothing end them, as does the cap: maxSettleRounds plus the
// furthest replica's lag (settleLimit). A classic fetch moves up to
// fetchBytes and a consolidation step one WAL answer, so a replica far
// behind takes many rounds, each of which moves it (a long schedule's
// backlog, a few offsets a round, is not a stall); a rebuild from remote
// storage takes a few steps that move nothing before it lands.
const (
	stillRounds     = 5
	maxSettleRounds = 400
)

// quietness is why the cluster is not quiet ("" when it is): a fault
// rate above 0, a broker down or with an offline log directory, no
// running leader. Only a quiet cluster must make progress.
func (c *Cluster) quietness() string {
	read, plane := c.walFaults.rates()
	switch {
	case c.store.rate() > 0:
		return "object-store faults on"
	case read > 0 || plane > 0:
		return "WAL read faults on"
	case c.leaderBroker() == nil:
		return "no running leader"
	case c.cut != 0:
		return fmt.Sprintf("broker %d is cut off", c.cut)
	}
	if outage, lost := c.walCP.state(); outage || lost {
		return "control-plane faults on"
	}
	for _, b := range c.brokers {
		if !b.up || b.Prior().Offline {
			return fmt.Sprintf("broker %d is down", b.ID)
		}
		if b.cut != nil && b.cut.armed(b) {
			return fmt.Sprintf("broker %d has a crash armed", b.ID)
		}
	}
	return ""
}

// unsettled names a replica that has not made the progress a quiet
// cluster owes, nil if none: before the seal, an ISR member whose log
// end or high watermark is below the leader's log end, or a leader whose
// high watermark is (acks=all: once the ISR holds every record, every
// record is committed); in phase
// 2, a consolidating leader whose log ends below the WAL's high
// watermark, unless it ends at the seal and the WAL holds no batch from
// there (walHoleAtSeal). Phase 1 waits for the operator or the phase-2
// check and owes nothing.
func (c *Cluster) unsettled() *Violation {
	lb := c.leaderBroker()
	if lb == nil {
		return nil
	}
	ll := lb.Log()
	st := c.ctrl.rec.State
	if !st.SealCommitted() {
		leo := ll.LogEndOffset()
		for _, id := range c.ctrl.rec.ISR {
			f := c.Broker(id)
			if f == lb || f == nil || f.Log() == nil {
				continue
			}
			if fl := f.Log(); fl.LogEndOffset() < leo || fl.HighWatermark() < leo {
				return c.violation(Stuck, id, fl.LogEndOffset(), "in-sync follower at log end %d hw %d, leader's log end %d hw %d (leader %d)",
					fl.LogEndOffset(), fl.HighWatermark(), leo, ll.HighWatermark(), lb.ID)
			}
		}
		if ll.HighWatermark() < leo {
			return c.violation(Stuck, lb.ID, ll.HighWatermark(), "leader's hw %d below its log end %d with the ISR %v caught up",
				ll.HighWatermark(), leo, c.ctrl.rec.ISR)
		}
		return nil
	}
	if st.Phase() != tierstate.PhaseTwo || !lb.consolidating {
		return nil
	}
	if _, hw, ok := c.WAL(); ok && ll.LogEndOffset() < hw && !c.walHoleAtSeal(ll.LogEndOffset(), st.Seal()) {
		detail := fmt.Sprintf("consolidating leader's log ends at %d, WAL high watermark %d (local start %d, seal %d)",
			ll.LogEndOffset(), hw, ll.LocalLogStartOffset(), st.Seal())
		if err := lb.fetcher.Failed(c.tp); err != nil {
			detail += "; fetcher failed: " + err.Error()
		}
		return c.violation(Stuck, lb.ID, ll.LogEndOffset(), "%s", detail)
	}
	return nil
}

// walHoleAtSeal reports whether a log ending at leo, the committed seal,
// has nothing to consolidate: the WAL holds no batch from leo on. A seal
// lowered below the one InitDisklessLog set (start-phase-2 accepting a
// loss, or a reseal) leaves [seal, the WAL's high watermark) holding no
// offset in any tier, and the WAL keeps its offsets
// (github.com/aiven/inkless/pull/855: the diskless log is not rewritten
// below its first batch). The log cannot end past the seal without a
// record; the fetcher appends the first batch past the hole once a
// producer writes one (consolidate's first-batch exception), so the
// replica is where it can be.
func (c *Cluster) walHoleAtSeal(leo, seal int64) bool {
	if leo != seal {
		return false
	}
	res, err := c.cp.FindBatches(c.ctx, wal.FindBatchesRequest{
		Partitions: []wal.FindPartition{{Partition: c.walTP(), Offset: leo, MaxPartitionBytes: 1 << 20}},
		MaxBytes:   1 << 20, MaxBatchesPerPartition: 1,
	})
	return err == nil && len(res) == 1 && res[0].Err == nil && len(res[0].Batches) == 0
}

// Settle is a liveness check: on a quiet cluster (no fault on, every
// broker running, a running leader) it runs rounds of catch-up, each a
// classic fetch of every follower and a consolidation step of every
// consolidating broker (each its own step, checked), until the partition
// has made the progress unsettled asks for or the rounds stop moving
// it (stillRounds, maxSettleRounds), then takes
// one "settle" step that fails with Stuck if it has not. A cluster that
// is not quiet is not applicable. It is recorded and replayed as one
// action (the rounds run again): a shrink that dropped some of them
// would report a replica as stuck that was only not asked to fetch.
func (c *Cluster) Settle() error {
	if why := c.quietness(); why != "" {
		return notApplicable("not quiet: %s", why)
	}
	on := c.rec.on
	c.rec.on = false
	rounds, err := c.settleRounds()
	c.rec.on = on
	if v := (*Violation)(nil); errors.As(err, &v) {
		c.rec.done("settle", -1, true)
		return v
	}
	return c.do("settle", -1, func() (string, error) {
		if why := c.quietness(); why != "" {
			// A round's step brought a fault (a broker crashed at an
			// armed file operation): the cluster owes no progress.
			return fmt.Sprintf("not quiet after %d round(s): %s", rounds, why), nil
		}
		if v := c.unsettled(); v != nil {
			v.Detail = fmt.Sprintf("after %d catch-up round(s): %s", rounds, v.Detail)
			return "stuck", v
		}
		if v := c.unreadable(); v != nil {
			v.Detail = fmt.Sprintf("after %d catch-up round(s): %s", rounds, v.Detail)
			return "unreadable", v
		}
		return fmt.Sprintf("settled after %d round(s)", rounds), nil
	})
}

// unreadable is, on a settled cluster, the first committed offset from
// the leader's log start on that a consumer's fetch is not served (the
// fetch fails, or serves nothing), nil when every one is served: a tier
// may hold the records while the leader cannot read them (an epoch
// cache without their epoch, a remote lookup that misses them), which
// no other invariant sees. Phase 1 owes nothing, as in unsettled.
func (c *Cluster) unreadable() *Violation {
	lb := c.leaderBroker()
	st := c.ctrl.rec.State
	if lb == nil || st.SealCommitted() && (st.Phase() != tierstate.PhaseTwo || !lb.consolidating) {
		return nil
	}
	for off := max(lb.Log().LogStartOffset(), c.model.deletedBelow); off < c.model.end; {
		if c.model.given(off, off+1) {
			off++
			continue
		}
		tier, data, err := c.fetch(lb, off)
		if err != nil {
			return c.violation(Stuck, lb.ID, off, "a fetch at the committed offset %d from %s fails: %v", off, tier, err)
		}
		next := off
		_, _ = forEachRecord(data, off, 1<<62, func(o int64, _ string) error {
			next = max(next, o+1)
			return nil
		})
		if next == off {
			return c.violation(Stuck, lb.ID, off, "a fetch at the committed offset %d from %s serves nothing (committed end %d)",
				off, tier, c.model.end)
		}
		off = next
	}
	return nil
}

// settleRounds runs Settle's rounds; a violation ends them. Other errors
// of a step are in its trace line.
func (c *Cluster) settleRounds() (int, error) {
	rounds, still, limit := 0, 0, c.settleLimit()
	last := c.replicaPositions()
	for ; rounds < limit && still < stillRounds && (c.unsettled() != nil || c.unreadable() != nil) && c.quietness() == ""; rounds++ {
		for _, b := range c.brokers {
			if err := c.Replicate(b.ID); errors.Is(err, ErrViolation) {
				return rounds, err
			}
		}
		// A phase-2 leader without the WAL row writes it (its switch
		// step, which a broker runs on every event) before its
		// consolidation can be redirected to remote storage.
		if c.ctrl.rec.State.Phase() == tierstate.PhaseTwo && !c.walReady() {
			if err := c.SwitchStep(); errors.Is(err, ErrViolation) {
				return rounds, err
			}
		}
		for _, b := range c.brokers {
			if err := c.Consolidate(b.ID); errors.Is(err, ErrViolation) {
				return rounds, err
			}
		}
		still++
		if pos := c.replicaPositions(); !slices.Equal(pos, last) {
			still, last = 0, pos
		}
	}
	return rounds, nil
}

// settleLimit is the most catch-up rounds Settle runs: maxSettleRounds
// plus the offsets between the lowest log end of a broker and the
// partition's end (the leader's log end, or the WAL's high watermark once
// it is past it).
func (c *Cluster) settleLimit() int {
	lb := c.leaderBroker()
	if lb == nil || lb.Log() == nil {
		return maxSettleRounds
	}
	end := lb.Log().LogEndOffset()
	if _, hw, ok := c.WAL(); ok {
		end = max(end, hw)
	}
	lag := int64(0)
	for _, b := range c.brokers {
		if l := b.Log(); l != nil {
			lag = max(lag, end-l.LogEndOffset())
		}
	}
	return maxSettleRounds + int(lag)
}

// replicaPositions are every broker's local log start, log end and high
// watermark (-1 without a log).
func (c *Cluster) replicaPositions() []int64 {
	var out []int64
	for _, b := range c.brokers {
		_, localStart, leo, hw := b.Offsets()
		out = append(out, localStart, leo, hw)
	}
	return out
}

func init() {
	clusterActions["settle"] = (*Cluster).Settle
	noBrokerArg["settle"] = true
}
