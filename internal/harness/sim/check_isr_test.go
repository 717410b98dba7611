package sim

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCheckerCatchesConsolidatingOutsideISR: a restarted follower of a
// sealed partition (outside the ISR, on the classic fetcher) that is
// made to consolidate is a violation.
func TestCheckerCatchesConsolidatingOutsideISR(t *testing.T) {
	c := scriptedPrefix(t) // broker 3 down, five records on 1 and 2
	require.NoError(t, c.ArmSwitch())
	require.NoError(t, c.SwitchStep())
	require.Equal(t, int64(5), c.Seal())
	require.NoError(t, c.Restart(3))
	require.Nil(t, c.Check())
	c.Broker(3).consolidating = true
	requireKind(t, c.Check(), ConsolidatingOutsideISR)
}
