package sim

import "github.com/tierlog/tierlog/tierstate"

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
