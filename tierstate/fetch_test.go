package tierstate

import (
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/log"
)

// TestValidateFetchAgreesWithRead sweeps every offset around a tiered and
// an untiered log and checks that, without a last fetched epoch,
// ValidateFetch answers what the log's own Read says: a read where Read
// succeeds, the tiered outcome where Read says
// ErrOffsetMovedToTieredStorage, OFFSET_OUT_OF_RANGE where it says
// ErrOffsetOutOfRange.
func TestValidateFetchAgreesWithRead(t *testing.T) {
	for _, remote := range []bool{false, true} {
		fs := vfs.NewMem()
		opts := log.Options{FS: fs, RemoteStorageEnabled: remote, LocalRetentionBytes: 1, SegmentIndexBytes: 4096}
		l, err := log.Open("p0", opts)
		require.NoError(t, err)
		for epoch := int32(0); epoch < 3; epoch++ {
			_, err := l.AppendAsLeader(testBatch(t, 10, 0, base.UndefinedEpoch), epoch, log.OriginClient)
			require.NoError(t, err)
			require.NoError(t, l.Roll())
		}
		l.UpdateHighWatermark(30)
		_, err = l.MaybeIncrementLogStartOffset(5)
		require.NoError(t, err)
		if remote {
			require.True(t, l.UpdateHighestOffsetInRemoteStorage(19, l.TruncationCount()))
		}
		_, err = l.DeleteOldSegments()
		require.NoError(t, err)
		if remote {
			require.Equal(t, int64(20), l.LocalLogStartOffset())
		}

		seen := map[FetchOutcome]bool{}
		for offset := int64(-1); offset <= l.LogEndOffset()+2; offset++ {
			_, readErr := l.Read(nil, offset, 1<<20, log.IsolationLogEnd, true)
			for _, f := range []Fetcher{FetcherConsumer, FetcherFollower, FetcherFuture} {
				v := ValidateFetch(l, 2, FetchRequest{Fetcher: f, FetchOffset: offset,
					LastFetchedEpoch: base.UndefinedEpoch, CurrentLeaderEpoch: base.UndefinedEpoch})
				switch {
				case readErr == nil:
					require.Equal(t, FetchRead, v.Outcome, "remote=%t offset=%d %s: %s", remote, offset, f, v)
				case f == FetcherConsumer && errors.Is(readErr, log.ErrOffsetMovedToTieredStorage):
					require.Equal(t, FetchRemoteRead, v.Outcome, "remote=%t offset=%d %s: %s", remote, offset, f, v)
				case errors.Is(readErr, log.ErrOffsetMovedToTieredStorage):
					require.Equal(t, FetchOffsetMovedToTieredStorage, v.Outcome, "remote=%t offset=%d %s: %s", remote, offset, f, v)
				default:
					require.ErrorIs(t, readErr, log.ErrOffsetOutOfRange)
					require.Equal(t, FetchOffsetOutOfRange, v.Outcome, "remote=%t offset=%d %s: %s", remote, offset, f, v)
				}
				seen[v.Outcome] = true
				require.Equal(t, base.UndefinedEpoch, v.DivergingEpoch)
				require.Equal(t, base.UndefinedOffset, v.DivergingEndOffset)
				require.Equal(t, l.HighWatermark(), v.HighWatermark)
				require.Equal(t, l.LogStartOffset(), v.LogStartOffset)
				require.Equal(t, l.LogEndOffset(), v.LogEndOffset)
			}
		}
		require.True(t, seen[FetchRead] && seen[FetchOffsetOutOfRange], "remote=%t: %v", remote, seen)
		require.Equal(t, remote, seen[FetchOffsetMovedToTieredStorage] && seen[FetchRemoteRead], "remote=%t: %v", remote, seen)
		require.NoError(t, l.Close())
	}
}

// fakeLog is a FetchLog with fixed offsets and an epoch answer, for the
// cases a real log cannot be put in.
type fakeLog struct {
	logStart, localLogStart, leo, hw int64
	remote                           bool
	end                              int64
	found                            int32
	ok                               bool
}

func (f fakeLog) LogStartOffset() int64        { return f.logStart }
func (f fakeLog) LocalLogStartOffset() int64   { return f.localLogStart }
func (f fakeLog) LogEndOffset() int64          { return f.leo }
func (f fakeLog) HighWatermark() int64         { return f.hw }
func (f fakeLog) RemoteStorageEnabled() bool   { return f.remote }
func (f fakeLog) EarliestEpoch() (int32, bool) { return 0, false }
func (f fakeLog) EndOffsetForEpoch(int32) EpochEndOffset {
	if !f.ok {
		return undefinedEpochEndOffset
	}
	return EpochEndOffset{Epoch: f.found, EndOffset: f.end}
}

// TestValidateFetchOrder pins the order of Kafka's checks where two rules
// apply at once.
func TestValidateFetchOrder(t *testing.T) {
	tiered := fakeLog{logStart: 10, localLogStart: 50, leo: 100, hw: 90, remote: true}
	req := func(f Fetcher, offset int64, epoch int32) FetchRequest {
		return FetchRequest{Fetcher: f, FetchOffset: offset, LastFetchedEpoch: epoch, CurrentLeaderEpoch: base.UndefinedEpoch}
	}
	cases := []struct {
		name string
		log  fakeLog
		req  FetchRequest
		want FetchOutcome
	}{
		// A divergence in the tiered range is answered before the range.
		{"diverging before tiered", with(tiered, 30, 3, true), req(FetcherFollower, 40, 3), FetchDiverging},
		{"diverging before tiered (consumer)", with(tiered, 30, 3, true), req(FetcherConsumer, 40, 3), FetchDiverging},
		// The log start check comes before the divergence.
		{"below log start before diverging", with(tiered, 5, 3, true), req(FetcherFollower, 9, 3), FetchOffsetOutOfRange},
		// An epoch the leader cannot answer is out of range, then tiered.
		{"no epoch answer in tiered range", with(tiered, 0, 0, false), req(FetcherFollower, 20, 3), FetchOffsetMovedToTieredStorage},
		{"no epoch answer in tiered range (consumer)", with(tiered, 0, 0, false), req(FetcherConsumer, 20, 3), FetchRemoteRead},
		{"no epoch answer locally", with(tiered, 0, 0, false), req(FetcherFollower, 60, 3), FetchOffsetOutOfRange},
		// A floor epoch below the requested one diverges at any offset.
		{"floor epoch", with(tiered, 95, 2, true), req(FetcherFollower, 60, 3), FetchDiverging},
		// Remote storage disabled: no tiered outcome.
		{"not tiered", fakeLog{logStart: 10, localLogStart: 50, leo: 100, hw: 90}, req(FetcherFollower, 20, base.UndefinedEpoch), FetchOffsetOutOfRange},
	}
	for _, c := range cases {
		v := ValidateFetch(c.log, 3, c.req)
		require.Equal(t, c.want, v.Outcome, "%s: %s", c.name, v)
	}
}

func with(l fakeLog, end int64, found int32, ok bool) fakeLog {
	l.end, l.found, l.ok = end, found, ok
	return l
}

func TestFetchValidationStrings(t *testing.T) {
	require.Equal(t, "OFFSET_MOVED_TO_TIERED_STORAGE", FetchOffsetMovedToTieredStorage.String())
	require.Equal(t, "OFFSET_OUT_OF_RANGE", FetchOffsetOutOfRange.String())
	require.Equal(t, "future", FetcherFuture.String())
	v := ValidateFetch(fakeLog{leo: 5, hw: 5}, 1, FetchRequest{FetchOffset: 0, LastFetchedEpoch: base.UndefinedEpoch, CurrentLeaderEpoch: 0})
	require.Equal(t, FetchFencedLeaderEpoch, v.Outcome)
	require.Equal(t, base.UndefinedOffset, v.HighWatermark)
	require.Equal(t, "FENCED_LEADER_EPOCH (request epoch 0 older than leader epoch 1)", v.String())
}
