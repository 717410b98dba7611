package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tierlog/tierlog/internal/mutation"
)

func TestRunSeeds(t *testing.T) {
	var out, errs bytes.Buffer
	if code := run([]string{"-seeds", "2", "-steps", "60"}, &out, &errs); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errs.String())
	}
	for _, want := range []string{"seed 1: ok, 60 steps", "seed 2: ok, 60 steps", "2 seed(s), 120 steps"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestRunTrace(t *testing.T) {
	var out, errs bytes.Buffer
	if code := run([]string{"-seed", "3", "-steps", "20", "-trace"}, &out, &errs); code != 0 {
		t.Fatalf("exit %d\n%s", code, errs.String())
	}
	if lines := strings.Count(out.String(), "\n"); lines < 22 { // "seed 3", 20 steps, the result, the total
		t.Fatalf("%d lines of trace:\n%s", lines, out.String())
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{{}, {"-steps", "0", "-seed", "1"}, {"-seed", "1", "extra"}} {
		var out, errs bytes.Buffer
		if code := run(args, &out, &errs); code != 2 {
			t.Fatalf("%v: exit %d, want 2", args, code)
		}
	}
}

// Search mode's usage errors exit 1 (not 2): an unknown guard, no seed
// count, extra arguments, -trace. Without the build tag no guard can be
// disabled, which is a usage error too, with the command to run instead.
func TestSearchUsage(t *testing.T) {
	for _, args := range [][]string{
		{"-mutation", "first-prune-bound"},
		{"-mutation", "first-prune-bound", "-seeds", "1", "-trace"},
		{"-mutation", "first-prune-bound", "-seeds", "1", "extra"},
		{"-mutation", "no-such-guard", "-seeds", "1"},
		{"-mutation", "first-prune-bound", "-seeds", "1", "-bogus"},
	} {
		var out, errs bytes.Buffer
		if code := run(args, &out, &errs); code != 1 {
			t.Fatalf("%v: exit %d, want 1\n%s%s", args, code, out.String(), errs.String())
		}
		if out.Len() != 0 {
			t.Fatalf("%v: printed a result: %s", args, out.String())
		}
	}
}

func TestSearchNeedsTheTag(t *testing.T) {
	if mutation.Enabled {
		t.Skip("built with -tags tierlog_mutation")
	}
	var out, errs bytes.Buffer
	if code := run([]string{"-mutation", "first-prune-bound", "-seeds", "3"}, &out, &errs); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	if !strings.Contains(errs.String(), "go run -tags tierlog_mutation ./cmd/tierlog-sim -mutation first-prune-bound") {
		t.Fatalf("the error does not name the tagged command: %s", errs.String())
	}
}

// TestRerunCommand: a failing seed's rerun line repeats the run's menu
// (TestRandom takes no -menu or -weights, so a run with them reruns
// through this command).
func TestRerunCommand(t *testing.T) {
	for _, tc := range []struct {
		menu, weights string
		steps         int
		swarm         bool
		want          string
	}{
		{"", "", 500, true, "go test ./internal/harness/sim -run TestRandom -seed 7"},
		{"", "", 2000, false, "go test ./internal/harness/sim -run TestRandom -seed 7 -steps 2000 -no-swarm"},
		{"lone-leader", "elect-unclean=1", 500, true,
			"go run ./cmd/tierlog-sim -seed 7 -seeds 1 -menu lone-leader -weights elect-unclean=1"},
		{"", "crash=4", 300, false, "go run ./cmd/tierlog-sim -seed 7 -seeds 1 -weights crash=4 -steps 300 -swarm=false"},
	} {
		if got := rerunCommand(7, tc.menu, tc.weights, tc.steps, tc.swarm); got != tc.want {
			t.Errorf("rerunCommand(%q, %q, %d, %t) = %q, want %q", tc.menu, tc.weights, tc.steps, tc.swarm, got, tc.want)
		}
	}
}
