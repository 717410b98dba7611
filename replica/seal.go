package replica

import (
	"context"

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
// (SealHandOff.BacksOff).
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
