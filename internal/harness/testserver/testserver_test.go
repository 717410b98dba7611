package testserver

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

var kind = Kind{Prefix: "xtest", Server: "X server", Tests: "the X tests", EnvSkip: "XTEST_SKIP", EnvRequire: "XTEST_REQUIRE"}

// TestSkipRule checks the three settings: fail by default, skip under the
// skip variable, fail again when the require variable is also set.
func TestSkipRule(t *testing.T) {
	for _, tc := range []struct {
		skip, require string
		allowed       bool
		remedy        string
	}{
		{"", "", false, "set XTEST_SKIP=1 to skip the X tests instead"},
		{"1", "", true, "set XTEST_SKIP=1 to skip the X tests instead"},
		{"1", "1", false, "XTEST_REQUIRE=1: the X tests must run"},
	} {
		t.Setenv("XTEST_SKIP", tc.skip)
		t.Setenv("XTEST_REQUIRE", tc.require)
		require.Equal(t, tc.allowed, kind.SkipAllowed(), "skip=%q require=%q", tc.skip, tc.require)
		require.Equal(t, tc.remedy, kind.Remedy())
	}
}

func TestSummary(t *testing.T) {
	t.Setenv("XTEST_REQUIRE", "")
	err := errors.New("no binary\nbuild output")
	require.Equal(t, "SKIPPED 2 tests of p (XTEST_SKIP=1): no X server: no binary\n  TestA\n  TestB",
		kind.Summary("p", []string{"TestA", "TestB"}, err, true))
	require.Equal(t, "FAILED 1 test of p: no X server: no binary\nbuild output\n  TestA\n  set XTEST_SKIP=1 to skip the X tests instead",
		kind.Summary("p", []string{"TestA"}, err, false))
}

// TestServerShared checks that under Main's sharing one server starts
// once, and without it every call starts a private one.
func TestServerShared(t *testing.T) {
	starts := 0
	h := New(kind, func(context.Context) (int, error) { starts++; return starts, nil })
	h.share = true
	a, pa := h.Server(t)
	b, pb := h.Server(t)
	require.Equal(t, []any{1, false, 1, false}, []any{a, pa, b, pb})
	h.share = false
	c, pc := h.Server(t)
	require.Equal(t, []any{2, true}, []any{c, pc})
}
