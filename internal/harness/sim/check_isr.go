package sim

import "github.com/tierlog/tierlog/tierstate"

// ConsolidatingOutsideISR: a running follower of a switched partition
// consolidates while the controller's ISR does not hold it. It never
// sends the leader the follower fetch at the seal that would readmit it,
// so it stays outside the ISR for good
// (github.com/aiven/inkless/pull/760: a switched follower leaves the
// classic fetcher only once the leader admitted it at the seal).
const ConsolidatingOutsideISR = LineageDiverged + 1

// checkConsolidatingInISR: every running, unfenced follower of a
// partition with a committed seal that consolidates is in the ISR.
func (c *Cluster) checkConsolidatingInISR() *Violation {
	rec := c.ctrl.rec
	if !rec.State.SealCommitted() || rec.State.Phase() == tierstate.PhaseClassic {
		return nil
	}
	for _, b := range c.brokers {
		if !b.up || !b.consolidating || b.ID == rec.Leader || rec.inISR(b.ID) || b.Prior().Fenced {
			continue
		}
		l := b.Log()
		leo := int64(-1)
		if l != nil {
			leo = l.LogEndOffset()
		}
		return c.violation(ConsolidatingOutsideISR, b.ID, leo, "follower consolidates at %d outside the ISR %v (seal %d)",
			leo, rec.ISR, rec.State.Seal())
	}
	return nil
}
