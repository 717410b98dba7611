// Package promexport exports tierlog's metrics snapshots to Prometheus.
//
// The core packages keep plain snapshots (log.Metrics,
// remote.ManagerMetrics, tierstate.MachineMetrics) and no dependency on a
// metrics library. A Collector holds the sources a broker registers (the
// log of each partition, the remote log manager, the rebuild machine of
// each fetcher) and, at every scrape, reads each snapshot once and emits
// its fields as constant metrics: counters as counters, gauges as gauges,
// durations in seconds, timestamps in seconds since the epoch.
//
//	c := promexport.NewCollector()
//	err := c.AddLog("orders", 0, l)        // l is a *log.UnifiedLog
//	c.SetRemote(mgr)                       // mgr is the *remote.Manager
//	err = c.AddMachine("fetcher-0", m)     // m is a fetcher's *tierstate.Machine
//	prometheus.MustRegister(c)
//
// # Names
//
// Names follow Kafka's JMX metrics mapped to Prometheus style:
// tierlog_<area>_<Kafka name in snake case>, counters ending in _total,
// units in the name. Per-partition metrics carry the labels topic and
// partition, as Kafka tags its per-partition MBeans; the rebuild metrics
// carry fetcher. Each metric's help text names the Kafka metric it
// mirrors, where Kafka has one:
//
//	tierlog_log_log_end_offset            kafka.log:type=Log,name=LogEndOffset
//	tierlog_log_log_start_offset          kafka.log:type=Log,name=LogStartOffset
//	tierlog_log_segments                  kafka.log:type=Log,name=NumLogSegments
//	tierlog_log_size_bytes                kafka.log:type=Log,name=Size
//	tierlog_log_fsync_time_seconds_total  kafka.log:type=LogFlushStats,name=LogFlushRateAndTimeMs
//	tierlog_remote_copy_bytes_total       BrokerTopicMetrics RemoteCopyBytesPerSec (KIP-405)
//	tierlog_remote_copy_errors_total      RemoteCopyErrorsPerSec
//	tierlog_remote_read_requests_total    RemoteFetchRequestsPerSec
//	tierlog_remote_read_bytes_total       RemoteFetchBytesPerSec
//	tierlog_remote_copy_lag_bytes         RemoteCopyLagBytes (KIP-963)
//	tierlog_remote_copy_lag_segments      RemoteCopyLagSegments (KIP-963)
//	tierlog_remote_delete_segments_total  RemoteDeleteRequestsPerSec (KIP-963)
//	tierlog_rebuild_requests_total        BuildRemoteLogAuxStateRequestsPerSec (KIP-963)
//	tierlog_rebuild_errors_total{action}  BuildRemoteLogAuxStateErrorsPerSec (KIP-963)
//
// Kafka's "PerSec" meters become counters: rate() gives the per-second
// value. A latency sum is a counter of seconds beside the matching count,
// so rate(time)/rate(count) is the mean. Kafka aggregates the remote
// counters per topic; the remote manager counts per broker, so they carry
// no label.
//
// The tables in tables.go hold one row per snapshot field; a test fails
// when a snapshot gains a field without a row.
//
// # Concurrency
//
// A Collector is safe for concurrent use; sources may be added and
// removed during a scrape. Snapshots are read without the Collector's
// mutex held.
//
// This package exports; it keeps no history, computes no rates and
// starts no HTTP server (promhttp does that).
package promexport
