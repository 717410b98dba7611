//go:build tierlog_mutation

package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tierlog/tierlog/internal/harness/sim"
	"github.com/tierlog/tierlog/internal/mutation"
)

// The search finds the bug of first-prune-bound: seeds 1 to 10 with the
// guard disabled, and wal-read-gap with it (the fetcher's refusal to
// append a batch that does not start at its log end stops the same bug
// one step later, as a leader that makes no progress, which no invariant
// checks). Seed 1 (its swarm configuration drawn) is the first that
// breaks an invariant; the guards are on again afterwards.
func TestSearchCatchesFirstPruneBound(t *testing.T) {
	var out, errs bytes.Buffer
	code := run([]string{"-mutation", "first-prune-bound,wal-read-gap", "-seeds", "10"}, &out, &errs)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errs.String())
	}
	if got, want := out.String(), "first-prune-bound,wal-read-gap: caught at seed 1 after 342 steps\n"; got != want {
		t.Fatalf("output %q, want %q", got, want)
	}
	for _, g := range []mutation.Guard{mutation.FirstPruneBound, mutation.WALReadGap} {
		if mutation.Disabled(g) {
			t.Fatalf("%v still disabled after the search", g)
		}
	}
}

// Searched alone, recovery-snapshots takes its backup
// recovery-point-snapshot-kept with it (the snapshot a reload keeps at the
// recovery point's segment holds the same producers), and a seed counts
// only if it passes with the backup alone disabled: seed 8 is the first,
// as in internal/harness/sim's TestSimCatchesEachGuard.
func TestSearchTakesBackups(t *testing.T) {
	var out, errs bytes.Buffer
	if code := run([]string{"-mutation", "recovery-snapshots", "-seeds", "10"}, &out, &errs); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errs.String())
	}
	want := "recovery-snapshots: caught at seed 8 after 133 steps " +
		"(backups disabled too: recovery-point-snapshot-kept; they alone pass the seed)\n"
	if got := out.String(); got != want {
		t.Fatalf("output %q, want %q", got, want)
	}
	for _, g := range []mutation.Guard{mutation.RecoverySnapshots, mutation.RecoveryPointSnapshotKept} {
		if mutation.Disabled(g) {
			t.Fatalf("%v still disabled after the search", g)
		}
	}
}

// A guard searched alone runs on its row's menu (sim.SearchPlan):
// first-prune-bound's is all-clear, where seed 3 catches it; on the
// default menu (-menu default) no seed of 1 to 11 does.
func TestSearchUsesTheRowMenu(t *testing.T) {
	var out, errs bytes.Buffer
	if code := run([]string{"-mutation", "first-prune-bound", "-seeds", "5"}, &out, &errs); code != 0 {
		t.Fatalf("exit %d\n%s", code, errs.String())
	}
	if got, want := out.String(), "first-prune-bound: caught at seed 3 after 252 steps\n"; got != want {
		t.Fatalf("output %q, want %q", got, want)
	}
	out.Reset()
	if code := run([]string{"-mutation", "first-prune-bound", "-seeds", "5", "-menu", "no-such"}, &out, &errs); code != 1 {
		t.Fatalf("unknown menu: exit %d, want 1", code)
	}
	if !strings.Contains(errs.String(), `unknown menu "no-such"`) {
		t.Fatalf("stderr %q", errs.String())
	}
}

// Seeds that pass with the guard disabled: the "not caught" line and
// exit 0. -mutation all prints one line per guard, in table order.
func TestSearchNotCaught(t *testing.T) {
	var out, errs bytes.Buffer
	if code := run([]string{"-mutation", "first-prune-bound", "-seeds", "11", "-menu", "default"}, &out, &errs); code != 0 {
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
		want := g.String() + ": not caught in 1 seeds"
		if b := mutation.Backups(g); len(b) > 0 {
			want += " (backups disabled too: " + joinGuards(b) + ")"
		}
		if lines[i] != want {
			t.Fatalf("line %d: %q, want %q", i, lines[i], want)
		}
	}
}

// With -shrink the search also writes the caught seed's shrunk script
// (phase2-gate: seed 62, 323 steps, the first of the default menu) and
// prints its line after the result.
func TestSearchShrinks(t *testing.T) {
	dir := t.TempDir()
	var out, errs bytes.Buffer
	if code := run([]string{"-mutation", "phase2-gate", "-seed", "62", "-seeds", "1", "-shrink", dir}, &out, &errs); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errs.String())
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	path := filepath.Join(dir, "shrunk_phase2_gate_seed_62")
	if len(lines) != 2 || lines[0] != "phase2-gate: caught at seed 62 after 323 steps" ||
		!strings.HasPrefix(lines[1], "phase2-gate: seed 62 shrunk from 323 to ") || !strings.HasSuffix(lines[1], path) {
		t.Fatalf("output:\n%s%s", out.String(), errs.String())
	}
	requireScript(t, path, 62)
}

// A soak stops at the first seed that breaks an invariant (here with
// phase2-gate disabled, from seed 60: seed 62), prints it, its swarm
// configuration and writes its shrunk script.
func TestSoakStopsAndShrinks(t *testing.T) {
	mutation.Disable(t, mutation.Phase2Gate)
	dir := t.TempDir()
	var out, errs bytes.Buffer
	if code := run([]string{"-duration", "10m", "-seed", "60", "-shrink", dir}, &out, &errs); code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", code, out.String(), errs.String())
	}
	for _, want := range []string{"seed 62 FAILED after 323 steps: step 323: lineage-diverged",
		"\n" + sim.DrawSwarm(62).String() + "\n",
		"rerun: go test ./internal/harness/sim -run TestRandom -seed 62\n", "seed 62 shrunk from 323 to "} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("output lacks %q:\n%s%s", want, out.String(), errs.String())
		}
	}
	requireScript(t, filepath.Join(dir, "shrunk_seed_62"), 62)
}

// requireScript: path is a script of a new cluster of seed ending in a
// violation.
func requireScript(t *testing.T, path string, seed int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if !strings.Contains(s, fmt.Sprintf("\nnew seed=%d\n----\n", seed)) || !strings.Contains(s, "\nviolation: step ") {
		t.Fatalf("%s:\n%s", path, s)
	}
}
