//go:build !tierlog_mutation

package mutation

// Enabled reports whether guards can be disabled: true only in a build
// with -tags tierlog_mutation.
const Enabled = false

// Disabled reports whether g is switched off. Without the tag it is
// always false: inlined, the guarded branch is compiled unconditionally.
func Disabled(Guard) bool { return false }

// Disable switches g off for the rest of t. Without the tag there is
// nothing to switch, so the test is skipped.
func Disable(t TB, g Guard) {
	t.Helper()
	t.Skip("mutation.Disable(" + g.String() + ") needs -tags tierlog_mutation")
}
