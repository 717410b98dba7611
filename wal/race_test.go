//go:build race

package wal_test

// raceEnabled: the test binary runs under the race detector, whose
// sync.Pool drops pooled buffers at random, so a fetch allocates its
// scratch buffers again.
const raceEnabled = true
