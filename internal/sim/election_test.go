package sim

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOperatorPull871(t *testing.T) {
	for _, loseTail := range []bool{true, false} {
		t.Run(map[bool]string{true: "lose-tail", false: "keep-tail"}[loseTail], func(t *testing.T) {
			c := newScripted(t, Options{SegmentBytes: 1 << 20, EligibleLeaderReplicas: true, MinInsyncReplicas: 2})
			defer logTrace(t, c)
			require.NoError(t, c.ElectLeader(3))
			for range 4 {
				require.NoError(t, c.Produce(5))
			}
			require.NoError(t, c.CatchUp(1))
			require.NoError(t, c.CatchUp(2))
			require.NoError(t, c.ArmSwitch())
			require.NoError(t, c.SwitchStep())
			require.NoError(t, c.SwitchStep())
			require.NoError(t, c.Stop(2, -1))
			require.NoError(t, c.Stop(1, -1))
			from := int64(-1)
			if loseTail {
				from = 15
			}
			require.NoError(t, c.Stop(3, from))
			require.NoError(t, c.RestartUnclean(1))
			require.NoError(t, c.RestartUnclean(2))
			require.NoError(t, c.RestartUnclean(3))
			if loseTail {
				require.NoError(t, c.Reseal(15))
			}
			require.NoError(t, c.Replicate(1))
			require.NoError(t, c.Replicate(2))
			require.NoError(t, c.Repair())
			require.NoError(t, c.Roll(3))
			require.NoError(t, c.Copy(3))
			require.NoError(t, c.SwitchStep())
			require.NoError(t, c.Produce(5))
			require.NoError(t, c.Consume(0))
			require.NoError(t, c.Consume(c.Seal()))
		})
	}
}
