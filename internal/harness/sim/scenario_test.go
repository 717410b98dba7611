package sim

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/remote"
)

// TestLoneLeaderLost: the scenario shrinks the ISR to the leader, which
// commits and tiers records alone, crashes, and a follower is elected
// uncleanly: the partition gives up the records past the new leader's
// log end (the model accepts the loss), remote storage still holds
// them, and every step is its own line of the trace. Outside the
// classic phase it does not apply.
func TestLoneLeaderLost(t *testing.T) {
	c := newCaughtUpCluster(t, 5)
	before := len(c.Trace())

	require.NoError(t, c.LoneLeaderLost(20))
	var cmds []string
	for _, l := range c.Trace()[before:] {
		if f := strings.Fields(l); len(f) > 1 {
			cmds = append(cmds, f[1])
		}
	}
	require.Equal(t, []string{"produce", "shrink-isr", "shrink-isr", "produce", "roll", "copy", "crash", "elect-leaders"}, cmds)
	require.NotEqual(t, int32(1), c.Leader(), "the lone leader still leads")
	require.Equal(t, []int32{c.Leader()}, c.ISR())
	lb := c.leaderBroker()
	require.NotNil(t, lb)
	require.Equal(t, int64(5), lb.Log().LogEndOffset(), "the new leader's log")
	require.Equal(t, int64(5), c.Committed(), "the partition keeps what the new leader holds")
	segs, err := c.meta.ListSegments(c.Partition())
	require.NoError(t, err)
	require.True(t, slices.ContainsFunc(segs, func(m remote.SegmentMetadata) bool { return m.EndOffset == 25 }),
		"remote storage holds the lost leader's tail [0, 25]: %v", segs)
	require.Nil(t, c.Check())

	require.NoError(t, c.Restart(1))
	require.NoError(t, c.ArmSwitch())
	require.ErrorIs(t, c.LoneLeaderLost(5), ErrNotApplicable)
}

// TestRemoteTaskLookupNamesWhatRemoteHolds: a task lookup (a script's
// task-lookup row, or a shrunk schedule's) must name the offset the
// remote tasks would find at that step, so a schedule that dropped the
// copy behind an offset cannot install it out of nothing. The offset
// remote storage holds is taken; any other, or a lookup with nothing of
// the broker's lineage copied, is not applicable and changes nothing.
func TestRemoteTaskLookupNamesWhatRemoteHolds(t *testing.T) {
	c := newCaughtUpCluster(t, 5)
	require.ErrorIs(t, c.RemoteTaskLookup(1, 4), ErrNotApplicable, "nothing copied yet")
	require.NoError(t, c.Roll(1))
	require.NoError(t, c.Copy(1))
	require.Equal(t, int64(4), c.HighestRemoteOffset())

	for _, wrong := range []int64{3, 5, 9} {
		require.ErrorIs(t, c.RemoteTaskLookup(1, wrong), ErrNotApplicable, "offset %d", wrong)
		require.ErrorIs(t, c.RemoteTaskInstall(1), ErrNotApplicable, "a refused lookup leaves no task (offset %d)", wrong)
	}
	require.NoError(t, c.RemoteTaskLookup(1, 4))
	require.NoError(t, c.RemoteTaskInstall(1))
	require.Equal(t, int64(4), c.Broker(1).Log().HighestOffsetInRemoteStorage())
	require.Nil(t, c.Check())
}
