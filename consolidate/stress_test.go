package consolidate

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/harness/testseed"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/tierstate"
	"github.com/tierlog/tierlog/wal"
)

// TestConsolidationStress runs a switched partition's whole diskless life
// at once, on real goroutines, for a bounded time: producers write through
// the WAL; the leader A consolidates (Fetcher.Run), its remote-log manager
// copies and expires in the background (tasks every few milliseconds), its
// local retention deletes what is tiered, its Pruner prunes the WAL behind
// remote storage, and a Reporter flushes its cross-tier start; meanwhile a
// second replica B (pull/857's recreated leader) is recreated again and
// again (tierstate.Recreate: its fetcher stopped, its remote tasks
// cancelled, its log deleted) and rebuilds from remote storage through its
// own endpoint. A sampler reads W and h all along.
//
// At the end every acknowledged record is read back once, at the offset
// its produce returned, through the tier that holds it on A (remote below
// its local log start, its log, the WAL above it), and through B's
// consolidated log; W <= h + 1 held at every sample. Run it with -race
// (and -tags invariants): the point is that the pieces share the log, the
// control plane and the remote metadata without a data race.
func TestConsolidationStress(t *testing.T) {
	seed := testseed.Seed(t, 11)
	run, batchesPerProducer, recreateEvery := 3*time.Second, 250, 250*time.Millisecond
	if testing.Short() {
		run, batchesPerProducer, recreateEvery = time.Second, 60, 150*time.Millisecond
	}
	s := newStress(t, seed)
	s.start(batchesPerProducer, recreateEvery)
	time.Sleep(run)
	s.stopProducers()
	s.drain()
	s.stop()
	s.verify()
	s.tierTheTail()
}

// stress is the deployment of TestConsolidationStress.
type stress struct {
	*walEnv
	seed  uint64
	state tierstate.State

	a            *log.UnifiedLog
	mgrA, mgrB   *remote.Manager
	storage      *remote.StorageManager
	epA, epB     *Endpoint
	fetchA       *Fetcher
	fetchB       *Fetcher
	machineB     *tierstate.Machine
	pruner       *Pruner
	reporter     *Reporter
	partsB       *partitionMap
	classic      map[int64]string
	bMu          sync.Mutex
	b            *log.UnifiedLog // guarded by bMu
	bGeneration  int             // guarded by bMu
	produceStop  chan struct{}
	producers    sync.WaitGroup
	cancel       context.CancelFunc
	workers      sync.WaitGroup
	ackedMu      sync.Mutex
	acked        map[int64]string // offset -> value, guarded by ackedMu
	samples      atomic.Int64
	recreates    atomic.Int64
	prunes       atomic.Int64
	bgErrMu      sync.Mutex
	bgErr        error
	maxSampledWH atomic.Int64 // the largest W - h seen
}

const stressSeal = 100

func newStress(t *testing.T, seed uint64) *stress {
	t.Helper()
	e := newWALEnv(t)
	s := &stress{walEnv: e, seed: seed, acked: map[int64]string{}, classic: map[int64]string{},
		partsB: &partitionMap{m: map[remote.TopicIDPartition]partitionEntry{}}, produceStop: make(chan struct{})}
	s.maxSampledWH.Store(-1 << 62)
	var err error
	s.storage, err = remote.NewStorageManager(e.store, remote.StorageOptions{})
	require.NoError(t, err)

	// A's classic prefix [0, 100) in epochs 0@0 2@80, small segments,
	// tiered before the switch.
	s.a = s.openStressLog("leader-a", 1)
	for i := range 10 {
		epoch := int32(0)
		if i >= 8 {
			epoch = 2
		}
		b := record.NewBuilder(record.DefaultBuilderOptions())
		for j := range 10 {
			v := fmt.Sprintf("classic-%d", 10*i+j)
			s.classic[int64(10*i+j)] = v
			b.Add(time.Now().UnixMilli(), nil, []byte(v))
		}
		buf, err := b.Build()
		require.NoError(t, err)
		_, err = s.a.AppendAsLeader(buf, epoch, log.OriginClient)
		require.NoError(t, err)
	}
	require.NoError(t, s.a.Roll())
	s.a.UpdateHighWatermark(stressSeal)
	s.state = e.switchAt(0, stressSeal, 2)
	e.parts.set(e.tp, s.state, s.a)

	cache, err := NewCrossTierCache(CrossTierCacheOptions{ControlPlane: e.cp, Partitions: e.parts, TTL: 5 * time.Millisecond})
	require.NoError(t, err)
	s.reporter, err = NewReporter(ReporterOptions{ControlPlane: e.cp, Cache: cache, Interval: 5 * time.Millisecond})
	require.NoError(t, err)
	s.mgrA, err = remote.NewManager(e.meta, s.storage, remote.ManagerOptions{BrokerID: 1, TaskInterval: 3 * time.Millisecond, Consolidation: cache})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.mgrA.Close() })
	// The classic prefix reaches remote storage and X = 0 the control
	// plane before anything else runs: the copy is what the switch waits
	// for (phase 2), and without the report X would fall back to W. (The
	// manual run and the background ones never overlap.)
	require.NoError(t, s.mgrA.OnLeadershipChange([]remote.Partition{s.partitionA()}, nil))
	_, err = s.mgrA.RunCopy(e.ctx, e.tp)
	require.NoError(t, err)
	require.Equal(t, int64(stressSeal-1), s.a.HighestOffsetInRemoteStorage())
	s.reporter.Report(e.tp, 0)
	require.NoError(t, s.reporter.Flush(e.ctx))
	s.mgrB, err = remote.NewManager(e.meta, s.storage, remote.ManagerOptions{BrokerID: 2, TaskInterval: 3 * time.Millisecond, Consolidation: cache})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.mgrB.Close() })

	epOpts := EndpointOptions{ControlPlane: e.cp, WAL: e.reader, Remote: e.meta, CrossTier: cache,
		SegmentBytes: 16 << 10, MaxMessageBytes: 8 << 10}
	epOpts.Partitions = e.parts
	s.epA, err = NewEndpoint(epOpts)
	require.NoError(t, err)
	epOpts.Partitions = s.partsB
	s.epB, err = NewEndpoint(epOpts)
	require.NoError(t, err)
	fopts := FetcherOptions{Backoff: 5 * time.Millisecond, IdleInterval: 2 * time.Millisecond}
	fopts.Endpoint = s.epA
	fopts.Machine, err = tierstate.NewMachine(tierstate.MachineOptions{Leader: s.epA, Metadata: e.meta, Data: s.storage})
	require.NoError(t, err)
	s.fetchA, err = NewFetcher(fopts)
	require.NoError(t, err)
	fopts.Endpoint = s.epB
	s.machineB, err = tierstate.NewMachine(tierstate.MachineOptions{Leader: s.epB, Metadata: e.meta, Data: s.storage,
		PartitionReady: s.mgrB.IsPartitionReady})
	require.NoError(t, err)
	fopts.Machine = s.machineB
	s.fetchB, err = NewFetcher(fopts)
	require.NoError(t, err)
	s.pruner, err = NewPruner(PrunerOptions{ControlPlane: e.cp})
	require.NoError(t, err)
	return s
}

// openStressLog opens a tiered log with 16 KiB segments and a local
// retention that deletes every tiered segment.
func (s *stress) openStressLog(dir string, gen int) *log.UnifiedLog {
	s.t.Helper()
	l, err := log.Open(dir, log.Options{FS: s.fs, RemoteStorageEnabled: true, SegmentBytes: 16 << 10,
		RetentionMs: log.RetentionInfinite, LocalRetentionMs: 1})
	require.NoError(s.t, err, "open %s (generation %d)", dir, gen)
	return l
}

func (s *stress) partitionA() remote.Partition {
	return remote.Partition{TopicIDPartition: s.tp, Log: ReportingLog{PartitionLog: s.a, Partition: s.tp, Reporter: s.reporter}}
}

// fail keeps the first error of a background goroutine (t.Fatal must
// not run there).
func (s *stress) fail(err error) {
	s.bgErrMu.Lock()
	defer s.bgErrMu.Unlock()
	if s.bgErr == nil {
		s.bgErr = err
	}
}

// every runs f every d until ctx ends.
func (s *stress) every(ctx context.Context, d time.Duration, f func()) {
	s.workers.Add(1)
	go func() {
		defer s.workers.Done()
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				f()
			}
		}
	}()
}

func (s *stress) start(batchesPerProducer int, recreateEvery time.Duration) {
	ctx, cancel := context.WithCancel(s.ctx)
	s.cancel = cancel
	require.NoError(s.t, s.fetchA.Add(FetcherPartition{Partition: s.tp, Log: s.a, State: s.state, CurrentLeaderEpoch: 4}))
	s.pruner.Arm(s.tp, stressSeal)
	s.recreateB(ctx) // the first B: an empty log
	for _, f := range []*Fetcher{s.fetchA, s.fetchB} {
		s.workers.Add(1)
		go func() {
			defer s.workers.Done()
			_ = f.Run(ctx)
		}()
	}
	s.workers.Add(1)
	go func() {
		defer s.workers.Done()
		_ = s.reporter.Run(ctx)
	}()
	s.every(ctx, 2*time.Millisecond, s.prune)
	s.every(ctx, time.Millisecond, s.sample)
	s.every(ctx, 4*time.Millisecond, func() {
		if _, err := s.a.DeleteOldSegments(); err != nil {
			s.fail(fmt.Errorf("A's local retention: %w", err))
		}
	})
	s.every(ctx, recreateEvery, func() { s.recreateB(ctx) })
	for g := range 2 {
		s.producers.Add(1)
		go s.produceLoop(g, batchesPerProducer)
	}
}

// produceLoop writes up to n batches of 1 to 8 records through the WAL
// until stopProducers, and records each acknowledged one.
func (s *stress) produceLoop(g, n int) {
	defer s.producers.Done()
	rng := rand.New(rand.NewPCG(s.seed, uint64(g)))
	for i := range n {
		select {
		case <-s.produceStop:
			return
		default:
		}
		if err := s.produceOne(g, i, rng); err != nil {
			s.fail(err)
			return
		}
	}
}

// produceOne writes producer g's batch i of 1 to 8 records through the
// WAL and records it once acknowledged.
func (s *stress) produceOne(g, i int, rng *rand.Rand) error {
	b := record.NewBuilder(record.DefaultBuilderOptions())
	k := 1 + rng.IntN(8)
	vals := make([]string, k)
	for j := range k {
		vals[j] = fmt.Sprintf("g%d-b%d-r%d-%s", g, i, j, strings.Repeat("x", rng.IntN(200)))
		b.Add(time.Now().UnixMilli(), nil, []byte(vals[j]))
	}
	buf, err := b.Build()
	if err != nil {
		return err
	}
	res, err := s.writer.Produce(s.ctx, []wal.ProduceRequest{{Partition: walTP(s.tp), Batches: buf}})
	if err == nil && res[0].Err != nil {
		err = res[0].Err
	}
	if err == nil && res[0].Batches[0].Err != nil {
		err = res[0].Batches[0].Err
	}
	if err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	base := res[0].Batches[0].BaseOffset
	s.ackedMu.Lock()
	defer s.ackedMu.Unlock()
	for j, v := range vals {
		s.acked[base+int64(j)] = v
	}
	return nil
}

// catchUpA steps A's fetcher (no longer running) until A's log ends at
// the WAL's high watermark.
func (s *stress) catchUpA() {
	s.t.Helper()
	info, err := s.cp.LogInfo(s.ctx, walTP(s.tp))
	require.NoError(s.t, err)
	for i := 0; s.a.LogEndOffset() < info.HighWatermark; i++ {
		require.Less(s.t, i, 10_000, "A stuck at %d, HW %d", s.a.LogEndOffset(), info.HighWatermark)
		_, err := s.fetchA.Step(s.ctx)
		require.NoError(s.t, err)
		require.NoError(s.t, s.fetchA.Failed(s.tp))
		time.Sleep(time.Millisecond) // the idle wait is on the system clock
	}
}

func (s *stress) stopProducers() {
	close(s.produceStop)
	s.producers.Wait()
}

// prune is one pruner round of the leader, as the broker's timer runs it.
func (s *stress) prune() {
	out, err := s.pruner.Run(s.ctx, []PrunePartition{{Partition: s.tp, State: s.state, Log: s.a}})
	if err != nil {
		s.fail(fmt.Errorf("prune: %w", err))
		return
	}
	if out[0].Err != nil {
		s.fail(fmt.Errorf("prune: %w", out[0].Err))
	}
	if out[0].Decision.Prune() {
		s.prunes.Add(1)
	}
}

// highestTiered is h as remote storage holds it: the end of the highest
// finished segment.
func (s *stress) highestTiered() (int64, error) {
	segs, err := s.meta.ListSegments(s.tp)
	if err != nil {
		return 0, err
	}
	h := int64(-1)
	for _, seg := range segs {
		if seg.State == remote.CopySegmentFinished {
			h = max(h, seg.EndOffset)
		}
	}
	return h, nil
}

// sample checks W <= h + 1. W is read before h: both only grow, so a W
// above the later h + 1 was above h + 1 when it was read.
func (s *stress) sample() {
	info, err := s.cp.LogInfo(s.ctx, walTP(s.tp))
	if err != nil {
		s.fail(err)
		return
	}
	h, err := s.highestTiered()
	if err != nil {
		s.fail(err)
		return
	}
	s.samples.Add(1)
	if d := info.LogStartOffset - h; d > s.maxSampledWH.Load() {
		s.maxSampledWH.Store(d) // one sampler goroutine: no lost update
	}
	if info.LogStartOffset > h+1 {
		s.fail(fmt.Errorf("W = %d above h + 1 = %d", info.LogStartOffset, h+1))
	}
}

// fetcherOf stops one fetcher's partition for a recreate.
type fetcherOf struct{ f *Fetcher }

func (f fetcherOf) StopFetchers(_ context.Context, tp remote.TopicIDPartition) error {
	f.f.Remove(tp)
	return nil
}

// recreateB recreates replica B as a broker does for a phase-2 replica
// that fails the check: its consolidation stopped, its remote tasks
// cancelled (the metadata kept), its log deleted; then a new empty log
// that consolidates from 0 (redirected to a rebuild from remote storage).
func (s *stress) recreateB(ctx context.Context) {
	s.bMu.Lock()
	defer s.bMu.Unlock()
	if ctx.Err() != nil {
		return
	}
	if s.b != nil {
		res := tierstate.Recreate(ctx, tierstate.RecreateDeps{Partition: s.tp, Fetchers: fetcherOf{s.fetchB},
			RemoteTasks: s.mgrB, DeleteCurrentLog: s.b.Delete})
		if res.Outcome != tierstate.Recreated {
			s.fail(fmt.Errorf("recreate of B: %s: %w", res, res.Err))
			return
		}
		s.recreates.Add(1)
	}
	s.bGeneration++
	s.b = s.openStressLog("replica-b", s.bGeneration)
	s.partsB.set(s.tp, s.state, s.b)
	if err := s.mgrB.OnLeadershipChange(nil, []remote.Partition{{TopicIDPartition: s.tp, Log: s.b}}); err != nil {
		s.fail(err)
		return
	}
	if err := s.fetchB.Add(FetcherPartition{Partition: s.tp, Log: s.b, State: s.state, CurrentLeaderEpoch: 6}); err != nil {
		s.fail(err)
	}
}

// drain waits until A and B consolidated everything produced and A's copy
// and prune caught up: the background pieces keep running meanwhile.
func (s *stress) drain() {
	s.t.Helper()
	info, err := s.cp.LogInfo(s.ctx, walTP(s.tp))
	require.NoError(s.t, err)
	hw := info.HighWatermark
	deadline := time.Now().Add(30 * time.Second)
	for {
		s.bMu.Lock()
		b := s.b
		s.bMu.Unlock()
		if s.a.LogEndOffset() == hw && b.LogEndOffset() == hw {
			break
		}
		require.NoError(s.t, s.bgError())
		require.NoError(s.t, s.fetchA.Failed(s.tp))
		require.NoError(s.t, s.fetchB.Failed(s.tp))
		require.True(s.t, time.Now().Before(deadline), "not caught up: A at %d, B at %d, HW %d", s.a.LogEndOffset(), b.LogEndOffset(), hw)
		time.Sleep(5 * time.Millisecond)
	}
}

func (s *stress) readWAL(t *testing.T, off int64) []byte {
	t.Helper()
	res, err := s.reader.Fetch(s.ctx, wal.FindBatchesRequest{MaxBytes: 1 << 20, Partitions: []wal.FindPartition{
		{Partition: walTP(s.tp), Offset: off, MaxPartitionBytes: 1 << 20}}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err, "WAL read at %d", off)
	return res[0].Records
}

// tierTheTail rolls A's log, copies the tail and prunes: the WAL is
// empty (W = HW) and remote storage holds everything.
func (s *stress) tierTheTail() {
	t := s.t
	mgr, err := remote.NewManager(s.meta, s.storage, remote.ManagerOptions{TaskInterval: -1})
	require.NoError(t, err)
	defer mgr.Close()
	require.NoError(t, mgr.OnLeadershipChange([]remote.Partition{{TopicIDPartition: s.tp, Log: s.a}}, nil))
	s.catchUpA()
	require.NoError(t, s.a.Roll())
	_, err = mgr.RunCopy(s.ctx, s.tp)
	require.NoError(t, err)
	info, err := s.cp.LogInfo(s.ctx, walTP(s.tp))
	require.NoError(t, err)
	h, err := s.highestTiered()
	require.NoError(t, err)
	require.Equal(t, info.HighWatermark-1, h)
	s.prune()
	require.NoError(t, s.bgError())
	require.Equal(t, info.HighWatermark, s.walStart())
}

func (s *stress) walStart() int64 {
	info, err := s.cp.LogInfo(s.ctx, walTP(s.tp))
	require.NoError(s.t, err)
	return info.LogStartOffset
}

func (s *stress) bgError() error {
	s.bgErrMu.Lock()
	defer s.bgErrMu.Unlock()
	return s.bgErr
}

func (s *stress) stop() {
	s.cancel()
	s.workers.Wait()
	require.NoError(s.t, s.mgrA.Close())
	require.NoError(s.t, s.mgrB.Close())
}

func (s *stress) verify() {
	t := s.t.(*testing.T)
	require.NoError(t, s.bgError())
	require.NoError(t, s.fetchA.Failed(s.tp))
	require.NoError(t, s.fetchB.Failed(s.tp))
	s.bMu.Lock()
	b := s.b
	s.bMu.Unlock()
	bEnd := b.LogEndOffset()
	// With everything stopped, a tail only A's log holds and one only the
	// WAL holds, so that the read below goes through all three tiers.
	rng := rand.New(rand.NewPCG(s.seed, 99))
	for i := range 3 {
		require.NoError(t, s.produceOne(2, i, rng))
	}
	s.catchUpA()
	for i := 3; i < 5; i++ {
		require.NoError(t, s.produceOne(2, i, rng))
	}
	info, err := s.cp.LogInfo(s.ctx, walTP(s.tp))
	require.NoError(t, err)
	require.Equal(t, int64(stressSeal)+int64(len(s.acked)), info.HighWatermark, "every offset above the seal was acknowledged once")
	want := map[int64]string{}
	for k, v := range s.classic {
		want[k] = v
	}
	for k, v := range s.acked {
		want[k] = v
	}

	// A: remote storage below its local log start, then its log.
	mgr, err := remote.NewManager(s.meta, s.storage, remote.ManagerOptions{TaskInterval: -1})
	require.NoError(t, err)
	defer mgr.Close()
	require.NoError(t, mgr.OnLeadershipChange(nil, []remote.Partition{{TopicIDPartition: s.tp, Log: s.a}}))
	tiers := map[string]int{}
	got := map[int64]string{}
	for off := int64(0); off < info.HighWatermark; {
		var data []byte
		var tier string
		switch {
		case off < s.a.LocalLogStartOffset():
			tier = "remote"
			res, err := mgr.Read(s.ctx, s.tp, off, 64<<10, log.IsolationLogEnd, true)
			require.NoError(t, err, "remote read at %d", off)
			data = res.Records
		case off < s.a.LogEndOffset():
			tier = "local"
			res, err := s.a.Read(nil, off, 64<<10, log.IsolationLogEnd, true)
			require.NoError(t, err, "read at %d", off)
			data = res.Records
		default:
			tier = "wal"
			data = s.readWAL(t, off)
		}
		off = s.collectOnce(t, data, off, got, tier, tiers)
	}
	require.Equal(t, want, got, "A read back through remote storage, its log and the WAL")

	// B: its consolidated log from the seal on (its prefix is remote).
	fromB := map[int64]string{}
	for off := max(b.LocalLogStartOffset(), stressSeal); off < b.LogEndOffset(); {
		res, err := b.Read(nil, off, 64<<10, log.IsolationLogEnd, true)
		require.NoError(t, err, "B read at %d", off)
		off = s.collectOnce(t, res.Records, off, fromB, "b", tiers)
	}
	for off, v := range fromB {
		require.Equal(t, want[off], v, "B at %d", off)
	}
	require.Len(t, fromB, int(bEnd-max(b.LocalLogStartOffset(), stressSeal)))
	epoch, _ := b.EpochForOffset(bEnd - 1)
	require.Equal(t, int32(5), epoch, "B's records in E_d")

	// The WAL from W holds the same records.
	fromWAL := map[int64]string{}
	for off := info.LogStartOffset; off < info.HighWatermark; {
		off = s.collectOnce(t, s.readWAL(t, off), off, fromWAL, "wal-from-W", tiers)
	}
	for off, v := range fromWAL {
		require.Equal(t, want[off], v, "WAL at %d", off)
	}
	mb := s.fetchB.Metrics()
	t.Logf("%d acknowledged diskless records, HW %d; A read %v; %d W/h samples (max W - h = %d), %d prunes, "+
		"%d recreates of B, B's fetcher: %d rebuilds %d resets %d appends; A's log starts at %d, epochs %s",
		len(s.acked), info.HighWatermark, tiers, s.samples.Load(), s.maxSampledWH.Load(), s.prunes.Load(), s.recreates.Load(),
		mb.Rebuilds, mb.Resets, mb.Appends, s.a.LocalLogStartOffset(), epochcache.FormatEntries(s.a.EpochEntries()))
	require.Positive(t, s.samples.Load())
	require.Positive(t, s.prunes.Load())
	require.Positive(t, s.recreates.Load())
	require.Positive(t, tiers["remote"], "some records come back from remote storage")
	require.Positive(t, tiers["local"], "the untiered tail comes from A's log")
	require.Positive(t, tiers["wal"], "the unconsolidated tail comes from the WAL")
	require.Positive(t, mb.Rebuilds)
}

// collectOnce adds the data records of batches at or after off to got,
// failing on an offset seen twice, and returns the offset after the last
// batch.
func (s *stress) collectOnce(t *testing.T, batches []byte, off int64, got map[int64]string, tier string, tiers map[string]int) int64 {
	t.Helper()
	require.NotEmpty(t, batches, "%s: nothing at %d", tier, off)
	it := record.NewIter(record.IterOptions{})
	next := off
	for len(batches) > 0 {
		b, err := record.ReadBatch(batches)
		require.NoError(t, err)
		for it.Reset(b); it.Next(); {
			r := it.Record()
			if r.Offset < off {
				continue
			}
			_, dup := got[r.Offset]
			require.False(t, dup, "%s: offset %d read twice", tier, r.Offset)
			got[r.Offset] = string(slices.Clone(r.Value))
			tiers[tier]++
		}
		require.NoError(t, it.Err())
		next = b.NextOffset()
		batches = batches[b.Size():]
	}
	return next
}
