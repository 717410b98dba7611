package consolidate

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/harness/testseed"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/remote"
)

// TestFetcherCrash crashes the consolidating replica's disk after every
// fetcher step (a phase-2 rebuild, then appends, flushed every other
// step) keeping 0 % or 50 % of the unsynced data, reopens its log from
// the crash image and consolidates to the end with a new fetcher. Every
// image must end with exactly the diskless records [100, 150), each once
// at its offset, stamped with E_d, and the epochs below the seal intact:
// nothing below the seal is lost (a log that lost the rebuild is rebuilt
// again) and no record is served twice.
func TestFetcherCrash(t *testing.T) {
	seed := testseed.Seed(t, 7)
	rng := rand.New(rand.NewPCG(seed, seed))
	e := newWALEnv(t)
	state := e.switchAt(0, 100, 2)
	var want []string
	for i := range 5 {
		p := fmt.Sprintf("c%d", i)
		want = append(want, expect(e.produce(10, p), 10, p)...)
	}
	a := e.addSegment(50, 99, epochcache.Entry{Epoch: 0, StartOffset: 50}, epochcache.Entry{Epoch: 2, StartOffset: 80})
	data := checkpointData{epochs: map[remote.UUID][]epochcache.Entry{a.SegmentID.ID: {{Epoch: 0, StartOffset: 0}, {Epoch: 2, StartOffset: 80}}},
		snapshot: emptyProducerSnapshot(t, e)}
	ep := e.endpoint(EndpointOptions{SegmentBytes: 4096, MaxMessageBytes: 1 << 20}) // one batch per fetch
	m := e.machine(ep, data)
	mem := vfs.NewCrashableMem()
	opts := log.Options{FS: mem, RemoteStorageEnabled: true, RetentionMs: log.RetentionInfinite}

	consolidate := func(t *testing.T, l *log.UnifiedLog, steps int) {
		e.parts.set(e.tp, state, l)
		f, err := NewFetcher(FetcherOptions{Endpoint: ep, Machine: m, Clock: &manualClock{}})
		require.NoError(t, err)
		require.NoError(t, f.Add(FetcherPartition{Partition: e.tp, Log: l, State: state, CurrentLeaderEpoch: 4}))
		for range steps {
			n, err := f.Step(e.ctx)
			require.NoError(t, err)
			require.NoError(t, f.Failed(e.tp))
			if n == 0 {
				return
			}
		}
	}
	check := func(t *testing.T, l *log.UnifiedLog) {
		require.Equal(t, int64(150), l.LogEndOffset())
		require.Equal(t, "0@0 2@80 5@100", epochcache.FormatEntries(l.EpochEntries()))
		require.Equal(t, want, readAll(t, l, 100, 5))
	}

	// log.Open does not fsync the parent of a directory it creates, so
	// the test makes the directory durable first (a broker's log
	// manager would).
	require.NoError(t, mem.MkdirAll("replica", 0o755))
	root, err := mem.OpenDir("")
	require.NoError(t, err)
	require.NoError(t, root.Sync())
	require.NoError(t, root.Close())
	l, err := log.Open("replica", opts)
	require.NoError(t, err)
	images, recovered := 0, map[int64]bool{}
	for step := range 8 {
		consolidate(t, l, 1)
		if step%2 == 1 {
			require.NoError(t, l.Flush())
		}
		for _, pct := range []int{0, 50} {
			clone := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rng})
			copts := opts
			copts.FS = clone
			cl, err := log.Open("replica", copts)
			require.NoError(t, err, "step %d, %d%% unsynced kept", step, pct)
			recovered[cl.LogEndOffset()] = true
			consolidate(t, cl, 20)
			check(t, cl)
			require.NoError(t, cl.Close())
			images++
		}
	}
	e.parts.set(e.tp, state, l)
	check(t, l)
	require.NoError(t, l.Close())
	require.Equal(t, 16, images)
	t.Logf("recovered log ends: %v", recovered)
	require.Greater(t, len(recovered), 3, "the images recover at several log ends: %v", recovered)
}
