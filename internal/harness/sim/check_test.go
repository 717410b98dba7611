package sim

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/cryptotest"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/wal"
)

// determinismSeeds are seeds whose first 300 steps (default menu, swarm
// on) take what once made a run depend on the Go scheduler: crash
// images keeping half the unsynced data (14, 18, 27), crashes cut at a
// file operation of a restart's recovery (all), remote copies failed by
// store faults (14, 18, 27), log directory moves copied and promoted
// (14, 27). The race detector runs two (a run is about ten times
// slower there).
func determinismSeeds() []uint64 {
	if raceEnabled {
		return []uint64{14, 27}
	}
	return []uint64{7, 14, 18, 27}
}

// TestDeterminism: the same seed gives the same trace, byte for byte,
// with the whole default menu and its swarm configuration.
func TestDeterminism(t *testing.T) {
	for _, seed := range determinismSeeds() {
		var traces [2][]string
		for i := range traces {
			cryptotest.SetGlobalRandom(t, seed)
			res, err := Run(seed, RunOptions{Steps: 300})
			require.NoError(t, err)
			require.False(t, res.Failed(), "seed %d: %v\n%s", seed, res.Violation, res.TraceTail(40))
			require.Len(t, res.Trace, 301) // the swarm configuration's line, then 300 steps
			traces[i] = res.Trace
		}
		for i := range traces[0] {
			require.Equal(t, traces[0][i], traces[1][i], "seed %d: line %d differs between two runs", seed, i)
		}
	}
}

// scriptedPrefix: five records committed on brokers 1 and 2 (3 down).
func scriptedPrefix(t *testing.T) *Cluster {
	cryptotest.SetGlobalRandom(t, 1)
	c, err := New(Options{Seed: 1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.Crash(3))
	require.NoError(t, c.Produce(5))
	require.NoError(t, c.CatchUp(2))
	require.Equal(t, int64(5), c.Committed())
	return c
}

// switchedPrefix: scriptedPrefix sealed at 5 and the WAL's row made
// (W = 0, S = 5); nothing is in remote storage yet.
func switchedPrefix(t *testing.T) *Cluster {
	c := scriptedPrefix(t)
	require.NoError(t, c.ArmSwitch())
	require.NoError(t, c.SwitchStep()) // the seal, proposed and committed
	require.NoError(t, c.SwitchStep()) // InitDisklessLog
	w, hw, ok := c.WAL()
	require.True(t, ok)
	require.Equal(t, [3]int64{0, 5, 5}, [3]int64{w, hw, c.Seal()})
	require.Nil(t, c.Check())
	return c
}

func requireKind(t *testing.T, v *Violation, k Kind) {
	t.Helper()
	require.NotNil(t, v, "no violation found")
	require.True(t, errors.Is(v, ErrViolation))
	require.Equal(t, k, v.Kind, "%v", v)
}

// TestCheckerCatches feeds the checker a corrupted cluster per
// invariant and requires the matching violation.
func TestCheckerCatches(t *testing.T) {
	t.Run("conflict", func(t *testing.T) {
		c := scriptedPrefix(t)
		l := c.Broker(2).Log()
		_, err := l.TruncateTo(2)
		require.NoError(t, err)
		b := record.NewBuilder(record.DefaultBuilderOptions())
		for range 3 {
			b.Add(startMs, nil, []byte("forged"))
		}
		buf, err := b.Build()
		require.NoError(t, err)
		batch, err := record.ReadBatch(buf)
		require.NoError(t, err)
		batch.SetBaseOffset(2)
		batch.SetPartitionLeaderEpoch(0)
		_, err = l.AppendAsFollower(buf, 0)
		require.NoError(t, err)
		l.UpdateHighWatermark(5)
		requireKind(t, c.Check(), Conflict)
	})
	t.Run("lost", func(t *testing.T) {
		c := scriptedPrefix(t)
		_, err := c.Broker(1).Log().TruncateTo(3)
		require.NoError(t, err)
		requireKind(t, c.Check(), LostRecord)
	})
	t.Run("uncommitted-read", func(t *testing.T) {
		c := scriptedPrefix(t)
		require.NoError(t, c.Produce(3)) // broker 2 has not fetched: not committed
		l := c.Broker(1).Log()
		l.UpdateHighWatermark(l.LogEndOffset()) // a leader that ignores its ISR
		var v *Violation
		require.ErrorAs(t, c.Consume(5), &v)
		requireKind(t, v, UncommittedRead)
	})
	t.Run("orphan-object", func(t *testing.T) {
		// An object of a segment the metadata never knew, as a PUT landing
		// after its failed copy's cleanup leaves it.
		c := scriptedPrefix(t)
		require.Nil(t, c.Check())
		key := "orders-dGllcmxvZy1kZW1vAQAAAA/0/00000000000000000000-" + remote.NewSegmentID(Partition).ID.String() + "/indexes"
		require.NoError(t, c.store.Put(context.Background(), key, strings.NewReader("x"), 1, objstore.PutOptions{}))
		requireKind(t, c.Check(), OrphanObject)
	})
	t.Run("remote-past-committed", func(t *testing.T) {
		c := scriptedPrefix(t)
		tp := Partition
		require.NoError(t, c.meta.RegisterCopiedSegment(context.Background(), remote.SegmentMetadata{
			SegmentID: remote.NewSegmentID(tp), StartOffset: 0, EndOffset: 7, SizeBytes: 8, TxnIndexEmpty: true,
			SegmentLeaderEpochs: []epochcache.Entry{{Epoch: 0, StartOffset: 0}}, State: remote.CopySegmentFinished,
		})) // offsets 5 to 7 were never produced
		requireKind(t, c.Check(), Conflict)
	})
	t.Run("lost-after-seal", func(t *testing.T) {
		c := switchedPrefix(t)
		// The leader drops its records and nothing else holds them.
		require.NoError(t, c.Broker(1).Log().TruncateFullyAndStartAt(5, 5))
		requireKind(t, c.Check(), LostRecord)
	})
	t.Run("pruned-past-remote", func(t *testing.T) {
		c := switchedPrefix(t)
		// A prune that trusts an h remote storage does not have (it holds
		// nothing): W moves to the seal.
		res, err := c.cp.PruneDisklessLogs(context.Background(), []wal.PruneRequest{{Partition: c.walTP(),
			HighestOffsetInRemoteStorage: 4}})
		require.NoError(t, err)
		require.NoError(t, res[0].Err)
		require.EqualValues(t, 5, res[0].LogStartOffset)
		requireKind(t, c.Check(), PrunedPastRemote)
	})
	t.Run("lineage", func(t *testing.T) {
		c := scriptedPrefix(t)
		fd, err := c.Broker(1).Log().Read(nil, 0, 1<<20, 0, true)
		require.NoError(t, err)
		buf := append([]byte(nil), fd.Records...)
		batch, err := record.ReadBatch(buf)
		require.NoError(t, err)
		batch.SetPartitionLeaderEpoch(9) // the same records in an epoch nobody led
		l := c.Broker(2).Log()
		require.NoError(t, l.TruncateFullyAndStartAt(0, 0))
		_, err = l.AppendAsFollower(buf, 9)
		require.NoError(t, err)
		l.UpdateHighWatermark(5)
		requireKind(t, c.Check(), LineageDiverged)
	})
}

// BenchmarkSimSteps measures simulated steps per second (one 500-step
// random run per iteration).
func BenchmarkSimSteps(b *testing.B) {
	steps := 0
	for i := range b.N {
		res, err := Run(uint64(i+1), RunOptions{Steps: 500})
		if err != nil {
			b.Fatal(err)
		}
		steps += res.Steps
	}
	b.ReportMetric(float64(steps)/b.Elapsed().Seconds(), "steps/s")
}
