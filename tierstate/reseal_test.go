package tierstate

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// The example of https://github.com/aiven/inkless/pull/871: seal 20, the
// last-known leader's log ends at 15. `seal 18` is refused with the range
// named; `seal 15` is the State the controller commits.
func TestPlanResealLastKnownLeader(t *testing.T) {
	s, err := State{}.WithConsolidating(true).ArmSwitch()
	require.NoError(t, err)
	s, err = s.CommitSeal(20, nil)
	require.NoError(t, err)
	req := ResealRequest{Seal: 18, Leader: 3, LogStartOffset: 0, LeaderLogEndOffset: 15}

	got, err := PlanReseal(s, req)
	require.ErrorIs(t, err, ErrSealOutOfRange)
	require.ErrorIs(t, err, ErrRecoveryRefused)
	var rangeErr *SealRangeError
	require.True(t, errors.As(err, &rangeErr))
	require.Equal(t, SealRangeError{Seal: 18, Leader: 3, LogStartOffset: 0, LeaderLogEndOffset: 15}, *rangeErr)
	require.Equal(t, s, got, "a refusal returns the State unchanged")

	req.Seal = 15
	got, err = PlanReseal(s, req)
	require.NoError(t, err)
	want, err := s.Reseal(15, nil, false)
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.Equal(t, int64(15), got.Seal())

	// Below the log start, no leader, and the switch rules before the range.
	_, err = PlanReseal(s, ResealRequest{Seal: 4, Leader: 3, LogStartOffset: 5, LeaderLogEndOffset: 15})
	require.ErrorIs(t, err, ErrSealOutOfRange)
	_, err = PlanReseal(s, ResealRequest{Seal: 15, Leader: -1})
	require.ErrorIs(t, err, ErrNoLeader)
	_, err = PlanReseal(s, ResealRequest{Seal: 21, Leader: 3, LeaderLogEndOffset: 30})
	require.ErrorIs(t, err, ErrSealIncrease)
	_, err = PlanReseal(State{}, ResealRequest{Seal: 0, Leader: 3})
	require.ErrorIs(t, err, ErrNotSwitching)
}

// A seal inside one of the leader's batches is refused with the batch
// named: the truncation at the seal keeps no part of a batch, so the
// batch's records below the seal would be lost with the tail. The
// batch's edges are accepted; an unknown batch skips the check.
func TestPlanResealInsideBatch(t *testing.T) {
	s, err := State{}.WithConsolidating(true).ArmSwitch()
	require.NoError(t, err)
	s, err = s.CommitSeal(20, nil)
	require.NoError(t, err)
	batch := BatchSpan{Known: true, BaseOffset: 10, LastOffset: 14}
	req := ResealRequest{Seal: 12, Leader: 3, LeaderLogEndOffset: 18, SealBatch: batch}
	got, err := PlanReseal(s, req)
	require.ErrorIs(t, err, ErrSealInsideBatch)
	require.ErrorIs(t, err, ErrRecoveryRefused)
	var be *SealBatchError
	require.True(t, errors.As(err, &be))
	require.Equal(t, SealBatchError{Seal: 12, Leader: 3, BaseOffset: 10, LastOffset: 14}, *be)
	require.Contains(t, err.Error(), "seal 10 or 15 keeps whole batches")
	require.Equal(t, s, got)

	for _, seal := range []int64{10, 15} {
		req.Seal = seal
		if seal == 15 {
			req.SealBatch = BatchSpan{Known: true, BaseOffset: 15, LastOffset: 17}
		}
		got, err := PlanReseal(s, req)
		require.NoError(t, err, "seal %d", seal)
		require.Equal(t, seal, got.Seal())
	}
	req.Seal, req.SealBatch = 12, BatchSpan{}
	_, err = PlanReseal(s, req)
	require.NoError(t, err, "batch unknown: the range check only")
}

// While the seal is pending the operator may force it, but only at the
// leader's log end: the leader holds [0, 10) with its high watermark at
// 10 (every record acknowledged), so `seal 5` would truncate [5, 10) with
// no loss accepted and is refused with the log end named; `seal 10` is
// what the leader would commit; `seal 12` names records nobody holds.
func TestPlanResealWhileSealPending(t *testing.T) {
	s, err := State{}.WithConsolidating(true).ArmSwitch()
	require.NoError(t, err)
	require.Equal(t, PhaseSealPending, s.Phase())
	req := ResealRequest{Seal: 5, Leader: 1, LogStartOffset: 0, LeaderLogEndOffset: 10, LeaderHighWatermark: 10}

	got, err := PlanReseal(s, req)
	require.ErrorIs(t, err, ErrForcedSealBelowLogEnd)
	require.ErrorIs(t, err, ErrRecoveryRefused)
	var forced *ForcedSealError
	require.True(t, errors.As(err, &forced))
	require.Equal(t, ForcedSealError{Seal: 5, Leader: 1, LeaderLogEndOffset: 10}, *forced)
	require.Equal(t, s, got, "a refusal returns the State unchanged")
	_, err = PlanReseal(s, ResealRequest{Seal: 0, Leader: 1, LeaderLogEndOffset: 10})
	require.ErrorIs(t, err, ErrForcedSealBelowLogEnd)

	req.Seal = 10
	got, err = PlanReseal(s, req)
	require.NoError(t, err)
	require.Equal(t, PhaseOne, got.Phase())
	require.Equal(t, int64(10), got.Seal())

	req.Seal = 12
	_, err = PlanReseal(s, req)
	require.ErrorIs(t, err, ErrSealOutOfRange)

	// In phase 1 the same lowering is the recovery that accepts the loss.
	p1, err := s.CommitSeal(10, nil)
	require.NoError(t, err)
	got, err = PlanReseal(p1, ResealRequest{Seal: 5, Leader: 1, LeaderLogEndOffset: 10})
	require.NoError(t, err)
	require.Equal(t, int64(5), got.Seal())
}

// While the seal is pending a forced seal at the leader's log end is
// refused while the leader's high watermark is below it: the leader
// holds [0, 10) with [0, 6) committed, and an in-sync follower may hold
// another [6, 10) (written by a leader of an earlier epoch). The seal
// raises every replica's high watermark to it, so that follower, elected,
// would serve its tail as committed. Once the high watermark reaches 10
// the same seal is taken; in phase 1 the high watermark is not read.
func TestPlanResealPendingAboveHighWatermark(t *testing.T) {
	s, err := State{}.WithConsolidating(true).ArmSwitch()
	require.NoError(t, err)
	req := ResealRequest{Seal: 10, Leader: 1, LogStartOffset: 0, LeaderLogEndOffset: 10, LeaderHighWatermark: 6}

	got, err := PlanReseal(s, req)
	require.ErrorIs(t, err, ErrForcedSealAboveHighWatermark)
	require.ErrorIs(t, err, ErrRecoveryRefused)
	var unreplicated *UnreplicatedSealError
	require.True(t, errors.As(err, &unreplicated))
	require.Equal(t, UnreplicatedSealError{Seal: 10, Leader: 1, HighWatermark: 6}, *unreplicated)
	require.Equal(t, s, got, "a refusal returns the State unchanged")
	require.Contains(t, err.Error(), "[6, 10) is not committed")

	req.LeaderHighWatermark = 10
	got, err = PlanReseal(s, req)
	require.NoError(t, err)
	require.Equal(t, PhaseOne, got.Phase())
	require.Equal(t, int64(10), got.Seal())

	// A committed seal is lowered to the leader's log end whatever its
	// high watermark (the recovery of github.com/aiven/inkless/pull/871
	// describes a fenced leader).
	p1, err := s.CommitSeal(12, nil)
	require.NoError(t, err)
	got, err = PlanReseal(p1, ResealRequest{Seal: 10, Leader: 1, LeaderLogEndOffset: 10, LeaderHighWatermark: 6})
	require.NoError(t, err)
	require.Equal(t, int64(10), got.Seal())
}
