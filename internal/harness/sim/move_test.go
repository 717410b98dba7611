package sim

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/logmanager"
)

// TestMovePromotionSurvivesCrash: a follower's log moves to the disk's
// other log directory and back through its log manager: each promoted
// future log is the driver's log at once (still in its "-future"
// directory, marked promoted), takes the next fetches, and after a crash
// that keeps nothing unsynced the restart finds the last one renamed into
// place with every record, and no other copy (current or future).
func TestMovePromotionSurvivesCrash(t *testing.T) {
	c := scriptedPrefix(t) // broker 3 down, five records on 1 and 2
	b := c.Broker(2)
	require.True(t, strings.HasPrefix(b.Log().Dir(), logDirs[0]+"/"))
	for i, to := range []string{logDirs[1], logDirs[0]} {
		require.NoError(t, c.StartMove(2))
		require.NoError(t, c.MoveCopy(2))
		future := b.futureLog()
		require.NotNil(t, future)
		require.NoError(t, c.PromoteFuture(2))
		require.Same(t, future, b.Log(), "the driver goes on with the future log's value")
		require.Nil(t, b.futureLog())
		require.True(t, strings.HasPrefix(b.Log().Dir(), to+"/"))
		require.NoError(t, c.Produce(3))
		require.NoError(t, c.CatchUp(2))
		require.Equal(t, int64(8+3*i), b.Log().LogEndOffset())
	}
	require.NoError(t, c.CrashKeeping(2, 0))
	require.NoError(t, c.Restart(2))
	require.Equal(t, logDirs[0]+"/orders-0", b.Log().Dir())
	require.Equal(t, int64(11), b.Log().LogEndOffset())
	names, err := b.fs.List(logDirs[1])
	require.NoError(t, err)
	for _, n := range names {
		// (A copy renamed for deletion may wait for its removal.)
		require.False(t, n == "orders-0" || strings.HasSuffix(n, logmanager.FutureDirSuffix), "a copy left in %s: %s", logDirs[1], n)
	}
	require.NoError(t, c.CatchUp(2))
	require.Nil(t, c.Check())
	require.NoError(t, c.Consume(0))
}

// TestMoveFetcherTruncatesFutureLog: a follower's future log copied an
// uncommitted tail [5, 8) of epoch 0; a clean election makes broker 3
// (log end 5) the leader, which writes [5, 9) in epoch 1. The follower's
// fetch diverges and truncates its log to 5, which marks the move fetcher
// (Kafka: markPartitionsForTruncation), so the next copy truncates the
// future log to 5 before it copies [5, 9): the promoted log holds the
// committed records, not the discarded tail.
func TestMoveFetcherTruncatesFutureLog(t *testing.T) {
	c := newCaughtUpCluster(t, 5)
	require.NoError(t, c.Produce(3)) // [5, 8): b3 lacks it, uncommitted
	require.NoError(t, c.Replicate(2))
	require.NoError(t, c.StartMove(2))
	require.NoError(t, c.MoveCopy(2))
	b := c.Broker(2)
	require.Equal(t, int64(8), b.futureLog().LogEndOffset())
	require.NoError(t, c.ElectLeader(3))
	require.NoError(t, c.Produce(4)) // [5, 9) in epoch 1
	require.NoError(t, c.CatchUp(2))
	require.Equal(t, int64(9), b.Log().LogEndOffset())
	require.NoError(t, c.MoveCopy(2))
	require.Contains(t, c.TraceTail(1), "marked truncation to 5")
	require.Equal(t, b.Log().EpochEntries(), b.futureLog().EpochEntries())
	require.NoError(t, c.PromoteFuture(2))
	require.Nil(t, b.futureLog())
	require.NoError(t, c.CatchUp(2))
	require.Nil(t, c.Check())
}
