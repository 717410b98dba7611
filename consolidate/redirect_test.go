package consolidate

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/tierstate"
	"github.com/tierlog/tierlog/wal"
)

// checkpointData is a tierstate.RemoteData that serves each segment's
// leader-epoch checkpoint from a map and a producer snapshot of no
// producer.
type checkpointData struct {
	epochs   map[remote.UUID][]epochcache.Entry
	snapshot []byte
}

func (c checkpointData) FetchLeaderEpochs(_ context.Context, m *remote.SegmentMetadata) ([]epochcache.Entry, error) {
	e, ok := c.epochs[m.SegmentID.ID]
	if !ok {
		return nil, fmt.Errorf("no checkpoint for segment [%d, %d]", m.StartOffset, m.EndOffset)
	}
	return e, nil
}

func (c checkpointData) FetchIndex(_ context.Context, _ *remote.SegmentMetadata, t remote.IndexType) ([]byte, error) {
	if t != remote.IndexProducerSnapshot {
		return nil, remote.ErrIndexNotFound // a segment copied without the producer batches
	}
	return c.snapshot, nil
}

// emptyProducerSnapshot is a log's snapshot with no producer, taken at a
// roll of a scratch log.
func emptyProducerSnapshot(t *testing.T, e *walEnv) []byte {
	l := e.openLog("scratch")
	b := record.NewBuilder(record.DefaultBuilderOptions())
	b.Add(1000, nil, []byte("x"))
	buf, err := b.Build()
	require.NoError(t, err)
	_, err = l.AppendAsLeader(buf, 0, log.OriginClient)
	require.NoError(t, err)
	require.NoError(t, l.Roll())
	snap, err := l.ProducerSnapshot(l.LogEndOffset())
	require.NoError(t, err)
	return snap
}

// TestEveryRedirectMovesForward runs the consolidation fetch loop against
// the real endpoint once prunes moved the WAL start past the seal
// (W = 200, S = 100, R = 2, E_d = 5), with remote segments on both sides
// of the seal. Every OFFSET_MOVED_TO_TIERED_STORAGE answer is followed by
// tierstate.Machine.Rebuild, and every rebuild must move the next fetch
// offset forward until the WAL serves the fetch: an empty replica goes
// 0 -> 100 (phase 2) -> 200 (upstream), a replica with a consolidated
// suffix [100, 130) goes 130 -> 200. With the phase-2 rebuild at every
// offset the fetch at 100 (and at 130) would be rebuilt to 100 forever.
func TestEveryRedirectMovesForward(t *testing.T) {
	e := newWALEnv(t)
	state := e.switchAt(0, 100, 2)
	for _, want := range []int64{100, 150, 200} {
		require.Equal(t, want, e.produce(50, fmt.Sprintf("r%d", want)))
	}
	data := checkpointData{epochs: map[remote.UUID][]epochcache.Entry{}, snapshot: emptyProducerSnapshot(t, e)}
	a := e.addSegment(50, 99, epochcache.Entry{Epoch: 0, StartOffset: 50}, epochcache.Entry{Epoch: 2, StartOffset: 80})
	data.epochs[a.SegmentID.ID] = []epochcache.Entry{{Epoch: 0, StartOffset: 0}, {Epoch: 2, StartOffset: 80}}
	for _, start := range []int64{100, 150} {
		s := e.addSegment(start, start+49, epochcache.Entry{Epoch: 5, StartOffset: start})
		data.epochs[s.SegmentID.ID] = []epochcache.Entry{{Epoch: 0, StartOffset: 0}, {Epoch: 2, StartOffset: 80}, {Epoch: 5, StartOffset: 100}}
	}
	pr, err := e.cp.PruneDisklessLogs(e.ctx, []wal.PruneRequest{{Partition: walTP(e.tp), HighestOffsetInRemoteStorage: 199}})
	require.NoError(t, err)
	require.NoError(t, pr[0].Err)
	require.Equal(t, int64(200), pr[0].LogStartOffset)
	e.xs.set(e.tp, 0)

	ep := e.endpoint(EndpointOptions{})
	m, err := tierstate.NewMachine(tierstate.MachineOptions{Leader: ep, Metadata: e.meta, Data: data})
	require.NoError(t, err)

	run := func(t *testing.T, l *log.UnifiedLog) []string {
		var steps []string
		for range 5 {
			off := l.LogEndOffset()
			res, err := ep.Fetch(e.ctx, []FetchPartition{{Partition: e.tp, Offset: off}})
			require.NoError(t, err)
			if !errors.Is(res[0].Err, ErrOffsetMovedToTieredStorage) {
				require.NoError(t, res[0].Err)
				v := values(t, res[0].Records)
				steps = append(steps, fmt.Sprintf("served at %d: %s .. %s", off, v[0], v[len(v)-1]))
				return steps
			}
			rb, err := m.Rebuild(e.ctx, tierstate.RebuildRequest{Partition: e.tp, Log: l, State: state,
				CurrentLeaderEpoch: 4, LeaderLogStartOffset: res[0].LogStartOffset})
			require.NoError(t, err)
			require.Greater(t, rb.NextOffset, off, "a redirect must move the fetch offset forward")
			steps = append(steps, fmt.Sprintf("%d: %s rebuild to %d", off, rb.Mode, rb.NextOffset))
		}
		t.Fatalf("no fetch served: %v", steps)
		return nil
	}

	t.Run("empty replica", func(t *testing.T) {
		l := e.openLog("empty")
		e.parts.set(e.tp, state, l)
		require.Equal(t, []string{
			"0: phase-2 rebuild to 100",
			"100: upstream rebuild to 200",
			"served at 200: 200:r200-0 .. 249:r200-49",
		}, run(t, l))
		require.Equal(t, "0@0 2@80 5@100", epochcache.FormatEntries(l.EpochEntries()))
	})
	t.Run("consolidated suffix", func(t *testing.T) {
		l := e.openLog("suffix")
		e.parts.set(e.tp, state, l)
		_, err := m.Rebuild(e.ctx, tierstate.RebuildRequest{Partition: e.tp, Log: l, State: state, CurrentLeaderEpoch: 4})
		require.NoError(t, err)
		require.Equal(t, int64(100), l.LogEndOffset())
		opts := record.DefaultBuilderOptions()
		opts.BaseOffset, opts.PartitionLeaderEpoch = 100, 5
		b := record.NewBuilder(opts)
		for i := range 30 {
			b.Add(int64(1000+i), nil, fmt.Appendf(nil, "c-%d", i))
		}
		buf, err := b.Build()
		require.NoError(t, err)
		_, err = l.AppendAsFollower(buf, 5)
		require.NoError(t, err)
		require.Equal(t, []string{
			"130: upstream rebuild to 200",
			"served at 200: 200:r200-0 .. 249:r200-49",
		}, run(t, l))
	})
}
