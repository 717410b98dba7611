package remote

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/internal/harness/testseed"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote/objstore/mem"
)

// TestManagerUnderStoreFaults runs the tasks and remote reads against a
// store that fails, loses responses, truncates and lies about bodies,
// and is slow past the deadline. Every call returns an error or the right
// bytes, never wrong ones, nothing hangs, the metrics count the errors;
// once the faults stop, the tier converges: everything copied, every
// offset readable, and after expiration no object is left.
func TestManagerUnderStoreFaults(t *testing.T) {
	seed := testseed.Seed(t, 7)
	store := mem.New(mem.Options{Seed: seed})
	e := newMgrEnv(t, store)
	ctx := context.Background()
	tp := testPartition(0)
	l := e.openLog("p0", log.Options{RetentionMs: 60_000, LocalRetentionMs: 1})
	appendSegments(t, l, 0, 4, 5)
	appendSegments(t, l, 1, 4, 5)
	want := map[int64][]byte{}
	for off := int64(0); off < l.LogEndOffset(); off++ {
		fd, err := l.Read(nil, off, 1, log.IsolationLogEnd, true)
		require.NoError(t, err)
		want[off] = bytes.Clone(fd.Records)
	}
	require.NoError(t, e.mgr.OnLeadershipChange([]Partition{{TopicIDPartition: tp, Log: l}}, nil))

	bad := mem.Faults{ErrorRate: 0.15, LostResponseRate: 0.1, TruncateRate: 0.1, LieRate: 0.1,
		LatencyJitter: 2 * time.Millisecond}
	store.SetFaults(mem.FaultConfig{Put: bad, Get: bad, Delete: bad, Stat: bad, List: bad})
	failures := 0
	for range 30 {
		tctx, cancel := context.WithTimeout(ctx, time.Second)
		if err := runErr(e.mgr.RunCopy(tctx, tp)); err != nil {
			failures++
		}
		cancel()
	}
	e.nowMs.Add(10)
	_, err := l.DeleteOldSegments()
	require.NoError(t, err)
	localStart := l.LocalLogStartOffset()
	require.Greater(t, localStart, int64(0), "some segments were copied despite the faults")
	reads, good := 0, 0
	for range 3 {
		for off := l.LogStartOffset(); off < localStart; off++ {
			tctx, cancel := context.WithTimeout(ctx, time.Second)
			res, err := e.mgr.Read(tctx, tp, off, 1, log.IsolationLogEnd, true)
			cancel()
			reads++
			if err == nil {
				good++
				require.Equal(t, want[res.BatchBaseOffset], res.Records, "offset %d: wrong bytes under faults", off)
			}
		}
	}
	require.Positive(t, good)
	require.Less(t, good, reads, "faults at these rates fail some reads")
	// Slow bodies past the deadline end with the context's error.
	store.SetFaults(mem.FaultConfig{Get: mem.Faults{Latency: time.Second}})
	tctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	start := time.Now()
	_, err = e.mgr.Read(tctx, tp, l.LogStartOffset(), 1, log.IsolationLogEnd, true)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 900*time.Millisecond, "the read did not wait out the store")
	met := e.mgr.Metrics()
	require.Positive(t, met.RemoteReadErrors)
	require.EqualValues(t, reads+1-good, met.RemoteReadErrors)

	// The faults stop: the tier converges.
	store.SetFaults(mem.FaultConfig{})
	require.NoError(t, runErr(e.mgr.RunCopy(ctx, tp)))
	segs, err := l.Segments(l.LogEndOffset())
	require.NoError(t, err)
	require.Equal(t, segs[0].BaseOffset-1, l.HighestOffsetInRemoteStorage())
	for off := l.LogStartOffset(); off < localStart; off++ {
		res, err := e.mgr.Read(ctx, tp, off, 1, log.IsolationLogEnd, true)
		require.NoError(t, err)
		b, err := record.ReadBatch(res.Records)
		require.NoError(t, err)
		require.Equal(t, want[off], b.Bytes())
	}
	e.nowMs.Add(120_000)
	require.NoError(t, runErr(e.mgr.RunExpiration(ctx, tp)))
	require.Empty(t, finished(t, e.meta, tp))
	require.Empty(t, store.Keys(), "no object survives expiration, not even from failed attempts")
	t.Logf("%d of 30 copy runs failed; %d of %d reads failed", failures, reads-good, reads)
}
