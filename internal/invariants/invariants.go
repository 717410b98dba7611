// Package invariants holds assertions that check the library's own
// invariants. They are active when the code is built with -tags invariants
// or with -race (so every CI test run checks them) and compile to nothing
// otherwise, so they may sit on hot paths.
//
// An invariant violation is a bug in tierlog, never bad input: input is
// checked with ordinary errors. That is why a failed assertion panics.
//
// This package imports only the standard library.
package invariants

import "fmt"

// Assertf panics with the formatted message if Enabled and cond is false.
//
// The arguments are evaluated even when assertions are off; guard
// expensive checks with `if invariants.Enabled { ... }`.
func Assertf(cond bool, format string, args ...any) {
	if Enabled && !cond {
		panic(fmt.Sprintf("tierlog invariant violated: "+format, args...))
	}
}
