package consolidate

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/tierstate"
	"github.com/tierlog/tierlog/wal"
)

// readAll reads every record of l from offset from to its end, as
// "offset:value", and checks each batch's leader epoch is epoch.
func readAll(t *testing.T, l *log.UnifiedLog, from int64, epoch int32) []string {
	t.Helper()
	var out []string
	for off := from; off < l.LogEndOffset(); {
		info, err := l.Read(nil, off, 1<<20, log.IsolationLogEnd, true)
		require.NoError(t, err)
		require.NotEmpty(t, info.Records)
		s := record.NewScanner(info.Records, record.ScannerOptions{})
		last := off
		for s.Next() {
			b := s.Batch()
			require.Equal(t, epoch, b.PartitionLeaderEpoch(), "batch at %d", b.BaseOffset())
			last = b.LastOffset() + 1
		}
		for _, v := range values(t, info.Records) {
			if offsetOf(t, v) >= off {
				out = append(out, v)
			}
		}
		off = last
		require.NoError(t, s.Err())
	}
	return out
}

func (e *walEnv) machine(ep *Endpoint, data tierstate.RemoteData) *tierstate.Machine {
	e.t.Helper()
	m, err := tierstate.NewMachine(tierstate.MachineOptions{Leader: ep, Metadata: e.meta, Data: data})
	require.NoError(e.t, err)
	return m
}

// expect lists "offset:prefix-i" for count records from base.
func expect(base int64, count int, prefix string) []string {
	var out []string
	for i := range count {
		out = append(out, fmt.Sprintf("%d:%s-%d", base+int64(i), prefix, i))
	}
	return out
}

// The first worked example of github.com/aiven/inkless/pull/857 through
// the fetcher: a recreated leader (empty log in epoch 5... here the
// fetcher's epoch 4, E_d = 5) fetches at 0, the endpoint redirects, the
// phase-2 rebuild restores the epochs below the seal and starts the log at
// 100, and consolidation copies every diskless record produced through
// the WAL writer, stamped with E_d. Records produced later are
// consolidated by the next steps.
func TestFetcherRecreatedLeaderConsolidatesFromSeal(t *testing.T) {
	e := newWALEnv(t)
	state := e.switchAt(0, 100, 2)
	var want []string
	for i := range 3 {
		p := fmt.Sprintf("b%d", i)
		base := e.produce(20, p)
		want = append(want, expect(base, 20, p)...)
	}
	a := e.addSegment(50, 99, epochcache.Entry{Epoch: 0, StartOffset: 50}, epochcache.Entry{Epoch: 2, StartOffset: 80})
	data := checkpointData{epochs: map[remote.UUID][]epochcache.Entry{a.SegmentID.ID: {{Epoch: 0, StartOffset: 0}, {Epoch: 2, StartOffset: 80}}},
		snapshot: emptyProducerSnapshot(t, e)}
	l := e.openLog("leader")
	e.parts.set(e.tp, state, l)
	e.xs.set(e.tp, 0)
	ep := e.endpoint(EndpointOptions{SegmentBytes: 4096, MaxMessageBytes: 1 << 20}) // one batch per fetch
	f, err := NewFetcher(FetcherOptions{Endpoint: ep, Machine: e.machine(ep, data), Clock: &manualClock{}})
	require.NoError(t, err)
	require.NoError(t, f.Add(FetcherPartition{Partition: e.tp, Log: l, State: state, CurrentLeaderEpoch: 4}))

	var leos []int64
	for range 10 {
		n, err := f.Step(e.ctx)
		require.NoError(t, err)
		if n == 0 {
			break // caught up: waits IdleInterval on the manual clock
		}
		leos = append(leos, l.LogEndOffset())
	}
	require.Equal(t, []int64{100, 120, 140, 160, 160}, leos, "rebuild to the seal, then one batch per fetch")
	require.Equal(t, "0@0 2@80 5@100", epochcache.FormatEntries(l.EpochEntries()))
	require.Equal(t, want, readAll(t, l, 100, 5))
	require.Equal(t, int64(160), l.Offsets().HighWatermark)
	m := f.Metrics()
	require.Equal(t, int64(1), m.Rebuilds)
	require.Equal(t, int64(3), m.Appends)
}

// The deleted-prefix reset through the fetcher: DeleteRecords at the seal
// moved X to 100 while W stays 0; the empty log is reset to 100 and
// consolidates from there, without a rebuild.
func TestFetcherDeletedPrefixResetsToCrossTierStart(t *testing.T) {
	e := newWALEnv(t)
	state := e.switchAt(0, 100, 2)
	base := e.produce(10, "d")
	_, err := e.cp.AdvanceCrossTierLogStart(e.ctx, []wal.AdvanceCrossTierLogStartRequest{{Partition: walTP(e.tp), CrossTierLogStart: 100}})
	require.NoError(t, err)
	l := e.openLog("leader")
	e.parts.set(e.tp, state, l)
	e.xs.set(e.tp, 100)
	ep := e.endpoint(EndpointOptions{})
	f, err := NewFetcher(FetcherOptions{Endpoint: ep, Machine: e.machine(ep, checkpointData{}), Clock: &manualClock{}})
	require.NoError(t, err)
	require.NoError(t, f.Add(FetcherPartition{Partition: e.tp, Log: l, State: state, CurrentLeaderEpoch: 4}))
	for range 3 {
		_, err := f.Step(e.ctx)
		require.NoError(t, err)
	}
	require.Equal(t, int64(100), l.LogStartOffset())
	require.Equal(t, expect(base, 10, "d"), readAll(t, l, 100, 5))
	require.Equal(t, int64(1), f.Metrics().Resets)
	require.Equal(t, int64(0), f.Metrics().Rebuilds)
	require.Equal(t, int64(0), ep.Metrics().CoverageLookups)
}

// While remote storage lacks seal - 1 the partition backs off; the manual
// clock releases it after Backoff, and once the segment exists the
// rebuild and consolidation proceed.
func TestFetcherBacksOffUntilRemoteHoldsThePrefix(t *testing.T) {
	e := newWALEnv(t)
	state := e.switchAt(0, 100, 2)
	e.produce(10, "w")
	l := e.openLog("leader")
	e.parts.set(e.tp, state, l)
	ep := e.endpoint(EndpointOptions{})
	data := checkpointData{epochs: map[remote.UUID][]epochcache.Entry{}, snapshot: emptyProducerSnapshot(t, e)}
	clock := &manualClock{}
	f, err := NewFetcher(FetcherOptions{Endpoint: ep, Machine: e.machine(ep, data), Clock: clock})
	require.NoError(t, err)
	require.NoError(t, f.Add(FetcherPartition{Partition: e.tp, Log: l, State: state, CurrentLeaderEpoch: 4}))

	n, err := f.Step(e.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, int64(1), ep.Metrics().PrefixUnknown)
	n, _ = f.Step(e.ctx)
	require.Equal(t, 0, n, "backing off")
	a := e.addSegment(0, 99, epochcache.Entry{Epoch: 2, StartOffset: 0})
	data.epochs[a.SegmentID.ID] = []epochcache.Entry{{Epoch: 2, StartOffset: 0}}
	clock.advance(DefaultFetcherBackoff)
	for range 2 {
		n, err = f.Step(e.ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n)
	}
	require.Equal(t, int64(110), l.LogEndOffset())
	require.Equal(t, int64(1), f.Metrics().Backoffs)
}

// Many partitions share one worker; Run stops with its context and a
// second Run resumes every partition at its log end. Every record
// produced through the WAL reads back from the local logs.
func TestFetcherRunStopsAndResumes(t *testing.T) {
	e := newWALEnv(t)
	const partitions = 4
	require.NoError(t, e.cp.CreatePartitions(e.ctx, []wal.CreatePartitionsRequest{{TopicID: walTP(e.tp).TopicID, Topic: e.tp.Topic, NumPartitions: partitions}}))
	born := tierstate.State{}.WithConsolidating(true)
	ep := e.endpoint(EndpointOptions{})
	f, err := NewFetcher(FetcherOptions{Endpoint: ep, Machine: e.machine(ep, checkpointData{}), Workers: 2,
		MaxPartitionsPerFetch: 3, IdleInterval: time.Millisecond, Backoff: time.Millisecond})
	require.NoError(t, err)
	logs := make([]*log.UnifiedLog, partitions)
	want := make([][]string, partitions)
	tps := make([]remote.TopicIDPartition, partitions)
	for p := range partitions {
		tps[p] = remote.TopicIDPartition{TopicID: e.tp.TopicID, Topic: e.tp.Topic, Partition: int32(p)}
		logs[p] = e.openLog(fmt.Sprintf("p%d", p))
		e.parts.set(tps[p], born, logs[p])
		require.NoError(t, f.Add(FetcherPartition{Partition: tps[p], Log: logs[p], State: born}))
	}
	produceRound := func(round int) {
		for p := range partitions {
			prefix := fmt.Sprintf("p%d-r%d", p, round)
			saved := e.tp
			e.tp = tps[p]
			base := e.produce(5+p, prefix)
			e.tp = saved
			want[p] = append(want[p], expect(base, 5+p, prefix)...)
		}
	}
	caughtUp := func() bool {
		for p := range partitions {
			if logs[p].LogEndOffset() < int64(len(want[p])) {
				return false
			}
		}
		return true
	}
	for round := range 2 {
		produceRound(round)
		ctx, cancel := context.WithCancel(e.ctx)
		done := make(chan error, 1)
		go func() { done <- f.Run(ctx) }()
		for !caughtUp() {
			runtime.Gosched()
		}
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
	}
	for p := range partitions {
		require.Equal(t, want[p], readAll(t, logs[p], 0, 0), "partition %d", p)
		require.NoError(t, f.Failed(tps[p]))
	}
}

// manualClock is a wal.Clock that moves only when told; its timers never
// fire on their own (Step-driven tests do not wait).
type manualClock struct{ now time.Time }

func (c *manualClock) Now() time.Time                            { return c.now }
func (c *manualClock) AfterFunc(time.Duration, func()) wal.Timer { return stoppedTimer{} }
func (c *manualClock) advance(d time.Duration)                   { c.now = c.now.Add(d) }

type stoppedTimer struct{}

func (stoppedTimer) Stop() bool { return false }

// Reconcile starts a leader below the seal and arms its pruner, and keeps
// a follower below the seal out of consolidation.
func TestFetcherReconcile(t *testing.T) {
	e := newWALEnv(t)
	state := e.switchAt(0, 100, 2)
	ep := e.endpoint(EndpointOptions{})
	f, err := NewFetcher(FetcherOptions{Endpoint: ep, Machine: e.machine(ep, checkpointData{}), Clock: &manualClock{}})
	require.NoError(t, err)
	pr, err := NewPruner(PrunerOptions{ControlPlane: e.cp})
	require.NoError(t, err)
	l := e.openLog("replica")
	e.parts.set(e.tp, state, l)
	p := FetcherPartition{Partition: e.tp, Log: l, State: state, CurrentLeaderEpoch: 4}

	d, err := f.Reconcile(p, 0, false, pr)
	require.NoError(t, err)
	require.Equal(t, StartRetry, d.Action)
	n, err := f.Step(e.ctx)
	require.NoError(t, err)
	require.Equal(t, 0, n, "a follower below the seal is not consolidated")
	require.Equal(t, NoFloor, pr.Floor(e.tp))

	d, err = f.Reconcile(p, 0, true, pr)
	require.NoError(t, err)
	require.Equal(t, StartDecision{Action: StartReady, FetchOffset: 0, PruneFloor: 99}, d)
	require.Equal(t, int64(99), pr.Floor(e.tp))
	n, err = f.Step(e.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, int64(1), ep.Metrics().PrefixUnknown, "the leader's fetch at 0 waits for remote storage")
}

// Remove while a fetch is in progress: the partition leaves after that
// round; Add during the round keeps one state, so the log has one writer.
func TestFetcherRemoveAndAddDuringFetch(t *testing.T) {
	e := newWALEnv(t)
	born := tierstate.State{}.WithConsolidating(true)
	require.NoError(t, e.cp.CreatePartitions(e.ctx, []wal.CreatePartitionsRequest{{TopicID: walTP(e.tp).TopicID, Topic: e.tp.Topic, NumPartitions: 1}}))
	e.produce(3, "x")
	l := e.openLog("p")
	e.parts.set(e.tp, born, l)
	ep := e.endpoint(EndpointOptions{})
	f, err := NewFetcher(FetcherOptions{Endpoint: ep, Machine: e.machine(ep, checkpointData{}), Clock: &manualClock{}})
	require.NoError(t, err)
	p := FetcherPartition{Partition: e.tp, Log: l, State: born}
	require.NoError(t, f.Add(p))

	claimed, _ := f.claim(time.Time{})
	require.Len(t, claimed, 1)
	removed := removeAsync(f, e.tp)
	requireBlocked(t, removed, "Remove returned while a fetch was in progress")
	require.NoError(t, f.Add(p), "re-added while busy")
	again, _ := f.claim(time.Time{})
	require.Empty(t, again, "busy: no second writer")
	f.release(claimed[0], time.Time{}, nil)
	<-removed
	again, _ = f.claim(time.Time{})
	require.Len(t, again, 1)
	f.release(again[0], time.Time{}, nil)

	claimed, _ = f.claim(time.Time{})
	removed = removeAsync(f, e.tp)
	requireBlocked(t, removed, "Remove returned while a fetch was in progress")
	f.release(claimed[0], time.Time{}, nil)
	<-removed // returns once the turn ended: the caller may now recreate the log
	n, err := f.Step(e.ctx)
	require.NoError(t, err)
	require.Equal(t, 0, n, "removed after its round")

	// Not busy: Remove returns at once.
	require.NoError(t, f.Add(p))
	f.Remove(e.tp)
}

// removeAsync calls f.Remove(tp) on a goroutine; the channel closes when
// it returns.
func removeAsync(f *Fetcher, tp remote.TopicIDPartition) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.Remove(tp)
	}()
	// Wait until Remove has marked the partition (or returned), so what
	// the caller does next (an Add during the round, say) comes after
	// it whatever the scheduler does.
	for {
		select {
		case <-done:
			return done
		default:
		}
		f.mu.Lock()
		s, ok := f.mu.parts[tp]
		marked := !ok || s.removed
		f.mu.Unlock()
		if marked {
			return done
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// requireBlocked fails if done is closed after the goroutine had ample
// chance to run. (A wrong pass is possible only if the scheduler starves
// the goroutine; a wrong fail is not.)
func requireBlocked(t *testing.T, done <-chan struct{}, msg string) {
	t.Helper()
	for i := 0; i < 100; i++ {
		runtime.Gosched()
	}
	select {
	case <-done:
		t.Fatal(msg)
	default:
	}
}

// A partition whose answer is empty because the fetch's byte budget was
// spent on the partitions before it (wal.FindBatchesRequest: FetchMaxBytes
// 1 grants the request's first batch only) is not caught up: it is
// fetched again in the next round, not after IdleInterval. Partitions
// caught up with the WAL still idle.
func TestFetcherBudgetStarvedPartitionIsFetchedAgain(t *testing.T) {
	e := newWALEnv(t)
	born := tierstate.State{}.WithConsolidating(true)
	require.NoError(t, e.cp.CreatePartitions(e.ctx, []wal.CreatePartitionsRequest{{TopicID: walTP(e.tp).TopicID, Topic: e.tp.Topic, NumPartitions: 2}}))
	ep := e.endpoint(EndpointOptions{FetchMaxBytes: 1})
	f, err := NewFetcher(FetcherOptions{Endpoint: ep, Machine: e.machine(ep, checkpointData{}), Clock: &manualClock{}})
	require.NoError(t, err)
	var logs []*log.UnifiedLog
	for p := range 2 {
		tp := remote.TopicIDPartition{TopicID: e.tp.TopicID, Topic: e.tp.Topic, Partition: int32(p)}
		saved := e.tp
		e.tp = tp
		e.produce(4, fmt.Sprintf("p%d", p))
		e.tp = saved
		l := e.openLog(fmt.Sprintf("p%d", p))
		logs = append(logs, l)
		e.parts.set(tp, born, l)
		require.NoError(t, f.Add(FetcherPartition{Partition: tp, Log: l, State: born}))
	}
	leos := func() []int64 { return []int64{logs[0].LogEndOffset(), logs[1].LogEndOffset()} }

	n, err := f.Step(e.ctx)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Equal(t, []int64{4, 0}, leos(), "the budget went to partition 0")
	n, err = f.Step(e.ctx) // the clock has not moved
	require.NoError(t, err)
	require.Equal(t, 2, n, "partition 1 is fetched again at once")
	require.Equal(t, []int64{4, 4}, leos())
	n, err = f.Step(e.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n, "partition 1, served last, finds itself caught up; partition 0 idles")
	n, err = f.Step(e.ctx)
	require.NoError(t, err)
	require.Equal(t, 0, n, "both caught up: idle")
	require.Equal(t, int64(2), f.Metrics().Appends)
}
