package remote

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/tierlog/tierlog/log"
)

// ManagerMetrics is a snapshot of a Manager's counters.
type ManagerMetrics struct {
	SegmentsCopied int64
	BytesCopied    int64
	CopyErrors     int64
	// CopyCorruptions counts copies that failed because a local batch
	// failed its checks (a *BatchCorruptionError); each is also in
	// CopyErrors.
	CopyCorruptions int64
	// CopyLatencySum is the total time of successful uploads.
	CopyLatencySum time.Duration

	SegmentsDeleted int64
	BytesDeleted    int64
	DeleteErrors    int64

	RemoteReads      int64
	RemoteReadBytes  int64
	RemoteReadErrors int64
	// RemoteReadCorruptions counts reads that failed on corrupt remote
	// data (a *ReadCorruptionError); each is also in RemoteReadErrors.
	RemoteReadCorruptions int64
	RemoteReadLatency     time.Duration // sum
	RemoteReadsInFlight   int64

	// TaskErrors counts failed task runs of every kind.
	TaskErrors int64

	// Partitions holds the per-partition gauges.
	Partitions map[TopicIDPartition]PartitionMetrics
}

// PartitionMetrics are the gauges of one partition.
type PartitionMetrics struct {
	Leader bool
	// CopyLagSegments and CopyLagBytes count the segments eligible for a
	// copy but not uploaded yet, as of the last copy run;
	// CopyLagOldestMs is the largest record timestamp of the oldest of
	// them (-1 when none lags) and CopyLagAge how long ago that was.
	CopyLagSegments int64
	CopyLagBytes    int64
	CopyLagOldestMs int64
	CopyLagAge      time.Duration
	// HighestOffsetInRemoteStorage is the log's current value.
	HighestOffsetInRemoteStorage int64
	// CopyStalledAt is the base offset of the corrupt local segment the
	// copy task stopped at (ErrCopyStalled), -1 when it did not.
	CopyStalledAt int64
}

// ManagerListener receives a Manager's events. Nil fields are skipped.
// Callbacks run on the task's goroutine, with no lock held.
type ManagerListener struct {
	CopyStart      func(CopyInfo)
	CopyEnd        func(CopyInfo)
	CopyError      func(CopyInfo, error)
	SegmentDeleted func(SegmentMetadata, DeleteReason)
	// Corruption reports corrupt data: a local segment a copy refused
	// (the error holds a *BatchCorruptionError; CopyError is called as
	// well) or a remote read's *ReadCorruptionError. It runs on the
	// task's or the reader's goroutine.
	Corruption func(TopicIDPartition, error)
}

// CopyInfo describes one upload.
type CopyInfo struct {
	Segment  SegmentMetadata
	Duration time.Duration
}

type managerCounters struct {
	segmentsCopied, bytesCopied, copyErrors, copyNanos, copyCorruptions atomic.Int64
	segmentsDeleted, bytesDeleted, deleteErrors                         atomic.Int64
	reads, readBytes, readErrors, readNanos, readsInFlight              atomic.Int64
	readCorruptions, taskErrors                                         atomic.Int64
}

// copyLag is a partition's copy-lag gauge.
type copyLag struct {
	mu                        sync.Mutex
	segments, bytes, oldestMs int64
}

// recordCopyLag sets the lag to the segments still to upload.
func (pt *partitionTasks) recordCopyLag(waiting []log.SegmentInfo) {
	var n, oldest int64 = 0, -1
	for _, s := range waiting {
		n += s.SizeBytes
	}
	if len(waiting) > 0 {
		oldest = waiting[0].MaxTimestampMs
	}
	pt.lag.mu.Lock()
	pt.lag.segments, pt.lag.bytes, pt.lag.oldestMs = int64(len(waiting)), n, oldest
	pt.lag.mu.Unlock()
}

// Metrics returns a snapshot of the counters and gauges.
func (m *Manager) Metrics() ManagerMetrics {
	c := &m.metrics
	out := ManagerMetrics{
		SegmentsCopied: c.segmentsCopied.Load(), BytesCopied: c.bytesCopied.Load(),
		CopyErrors: c.copyErrors.Load(), CopyLatencySum: time.Duration(c.copyNanos.Load()),
		CopyCorruptions: c.copyCorruptions.Load(), RemoteReadCorruptions: c.readCorruptions.Load(),
		SegmentsDeleted: c.segmentsDeleted.Load(), BytesDeleted: c.bytesDeleted.Load(),
		DeleteErrors: c.deleteErrors.Load(),
		RemoteReads:  c.reads.Load(), RemoteReadBytes: c.readBytes.Load(), RemoteReadErrors: c.readErrors.Load(),
		RemoteReadLatency: time.Duration(c.readNanos.Load()), RemoteReadsInFlight: c.readsInFlight.Load(),
		TaskErrors: c.taskErrors.Load(),
		Partitions: map[TopicIDPartition]PartitionMetrics{},
	}
	m.mu.Lock()
	pts := make([]*partitionTasks, 0, len(m.mu.partitions))
	for _, pt := range m.mu.partitions {
		pts = append(pts, pt)
	}
	m.mu.Unlock()
	for _, pt := range pts {
		pt.lag.mu.Lock()
		pm := PartitionMetrics{
			Leader: pt.leader, CopyLagSegments: pt.lag.segments, CopyLagBytes: pt.lag.bytes,
			CopyLagOldestMs: pt.lag.oldestMs,
		}
		pt.lag.mu.Unlock()
		if pm.CopyLagOldestMs >= 0 {
			pm.CopyLagAge = m.opts.Now().Sub(time.UnixMilli(pm.CopyLagOldestMs))
		}
		pm.HighestOffsetInRemoteStorage = pt.p.Log.HighestOffsetInRemoteStorage()
		pm.CopyStalledAt = pt.copyStalledAt()
		out.Partitions[pt.p.TopicIDPartition] = pm
	}
	return out
}

// notify calls f with the listener, if any.
func (m *Manager) notify(f func(*ManagerListener)) {
	f(&m.opts.Listener)
}

// copyStalledAt returns the base offset the copy task stalled at, -1 when
// none.
func (pt *partitionTasks) copyStalledAt() int64 { return pt.stallGauge.Load() - 1 }
