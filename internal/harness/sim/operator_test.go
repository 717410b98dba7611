package sim

import (
	"testing"
	"testing/cryptotest"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/tierstate"
)

// A refused operator command changes nothing: no new record, no
// election. start-phase-2 is refused while a running replica holds the
// prefix (the stopped broker, not described, blocks nothing), elect
// needs a running replica.
func TestOperatorRefusalsChangeNothing(t *testing.T) {
	cryptotest.SetGlobalRandom(t, 1)
	c := newCaughtUpCluster(t, 5)

	// Classic: nothing to recover.
	require.ErrorIs(t, c.ElectReplica(2), tierstate.ErrNotSwitching)
	require.ErrorIs(t, c.StartPhaseTwo(true), tierstate.ErrNotSwitching)

	require.NoError(t, c.ArmSwitch())
	require.NoError(t, c.SwitchStep())
	require.Equal(t, int64(5), c.Seal())
	require.NoError(t, c.Stop(3, -1))
	epoch, pe := c.LeaderEpoch(), c.PartitionEpoch()

	require.ErrorIs(t, c.StartPhaseTwo(true), tierstate.ErrReplicaHoldsClassicPrefix)
	_, err := c.Describe(3)
	require.Error(t, err)
	require.Error(t, c.ElectReplica(3))
	require.ErrorIs(t, c.Reseal(6), tierstate.ErrSealIncrease)
	require.Equal(t, []int32{epoch, pe}, []int32{c.LeaderEpoch(), c.PartitionEpoch()})
	require.Equal(t, int32(1), c.Leader())
}

// Outside phase 1 the controller elects a replica outside the ISR when
// unclean elections are on: the records it lacks are discarded, new ones
// take their offsets, and the old leader truncates to it when it returns.
func TestOperatorUncleanElectionBeforeTheSwitch(t *testing.T) {
	cryptotest.SetGlobalRandom(t, 1)
	c, err := New(Options{Seed: 1, UncleanLeaderElection: true})
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log("\n" + c.TraceTail(40))
		}
		_ = c.Close()
	})
	require.NoError(t, c.Produce(5))
	require.NoError(t, c.CatchUp(2))
	require.NoError(t, c.CatchUp(3))
	require.NoError(t, c.Stop(3, -1))
	require.NoError(t, c.Produce(5))
	require.NoError(t, c.CatchUp(2))
	require.Equal(t, int64(10), c.Committed())
	require.NoError(t, c.Stop(2, -1))
	// A crash, not a controlled shutdown: with a checkpointed high
	// watermark over the records the election discards, the restarted
	// replica would break the checker's rule (below its high watermark a
	// replica holds committed values) until it truncates.
	require.NoError(t, c.Crash(1))
	require.Equal(t, int32(-1), c.Leader())
	require.NoError(t, c.Restart(3))
	require.Equal(t, int32(3), c.Leader())
	require.Equal(t, []int32{3}, c.ISR())
	require.False(t, c.ctrl.rec.Recovering, "the leader leads on its log and reports RECOVERED")
	require.Equal(t, int64(5), c.Committed(), "[5, 10) discarded")
	require.NoError(t, c.Produce(3))
	require.NoError(t, c.Restart(1))
	require.NoError(t, c.CatchUp(1))
	_, _, leo, hw := c.Broker(1).Offsets()
	require.Equal(t, []int64{8, 8}, []int64{leo, hw})
	require.NoError(t, c.Consume(5))
}
