//go:build tierlog_mutation

package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tierlog/tierlog/internal/mutation"
)

// The search finds the bug of first-prune-bound: seeds 1 to 12 with the
// guard disabled, and wal-read-gap with it (the fetcher's refusal to
// append a batch that does not start at its log end stops the same bug
// one step later, as a leader that makes no progress, which no invariant
// checks). Seed 12 is the first that breaks an invariant
// (internal/sim's TestSimCatchesEachGuard runs it too); the guards are
// on again afterwards.
func TestSearchCatchesFirstPruneBound(t *testing.T) {
	var out, errs bytes.Buffer
	code := run([]string{"-mutation", "first-prune-bound,wal-read-gap", "-seeds", "12"}, &out, &errs)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errs.String())
	}
	if got, want := out.String(), "first-prune-bound,wal-read-gap: caught at seed 12 after 223 steps\n"; got != want {
		t.Fatalf("output %q, want %q", got, want)
	}
	for _, g := range []mutation.Guard{mutation.FirstPruneBound, mutation.WALReadGap} {
		if mutation.Disabled(g) {
			t.Fatalf("%v still disabled after the search", g)
		}
	}
}

// Seeds that pass with the guard disabled: the "not caught" line and
// exit 0. -mutation all prints one line per guard, in table order.
func TestSearchNotCaught(t *testing.T) {
	var out, errs bytes.Buffer
	if code := run([]string{"-mutation", "first-prune-bound", "-seeds", "11"}, &out, &errs); code != 0 {
		t.Fatalf("exit %d\n%s", code, errs.String())
	}
	if got, want := out.String(), "first-prune-bound: not caught in 11 seeds\n"; got != want {
		t.Fatalf("output %q, want %q", got, want)
	}

	out.Reset()
	if code := run([]string{"-mutation", "all", "-seeds", "1", "-steps", "5"}, &out, &errs); code != 0 {
		t.Fatalf("exit %d\n%s", code, errs.String())
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	guards := mutation.Guards()
	if len(lines) != len(guards) {
		t.Fatalf("%d lines for %d guards:\n%s", len(lines), len(guards), out.String())
	}
	for i, g := range guards {
		if want := g.String() + ": not caught in 1 seeds"; lines[i] != want {
			t.Fatalf("line %d: %q, want %q", i, lines[i], want)
		}
	}
}
