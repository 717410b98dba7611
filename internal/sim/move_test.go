package sim

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMovePromotionSurvivesCrash: a follower's log moves to the disk's
// other log directory through its log manager: the promoted future log
// is the driver's log at once (still in its "-future" directory, marked
// promoted), takes the next fetches, and after a crash that keeps nothing
// unsynced the restart finds it renamed into place with every record,
// and the old log gone.
func TestMovePromotionSurvivesCrash(t *testing.T) {
	c := scriptedPrefix(t) // broker 3 down, five records on 1 and 2
	b := c.Broker(2)
	require.True(t, strings.HasPrefix(b.Log().Dir(), logDirs[0]+"/"))
	require.NoError(t, c.StartMove(2))
	require.NoError(t, c.MoveCopy(2))
	future := b.futureLog()
	require.NotNil(t, future)
	require.NoError(t, c.PromoteFuture(2))
	require.Same(t, future, b.Log(), "the driver goes on with the future log's value")
	require.Nil(t, b.futureLog())
	require.True(t, strings.HasPrefix(b.Log().Dir(), logDirs[1]+"/"))

	require.NoError(t, c.Produce(3))
	require.NoError(t, c.CatchUp(2))
	require.Equal(t, int64(8), b.Log().LogEndOffset())
	require.NoError(t, c.CrashKeeping(2, 0))
	require.NoError(t, c.Restart(2))
	require.Equal(t, logDirs[1]+"/orders-0", b.Log().Dir())
	require.Equal(t, int64(8), b.Log().LogEndOffset())
	names, err := b.fs.List(logDirs[0])
	require.NoError(t, err)
	for _, n := range names {
		require.False(t, strings.HasPrefix(n, "orders-0"), "old log left in %s: %s", logDirs[0], n)
	}
	require.NoError(t, c.CatchUp(2))
	require.Nil(t, c.Check())
	require.NoError(t, c.Consume(0))
}
