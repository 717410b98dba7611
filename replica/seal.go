package replica

import (
	"context"

	"go.uber.org/zap"

	"github.com/tierlog/tierlog/tierstate"
)

// IsrExpander submits the leader's AlterPartition that adds a follower to
// the ISR (Kafka: Partition.submitAlterPartition). A broker implements
// it.
type IsrExpander interface {
	ExpandIsr(ctx context.Context, replicaID int32) error
}

// HandOff is the follower's hook after each append of the classic
// fetcher (https://github.com/aiven/inkless/pull/760): it decides with
// tierstate.HandOffAtSeal on the delta last applied and performs it: a
// partition that leaves the classic fetcher is removed from it, and a
// consolidating one starts the consolidation fetcher at its log end. The
// answer tells the classic fetcher whether to back off
// (SealHandOff.BacksOff). Call it after every fetch of the classic
// fetcher at the seal, an empty one too: a follower waiting there for
// ISR admission appends nothing, and HandOff is what measures its wait
// (Metrics.IsrWaitMs) and warns after a minute, then once a minute.
func (r *Replica) HandOff(ctx context.Context) (tierstate.SealHandOff, error) {
	ev := &events{r: r}
	defer ev.report()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.prior.Offline {
		return tierstate.SealHandOff{Reason: "replica offline"}, ErrOffline
	}
	d := r.mu.delta
	if d.Leader || r.mu.log == nil {
		return tierstate.SealHandOff{Reason: "not a follower with a log"}, nil
	}
	h := tierstate.HandOffAtSeal(d.State, r.mu.log, d.InIsr)
	if h.Evicts() {
		r.mu.metrics.HandOffs++
	}
	r.observeIsrWaitLocked(ev, h, d.State.Seal(), r.mu.log.LogEndOffset())
	var err error
	tp := r.opts.Partition
	switch h.Action {
	case tierstate.HandOffConsolidate:
		a := act(StartConsolidation, h.ConsolidationStartOffset, "hand-off at the seal: %s", h.Reason)
		if err = r.opts.Classic.RemovePartition(ctx, tp); err == nil {
			err = r.opts.Consolidation.AddPartition(ctx, r.consolidationStartLocked(d, h.ConsolidationStartOffset))
		}
		ev.add(a, err)
	case tierstate.HandOffEvict:
		err = r.opts.Classic.RemovePartition(ctx, tp)
		ev.add(act(StopFetching, -1, "hand-off at the seal: %s", h.Reason), err)
	}
	return h, err
}

// observeIsrWaitLocked tracks the wait at the seal for ISR admission and
// warns after a minute, then once a minute, with the time waited, the
// seal and the log end (https://github.com/aiven/inkless/pull/760). The
// warning is logged after mu is released. REQUIRES: r.mu held.
func (r *Replica) observeIsrWaitLocked(ev *events, h tierstate.SealHandOff, seal, leo int64) {
	warn, waited := r.mu.isrWait.observe(h.Action == tierstate.HandOffWaitForIsr, r.opts.NowMs())
	if !warn {
		return
	}
	r.mu.metrics.IsrWaitWarnings++
	tp, logger := r.opts.Partition, r.opts.Logger
	ev.logs = append(ev.logs, func() {
		logger.Warn("replica waiting at the classic-to-diskless seal for ISR admission: it stays on the classic fetcher until the leader admits it",
			zap.Stringer("partition", tp), zap.Int64("waited_ms", waited), zap.Int64("seal", seal), zap.Int64("log_end_offset", leo))
	})
}

// AdmitAtSeal is the leader's hook after an at-seal follower fetch whose
// decision said TryAdmission (https://github.com/aiven/inkless/pull/760):
// it fills in the switch state and leadership of the delta last applied,
// decides with tierstate.ShouldAdmitAtSeal and, if admitted, submits the
// ISR expansion of replicaID through isr.
func (r *Replica) AdmitAtSeal(ctx context.Context, replicaID int32, a tierstate.SealAdmission, isr IsrExpander) (bool, string, error) {
	ev := &events{r: r}
	defer ev.report()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.prior.Offline {
		return false, "replica offline", ErrOffline
	}
	a.State, a.IsLeader = r.mu.delta.State, r.mu.delta.Leader && !r.mu.prior.Fenced
	admit, why := tierstate.ShouldAdmitAtSeal(a)
	if !admit {
		return false, why, nil
	}
	err := isr.ExpandIsr(ctx, replicaID)
	ev.add(act(Admit, a.RecordedEndOffset, "follower %d: %s", replicaID, why), err)
	return true, why, err
}
