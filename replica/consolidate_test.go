package replica

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tierlog/tierlog/consolidate"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/tierstate"
)

type fakeConsolidator struct {
	added   []consolidate.FetcherPartition
	removed []remote.TopicIDPartition
}

func (f *fakeConsolidator) Add(p consolidate.FetcherPartition) error {
	f.added = append(f.added, p)
	return nil
}
func (f *fakeConsolidator) Remove(tp remote.TopicIDPartition) { f.removed = append(f.removed, tp) }

// The driver runs on tierlog's own consolidation fetcher through the
// adapter: a phase-2 follower in the ISR at the seal is added with its
// log, state and leader epoch.
func TestConsolidationFetcherAdapter(t *testing.T) {
	e := newEnv(t, true)
	fc := &fakeConsolidator{}
	e.r.opts.Consolidation = NewConsolidationFetcher(fc)
	bLog(t, e)
	s, err := tierstate.FromPartitionRecord(tierstate.Tags{ClassicToDisklessStartOffset: tierstate.Some[int64](100),
		DisklessLeaderEpoch: tierstate.Some[int32](4), ClassicPrefixInRemoteStorage: tierstate.Some(true),
		LastClassicLeaderEpoch: tierstate.Some[int32](1)}) // bLog's epoch at 99: the replica check keeps the log
	require.NoError(t, err)
	s = s.WithConsolidating(true)
	plan, err := e.r.Apply(context.Background(), Delta{LeaderID: 2, LeaderEpoch: 5, InIsr: true, State: s})
	require.NoError(t, err, plan.String())
	require.Len(t, fc.added, 1)
	p := fc.added[0]
	require.Equal(t, testTP, p.Partition)
	require.Equal(t, s, p.State)
	require.Equal(t, int32(5), p.CurrentLeaderEpoch)
	require.Same(t, e.r.Log().(*log.UnifiedLog), p.Log.(*log.UnifiedLog))
	// An ISR-only delta that removes it moves it back to the classic
	// fetcher. (The replica check of the new replica stopped its fetchers
	// before the add: that removal is not this one.)
	removed := len(fc.removed)
	_, err = e.r.Apply(context.Background(), Delta{LeaderID: 2, LeaderEpoch: 5, PartitionEpoch: 1, State: s})
	require.NoError(t, err)
	require.Equal(t, []remote.TopicIDPartition{testTP}, fc.removed[removed:])

	// A start offset other than the log end is refused, not moved.
	err = NewConsolidationFetcher(fc).AddPartition(context.Background(),
		ConsolidationStart{Partition: testTP, Log: e.r.Log(), Offset: 3})
	require.ErrorIs(t, err, ErrInvalidArgument)
}
