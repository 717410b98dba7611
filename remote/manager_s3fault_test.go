package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/internal/harness/s3test"
	"github.com/tierlog/tierlog/internal/harness/testseed"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/remote/objstore/s3"
)

// s3FaultMix is the per-request fault mix of the reads of
// TestManagerUnderS3Faults: about one request in five fails. The
// retryable faults (5xx, 429, resets, lost responses, a wrong
// Content-Range) are retried by the adapter, which gives up after two
// attempts; a cut or stalled body is never retried once a Get returned it,
// so the read that holds it fails. The task runs get twice these rates, so
// that uploads and deletes exhaust their attempts too.
//
// The mix is small because each retryable fault costs about 100 ms:
// minio-go, even with MaxRetries 1, sleeps its retry unit (a random 0 to
// 200 ms) after a failed attempt before it returns the error.
var s3FaultMix = []s3test.FaultRate{
	{Fault: s3test.Status503, Rate: 0.04},
	{Fault: s3test.Status500, Rate: 0.02},
	{Fault: s3test.Status429, Rate: 0.02},
	{Fault: s3test.Reset, Rate: 0.03},
	{Fault: s3test.LostResponse, Rate: 0.03},
	{Fault: s3test.TruncateBody, Rate: 0.04, Method: http.MethodGet},
	{Fault: s3test.WrongRange, Rate: 0.03, Method: http.MethodGet},
	// Each costs a whole read deadline: kept rare for the run time.
	{Fault: s3test.SlowBody, Rate: 0.015, Method: http.MethodGet},
}

func scaleFaultRates(rates []s3test.FaultRate, k float64) []s3test.FaultRate {
	out := append([]s3test.FaultRate(nil), rates...)
	for i := range out {
		out[i].Rate *= k
	}
	return out
}

// shortReadIsCorruption: Manager.Read reports a body the network cut
// short as ErrCorruption (batchStream.corrupt takes any error wrapping
// io.ErrUnexpectedEOF, objstore.ErrShortRead included, for a short
// object, and drops it). DESIGN.md section 3: corruption is never an I/O
// error. The proxy never changes a byte, so no read here may fail with
// ErrCorruption; set this to false once Read passes such errors through.
const shortReadIsCorruption = false

// expirationRetriesOnlyWhatRetentionReaches: a copy that fails and whose
// immediate cleanup fails too leaves a DELETE_SEGMENT_STARTED segment
// with objects. deleteSegment's comment promises that the next expiration
// run retries it, but PlanRetention schedules such retries only while its
// walk goes on, and the walk stops at the first valid segment retention
// does not breach: a pending deletion above it waits until retention
// reaches its offsets (forever with infinite retention). Set this to false
// once every expiration run retries every pending deletion.
const expirationRetriesOnlyWhatRetentionReaches = false

// Deadlines of one task run and of one remote read. A slow body holds a
// read until its deadline, so the read deadline is short.
const (
	s3FaultTaskTimeout = 3 * time.Second
	s3FaultReadTimeout = 300 * time.Millisecond
	// s3FaultSlack is how far past its deadline a call may return: the
	// dangling-copy delete after a failed upload runs without the run's
	// deadline (context.WithoutCancel), bounded by the adapter's attempts.
	s3FaultSlack = 2 * time.Second
)

// TestManagerUnderS3Faults runs the Manager (copy task, remote reads,
// expiration) over the real S3 adapter and versitygw, through a proxy that
// injects seeded faults into the HTTP traffic: 5xx and 429 throttling,
// connection resets, lost responses (applied, then reset), cut bodies,
// wrong Content-Range, and bodies that stall past the caller's deadline.
// Every task run and read returns an error or the right bytes, never wrong
// ones; each returns by its deadline (plus the adapter's bounded cleanup);
// the Manager's metrics count exactly the failures the calls returned.
// Once the faults stop the tier converges: every rolled segment copied,
// every offset below the local log start readable byte for byte, and after
// expiration the bucket is empty, including the objects of failed copies.
func TestManagerUnderS3Faults(t *testing.T) {
	seed := testseed.Seed(t, 5)
	srv := s3test.Start(t)
	ctx := context.Background()
	direct, store, proxy := openProxiedS3(t, srv)
	e := newMgrEnv(t, store)
	// No manifest cache: every read fetches the manifest through the faults.
	storage, err := NewStorageManager(store, StorageOptions{ChunkSize: 512, ManifestCacheEntries: -1})
	require.NoError(t, err)
	e.storage, e.hooks.SegmentStorage = storage, storage

	tp := testPartition(0)
	l := e.openLog("p0", log.Options{RetentionMs: 60_000, LocalRetentionMs: 1})
	appendSegments(t, l, 0, 3, 12) // six segments of 12 batches, about 2 chunks each
	appendSegments(t, l, 1, 3, 12)
	want := map[int64][]byte{} // offset -> its batch (one record per batch)
	for off := int64(0); off < l.LogEndOffset(); off++ {
		fd, err := l.Read(nil, off, 1, log.IsolationLogEnd, true)
		require.NoError(t, err)
		want[off] = bytes.Clone(fd.Records)
	}
	rolled, err := l.Segments(l.LogEndOffset())
	require.NoError(t, err)
	lastRolled := rolled[0].BaseOffset - 1
	var copyEnds, copyErrs atomic.Int64
	e.mgr.opts.Listener.CopyEnd = func(CopyInfo) { copyEnds.Add(1) }
	e.mgr.opts.Listener.CopyError = func(CopyInfo, error) { copyErrs.Add(1) }
	require.NoError(t, e.mgr.OnLeadershipChange([]Partition{{TopicIDPartition: tp, Log: l}}, nil))

	st := &s3FaultRun{t: t, proxy: proxy, seed: seed, start: time.Now()}
	runTask := func(what string, run func(context.Context, TopicIDPartition) error) error {
		return st.task(what, func(ctx context.Context) error { return run(ctx, tp) })
	}

	// 1. Copy under faults. A run stops at its first failed segment (whose
	// attempt the Manager deletes at once); the next run resumes there.
	st.faults(1, scaleFaultRates(s3FaultMix, 2))
	copyRuns := 0
	for ; copyRuns < 20 && l.HighestOffsetInRemoteStorage() < lastRolled; copyRuns++ {
		if runTask("copy", errOnly(e.mgr.RunCopy)) != nil {
			st.copyRunErrors++
		}
	}
	checkFinishedChain(t, e, tp, l)
	// Expiration before retention ends only retries the deletes of failed
	// copies whose own cleanup failed (DELETE_SEGMENT_STARTED).
	_ = runTask("expiration", errOnly(e.mgr.RunExpiration))
	st.phase("copy")

	// 2. Reads under faults, of what is copied: an error or the right bytes.
	e.nowMs.Add(10)
	_, err = l.DeleteOldSegments()
	require.NoError(t, err)
	localStart := l.LocalLogStartOffset()
	require.Positive(t, localStart, "no segment was copied in %d runs", copyRuns)
	st.faults(2, s3FaultMix)
	st.readsUnderFaults(e.mgr, tp, want, localStart, 32)
	met := e.mgr.Metrics()
	require.EqualValues(t, st.reads, met.RemoteReads)
	require.EqualValues(t, st.readErrors, met.RemoteReadErrors, "every failed read is counted")
	require.EqualValues(t, st.taskErrors, met.TaskErrors, "every failed run is counted")
	require.LessOrEqual(t, met.CopyErrors, int64(st.copyRunErrors), "a failed copy fails its run")
	require.Equal(t, copyErrs.Load(), met.CopyErrors, "every failed upload is counted")
	require.Equal(t, copyEnds.Load(), met.SegmentsCopied)
	require.Positive(t, st.readErrors, "faults at these rates fail some reads")
	require.Less(t, st.readErrors, st.reads, "and not all of them")
	require.Zero(t, met.RemoteReadsInFlight)
	st.phase("reads")

	// 3. The faults stop: the tier converges.
	st.faults(0, nil)
	require.NoError(t, runTask("copy", errOnly(e.mgr.RunCopy)))
	require.NoError(t, runTask("expiration", errOnly(e.mgr.RunExpiration)))
	require.EqualValues(t, lastRolled, l.HighestOffsetInRemoteStorage(), "every rolled segment is copied")
	checkFinishedChain(t, e, tp, l)
	e.nowMs.Add(10)
	_, err = l.DeleteOldSegments()
	require.NoError(t, err)
	localStart = l.LocalLogStartOffset()
	require.EqualValues(t, lastRolled+1, localStart)
	for off := l.LogStartOffset(); off < localStart; off++ {
		res, err := e.mgr.Read(ctx, tp, off, 1, log.IsolationLogEnd, true)
		require.NoError(t, err, "offset %d", off)
		require.Equal(t, want[off], res.Records, "offset %d", off)
	}
	res, err := e.mgr.Read(ctx, tp, l.LogStartOffset(), 1<<20, log.IsolationLogEnd, false)
	require.NoError(t, err)
	requireBatchesFrom(t, want, l.LogStartOffset(), res.Records)
	if pending := checkNoOrphans(t, e.meta, tp, storage, direct); pending > 0 {
		if !expirationRetriesOnlyWhatRetentionReaches {
			require.Zero(t, pending, "an expiration run without faults retries every pending deletion")
		}
		t.Logf("after an expiration run without faults, %d failed attempts still have objects (DELETE_SEGMENT_STARTED)", pending)
	}
	st.phase("converge")

	// 4. Expiration past retention, under faults and then without: no
	// object is left in the bucket.
	e.nowMs.Add(120_000)
	st.faults(4, scaleFaultRates(s3FaultMix, 2))
	for range 3 {
		_ = runTask("expiration", errOnly(e.mgr.RunExpiration))
	}
	st.faults(0, nil)
	require.NoError(t, runTask("expiration", errOnly(e.mgr.RunExpiration)))
	require.Empty(t, finished(t, e.meta, tp))
	all, err := e.meta.ListSegments(tp)
	require.NoError(t, err)
	require.Empty(t, all, "every segment, failed attempts included, is DELETE_SEGMENT_FINISHED")
	require.Empty(t, listKeys(t, direct), "no object survives expiration, not even from failed copies")
	_, err = e.mgr.Read(ctx, tp, 0, 1<<20, log.IsolationLogEnd, true)
	require.ErrorIs(t, err, ErrOffsetOutOfRange)
	st.phase("expire")

	met = e.mgr.Metrics()
	require.EqualValues(t, st.taskErrors, met.TaskErrors)
	require.Equal(t, met.SegmentsCopied, met.SegmentsDeleted-met.CopyErrors,
		"each copy is deleted once, and each failed attempt once")
	st.report(met, copyRuns)
}

// openProxiedS3 opens two S3 stores on a fresh bucket of srv: direct, to
// the server, and proxied, through a new fault proxy, with a short request
// timeout and two quick attempts per request.
func openProxiedS3(t *testing.T, srv *s3test.Server) (direct, proxied *s3.Store, proxy *s3test.FaultProxy) {
	o := srv.StoreOptions(t)
	direct = s3test.OpenStore(t, o) // creates the bucket
	proxy = s3test.NewFaultProxy(t, srv)
	o.Endpoint, o.RootCAs, o.CreateBucket = proxy.URL(), proxy.RootCAs(), false
	o.RequestTimeout = 250 * time.Millisecond
	o.Retry = s3.RetryPolicy{MaxAttempts: 2, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}
	return direct, s3test.OpenStore(t, o), proxy
}

// s3FaultRun drives the phases of TestManagerUnderS3Faults and sums what
// they saw.
type s3FaultRun struct {
	t     *testing.T
	proxy *s3test.FaultProxy
	seed  uint64
	start time.Time

	requests    int
	faultCounts map[s3test.Fault]int
	phases      string

	tasks, taskErrors, copyRunErrors int
	reads, readErrors                int
	readCorrupt, readDeadline        int
}

// faults installs a seeded random rule with rates (none: faults off),
// after adding up the proxy's counts of the rule it replaces.
func (r *s3FaultRun) faults(phase uint64, rates []s3test.FaultRate) {
	if r.faultCounts == nil {
		r.faultCounts = map[s3test.Fault]int{}
	}
	r.requests += r.proxy.Requests()
	for f, n := range r.proxy.Counts() {
		if f != s3test.Pass {
			r.faultCounts[f] += n
		}
	}
	if len(rates) == 0 {
		r.proxy.SetRule(nil)
		return
	}
	r.proxy.SetRule(s3test.RandomFaults(r.seed*31+phase, rates...))
}

func (r *s3FaultRun) phase(name string) {
	r.phases += fmt.Sprintf("%s@%v ", name, time.Since(r.start).Round(time.Millisecond))
}

func (r *s3FaultRun) report(met ManagerMetrics, copyRuns int) {
	r.faults(0, nil) // adds up the last rule's counts
	r.t.Logf("faults %v in %d requests; phases %s", r.faultCounts, r.requests, r.phases)
	r.t.Logf("task runs %d, failed %d (copy runs %d, failed %d); reads %d, failed %d (as corruption %d, deadline %d)",
		r.tasks, r.taskErrors, copyRuns, r.copyRunErrors, r.reads, r.readErrors, r.readCorrupt, r.readDeadline)
	r.t.Logf("metrics: copied %d, copy errors %d, deleted %d, delete errors %d, task errors %d, read errors %d",
		met.SegmentsCopied, met.CopyErrors, met.SegmentsDeleted, met.DeleteErrors, met.TaskErrors, met.RemoteReadErrors)
}

// bounded runs f under a deadline and checks that it returned in time.
func (r *s3FaultRun) bounded(what string, timeout time.Duration, f func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	err := f(ctx)
	require.Less(r.t, time.Since(start), timeout+s3FaultSlack, "%s hung", what)
	return err
}

// task runs a task once under s3FaultTaskTimeout and counts the outcome.
func (r *s3FaultRun) task(what string, run func(context.Context) error) error {
	err := r.bounded(what, s3FaultTaskTimeout, run)
	r.tasks++
	if err != nil {
		r.taskErrors++
		r.t.Logf("%s: %v", what, err)
	}
	return err
}

// read runs one remote read under s3FaultReadTimeout and counts the
// outcome. The proxy changes no byte, so a failed read is an I/O error or
// the deadline, never corruption.
func (r *s3FaultRun) read(f func(ctx context.Context) (ReadResult, error)) (ReadResult, error) {
	var res ReadResult
	err := r.bounded("read", s3FaultReadTimeout, func(ctx context.Context) error {
		var err error
		res, err = f(ctx)
		return err
	})
	r.reads++
	if err == nil {
		return res, nil
	}
	r.readErrors++
	switch {
	case errors.Is(err, ErrCorruption):
		r.readCorrupt++
		if !shortReadIsCorruption {
			require.NotErrorIs(r.t, err, ErrCorruption, "a fault of the network is not corruption")
		}
		r.t.Logf("read reported as corruption: %v", err)
	case errors.Is(err, context.DeadlineExceeded):
		r.readDeadline++
	}
	return res, err
}

// readsUnderFaults reads n random offsets below localStart, alternately
// one batch and everything to the segment's end: each read fails or
// returns whole batches, byte for byte those of the log.
func (r *s3FaultRun) readsUnderFaults(mgr *Manager, tp TopicIDPartition, want map[int64][]byte, localStart int64, n int) {
	rng := rand.New(rand.NewPCG(r.seed, 2))
	for i := range n {
		off := rng.Int64N(localStart)
		maxBytes := 1 // min-one: the batch at off
		if i%2 == 1 {
			maxBytes = 1 << 20 // the batches from off to the segment's end
		}
		res, err := r.read(func(ctx context.Context) (ReadResult, error) {
			return mgr.Read(ctx, tp, off, maxBytes, log.IsolationLogEnd, true)
		})
		if err != nil {
			continue
		}
		require.Equal(r.t, off, res.BatchBaseOffset)
		requireBatchesFrom(r.t, want, off, res.Records)
	}
}

// checkNoOrphans checks that every object in the bucket belongs to a
// segment the metadata still names: a finished one, or a failed attempt
// whose deletion is pending (DELETE_SEGMENT_STARTED). It returns the
// number of such pending attempts that still have objects.
func checkNoOrphans(t *testing.T, meta *MetadataManager, tp TopicIDPartition, storage *StorageManager, bucket objstore.Store) int {
	t.Helper()
	states := map[SegmentID]SegmentState{}
	all, err := meta.ListSegments(tp)
	require.NoError(t, err)
	for _, s := range all {
		states[s.SegmentID] = s.State
	}
	pending := map[SegmentID]bool{}
	for _, k := range listKeys(t, bucket) {
		id, _, _, err := storage.ParseObjectKey(k)
		require.NoError(t, err)
		state, ok := states[id]
		require.True(t, ok, "object %s of no known segment", k)
		if state != CopySegmentFinished {
			require.Equal(t, DeleteSegmentStarted, state, "object %s", k)
			pending[id] = true
		}
	}
	return len(pending)
}

// requireBatchesFrom checks that records holds whole batches, the first
// at offset from and each following one the next batch of the log, byte
// for byte (one record per batch).
func requireBatchesFrom(t *testing.T, want map[int64][]byte, from int64, records []byte) {
	t.Helper()
	require.NotEmpty(t, records, "offset %d", from)
	for off := from; len(records) > 0; off++ {
		b, err := record.ReadBatch(records)
		require.NoError(t, err, "offset %d", off)
		require.Equal(t, want[off], b.Bytes(), "offset %d: wrong bytes", off)
		records = records[b.Size():]
	}
}

// checkFinishedChain checks that the finished segments are contiguous from
// the log start and end at the log's highest offset in remote storage.
func checkFinishedChain(t *testing.T, e *mgrEnv, tp TopicIDPartition, l *log.UnifiedLog) {
	t.Helper()
	next := l.LogStartOffset()
	for _, s := range finished(t, e.meta, tp) {
		require.Equal(t, next, s.StartOffset, "finished segments %s", spans(finished(t, e.meta, tp)))
		next = s.EndOffset + 1
	}
	require.Equal(t, next-1, l.HighestOffsetInRemoteStorage())
}

func listKeys(t *testing.T, s objstore.Store) []string {
	t.Helper()
	var keys []string
	require.NoError(t, objstore.ListAll(context.Background(), s, "", func(o objstore.ObjectInfo) error {
		keys = append(keys, o.Key)
		return nil
	}))
	return keys
}
