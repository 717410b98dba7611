package tierstate

import (
	"context"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/remote"
)

// TestMachineMetrics: each rebuild's end is counted once, under the
// action its error asks of the fetcher; a refused call is not a rebuild.
func TestMachineMetrics(t *testing.T) {
	data := newFakeData()
	seg := remote.SegmentMetadata{StartOffset: 0, EndOffset: 9, SegmentID: remote.SegmentID{ID: remote.UUID{9}}}
	data.segments[seg.SegmentID.ID] = fakeSegment{epochs: entries(0, 0), snapshot: producerSnapshot(t)}
	leader := newFakeLeader()
	leader.local = OffsetAndEpoch{Offset: 10, Epoch: 0}
	m, err := NewMachine(MachineOptions{Leader: leader, Metadata: fakeMeta{seg: seg, ok: true}, Data: data})
	require.NoError(t, err)
	rebuild := func(ctx context.Context) error {
		l, err := log.Open("p0", log.Options{FS: vfs.NewMem(), RemoteStorageEnabled: true})
		require.NoError(t, err)
		defer l.Close()
		_, err = m.Rebuild(ctx, RebuildRequest{Partition: testTP, Log: l})
		return err
	}

	require.NoError(t, rebuild(context.Background()))
	leader.err = base.ErrFencedEpoch
	require.Equal(t, ActionMarkFailed, RebuildAction(rebuild(context.Background())))
	leader.err = remote.ErrClosed
	require.Equal(t, ActionRetry, RebuildAction(rebuild(context.Background())))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.Equal(t, ActionStop, RebuildAction(rebuild(ctx)))
	_, err = m.Rebuild(context.Background(), RebuildRequest{})
	require.ErrorIs(t, err, ErrInvalidArgument)

	require.Equal(t, MachineMetrics{
		RebuildsStarted:           4,
		RebuildsCompleted:         1,
		RebuildRetries:            1,
		RebuildsMarkedFailed:      1,
		RebuildsStopped:           1,
		ProducerSnapshotsRestored: 1,
	}, m.Metrics())
}
