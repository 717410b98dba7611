package main

import (
	"bytes"
	"strings"
	"testing"
)

// A short soak: the first seed printed, progress lines (the last seed
// ends past the duration, so past the first progress interval), the
// summary, exit 0.
func TestSoak(t *testing.T) {
	var out, errs bytes.Buffer
	code := run([]string{"-duration", "500ms", "-progress", "100ms", "-seed", "5", "-steps", "40"}, &out, &errs)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errs.String())
	}
	s := out.String()
	for _, want := range []string{"soak: seeds from 5 for 500ms, 40 steps each\n", " steps/s); faults: ",
		"soak: done, no violation: "} {
		if !strings.Contains(s, want) {
			t.Fatalf("output lacks %q:\n%s", want, s)
		}
	}
	if n := strings.Count(s, "\n"); n < 3 {
		t.Fatalf("no progress line:\n%s", s)
	}
}

func TestSoakUsage(t *testing.T) {
	for _, args := range [][]string{
		{"-duration", "1s", "-seeds", "3"},
		{"-duration", "1s", "-trace"},
		{"-duration", "1s", "extra"},
		{"-duration", "-1s"},
		{"-duration", "1s", "-progress", "0s"},
	} {
		var out, errs bytes.Buffer
		if code := run(args, &out, &errs); code != 2 {
			t.Fatalf("%v: exit %d, want 2\n%s%s", args, code, out.String(), errs.String())
		}
	}
}
