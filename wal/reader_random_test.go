package wal_test

import (
	"testing"

	"github.com/tierlog/tierlog/internal/walcheck"
	"github.com/tierlog/tierlog/wal"
)

// TestReaderRandomDamage reads random objects through a wal.Reader after
// random damage to the store and random lies in FindBatches' answers, and
// checks every answer against what was committed (walcheck.CheckFetch):
// never another partition's, batch's or object version's bytes, the
// intact batches always served, typed errors only. Iterations and seed:
// TIERLOG_WALCHECK_ITERS, TIERLOG_WALCHECK_SEED.
func TestReaderRandomDamage(t *testing.T) {
	iters := 1000
	if testing.Short() {
		iters = 300
	}
	walcheck.Run(t, walcheck.Options{Seed: 1, Iterations: iters,
		NewPlane: func(testing.TB) wal.ControlPlane { return walcheck.NewModelPlane() },
		Fetch:    walcheck.ReadFetch})
}
