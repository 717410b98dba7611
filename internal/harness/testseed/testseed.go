// Package testseed chooses the seed of a randomized test.
//
// By default a test runs on the fixed seed it names, so `go test ./...`
// is reproducible and a clean checkout passes or fails the same way every
// time. Soak runs explore: TIERLOG_RANDOM_SEED=1 seeds from the clock, and
// TIERLOG_SEED=n reruns one seed that a failure printed. Every seed is
// logged, so a failing run always says how to repeat it.
package testseed

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// Seed returns the seed for t: TIERLOG_SEED when set, the clock when
// TIERLOG_RANDOM_SEED=1, fixed otherwise. It logs the choice.
func Seed(t testing.TB, fixed uint64) uint64 {
	t.Helper()
	seed, how := fixed, "fixed"
	if v := os.Getenv("TIERLOG_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("TIERLOG_SEED=%q: %v", v, err)
		}
		seed, how = n, "from TIERLOG_SEED"
	} else if os.Getenv("TIERLOG_RANDOM_SEED") == "1" {
		seed, how = uint64(time.Now().UnixNano()), "from the clock"
	}
	t.Logf("seed %d (%s; rerun with TIERLOG_SEED=%d)", seed, how, seed)
	return seed
}
