//go:build invariants || race

package invariants

// Enabled reports whether invariant checks are compiled in: true under
// -tags invariants or -race.
const Enabled = true
