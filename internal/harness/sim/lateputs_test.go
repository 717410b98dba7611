package sim

import (
	"strings"
	"testing"
	"testing/cryptotest"

	"github.com/stretchr/testify/require"
)

// TestLatePutsDeterministic: with late PUTs on, copies upload data and
// indexes concurrently and the store orders them, so a seed still gives
// one trace; with every guard on, no object outlives its failed copy
// (the OrphanObject check runs after every step that changed one).
func TestLatePutsDeterministic(t *testing.T) {
	w := map[string]int{"late-puts": 3, "faults": 4, "copy": 12}
	lateCopies := 0
	for _, seed := range []uint64{3, 27} {
		var traces [2][]string
		for i := range traces {
			cryptotest.SetGlobalRandom(t, seed)
			res, err := Run(seed, RunOptions{Steps: 300, Weights: w})
			require.NoError(t, err)
			require.False(t, res.Failed(), "seed %d: %v\n%s", seed, res.Violation, res.TraceTail(40))
			traces[i] = res.Trace
		}
		require.Equal(t, traces[0], traces[1], "seed %d: two runs differ", seed)
		late := false
		for _, l := range traces[0] {
			switch {
			case strings.Contains(l, "late-puts=true"):
				late = true
			case strings.Contains(l, "late-puts=false"):
				late = false
			case late && strings.Contains(l, " copy ") && strings.Contains(l, "failed"):
				lateCopies++
			}
		}
	}
	require.Positive(t, lateCopies, "no copy failed while late PUTs were on")
}
