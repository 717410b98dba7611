package sim

import (
	"fmt"

	"github.com/tierlog/tierlog/consolidate"
	"github.com/tierlog/tierlog/replica"
	"github.com/tierlog/tierlog/tierstate"
)

// The hooks below put into the trace what a driver decided and what a
// rebuild restored, so that a step's line shows the why (the failed
// condition of a replica check, the segment a rebuild read) and not
// only the plan's action kinds.

// onDriverEvent notes a replica check's decision and recreate.
func (b *Broker) onDriverEvent(ev replica.Event) {
	if ev.Action.Kind != replica.CheckReplica {
		return
	}
	note := fmt.Sprintf("b%d check-replica: %s", b.ID, ev.Check)
	if ev.Check.Recreate {
		note += fmt.Sprintf(" -> %s", ev.Recreate.Outcome)
	}
	b.c.trace.detail("%s", note)
}

// rebuildListener notes each rebuild of broker b's consolidation
// fetcher: the segment it restored from and where the log now starts.
func (b *Broker) rebuildListener() tierstate.MachineListener {
	return tierstate.MachineListener{
		RebuildFinished: func(res tierstate.RebuildResult, err error) {
			if err != nil {
				b.c.trace.detail("b%d rebuild failed: %v", b.ID, err)
				return
			}
			b.c.trace.detail("%s", rebuildNote(b.ID, res))
		},
	}
}

// endpointAnswers names the endpoint's redirecting answers of one
// consolidation round, from its counters before and after.
func endpointAnswers(before, after consolidate.EndpointMetrics) string {
	s := ""
	if after.Redirects > before.Redirects {
		s += " (OFFSET_MOVED_TO_TIERED_STORAGE)"
	}
	if after.Resets > before.Resets {
		s += " (OFFSET_OUT_OF_RANGE: prefix deleted)"
	}
	if after.PrefixUnknown > before.PrefixUnknown {
		s += " (NOT_LEADER_OR_FOLLOWER: remote prefix unknown)"
	}
	return s
}

// rebuildNote is one rebuild's result: the segment it read, the record
// it looked that segment up for, where the log now starts and the epochs
// it restored and dropped.
func rebuildNote(id int32, res tierstate.RebuildResult) string {
	s := res.Segment
	note := fmt.Sprintf("b%d rebuild (%s): segment [%d, %d] epochs %s holds %d@%d; log starts at %d, epochs %s",
		id, res.Mode, s.StartOffset, s.EndOffset, formatEpochs(s.SegmentLeaderEpochs), res.Target.Offset,
		res.Target.Epoch, res.NextOffset, formatEpochs(res.Epochs))
	if len(res.Dropped) > 0 {
		note += ", dropped " + formatEpochs(res.Dropped)
	}
	return note
}
