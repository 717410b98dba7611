package consolidate

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/tierstate"
	"github.com/tierlog/tierlog/wal"
)

// prefetchEnv is a born-diskless partition with batches WAL batches of
// 3 records each, and an endpoint that serves one batch per fetch.
func prefetchEnv(t *testing.T, batches int) (*walEnv, *Endpoint, []string) {
	e := newWALEnv(t)
	require.NoError(t, e.cp.CreatePartitions(e.ctx, []wal.CreatePartitionsRequest{{TopicID: walTP(e.tp).TopicID, Topic: e.tp.Topic, NumPartitions: 1}}))
	var want []string
	for i := range batches {
		p := fmt.Sprintf("b%d", i)
		base := e.produce(3, p)
		want = append(want, expect(base, 3, p)...)
	}
	// A partition budget of 1 byte: every fetch serves one batch.
	return e, e.endpoint(EndpointOptions{SegmentBytes: 4096, MaxMessageBytes: 1 << 20}), want
}

// runUntil runs f until l ends at end, then stops it.
func runUntil(t *testing.T, f *Fetcher, l *log.UnifiedLog, end int64) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for l.LogEndOffset() < end && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.Equal(t, end, l.LogEndOffset())
}

// Run's worker fetches the next batch while it appends the last: every
// round after the first was fetched ahead (answerEnd: the WAL holds
// more), none is dropped, and the log holds every record once, in
// order.
func TestFetcherRunPrefetchesWhileAppending(t *testing.T) {
	const batches = 30
	e, ep, want := prefetchEnv(t, batches)
	born := tierstate.State{}.WithConsolidating(true)
	l := e.openLog("p")
	e.parts.set(e.tp, born, l)
	f, err := NewFetcher(FetcherOptions{Endpoint: ep, Machine: e.machine(ep, checkpointData{}), IdleInterval: time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, f.Add(FetcherPartition{Partition: e.tp, Log: l, State: born}))
	runUntil(t, f, l, 3*batches)
	require.Equal(t, want, readAll(t, l, 0, 0))
	m := f.Metrics()
	require.Equal(t, int64(batches), m.Appends)
	require.Equal(t, int64(batches-1), m.Prefetches, "every answer but the last was followed by a fetch ahead")
	require.Zero(t, m.DroppedPrefetches)

	// DisablePrefetch: the same records, fetched one round at a time.
	l2 := e.openLog("p2")
	e.parts.set(e.tp, born, l2)
	f2, err := NewFetcher(FetcherOptions{Endpoint: ep, Machine: e.machine(ep, checkpointData{}), IdleInterval: time.Millisecond, DisablePrefetch: true})
	require.NoError(t, err)
	require.NoError(t, f2.Add(FetcherPartition{Partition: e.tp, Log: l2, State: born}))
	runUntil(t, f2, l2, 3*batches)
	require.Equal(t, want, readAll(t, l2, 0, 0))
	require.Zero(t, f2.Metrics().Prefetches)
}

// refusingLog refuses its refuseAt-th follower append (counting from 1)
// as an invalid record, which the Fetcher backs off from.
type refusingLog struct {
	*log.UnifiedLog
	calls, refuseAt int
}

func (l *refusingLog) AppendAsFollower(batches []byte, epoch int32) (log.AppendInfo, error) {
	if l.calls++; l.calls == l.refuseAt {
		return log.AppendInfo{}, fmt.Errorf("refused for the test: %w", log.ErrInvalidRecord)
	}
	return l.UnifiedLog.AppendAsFollower(batches, epoch)
}

// An append refused while the next round was already fetched: that
// round's answer (which starts where the refused batch would have
// ended) is dropped, the partition backs off, and the next fetch starts
// again at the log end: every record once, in order.
func TestFetcherRunDropsPrefetchAfterRefusedAppend(t *testing.T) {
	const batches = 10
	e, ep, want := prefetchEnv(t, batches)
	born := tierstate.State{}.WithConsolidating(true)
	ul := e.openLog("p")
	l := &refusingLog{UnifiedLog: ul, refuseAt: 4}
	e.parts.set(e.tp, born, ul)
	f, err := NewFetcher(FetcherOptions{Endpoint: ep, Machine: e.machine(ep, checkpointData{}), IdleInterval: time.Millisecond, Backoff: time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, f.Add(FetcherPartition{Partition: e.tp, Log: l, State: born}))
	runUntil(t, f, ul, 3*batches)
	require.Equal(t, want, readAll(t, ul, 0, 0))
	m := f.Metrics()
	require.Equal(t, int64(batches), m.Appends)
	require.Equal(t, int64(1), m.DroppedPrefetches)
	require.GreaterOrEqual(t, m.Backoffs, int64(1), "the refusal backs off (stopping Run may add one)")
}

// Add replaces a partition's values while Run's worker consolidates it
// (here with the same log): the turn in progress keeps the values it was
// claimed with (no data race between Add and the worker), the pipelined
// rounds stop at the replacement, and the log ends holding every record
// once.
func TestFetcherAddWhileRunning(t *testing.T) {
	const batches = 40
	e, ep, want := prefetchEnv(t, batches)
	born := tierstate.State{}.WithConsolidating(true)
	l := e.openLog("p")
	e.parts.set(e.tp, born, l)
	f, err := NewFetcher(FetcherOptions{Endpoint: ep, Machine: e.machine(ep, checkpointData{}), IdleInterval: time.Millisecond})
	require.NoError(t, err)
	p := FetcherPartition{Partition: e.tp, Log: l, State: born}
	require.NoError(t, f.Add(p))
	var stop atomic.Bool
	added := make(chan error, 1)
	go func() {
		var err error
		for !stop.Load() && err == nil {
			err = f.Add(p)
			time.Sleep(100 * time.Microsecond)
		}
		added <- err
	}()
	runUntil(t, f, l, 3*batches)
	stop.Store(true)
	require.NoError(t, <-added)
	require.Equal(t, want, readAll(t, l, 0, 0))
	require.NoError(t, f.Failed(e.tp))
}
