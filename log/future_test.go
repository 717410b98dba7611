package log

import (
	"io/fs"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// A future log started at a segment base of a tiered current log takes
// its log start, its epochs below and its producers there: once it holds
// the current log's records from there on, a producer's retry of a
// batch below the start is answered as a duplicate with its first
// offsets, not appended again. Where the current log keeps no snapshot
// the start is refused and the future log is unchanged.
func TestStartAsFutureOf(t *testing.T) {
	current := openTestLog(t, vfs.NewMem(), Options{RemoteStorageEnabled: true})
	defer current.Close()
	first := idempotentBatch(t, 9, 0, 0, 2, restartNowMs)
	_, err := current.AppendAsLeader(first, 0, OriginClient) // [0, 2)
	require.NoError(t, err)
	require.NoError(t, current.AssignEpochStartOffset(3, 2))
	_, err = current.AppendAsLeader(idempotentBatch(t, 9, 0, 2, 3, restartNowMs), 3, OriginClient) // [2, 5)
	require.NoError(t, err)
	require.NoError(t, current.Roll()) // snapshot at 5

	future := openTestLog(t, vfs.NewMem(), Options{RemoteStorageEnabled: true})
	defer future.Close()
	err = future.StartAsFutureOf(current, 3)
	require.ErrorIs(t, err, fs.ErrNotExist, "no snapshot at 3")
	require.EqualValues(t, 0, future.LogEndOffset())

	require.NoError(t, future.StartAsFutureOf(current, 5))
	require.Equal(t, "log-start=0 local-log-start=5 leo=5 epochs=0@0 3@2 producers=[9]", restoreState(future))
	info, err := future.AppendAsLeader(idempotentBatch(t, 9, 0, 0, 2, restartNowMs), 3, OriginClient)
	require.NoError(t, err)
	require.True(t, info.Duplicate, "the retry of [0, 2)")
	require.EqualValues(t, 0, info.FirstOffset)
	require.EqualValues(t, 5, future.LogEndOffset())
	require.ErrorIs(t, future.StartAsFutureOf(future, 5), ErrInvalidArgument)
}
