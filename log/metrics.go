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
	// RecoveryTruncated is called when recovery cut a segment's tail, or
	// ended the log at a segment whose .log lost its end (BytesRemoved
	// 0); later segments are then moved aside, see RecoveryTruncation.
	RecoveryTruncated func(info RecoveryTruncation)
	// Corruption is called when recovery found corrupt data (not a torn
	// tail) and cut it.
	Corruption func(info RecoveryTruncation)
	// DamageFound is called when Open's checks of a segment it does not
	// recover (a rolled segment after a clean shutdown, or one below the
	// recovery point) found damage: the segment stays, and reads of it
	// return the same *CorruptionError.
	DamageFound func(err *CorruptionError)
	// HighWatermarkLowered is called after a truncation (or a rebuild)
	// lowered the high watermark to hw: only an unclean leader change
	// truncates below it. It is called before the truncating call
	// returns, with no lock of the log held. A log manager rewrites its
	// high-watermark checkpoint here: the old value, restored after a
	// crash, would cover the records that later take the truncated
	// offsets, which are not committed.
	HighWatermarkLowered func(hw int64)
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
	// SegmentsDeleted counts the later segments deleted with it (always
	// 0 now: later segments are moved aside, see MovedAside).
	SegmentsDeleted int
	// Err is the reason: a torn tail or a corruption error.
	Err error
	// MovedAside lists the files renamed (or, for this segment's .log,
	// hard-linked) to "<name>.damaged" instead of being deleted: this
	// segment's original .log when the cut is corruption or later
	// segments exist, and every file of the later segments. Nil when
	// only a torn tail of the last segment was cut.
	MovedAside []string
	// SegmentsMovedAside counts the later segments among MovedAside.
	SegmentsMovedAside int
	// LostFrom and LostTo bound the offsets no longer in the log,
	// [LostFrom, LostTo): LostFrom is the new log end offset, LostTo the
	// next offset of the last segment moved aside as its batch headers
	// say (its base offset if they cannot be read), or LostFrom when
	// nothing was moved aside. A lower bound: offsets in the cut bytes
	// of this segment are not decoded.
	LostFrom, LostTo int64
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

	AppendedBatches int64
	AppendedBytes   int64
	Rolls           int64
	SegmentsDeleted int64
	Truncations     int64 // truncations that changed the log (the truncation count)
	RecoveryCuts    int64 // segment tails cut by recovery since Open
	// RecoverySkippedBytes is how many bytes of the segment holding the
	// recovery point Open's recovery trusted without reading them: the
	// .log position of the segment recovery point it resumed at (0 when
	// it recovered from the segment's start). See
	// Options.RecoveryPointIntervalBytes.
	RecoverySkippedBytes int64
	CorruptionsFound     int64 // of which corruption rather than a torn tail, plus damage found by Open's checks
	// SegmentsMovedAside counts segments whose files recovery renamed to
	// "<name>.damaged" since Open (the damaged segment itself counts
	// when its original .log was kept).
	SegmentsMovedAside int64
	// DamagedReads counts reads that found damaged data and returned a
	// *CorruptionError.
	DamagedReads int64
	// ReadsCutAtDamage counts reads that found damaged data after the
	// first batch they return and returned the batches before it (the
	// next read from there returns the *CorruptionError, counted in
	// DamagedReads): damage the header checks of every read find, and,
	// with Options.VerifyReads, a batch failing its CRC.
	ReadsCutAtDamage int64
	// OrphanIndexesRemoved counts index files without a .log removed
	// where a new segment was created (a roll, a new empty log).
	OrphanIndexesRemoved int64

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
	recoverySkipped  atomic.Int64
	corruptionsFound atomic.Int64
	movedAside       atomic.Int64
	damagedReads     atomic.Int64
	readsCutAtDamage atomic.Int64
	orphansRemoved   atomic.Int64
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
