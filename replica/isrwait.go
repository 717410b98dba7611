package replica

// isrWaitWarnEveryMs is how long a follower waits at the seal for ISR
// admission before the first warning, and the time between warnings
// (https://github.com/aiven/inkless/pull/760: after one minute, then once
// a minute). A normal admission takes a few fetches and stays silent.
const isrWaitWarnEveryMs = 60_000

// isrWait is how long a follower has waited at the seal for ISR admission
// during its current stay on the classic fetcher. Kafka's aggregate
// under-replicated count leaves consolidating partitions out, so this
// wait is the only partition-level signal of a replica stuck outside the
// ISR; the driver logs it and Metrics.IsrWaitMs shows it. It is reset
// whenever the classic fetcher gains or loses the partition, so a later
// stay never inherits an earlier one's start.
type isrWait struct {
	waiting    bool
	sinceMs    int64 // when the wait began
	lastWarnMs int64 // the last warning; meaningful once warned
	warned     bool
}

// observe records one hand-off decision at nowMs (waiting: the decision
// was to wait for ISR admission) and reports whether to warn now and how
// long the wait has lasted.
func (w *isrWait) observe(waiting bool, nowMs int64) (warn bool, waitedMs int64) {
	if !waiting {
		w.reset()
		return false, 0
	}
	if !w.waiting {
		*w = isrWait{waiting: true, sinceMs: nowMs}
	}
	waitedMs = nowMs - w.sinceMs
	if waitedMs < isrWaitWarnEveryMs || (w.warned && nowMs-w.lastWarnMs < isrWaitWarnEveryMs) {
		return false, waitedMs
	}
	w.warned, w.lastWarnMs = true, nowMs
	return true, waitedMs
}

// waitedMs is the current wait at nowMs, 0 when not waiting.
func (w *isrWait) waitedMs(nowMs int64) int64 {
	if !w.waiting {
		return 0
	}
	return nowMs - w.sinceMs
}

func (w *isrWait) reset() { *w = isrWait{} }
