package tierstate

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// followerAt is a SealFollowerLog with a log end, a high watermark and a
// latest epoch.
type followerAt struct {
	leo, hw int64
	epoch   int32
}

func (l followerAt) LogEndOffset() int64        { return l.leo }
func (l followerAt) HighWatermark() int64       { return l.hw }
func (l followerAt) LatestEpoch() (int32, bool) { return l.epoch, true }

// TestUndoRefusedOnceSealCommitted: the abort (-1) and the re-arm (-2)
// of the switch document's operator override are refused in phases 1
// and 2 with ErrSealCommitted, and on a classic partition with
// ErrNotSwitching; each refusal is a *TransitionError naming the phase
// and leaves the State as it was.
func TestUndoRefusedOnceSealCommitted(t *testing.T) {
	pending, err := State{}.WithConsolidating(true).ArmSwitch()
	require.NoError(t, err)
	phase1, err := pending.CommitSeal(120, testProducers(1))
	require.NoError(t, err)
	phase2, err := phase1.SetClassicPrefixInRemoteStorage(
		ClassicPrefixRequest{BrokerID: 1, LeaderEpoch: 5, Seal: 120, LastClassicLeaderEpoch: 4},
		Leadership{Leader: 1, LeaderEpoch: 5})
	require.NoError(t, err)
	require.Equal(t, int32(4), phase2.LastClassicLeaderEpoch())

	undos := map[string]func(State) (State, error){
		OpAbort: State.AbortSwitch,
		OpRearm: State.RearmSwitch,
	}
	for op, undo := range undos {
		for _, tc := range []struct {
			from   State
			reason error
		}{
			{State{}.WithConsolidating(true), ErrNotSwitching},
			{phase1, ErrSealCommitted},
			{phase2, ErrSealCommitted},
		} {
			next, err := undo(tc.from)
			require.ErrorIs(t, err, ErrInvalidTransition, "%s from %s", op, tc.from)
			require.ErrorIs(t, err, tc.reason, "%s from %s", op, tc.from)
			var te *TransitionError
			require.True(t, errors.As(err, &te))
			require.Equal(t, op, te.Op)
			require.Equal(t, tc.from.Phase(), te.From)
			require.Equal(t, tc.from, next, "a refused undo leaves the State as it was")
		}
	}
	// Phase 2 keeps R and E_d through every refused undo and record.
	for _, seal := range []int64{NoSeal, SealPending} {
		next, err := phase2.ApplyChange(Tags{ClassicToDisklessStartOffset: Some(seal)})
		require.ErrorIs(t, err, ErrSealCommitted)
		require.Equal(t, phase2, next)
	}
}

// TestAbortReturnsPartitionToClassic: an abort of a pending switch, by
// the operation or by the record a broker replays, leaves a classic
// partition that does not consolidate, so its followers stay on the
// classic fetcher; a re-arm keeps it pending and consolidating.
func TestAbortReturnsPartitionToClassic(t *testing.T) {
	pending, err := State{}.WithConsolidating(true).ArmSwitch()
	require.NoError(t, err)

	rearmed, err := pending.RearmSwitch()
	require.NoError(t, err)
	require.Equal(t, pending, rearmed)

	aborted, err := pending.AbortSwitch()
	require.NoError(t, err)
	replayed, err := pending.ApplyChange(ChangeTags(pending, aborted))
	require.NoError(t, err)
	require.Equal(t, aborted, replayed)
	for _, s := range []State{aborted, replayed} {
		require.Equal(t, PhaseClassic, s.Phase())
		require.Equal(t, NoSeal, s.Seal())
		require.False(t, s.Consolidating(), "an aborted switch reads as born diskless: %s", s)
		route := RouteFollowerFetcher(s, followerAt{leo: 40, hw: 40, epoch: 3}, true)
		require.Equal(t, ClassicFetcher, route.Fetcher, "%s", route)
		require.Equal(t, int64(40), route.StartOffset)
	}

	// Arming again starts over from classic.
	again, err := aborted.WithConsolidating(true).ArmSwitch()
	require.NoError(t, err)
	require.Equal(t, pending, again)
}
