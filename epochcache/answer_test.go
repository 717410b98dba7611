package epochcache

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAnswerTypes(t *testing.T) {
	require.Equal(t, "2@99", OffsetAndEpoch{Offset: 99, Epoch: 2}.String())
	require.Equal(t, "(1, 400)", EpochEndOffset{Epoch: 1, EndOffset: 400}.String())
	require.True(t, UndefinedEpochEndOffset.Undefined())
	require.Equal(t, "(-1, -1)", UndefinedEpochEndOffset.String())
	// The fourth row of EndOffsetFor echoes the epoch with a defined end.
	require.False(t, EpochEndOffset{Epoch: 4, EndOffset: 11}.Undefined())
}
