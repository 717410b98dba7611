package promexport

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/tierstate"
)

const (
	counter = prometheus.CounterValue
	gauge   = prometheus.GaugeValue
)

// partitionLabels are the labels of per-partition metrics, as Kafka tags
// its per-partition MBeans.
var partitionLabels = []string{"topic", "partition"}

// logTable exports log.Metrics per partition (Kafka: kafka.log:type=Log
// and kafka.log:type=LogFlushStats).
var logTable = newTable(partitionLabels, []row[log.Metrics]{
	{name: "tierlog_log_segments", kind: gauge, help: "Local segments of the log. Kafka: kafka.log:type=Log,name=NumLogSegments.",
		value: func(m *log.Metrics) float64 { return float64(m.Segments) }},
	{name: "tierlog_log_size_bytes", kind: gauge, help: "Bytes in the log's local segment files. Kafka: kafka.log:type=Log,name=Size.",
		value: func(m *log.Metrics) float64 { return count(m.Bytes) }},
	{name: "tierlog_log_log_start_offset", kind: gauge, help: "First offset readable locally or remotely. Kafka: kafka.log:type=Log,name=LogStartOffset.",
		value: func(m *log.Metrics) float64 { return count(m.LogStartOffset) }},
	{name: "tierlog_log_local_log_start_offset", kind: gauge, help: "First offset readable from local segments. Kafka: UnifiedLog.localLogStartOffset.",
		value: func(m *log.Metrics) float64 { return count(m.LocalLogStartOffset) }},
	{name: "tierlog_log_log_end_offset", kind: gauge, help: "Offset the next appended record receives. Kafka: kafka.log:type=Log,name=LogEndOffset.",
		value: func(m *log.Metrics) float64 { return count(m.LogEndOffset) }},
	{name: "tierlog_log_high_watermark", kind: gauge, help: "First offset not known to be fully replicated. Kafka: UnifiedLog.highWatermark.",
		value: func(m *log.Metrics) float64 { return count(m.HighWatermark) }},
	{name: "tierlog_log_recovery_point", kind: gauge, help: "Offset below which the log is flushed; recovery starts here. Kafka: UnifiedLog.recoveryPoint.",
		value: func(m *log.Metrics) float64 { return count(m.RecoveryPoint) }},
	{name: "tierlog_log_appended_batches_total", kind: counter, help: "Record batches appended since the log was opened.",
		value: func(m *log.Metrics) float64 { return count(m.AppendedBatches) }},
	{name: "tierlog_log_appended_bytes_total", kind: counter, help: "Bytes of record batches appended since the log was opened. Kafka: BytesInPerSec, per partition.",
		value: func(m *log.Metrics) float64 { return count(m.AppendedBytes) }},
	{name: "tierlog_log_rolls_total", kind: counter, help: "Segment rolls since the log was opened.",
		value: func(m *log.Metrics) float64 { return count(m.Rolls) }},
	{name: "tierlog_log_segments_deleted_total", kind: counter, help: "Local segments deleted by retention or truncation since the log was opened.",
		value: func(m *log.Metrics) float64 { return count(m.SegmentsDeleted) }},
	{name: "tierlog_log_truncations_total", kind: counter, help: "Truncations that changed the log.",
		value: func(m *log.Metrics) float64 { return count(m.Truncations) }},
	{name: "tierlog_log_recovery_cuts_total", kind: counter, help: "Segment tails cut by recovery since the log was opened.",
		value: func(m *log.Metrics) float64 { return count(m.RecoveryCuts) }},
	{name: "tierlog_log_recovery_skipped_bytes_total", kind: counter, help: "Bytes of the active segment that crash recovery trusted without reading them, below a segment recovery point.",
		value: func(m *log.Metrics) float64 { return count(m.RecoverySkippedBytes) }},
	{name: "tierlog_log_corruptions_found_total", kind: counter, help: "Corrupt data found by recovery or by the checks at open.",
		value: func(m *log.Metrics) float64 { return count(m.CorruptionsFound) }},
	{name: "tierlog_log_segments_moved_aside_total", kind: counter, help: "Segments whose files recovery renamed to <name>.damaged.",
		value: func(m *log.Metrics) float64 { return count(m.SegmentsMovedAside) }},
	{name: "tierlog_log_damaged_reads_total", kind: counter, help: "Reads that found damaged data and failed with a corruption error.",
		value: func(m *log.Metrics) float64 { return count(m.DamagedReads) }},
	{name: "tierlog_log_reads_cut_at_damage_total", kind: counter, help: "Reads that found damaged data after their first batch and returned the batches before it.",
		value: func(m *log.Metrics) float64 { return count(m.ReadsCutAtDamage) }},
	{name: "tierlog_log_orphan_indexes_removed_total", kind: counter, help: "Index files without a .log removed where a segment was created.",
		value: func(m *log.Metrics) float64 { return count(m.OrphanIndexesRemoved) }},
	{name: "tierlog_log_fsyncs_total", kind: counter, help: "Fsyncs of the log's files. Kafka: kafka.log:type=LogFlushStats,name=LogFlushRateAndTimeMs (count).",
		value: func(m *log.Metrics) float64 { return count(m.Fsyncs) }},
	{name: "tierlog_log_fsync_time_seconds_total", kind: counter, help: "Time spent in fsyncs. Kafka: kafka.log:type=LogFlushStats,name=LogFlushRateAndTimeMs (sum).",
		value: func(m *log.Metrics) float64 { return seconds(m.FsyncLatencySum) }},
	{name: "tierlog_log_fsync_time_max_seconds", kind: gauge, help: "Longest fsync since the log was opened. Kafka: kafka.log:type=LogFlushStats,name=LogFlushRateAndTimeMs (max).",
		value: func(m *log.Metrics) float64 { return seconds(m.FsyncLatencyMax) }},
})

// remoteTable exports the broker-wide counters of remote.ManagerMetrics
// (Kafka: kafka.server:type=BrokerTopicMetrics without a topic tag, and
// kafka.log.remote:type=RemoteLogManager). Partitions goes to
// remotePartitionTable.
var remoteTable = newTable(nil, []row[remote.ManagerMetrics]{
	{name: "tierlog_remote_copy_segments_total", kind: counter, help: "Segments uploaded to remote storage. Kafka: RemoteCopyRequestsPerSec (which also counts failed attempts).",
		value: func(m *remote.ManagerMetrics) float64 { return count(m.SegmentsCopied) }},
	{name: "tierlog_remote_copy_bytes_total", kind: counter, help: "Segment bytes uploaded to remote storage. Kafka: RemoteCopyBytesPerSec.",
		value: func(m *remote.ManagerMetrics) float64 { return count(m.BytesCopied) }},
	{name: "tierlog_remote_copy_errors_total", kind: counter, help: "Failed segment uploads. Kafka: RemoteCopyErrorsPerSec.",
		value: func(m *remote.ManagerMetrics) float64 { return count(m.CopyErrors) }},
	{name: "tierlog_remote_copy_corruptions_total", kind: counter, help: "Uploads refused because a local batch failed its checks (also in copy errors).",
		value: func(m *remote.ManagerMetrics) float64 { return count(m.CopyCorruptions) }},
	{name: "tierlog_remote_copy_time_seconds_total", kind: counter, help: "Time spent in successful uploads.",
		value: func(m *remote.ManagerMetrics) float64 { return seconds(m.CopyLatencySum) }},
	{name: "tierlog_remote_delete_segments_total", kind: counter, help: "Remote segments deleted. Kafka: RemoteDeleteRequestsPerSec (KIP-963).",
		value: func(m *remote.ManagerMetrics) float64 { return count(m.SegmentsDeleted) }},
	{name: "tierlog_remote_delete_bytes_total", kind: counter, help: "Bytes of remote segments deleted.",
		value: func(m *remote.ManagerMetrics) float64 { return count(m.BytesDeleted) }},
	{name: "tierlog_remote_delete_errors_total", kind: counter, help: "Failed remote segment deletions. Kafka: RemoteDeleteErrorsPerSec (KIP-963).",
		value: func(m *remote.ManagerMetrics) float64 { return count(m.DeleteErrors) }},
	{name: "tierlog_remote_read_requests_total", kind: counter, help: "Reads served from remote storage. Kafka: RemoteFetchRequestsPerSec.",
		value: func(m *remote.ManagerMetrics) float64 { return count(m.RemoteReads) }},
	{name: "tierlog_remote_read_bytes_total", kind: counter, help: "Record bytes read from remote storage. Kafka: RemoteFetchBytesPerSec.",
		value: func(m *remote.ManagerMetrics) float64 { return count(m.RemoteReadBytes) }},
	{name: "tierlog_remote_read_errors_total", kind: counter, help: "Failed remote reads. Kafka: RemoteFetchErrorsPerSec.",
		value: func(m *remote.ManagerMetrics) float64 { return count(m.RemoteReadErrors) }},
	{name: "tierlog_remote_read_corruptions_total", kind: counter, help: "Remote reads that found corrupt data (also in read errors).",
		value: func(m *remote.ManagerMetrics) float64 { return count(m.RemoteReadCorruptions) }},
	{name: "tierlog_remote_read_time_seconds_total", kind: counter, help: "Time spent in remote reads.",
		value: func(m *remote.ManagerMetrics) float64 { return seconds(m.RemoteReadLatency) }},
	{name: "tierlog_remote_reads_in_flight", kind: gauge, help: "Remote reads running now.",
		value: func(m *remote.ManagerMetrics) float64 { return count(m.RemoteReadsInFlight) }},
	{name: "tierlog_remote_task_errors_total", kind: counter, help: "Failed runs of the copy, expiration and follower tasks.",
		value: func(m *remote.ManagerMetrics) float64 { return count(m.TaskErrors) }},
})

// remotePartitionTable exports remote.PartitionMetrics per partition of
// the manager (Kafka: the KIP-963 lag gauges, tagged by topic and
// partition).
var remotePartitionTable = newTable(partitionLabels, []row[remote.PartitionMetrics]{
	{name: "tierlog_remote_partition_leader", kind: gauge, help: "1 when the manager runs the partition's leader tasks, 0 for a follower.",
		value: func(m *remote.PartitionMetrics) float64 { return boolean(m.Leader) }},
	{name: "tierlog_remote_copy_lag_segments", kind: gauge, help: "Segments eligible for upload but not uploaded, as of the last copy run. Kafka: RemoteCopyLagSegments (KIP-963).",
		value: func(m *remote.PartitionMetrics) float64 { return count(m.CopyLagSegments) }},
	{name: "tierlog_remote_copy_lag_bytes", kind: gauge, help: "Bytes eligible for upload but not uploaded, as of the last copy run. Kafka: RemoteCopyLagBytes (KIP-963).",
		value: func(m *remote.PartitionMetrics) float64 { return count(m.CopyLagBytes) }},
	{name: "tierlog_remote_copy_lag_oldest_timestamp_seconds", kind: gauge, help: "Largest record timestamp of the oldest segment waiting for upload; -1 when none waits.",
		value: func(m *remote.PartitionMetrics) float64 { return unixSeconds(m.CopyLagOldestMs) }},
	{name: "tierlog_remote_copy_lag_age_seconds", kind: gauge, help: "How long ago the oldest segment waiting for upload was written; 0 when none waits.",
		value: func(m *remote.PartitionMetrics) float64 { return seconds(m.CopyLagAge) }},
	{name: "tierlog_remote_highest_offset", kind: gauge, help: "Highest offset in remote storage; -1 when none. Kafka: UnifiedLog.highestOffsetInRemoteStorage.",
		value: func(m *remote.PartitionMetrics) float64 { return count(m.HighestOffsetInRemoteStorage) }},
	{name: "tierlog_remote_copy_stalled_offset", kind: gauge, help: "Base offset of the corrupt local segment the copy task stopped at; -1 when it did not stop.",
		value: func(m *remote.PartitionMetrics) float64 { return count(m.CopyStalledAt) }},
})

// rebuildLabels name the Machine: a broker runs one per fetcher.
var rebuildLabels = []string{"fetcher"}

// rebuildErrorsHelp is shared by the rows of the one family split by
// action (a registry requires one help text per family).
const rebuildErrorsHelp = "Failed rebuilds, by what the fetcher does next. Kafka: BuildRemoteLogAuxStateErrorsPerSec (KIP-963)."

func byAction(a tierstate.FetcherAction) prometheus.Labels {
	return prometheus.Labels{"action": a.String()}
}

// rebuildTable exports tierstate.MachineMetrics (Kafka: the fetcher's
// tier state machine, ReplicaFetcherTierStateMachine).
var rebuildTable = newTable(rebuildLabels, []row[tierstate.MachineMetrics]{
	{name: "tierlog_rebuild_requests_total", kind: counter, help: "Rebuilds of a local log from remote storage started. Kafka: BuildRemoteLogAuxStateRequestsPerSec (KIP-963).",
		value: func(m *tierstate.MachineMetrics) float64 { return count(m.RebuildsStarted) }},
	{name: "tierlog_rebuild_completed_total", kind: counter, help: "Rebuilds that restored the local log.",
		value: func(m *tierstate.MachineMetrics) float64 { return count(m.RebuildsCompleted) }},
	{name: "tierlog_rebuild_errors_total", kind: counter, help: rebuildErrorsHelp, constLabels: byAction(tierstate.ActionRetry),
		value: func(m *tierstate.MachineMetrics) float64 { return count(m.RebuildRetries) }},
	{name: "tierlog_rebuild_errors_total", kind: counter, help: rebuildErrorsHelp, constLabels: byAction(tierstate.ActionMarkFailed),
		value: func(m *tierstate.MachineMetrics) float64 { return count(m.RebuildsMarkedFailed) }},
	{name: "tierlog_rebuild_errors_total", kind: counter, help: rebuildErrorsHelp, constLabels: byAction(tierstate.ActionStop),
		value: func(m *tierstate.MachineMetrics) float64 { return count(m.RebuildsStopped) }},
	{name: "tierlog_rebuild_errors_total", kind: counter, help: rebuildErrorsHelp, constLabels: byAction(tierstate.ActionOffline),
		value: func(m *tierstate.MachineMetrics) float64 { return count(m.RebuildsOffline) }},
	{name: "tierlog_rebuild_producer_snapshots_restored_total", kind: counter, help: "Completed rebuilds that restored the remote segment's producer snapshot.",
		value: func(m *tierstate.MachineMetrics) float64 { return count(m.ProducerSnapshotsRestored) }},
})
