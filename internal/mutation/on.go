//go:build tierlog_mutation

package mutation

import (
	"os"
	"sync/atomic"
)

// Enabled reports whether guards can be disabled: true only in a build
// with -tags tierlog_mutation.
const Enabled = true

var disabled [numGuards]atomic.Bool

// The environment names the guards the whole binary runs without. An
// unknown name panics: a misspelt mutant would otherwise run the intact
// code and look caught or not for the wrong reason.
func init() {
	gs, err := ParseList(os.Getenv(EnvVar))
	if err != nil {
		panic(EnvVar + ": " + err.Error())
	}
	for _, g := range gs {
		disabled[g].Store(true)
	}
}

// Disabled reports whether g is switched off.
func Disabled(g Guard) bool { return g < numGuards && disabled[g].Load() }

// Disable switches g off until t ends, then restores it. The switch is
// process-wide: a test that calls it must not run in parallel with
// tests that exercise g.
func Disable(t TB, g Guard) {
	t.Helper()
	prev := disabled[g].Swap(true)
	t.Cleanup(func() { disabled[g].Store(prev) })
}
