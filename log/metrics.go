package log

import (
	"sync/atomic"
	"time"
)

// Listener receives the log's notable events. Every field is optional.
// Callbacks run on the goroutine that caused the event, never with the
// log's mutex held, and must not call back into the log's mutating
// methods.
type Listener struct {
	// SegmentRolled is called after a new active segment was created at
	// baseOffset.
	SegmentRolled func(baseOffset int64)
	// SegmentDeleted is called after a segment was removed from the log
	// by retention or truncation.
	SegmentDeleted func(info SegmentDeleteInfo)
	// RecoveryTruncated is called when recovery cut a segment's tail.
	RecoveryTruncated func(info RecoveryTruncation)
	// Corruption is called when recovery found corrupt data (not a torn
	// tail) and cut it.
	Corruption func(info RecoveryTruncation)
}

// SegmentDeleteInfo describes a deleted segment.
type SegmentDeleteInfo struct {
	BaseOffset int64
	// NextOffset is the base of the next segment (or the log end offset).
	NextOffset int64
	Bytes      int64
	Reason     string // "retention-time", "retention-size", "log-start", "truncation"
}

// RecoveryTruncation describes the tail recovery cut from a segment.
type RecoveryTruncation struct {
	BaseOffset   int64 // the segment
	Position     int64 // where the valid prefix ends
	BytesRemoved int64
	// SegmentsDeleted counts the later segments deleted with it.
	SegmentsDeleted int
	// Err is the reason: a torn tail or a corruption error.
	Err error
}

// Metrics is a snapshot of a log's counters and sizes (pebble style:
// plain values, read with UnifiedLog.Metrics).
type Metrics struct {
	Segments            int
	Bytes               int64 // bytes in local segment files
	LogStartOffset      int64
	LocalLogStartOffset int64
	LogEndOffset        int64
	HighWatermark       int64
	RecoveryPoint       int64

	AppendedBatches  int64
	AppendedBytes    int64
	Rolls            int64
	SegmentsDeleted  int64
	Truncations      int64 // truncations that changed the log (the truncation count)
	RecoveryCuts     int64 // segment tails cut by recovery since Open
	CorruptionsFound int64 // of which corruption rather than a torn tail

	Fsyncs          int64
	FsyncLatencySum time.Duration
	FsyncLatencyMax time.Duration
}

// counters are the monotonic counters behind Metrics, updated without the
// log mutex.
type counters struct {
	appendedBatches  atomic.Int64
	appendedBytes    atomic.Int64
	rolls            atomic.Int64
	segmentsDeleted  atomic.Int64
	recoveryCuts     atomic.Int64
	corruptionsFound atomic.Int64
	fsyncs           atomic.Int64
	fsyncNanos       atomic.Int64
	fsyncMaxNanos    atomic.Int64
}

func (c *counters) observeFsync(d time.Duration) {
	c.fsyncs.Add(1)
	c.fsyncNanos.Add(int64(d))
	for {
		cur := c.fsyncMaxNanos.Load()
		if int64(d) <= cur || c.fsyncMaxNanos.CompareAndSwap(cur, int64(d)) {
			return
		}
	}
}

func durationOf(nanos int64) time.Duration { return time.Duration(nanos) }
