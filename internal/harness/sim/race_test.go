//go:build race

package sim

// raceEnabled: the test binary runs under the race detector, which makes
// a schedule about ten times slower.
const raceEnabled = true
