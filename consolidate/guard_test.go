package consolidate

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/tierstate"
)

// The retention guard of github.com/aiven/inkless/pull/857 on real state:
// remote.Manager's expiration task takes X from a CrossTierCache over the
// control plane, where a Reporter flushed 40. A recreated leader (an
// empty log in epoch 7) of a consolidating partition with remote segments
// [0,39]{0}, [40,79]{0,2}, [80,99]{2} below seal 100 and [100,149]{5}
// loses only [0,39], before and after its phase-2 rebuild.
func TestRetentionGuardOnRealCrossTierStart(t *testing.T) {
	e := newWALEnv(t)
	state := e.switchAt(0, 100, 2)
	segs := []remote.SegmentMetadata{
		e.addSegment(0, 39, epochcache.Entry{Epoch: 0, StartOffset: 0}),
		e.addSegment(40, 79, epochcache.Entry{Epoch: 0, StartOffset: 40}, epochcache.Entry{Epoch: 2, StartOffset: 60}),
		e.addSegment(80, 99, epochcache.Entry{Epoch: 2, StartOffset: 80}),
		e.addSegment(100, 149, epochcache.Entry{Epoch: 5, StartOffset: 100}),
	}
	// Infinite time retention: the segments carry timestamp 0, and the
	// rebuilt log's epochs make them subject to retention, which the
	// guard does not hold back (it bounds only the epoch-cache cleanup).
	l, err := log.Open("leader", log.Options{FS: e.fs, RemoteStorageEnabled: true, RetentionMs: log.RetentionInfinite})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	require.NoError(t, l.AssignEpochStartOffset(7, 0))
	e.parts.set(e.tp, state, l)
	cache, err := NewCrossTierCache(CrossTierCacheOptions{ControlPlane: e.cp, Partitions: e.parts})
	require.NoError(t, err)
	rep, err := NewReporter(ReporterOptions{ControlPlane: e.cp, Cache: cache})
	require.NoError(t, err)
	rep.Report(e.tp, 40)
	require.NoError(t, rep.Flush(e.ctx))

	storage, err := remote.NewStorageManager(e.store, remote.StorageOptions{})
	require.NoError(t, err)
	mgr, err := remote.NewManager(e.meta, storage, remote.ManagerOptions{TaskInterval: -1, Consolidation: cache})
	require.NoError(t, err)
	t.Cleanup(func() { _ = mgr.Close() })
	require.NoError(t, mgr.OnLeadershipChange([]remote.Partition{{TopicIDPartition: e.tp, Log: l}}, nil))

	left := func() []int64 {
		all, err := e.meta.ListSegments(e.tp)
		require.NoError(t, err)
		var starts []int64
		for _, s := range all {
			if s.State == remote.CopySegmentFinished {
				starts = append(starts, s.StartOffset)
			}
		}
		return starts
	}
	_, err = mgr.RunExpiration(e.ctx, e.tp)
	require.NoError(t, err)
	require.Equal(t, []int64{40, 80, 100}, left(), "only the segment below X = 40 goes")

	// The phase-2 rebuild from (2, 99), then expiration again.
	data := checkpointData{epochs: map[remote.UUID][]epochcache.Entry{
		segs[2].SegmentID.ID: {{Epoch: 0, StartOffset: 0}, {Epoch: 2, StartOffset: 60}},
	}, snapshot: emptyProducerSnapshot(t, e)}
	ep := e.endpoint(EndpointOptions{CrossTier: cache})
	m := e.machine(ep, data)
	_, err = m.Rebuild(e.ctx, tierstate.RebuildRequest{Partition: e.tp, Log: l, State: state, CurrentLeaderEpoch: 7, LeaderLogStartOffset: 40})
	require.NoError(t, err)
	require.Equal(t, int64(100), l.LogEndOffset())
	_, err = mgr.RunExpiration(e.ctx, e.tp)
	require.NoError(t, err)
	require.Equal(t, []int64{40, 80, 100}, left())
}
