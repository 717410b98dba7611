package sim

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/internal/mutation"
)

// Every guard of the mutation table has a row of the random search, and
// every row names a guard once: a new guard without a row fails here, not
// silently outside the search.
func TestEveryGuardHasASearchRow(t *testing.T) {
	seen := map[mutation.Guard]bool{}
	for _, sc := range simCatches {
		require.False(t, seen[sc.guard], "%v has two rows", sc.guard)
		seen[sc.guard] = true
		require.Positive(t, sc.limit, "%v", sc.guard)
	}
	for _, g := range mutation.Guards() {
		_, _, ok := SearchPlan(g)
		require.True(t, ok, "%v has no row in simCatches", g)
	}
	require.Len(t, simCatches, len(mutation.Guards()))
}

// Every named menu weighs only actions the scheduler knows: a short run
// on each is accepted.
func TestMenus(t *testing.T) {
	for _, name := range MenuNames() {
		m, ok := Menu(name)
		require.True(t, ok)
		_, err := Run(1, RunOptions{Steps: 5, Weights: m})
		require.NoError(t, err, "menu %s", name)
	}
	_, ok := Menu("no-such-menu")
	require.False(t, ok)
}
