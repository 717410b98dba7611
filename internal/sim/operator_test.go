package sim

import (
	"testing"
	"testing/cryptotest"

	"github.com/stretchr/testify/require"
)

// newScripted builds a cluster for a scripted run with crypto/rand fixed.
func newScripted(t *testing.T, opts Options) *Cluster {
	t.Helper()
	cryptotest.SetGlobalRandom(t, 1)
	c, err := New(opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func logTrace(t *testing.T, c *Cluster) {
	t.Helper()
	if t.Failed() || testing.Verbose() {
		t.Log("\n" + c.TraceTail(200))
	}
}

// produce100 produces n records in batches of 100 (n a multiple of 100,
// or a smaller last batch).
func produceN(t *testing.T, c *Cluster, n int) {
	t.Helper()
	for n > 0 {
		k := min(n, 100)
		require.NoError(t, c.Produce(k))
		n -= k
	}
}

func TestOperatorPull855Elect(t *testing.T) {
	c := newScripted(t, Options{SegmentBytes: 1 << 20})
	defer logTrace(t, c)
	// The classic prefix: [0, 600) rolled and copied, then [600, 990)
	// on all three brokers, broker 3 stops at 990, [990, 1000) on 1 and 2.
	produceN(t, c, 600)
	require.NoError(t, c.CatchUp(2))
	require.NoError(t, c.CatchUp(3))
	require.NoError(t, c.Roll(1))
	require.NoError(t, c.Copy(1))
	require.Equal(t, int64(599), c.HighestRemoteOffset())
	produceN(t, c, 390)
	require.NoError(t, c.CatchUp(2))
	require.NoError(t, c.CatchUp(3))
	require.NoError(t, c.Stop(3, -1))
	produceN(t, c, 10)
	require.NoError(t, c.CatchUp(2))
	require.NoError(t, c.ArmSwitch())
	for range 3 {
		if c.Seal() >= 0 && c.walReady() {
			break
		}
		require.NoError(t, c.SwitchStep())
	}
	require.Equal(t, int64(1000), c.Seal())
	_, _, leo, hw := c.Broker(2).Offsets()
	require.Equal(t, []int64{1000, 1000}, []int64{leo, hw})
	// Broker 2 leaves the ISR when it shuts down; broker 1, the leader
	// and the only ISR member, loses its disk and comes back: an empty
	// log, registered as a follower, fenced.
	require.NoError(t, c.Stop(2, -1))
	require.NoError(t, c.WipeDisk(1))
	require.NoError(t, c.Restart(1))
	require.NoError(t, c.Restart(2))
	require.NoError(t, c.Restart(3))
	require.True(t, c.Broker(1).Prior().Fenced)
	out, err := c.DescribeAll()
	require.NoError(t, err)
	t.Log(out)
	require.Error(t, c.ElectReplica(3))
	require.Error(t, c.ElectReplica(1))
	require.NoError(t, c.ElectReplica(2))
	require.NoError(t, c.CatchUp(1))
	require.NoError(t, c.CatchUp(3))
	require.NoError(t, c.Roll(2))
	require.NoError(t, c.Copy(2))
	require.NoError(t, c.SwitchStep())
	require.NoError(t, c.Produce(5))
	require.NoError(t, c.Consume(0))
	require.NoError(t, c.Consume(990))
	require.NoError(t, c.Consume(1000))
}

func TestOperatorPull855StartPhaseTwo(t *testing.T) {
	c := newScripted(t, Options{SegmentBytes: 1 << 20})
	defer logTrace(t, c)
	produceN(t, c, 600)
	require.NoError(t, c.CatchUp(2))
	require.NoError(t, c.CatchUp(3))
	require.NoError(t, c.Roll(1))
	require.NoError(t, c.Copy(1))
	produceN(t, c, 390)
	require.NoError(t, c.CatchUp(2))
	require.NoError(t, c.CatchUp(3))
	require.NoError(t, c.Stop(3, -1))
	produceN(t, c, 10)
	require.NoError(t, c.CatchUp(2))
	require.NoError(t, c.ArmSwitch())
	require.NoError(t, c.SwitchStep())
	require.NoError(t, c.SwitchStep())
	require.NoError(t, c.Stop(2, -1))
	require.NoError(t, c.WipeDisk(1))
	require.NoError(t, c.Restart(1))
	require.NoError(t, c.WipeDisk(2))
	require.NoError(t, c.Restart(2))
	require.NoError(t, c.Restart(3))
	out, err := c.DescribeAll()
	require.NoError(t, err)
	t.Log(out)
	require.Error(t, c.ElectReplica(2))
	require.Error(t, c.StartPhaseTwo(false))
	require.NoError(t, c.StartPhaseTwo(true))
	require.NoError(t, c.Repair())
}
