package truncation

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFence(t *testing.T) {
	// A value computed at count 3 installs at count 3 only.
	f := Fence(int64(119), Count(3))
	require.True(t, f.Valid(3))
	require.False(t, f.Valid(4), "a truncation happened since the value was computed")
	require.False(t, f.Valid(2), "counts only grow; an older count never matches")
	require.Equal(t, "119@c3", f.String())
	require.Equal(t, int64(119), f.Value)
}
