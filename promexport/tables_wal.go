package promexport

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/tierlog/tierlog/wal"
	"github.com/tierlog/tierlog/wal/pgcp"
)

// The diskless WAL's tables: a broker runs one Writer (Inkless: one
// Writer per broker, fed by every produce request), one Reader with its
// ObjectCache, and one Cleaner; each is registered under a name, its
// label. The control plane keeps no snapshot of its own: its calls are
// counted by the writer (commits), the reader (fetches) and the cleaner.

// walRejection maps a wal rejection sentinel (WriterMetrics.Rejected is
// keyed by its Error()) to the Kafka error code a produce response
// carries for it, the value of the error label.
type walRejection struct {
	err  error
	code string
}

var walRejections = []walRejection{
	{wal.ErrCorruption, "CORRUPT_MESSAGE"},
	{wal.ErrInvalidRecord, "INVALID_RECORD"},
	{wal.ErrRecordTooLarge, "MESSAGE_TOO_LARGE"},
	{wal.ErrTransactionalBatch, "INVALID_REQUEST"},
	{wal.ErrUnknownTopicOrPartition, "UNKNOWN_TOPIC_OR_PARTITION"},
	{wal.ErrDuplicateSequence, "DUPLICATE_SEQUENCE_NUMBER"},
	{wal.ErrOutOfOrderSequence, "OUT_OF_ORDER_SEQUENCE_NUMBER"},
	{wal.ErrInvalidProducerEpoch, "INVALID_PRODUCER_EPOCH"},
}

const walRejectedHelp = "Produce batches refused, by the Kafka error code of the answer: the writer's validation " +
	"(one per refused request) and the control plane's (one per batch). Kafka: FailedProduceRequestsPerSec, by error."

// walWriterTable exports wal.WriterMetrics.
var walWriterTable = newTable([]string{"writer"}, append([]row[wal.WriterMetrics]{
	{name: "tierlog_wal_writer_objects_in_flight", kind: gauge, help: "WAL objects sealed and not yet answered (uploading, or waiting for their commit).",
		value: func(m *wal.WriterMetrics) float64 { return count(m.ObjectsInFlight) }},
	{name: "tierlog_wal_writer_bytes_in_flight", kind: gauge, help: "Produce request bytes admitted and not yet answered; bounded by MaxBytesInFlight. Inkless: the produce buffer.",
		value: func(m *wal.WriterMetrics) float64 { return count(m.BytesInFlight) }},
	{name: "tierlog_wal_writer_back_pressure_waits_total", kind: counter, help: "Produce calls that waited for room under MaxBytesInFlight.",
		value: func(m *wal.WriterMetrics) float64 { return count(m.BackPressureWaits) }},
	{name: "tierlog_wal_writer_upload_objects_total", kind: counter, help: "WAL objects stored. Inkless: the writer's file upload count.",
		value: func(m *wal.WriterMetrics) float64 { return count(m.ObjectsUploaded) }},
	{name: "tierlog_wal_writer_upload_bytes_total", kind: counter, help: "Bytes of WAL objects stored (batches and footers). Kafka: BytesInPerSec, broker-wide.",
		value: func(m *wal.WriterMetrics) float64 { return count(m.BytesUploaded) }},
	{name: "tierlog_wal_writer_commit_objects_total", kind: counter, help: "WAL objects committed to the control plane. Inkless: the writer's commit count.",
		value: func(m *wal.WriterMetrics) float64 { return count(m.ObjectsCommitted) }},
	{name: "tierlog_wal_writer_commit_errors_total", kind: counter, help: "Commits that failed after their retries (every request of the object fails, retriably).",
		value: func(m *wal.WriterMetrics) float64 { return count(m.CommitErrors) }},
	{name: "tierlog_wal_writer_commit_time_seconds_total", kind: counter, help: "Time each object spent in its CommitFiles call with its retries, successful or not (a call of k objects counts k times); divide by the commit count for the mean.",
		value: func(m *wal.WriterMetrics) float64 { return seconds(m.CommitLatencySum) }},
	{name: "tierlog_wal_writer_commit_calls_total", kind: counter, help: "CommitFiles calls, retries included: each commits the oldest uploaded object and the later ones uploaded by then; objects committed over calls is the mean group.",
		value: func(m *wal.WriterMetrics) float64 { return count(m.CommitCalls) }},
	{name: "tierlog_wal_writer_uncommitted_objects_deleted_total", kind: counter, help: "Stored objects deleted because they were never registered: after a failed commit the control plane proved unregistered, or after an upload answered at its deadline that stored its object later.",
		value: func(m *wal.WriterMetrics) float64 { return count(m.ObjectsDeletedUncommitted) }},
	{name: "tierlog_wal_writer_unknown_objects_kept_total", kind: counter, help: "Objects kept after a failed commit because the control plane did not prove them unregistered: the proof failed, or the commit landed after all (left to the cleaner).",
		value: func(m *wal.WriterMetrics) float64 { return count(m.ObjectsKeptUnknown) }},
	{name: "tierlog_wal_writer_objects_timed_out_total", kind: counter, help: "Objects answered at their deadline (ObjectTimeout) while their upload or commit was still running; their requests fail retriably.",
		value: func(m *wal.WriterMetrics) float64 { return count(m.ObjectsTimedOut) }},
	{name: "tierlog_wal_writer_upload_retries_total", kind: counter, help: "Object puts retried after a backoff on a retriable store error.",
		value: func(m *wal.WriterMetrics) float64 { return count(m.UploadRetries) }},
}, rejectedRows()...))

func rejectedRows() []row[wal.WriterMetrics] {
	rows := make([]row[wal.WriterMetrics], len(walRejections))
	for i, r := range walRejections {
		key := r.err.Error()
		rows[i] = row[wal.WriterMetrics]{name: "tierlog_wal_writer_rejected_batches_total", kind: counter, help: walRejectedHelp,
			constLabels: prometheus.Labels{"error": r.code},
			value:       func(m *wal.WriterMetrics) float64 { return count(m.Rejected[key]) }}
	}
	return rows
}

// walReaderTable exports wal.ReaderMetrics.
var walReaderTable = newTable([]string{"reader"}, []row[wal.ReaderMetrics]{
	{name: "tierlog_wal_reader_fetches_total", kind: counter, help: "Fetches served from the WAL. Kafka: TotalFetchRequestsPerSec.",
		value: func(m *wal.ReaderMetrics) float64 { return count(m.Fetches) }},
	{name: "tierlog_wal_reader_get_requests_total", kind: counter, help: "Ranged GETs of WAL objects (one per object and partition a fetch needs, and one more for an object found shorter than its committed bytes).",
		value: func(m *wal.ReaderMetrics) float64 { return count(m.Gets) }},
	{name: "tierlog_wal_reader_get_bytes_total", kind: counter, help: "Bytes received by those GETs.",
		value: func(m *wal.ReaderMetrics) float64 { return count(m.GetBytes) }},
	{name: "tierlog_wal_reader_get_errors_total", kind: counter, help: "GETs of WAL objects that failed.",
		value: func(m *wal.ReaderMetrics) float64 { return count(m.GetErrors) }},
	{name: "tierlog_wal_reader_cache_hits_total", kind: counter, help: "Reads of an object and partition a fetch served from the object cache instead of a GET.",
		value: func(m *wal.ReaderMetrics) float64 { return count(m.CacheHits) }},
	{name: "tierlog_wal_reader_failed_partitions_total", kind: counter, help: "Fetched partitions answered with an error because their first batch failed its checks or its GET.",
		value: func(m *wal.ReaderMetrics) float64 { return count(m.FailedPartitions) }},
	{name: "tierlog_wal_reader_truncated_partitions_total", kind: counter, help: "Fetched partitions served only the good prefix because a later batch failed.",
		value: func(m *wal.ReaderMetrics) float64 { return count(m.TruncatedPartitions) }},
	{name: "tierlog_wal_reader_corrupt_batches_total", kind: counter, help: "Batches refused as corruption: bytes that fail their checks, are not the batch committed at their coordinates, or lie past the object's end.",
		value: func(m *wal.ReaderMetrics) float64 { return count(m.CorruptBatches) }},
	{name: "tierlog_wal_reader_inconsistent_answers_total", kind: counter, help: "Batches refused because the control plane's answer contradicts itself: coordinates that are no range, offsets with a gap or an overlap.",
		value: func(m *wal.ReaderMetrics) float64 { return count(m.InconsistentAnswers) }},
})

// walCacheTable exports wal.CacheMetrics.
var walCacheTable = newTable([]string{"cache"}, []row[wal.CacheMetrics]{
	{name: "tierlog_wal_cache_hits_total", kind: counter, help: "Object cache lookups that found the object. Inkless: the object cache's hit count.",
		value: func(m *wal.CacheMetrics) float64 { return count(m.Hits) }},
	{name: "tierlog_wal_cache_misses_total", kind: counter, help: "Object cache lookups that did not. Inkless: the object cache's miss count.",
		value: func(m *wal.CacheMetrics) float64 { return count(m.Misses) }},
	{name: "tierlog_wal_cache_objects", kind: gauge, help: "WAL objects in the cache.",
		value: func(m *wal.CacheMetrics) float64 { return count(m.Objects) }},
	{name: "tierlog_wal_cache_size_bytes", kind: gauge, help: "Bytes of the WAL objects in the cache (bounded by its maximum).",
		value: func(m *wal.CacheMetrics) float64 { return count(m.Bytes) }},
})

// walCleanerTable exports wal.CleanerMetrics.
var walCleanerTable = newTable([]string{"cleaner"}, []row[wal.CleanerMetrics]{
	{name: "tierlog_wal_cleaner_deleted_objects_total", kind: counter, help: "WAL objects deleted after their batches were gone and the grace period passed. Inkless: the file cleaner's deletions.",
		value: func(m *wal.CleanerMetrics) float64 { return count(m.ObjectsDeleted) }},
	{name: "tierlog_wal_cleaner_orphans_reaped_total", kind: counter, help: "Objects reserved but never committed (a writer died mid-upload) deleted after the reservation timeout.",
		value: func(m *wal.CleanerMetrics) float64 { return count(m.OrphansReaped) }},
	{name: "tierlog_wal_cleaner_delete_errors_total", kind: counter, help: "Deletes of WAL objects that failed (retried by the next run).",
		value: func(m *wal.CleanerMetrics) float64 { return count(m.DeleteErrors) }},
	{name: "tierlog_wal_cleaner_files_awaiting_deletion", kind: gauge, help: "Due objects the last run could not delete.",
		value: func(m *wal.CleanerMetrics) float64 { return count(m.FilesAwaitingDeletion) }},
})

// walPGTable exports pgcp.Metrics: the PostgreSQL control plane's own
// view of its calls (the writer counts the same commits from its side).
var walPGTable = newTable([]string{"control_plane"}, []row[pgcp.Metrics]{
	{name: "tierlog_wal_pgcp_commits_total", kind: counter, help: "CommitFile calls answered by the PostgreSQL control plane (each batch accepted or refused).",
		value: func(m *pgcp.Metrics) float64 { return count(m.Commits) }},
	{name: "tierlog_wal_pgcp_commit_groups_total", kind: counter, help: "Groups of CommitFile calls written in one transaction (group commit); commits per group is the commit count over this.",
		value: func(m *pgcp.Metrics) float64 { return count(m.CommitGroups) }},
	{name: "tierlog_wal_pgcp_commit_errors_total", kind: counter, help: "CommitFile calls that failed after their retries.",
		value: func(m *pgcp.Metrics) float64 { return count(m.CommitErrors) }},
	{name: "tierlog_wal_pgcp_commit_time_seconds_total", kind: counter, help: "Time spent in CommitFile with its retries, answered or failed; divide by the commit count for the mean.",
		value: func(m *pgcp.Metrics) float64 { return seconds(m.CommitLatencySum) }},
	{name: "tierlog_wal_pgcp_retries_total", kind: counter, help: "Transactions run again after a serialization failure (40001), a deadlock (40P01) or a request that never left.",
		value: func(m *pgcp.Metrics) float64 { return count(m.Retries) }},
	{name: "tierlog_wal_pgcp_outcome_unknown_total", kind: counter, help: "Mutating calls that lost their connection after a statement left (ErrOutcomeUnknown); a commit's retry with the same object key resolves it.",
		value: func(m *pgcp.Metrics) float64 { return count(m.OutcomeUnknown) }},
	{name: "tierlog_wal_pgcp_commit_group_attempts_total", kind: counter, help: "Group transactions attempted (groups and their retries): the divisor of the commit stage times.",
		value: func(m *pgcp.Metrics) float64 { return count(m.CommitStages.Attempts) }},
	{name: "tierlog_wal_pgcp_commit_acquire_seconds_total", kind: counter, help: "Time group transactions waited for a pooled connection.",
		value: func(m *pgcp.Metrics) float64 { return seconds(m.CommitStages.Acquire) }},
	{name: "tierlog_wal_pgcp_commit_read_seconds_total", kind: counter, help: "Time in a group transaction's first pipeline (BEGIN, registration, the partition rows' lock, producer states): a wait for another broker's lock is here.",
		value: func(m *pgcp.Metrics) float64 { return seconds(m.CommitStages.Read) }},
	{name: "tierlog_wal_pgcp_commit_decide_seconds_total", kind: counter, help: "Time in a group transaction's decisions in Go and the answers of keys already registered.",
		value: func(m *pgcp.Metrics) float64 { return seconds(m.CommitStages.Decide) }},
	{name: "tierlog_wal_pgcp_commit_write_seconds_total", kind: counter, help: "Time in a group transaction's last pipeline (rows, answers, COMMIT): the WAL flush is most of it.",
		value: func(m *pgcp.Metrics) float64 { return seconds(m.CommitStages.Write) }},
})
