package promexport_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/promexport"
	"github.com/tierlog/tierlog/wal"
	"github.com/tierlog/tierlog/wal/pgcp"
)

func newTestEnv(t *testing.T) *env {
	t.Helper()
	e, err := newEnv()
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, e.close()) })
	return e
}

func registered(t *testing.T, e *env) (*promexport.Collector, *prometheus.Registry) {
	t.Helper()
	c := promexport.NewCollector()
	require.NoError(t, c.AddLog(testTP.Topic, testTP.Partition, e.log))
	c.SetRemote(e.mgr)
	require.NoError(t, c.AddMachine("fetcher-0", e.mach))
	require.NoError(t, c.AddWALWriter("wal", e.wal.writer))
	require.NoError(t, c.AddWALReader("wal", e.wal.reader))
	require.NoError(t, c.AddWALCache("wal", e.wal.cache))
	require.NoError(t, c.AddWALCleaner("wal", e.wal.cleaner))
	require.NoError(t, c.AddWALControlPlane("pg", fixedPG{}))
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	return c, reg
}

// fixedPG stands for a *pgcp.ControlPlane (whose tests need a server):
// the table reads only the snapshot.
type fixedPG struct{}

func (fixedPG) Metrics() pgcp.Metrics {
	return pgcp.Metrics{Commits: 7, CommitErrors: 1, CommitLatencySum: 1500 * time.Millisecond, Retries: 2, OutcomeUnknown: 1}
}

// TestScrape: a registry scrape shows each source's snapshot with exact
// values and the topic and partition labels.
func TestScrape(t *testing.T) {
	e := newTestEnv(t)
	require.NoError(t, e.produce(2, 3))
	require.NoError(t, e.copyAndRebuild())
	_, reg := registered(t, e)

	const want = `
# HELP tierlog_log_appended_batches_total Record batches appended since the log was opened.
# TYPE tierlog_log_appended_batches_total counter
tierlog_log_appended_batches_total{partition="3",topic="orders"} 6
# HELP tierlog_log_high_watermark First offset not known to be fully replicated. Kafka: UnifiedLog.highWatermark.
# TYPE tierlog_log_high_watermark gauge
tierlog_log_high_watermark{partition="3",topic="orders"} 6
# HELP tierlog_log_log_end_offset Offset the next appended record receives. Kafka: kafka.log:type=Log,name=LogEndOffset.
# TYPE tierlog_log_log_end_offset gauge
tierlog_log_log_end_offset{partition="3",topic="orders"} 6
# HELP tierlog_log_rolls_total Segment rolls since the log was opened.
# TYPE tierlog_log_rolls_total counter
tierlog_log_rolls_total{partition="3",topic="orders"} 2
# HELP tierlog_log_segments Local segments of the log. Kafka: kafka.log:type=Log,name=NumLogSegments.
# TYPE tierlog_log_segments gauge
tierlog_log_segments{partition="3",topic="orders"} 3
# HELP tierlog_rebuild_errors_total Failed rebuilds, by what the fetcher does next. Kafka: BuildRemoteLogAuxStateErrorsPerSec (KIP-963).
# TYPE tierlog_rebuild_errors_total counter
tierlog_rebuild_errors_total{action="mark-failed",fetcher="fetcher-0"} 0
tierlog_rebuild_errors_total{action="offline",fetcher="fetcher-0"} 0
tierlog_rebuild_errors_total{action="retry",fetcher="fetcher-0"} 1
tierlog_rebuild_errors_total{action="stop",fetcher="fetcher-0"} 0
# HELP tierlog_rebuild_requests_total Rebuilds of a local log from remote storage started. Kafka: BuildRemoteLogAuxStateRequestsPerSec (KIP-963).
# TYPE tierlog_rebuild_requests_total counter
tierlog_rebuild_requests_total{fetcher="fetcher-0"} 1
# HELP tierlog_remote_copy_errors_total Failed segment uploads. Kafka: RemoteCopyErrorsPerSec.
# TYPE tierlog_remote_copy_errors_total counter
tierlog_remote_copy_errors_total 0
# HELP tierlog_remote_copy_lag_oldest_timestamp_seconds Largest record timestamp of the oldest segment waiting for upload; -1 when none waits.
# TYPE tierlog_remote_copy_lag_oldest_timestamp_seconds gauge
tierlog_remote_copy_lag_oldest_timestamp_seconds{partition="3",topic="orders"} -1
# HELP tierlog_remote_copy_lag_segments Segments eligible for upload but not uploaded, as of the last copy run. Kafka: RemoteCopyLagSegments (KIP-963).
# TYPE tierlog_remote_copy_lag_segments gauge
tierlog_remote_copy_lag_segments{partition="3",topic="orders"} 0
# HELP tierlog_remote_copy_segments_total Segments uploaded to remote storage. Kafka: RemoteCopyRequestsPerSec (which also counts failed attempts).
# TYPE tierlog_remote_copy_segments_total counter
tierlog_remote_copy_segments_total 2
# HELP tierlog_remote_copy_stalled_offset Base offset of the corrupt local segment the copy task stopped at; -1 when it did not stop.
# TYPE tierlog_remote_copy_stalled_offset gauge
tierlog_remote_copy_stalled_offset{partition="3",topic="orders"} -1
# HELP tierlog_remote_highest_offset Highest offset in remote storage; -1 when none. Kafka: UnifiedLog.highestOffsetInRemoteStorage.
# TYPE tierlog_remote_highest_offset gauge
tierlog_remote_highest_offset{partition="3",topic="orders"} 5
# HELP tierlog_remote_partition_leader 1 when the manager runs the partition's leader tasks, 0 for a follower.
# TYPE tierlog_remote_partition_leader gauge
tierlog_remote_partition_leader{partition="3",topic="orders"} 1
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want),
		"tierlog_log_appended_batches_total", "tierlog_log_high_watermark", "tierlog_log_log_end_offset",
		"tierlog_log_rolls_total", "tierlog_log_segments",
		"tierlog_rebuild_errors_total", "tierlog_rebuild_requests_total",
		"tierlog_remote_copy_errors_total", "tierlog_remote_copy_lag_oldest_timestamp_seconds",
		"tierlog_remote_copy_lag_segments", "tierlog_remote_copy_segments_total",
		"tierlog_remote_copy_stalled_offset", "tierlog_remote_highest_offset", "tierlog_remote_partition_leader"))

	// Sizes depend on the batch encoding: they must equal the snapshots'.
	lm, rm := e.log.Metrics(), e.mgr.Metrics()
	require.Positive(t, rm.BytesCopied)
	require.Equal(t, map[string]float64{
		`tierlog_log_size_bytes{partition="3",topic="orders"}`:           float64(lm.Bytes),
		`tierlog_log_appended_bytes_total{partition="3",topic="orders"}`: float64(lm.AppendedBytes),
		`tierlog_remote_copy_bytes_total`:                                float64(rm.BytesCopied),
	}, values(t, reg, "tierlog_log_size_bytes", "tierlog_log_appended_bytes_total", "tierlog_remote_copy_bytes_total"))
}

// values gathers the named families as "name{labels}" -> value.
func values(t *testing.T, g prometheus.Gatherer, names ...string) map[string]float64 {
	t.Helper()
	fams, err := g.Gather()
	require.NoError(t, err)
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	out := map[string]float64{}
	for _, f := range fams {
		if !want[f.GetName()] {
			continue
		}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			key := f.GetName()
			if len(labels) > 0 {
				key += "{" + strings.Join(labels, ",") + "}"
			}
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			out[key] = v
		}
	}
	return out
}

// TestMetricNamesLint: every family passes promlint (units, _total on
// counters, snake case).
func TestMetricNamesLint(t *testing.T) {
	e := newTestEnv(t)
	require.NoError(t, e.produce(1, 1))
	require.NoError(t, e.copyAndRebuild())
	require.NoError(t, e.wal.produce(1))
	_, reg := registered(t, e)
	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	require.Empty(t, problems)
	// Every family of Describe shows up once every kind of source is
	// registered.
	fams, err := reg.Gather()
	require.NoError(t, err)
	require.Len(t, fams, len(descNames(t)))
}

func descNames(t *testing.T) map[string]bool {
	t.Helper()
	ch := make(chan *prometheus.Desc)
	go func() {
		promexport.NewCollector().Describe(ch)
		close(ch)
	}()
	names := map[string]bool{}
	for d := range ch {
		s := d.String() // Desc{fqName: "name", ...}
		_, rest, _ := strings.Cut(s, `fqName: "`)
		name, _, _ := strings.Cut(rest, `"`)
		names[name] = true
	}
	require.NotEmpty(t, names)
	return names
}

// TestRegistration: duplicates and nil sources (typed nils included) are
// refused; a removed source is no longer scraped.
func TestRegistration(t *testing.T) {
	e := newTestEnv(t)
	c, reg := registered(t, e)
	require.ErrorIs(t, c.AddLog(testTP.Topic, testTP.Partition, e.log), promexport.ErrDuplicate)
	require.ErrorIs(t, c.AddMachine("fetcher-0", e.mach), promexport.ErrDuplicate)
	var nilLog *log.UnifiedLog
	require.ErrorIs(t, c.AddLog("other", 0, nilLog), promexport.ErrInvalidArgument)
	require.ErrorIs(t, c.AddLog("", 0, e.log), promexport.ErrInvalidArgument)
	require.ErrorIs(t, c.AddMachine("", e.mach), promexport.ErrInvalidArgument)
	require.ErrorIs(t, c.AddMachine("fetcher-1", nil), promexport.ErrInvalidArgument)
	require.Equal(t, 1, testutil.CollectAndCount(c, "tierlog_log_log_end_offset"))

	require.ErrorIs(t, c.AddWALWriter("wal", e.wal.writer), promexport.ErrDuplicate)
	require.ErrorIs(t, c.AddWALReader("", e.wal.reader), promexport.ErrInvalidArgument)
	var nilCache *wal.ObjectCache
	require.ErrorIs(t, c.AddWALCache("other", nilCache), promexport.ErrInvalidArgument)
	require.ErrorIs(t, c.AddWALCleaner("other", nil), promexport.ErrInvalidArgument)
	require.ErrorIs(t, c.AddWALControlPlane("pg", fixedPG{}), promexport.ErrDuplicate)
	var nilPG *pgcp.ControlPlane
	require.ErrorIs(t, c.AddWALControlPlane("other", nilPG), promexport.ErrInvalidArgument)
	require.Equal(t, 1, testutil.CollectAndCount(c, "tierlog_wal_pgcp_retries_total"))

	c.RemoveLog(testTP.Topic, testTP.Partition)
	c.RemoveMachine("fetcher-0")
	c.SetRemote(nil)
	c.RemoveWALWriter("wal")
	c.RemoveWALReader("wal")
	c.RemoveWALCache("wal")
	c.RemoveWALCleaner("wal")
	c.RemoveWALControlPlane("pg")
	require.Zero(t, testutil.CollectAndCount(c))
	fams, err := reg.Gather()
	require.NoError(t, err)
	require.Empty(t, fams)
}

// TestConcurrentRegistration: sources come and go while scrapes run (the
// race detector checks the locking).
func TestConcurrentRegistration(t *testing.T) {
	e := newTestEnv(t)
	c, reg := registered(t, e)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := range 50 {
			topic := fmt.Sprintf("t%d", i)
			require.NoError(t, c.AddLog(topic, 0, e.log))
			c.SetRemote(e.mgr)
			c.RemoveLog(topic, 0)
		}
	}()
	go func() {
		defer wg.Done()
		for range 50 {
			_, err := reg.Gather()
			require.NoError(t, err)
		}
	}()
	wg.Wait()
}

// TestScrapeWAL: the WAL's writer, reader, cache and cleaner show their
// snapshots with exact values, the rejected batches by Kafka error code.
func TestScrapeWAL(t *testing.T) {
	e := newTestEnv(t)
	require.NoError(t, e.wal.produce(2))
	_, reg := registered(t, e)
	const want = `
# HELP tierlog_wal_cache_hits_total Object cache lookups that found the object. Inkless: the object cache's hit count.
# TYPE tierlog_wal_cache_hits_total counter
tierlog_wal_cache_hits_total{cache="wal"} 2
# HELP tierlog_wal_cache_objects WAL objects in the cache.
# TYPE tierlog_wal_cache_objects gauge
tierlog_wal_cache_objects{cache="wal"} 2
# HELP tierlog_wal_cleaner_deleted_objects_total WAL objects deleted after their batches were gone and the grace period passed. Inkless: the file cleaner's deletions.
# TYPE tierlog_wal_cleaner_deleted_objects_total counter
tierlog_wal_cleaner_deleted_objects_total{cleaner="wal"} 0
# HELP tierlog_wal_reader_cache_hits_total Reads of an object and partition a fetch served from the object cache instead of a GET.
# TYPE tierlog_wal_reader_cache_hits_total counter
tierlog_wal_reader_cache_hits_total{reader="wal"} 2
# HELP tierlog_wal_reader_fetches_total Fetches served from the WAL. Kafka: TotalFetchRequestsPerSec.
# TYPE tierlog_wal_reader_fetches_total counter
tierlog_wal_reader_fetches_total{reader="wal"} 1
# HELP tierlog_wal_reader_get_requests_total Ranged GETs of WAL objects (one per object and partition a fetch needs, and one more for an object found shorter than its committed bytes).
# TYPE tierlog_wal_reader_get_requests_total counter
tierlog_wal_reader_get_requests_total{reader="wal"} 0
# HELP tierlog_wal_writer_commit_objects_total WAL objects committed to the control plane. Inkless: the writer's commit count.
# TYPE tierlog_wal_writer_commit_objects_total counter
tierlog_wal_writer_commit_objects_total{writer="wal"} 3
# HELP tierlog_wal_writer_rejected_batches_total ` + rejectedHelp + `
# TYPE tierlog_wal_writer_rejected_batches_total counter
tierlog_wal_writer_rejected_batches_total{error="CORRUPT_MESSAGE",writer="wal"} 1
tierlog_wal_writer_rejected_batches_total{error="DUPLICATE_SEQUENCE_NUMBER",writer="wal"} 0
tierlog_wal_writer_rejected_batches_total{error="INVALID_PRODUCER_EPOCH",writer="wal"} 0
tierlog_wal_writer_rejected_batches_total{error="INVALID_RECORD",writer="wal"} 0
tierlog_wal_writer_rejected_batches_total{error="INVALID_REQUEST",writer="wal"} 0
tierlog_wal_writer_rejected_batches_total{error="MESSAGE_TOO_LARGE",writer="wal"} 0
tierlog_wal_writer_rejected_batches_total{error="OUT_OF_ORDER_SEQUENCE_NUMBER",writer="wal"} 0
tierlog_wal_writer_rejected_batches_total{error="UNKNOWN_TOPIC_OR_PARTITION",writer="wal"} 1
# HELP tierlog_wal_writer_upload_objects_total WAL objects stored. Inkless: the writer's file upload count.
# TYPE tierlog_wal_writer_upload_objects_total counter
tierlog_wal_writer_upload_objects_total{writer="wal"} 3
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want),
		"tierlog_wal_cache_hits_total", "tierlog_wal_cache_objects", "tierlog_wal_cleaner_deleted_objects_total",
		"tierlog_wal_reader_cache_hits_total", "tierlog_wal_reader_fetches_total", "tierlog_wal_reader_get_requests_total",
		"tierlog_wal_writer_commit_objects_total", "tierlog_wal_writer_rejected_batches_total",
		"tierlog_wal_writer_upload_objects_total"))
	wm, cm := e.wal.writer.Metrics(), e.wal.cache.Metrics()
	require.Equal(t, map[string]float64{
		`tierlog_wal_writer_upload_bytes_total{writer="wal"}`: float64(wm.BytesUploaded),
		`tierlog_wal_cache_size_bytes{cache="wal"}`:           float64(cm.Bytes),
	}, values(t, reg, "tierlog_wal_writer_upload_bytes_total", "tierlog_wal_cache_size_bytes"))
}

const rejectedHelp = "Produce batches refused, by the Kafka error code of the answer: the writer's validation " +
	"(one per refused request) and the control plane's (one per batch). Kafka: FailedProduceRequestsPerSec, by error."
