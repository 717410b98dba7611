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
	// CommitStages is where the group transactions' time went.
	CommitStages CommitStages
}

// CommitStages sums, over the attempts of group transactions, the time
// of each stage as the client sees it; a call's own latency is the time
// it waited in the commit queue for the groups before its own, plus its
// group's stages.
type CommitStages struct {
	// Attempts is the group transactions attempted (CommitGroups plus
	// the retries of commits).
	Attempts int64
	// Acquire is the wait for a pooled connection.
	Acquire time.Duration
	// Read is the first pipeline: BEGIN, the reservations' removal, the
	// objects' registration, the lock of the partitions' rows (a wait
	// for another broker's group holding them is here) and the
	// producers' states: one round trip.
	Read time.Duration
	// Decide is the decisions in Go and the answers of keys already
	// registered (a round trip each).
	Decide time.Duration
	// Write is the last pipeline: the batch rows, the partitions' rows,
	// the producers, the stored answers and COMMIT, whose WAL flush
	// (synchronous_commit on) is most of it.
	Write time.Duration
}

type counters struct {
	commits, commitErrors, commitNanos, commitGroups, retries, outcomeUnknown atomic.Int64
	stageAttempts, acquireNanos, readNanos, decideNanos, writeNanos           atomic.Int64
}

// Metrics returns a snapshot of the counters.
func (cp *ControlPlane) Metrics() Metrics {
	m := &cp.metrics
	return Metrics{Commits: m.commits.Load(), CommitErrors: m.commitErrors.Load(),
		CommitLatencySum: time.Duration(m.commitNanos.Load()), Retries: m.retries.Load(),
		CommitGroups: m.commitGroups.Load(), OutcomeUnknown: m.outcomeUnknown.Load(),
		CommitStages: CommitStages{Attempts: m.stageAttempts.Load(), Acquire: time.Duration(m.acquireNanos.Load()),
			Read: time.Duration(m.readNanos.Load()), Decide: time.Duration(m.decideNanos.Load()),
			Write: time.Duration(m.writeNanos.Load())}}
}
