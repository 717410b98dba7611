package pgcp

import (
	"sync/atomic"
	"time"
)

// Metrics is a snapshot of a ControlPlane's counters since Open.
type Metrics struct {
	// Commits is the commits answered (each batch accepted or refused),
	// a CommitFile call or one request of a CommitFiles; CommitErrors the
	// ones that failed after their retries.
	Commits      int64
	CommitErrors int64
	// CommitLatencySum is the time spent in CommitFile, or CommitFiles
	// once per request, with its retries, answered or failed; divide by
	// Commits+CommitErrors for the mean.
	CommitLatencySum time.Duration
	// Retries is the transactions of any call run again after a
	// serialization failure, a deadlock or a request that never left.
	Retries int64
	// CommitGroups is the groups of commits written together
	// (Commits+CommitErrors over CommitGroups is the mean group size).
	CommitGroups int64
	// OutcomeUnknown is the mutating calls that failed with
	// ErrOutcomeUnknown (the connection was lost after a statement left).
	OutcomeUnknown int64
}

type counters struct {
	commits, commitErrors, commitNanos, commitGroups, retries, outcomeUnknown atomic.Int64
}

// Metrics returns a snapshot of the counters.
func (cp *ControlPlane) Metrics() Metrics {
	m := &cp.metrics
	return Metrics{Commits: m.commits.Load(), CommitErrors: m.commitErrors.Load(),
		CommitLatencySum: time.Duration(m.commitNanos.Load()), Retries: m.retries.Load(),
		CommitGroups: m.commitGroups.Load(), OutcomeUnknown: m.outcomeUnknown.Load()}
}
