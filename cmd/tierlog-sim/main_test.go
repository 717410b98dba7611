package main

import (
	"bytes"
	"strings"
	"testing"
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
