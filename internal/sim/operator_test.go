package sim

import (
	"testing"
	"testing/cryptotest"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/tierstate"
)

// A refused operator command changes nothing: no new record, no
// election. start-phase-2 needs every replica described (a stopped
// broker might hold the prefix), elect a running replica.
func TestOperatorRefusalsChangeNothing(t *testing.T) {
	cryptotest.SetGlobalRandom(t, 1)
	c, err := New(Options{Seed: 1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.Produce(5))
	require.NoError(t, c.CatchUp(2))
	require.NoError(t, c.CatchUp(3))

	// Classic: nothing to recover.
	require.ErrorIs(t, c.ElectReplica(2), tierstate.ErrNotSwitching)
	require.ErrorIs(t, c.StartPhaseTwo(true), tierstate.ErrNotSwitching)

	require.NoError(t, c.ArmSwitch())
	require.NoError(t, c.SwitchStep())
	require.Equal(t, int64(5), c.Seal())
	require.NoError(t, c.Stop(3, -1))
	epoch, pe := c.LeaderEpoch(), c.PartitionEpoch()

	require.ErrorIs(t, c.StartPhaseTwo(true), tierstate.ErrReplicaNotDescribed)
	_, err = c.Describe(3)
	require.Error(t, err)
	require.Error(t, c.ElectReplica(3))
	require.ErrorIs(t, c.Reseal(6), tierstate.ErrSealIncrease)
	require.Equal(t, []int32{epoch, pe}, []int32{c.LeaderEpoch(), c.PartitionEpoch()})
	require.Equal(t, int32(1), c.Leader())
}
