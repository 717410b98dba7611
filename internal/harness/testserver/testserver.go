// Package testserver is what the test-server harnesses (internal/harness/s3test,
// internal/harness/pgtest) share: one server per test package, started on first
// use while Main runs the tests, and the rule for a test that gets no
// server. By default such a test fails; the kind's skip variable (say
// TIERLOG_SKIP_S3=1) makes it skip instead, unless its require variable
// (set by CI) is also set. Main closes the run with a summary of the
// tests that got no server, so a skipped suite is never silent.
//
// Only test harnesses import it.
package testserver

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
)

// Kind names one kind of test server in messages and environment.
type Kind struct {
	Prefix     string // first word of every line: "s3test"
	Server     string // what a test got none of: "S3 server"
	Tests      string // the tests that need one: "the S3 tests"
	EnvSkip    string // =1: a test without a server skips
	EnvRequire string // =1: it fails even with EnvSkip set
}

// SkipAllowed reports whether a test without a server skips.
func (k Kind) SkipAllowed() bool {
	return os.Getenv(k.EnvSkip) == "1" && os.Getenv(k.EnvRequire) != "1"
}

// Remedy is the advice a failing test without a server ends with.
func (k Kind) Remedy() string {
	if os.Getenv(k.EnvRequire) == "1" {
		return k.EnvRequire + "=1: " + k.Tests + " must run"
	}
	return "set " + k.EnvSkip + "=1 to skip " + k.Tests + " instead"
}

// Summary is Main's closing report on the tests of pkg that got no
// server; skipped says whether they skipped or failed.
func (k Kind) Summary(pkg string, tests []string, err error, skipped bool) string {
	var b strings.Builder
	if skipped {
		reason, _, _ := strings.Cut(err.Error(), "\n")
		fmt.Fprintf(&b, "SKIPPED %s of %s (%s=1): no %s: %s\n", count(len(tests)), pkg, k.EnvSkip, k.Server, reason)
	} else {
		fmt.Fprintf(&b, "FAILED %s of %s: no %s: %v\n", count(len(tests)), pkg, k.Server, err)
	}
	for _, t := range tests {
		fmt.Fprintf(&b, "  %s\n", t)
	}
	if !skipped {
		b.WriteString("  " + k.Remedy())
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// Progress writes the kind's prefix and a line to stderr and, when
// stderr is not the terminal, to the terminal as well: go test ./...
// keeps a passing package's output to itself unless -v. Without a
// terminal (CI) stderr alone carries it.
func (k Kind) Progress(format string, args ...any) {
	line := k.Prefix + ": " + fmt.Sprintf(format, args...) + "\n"
	_, _ = os.Stderr.WriteString(line)
	if fi, err := os.Stderr.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		return
	}
	if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
		_, _ = tty.WriteString(line)
		_ = tty.Close()
	}
}

// Shared is one test package's server of type S. The zero value is not
// usable: make one with New.
type Shared[S any] struct {
	kind  Kind
	start func(context.Context) (S, error)

	share bool // Main runs the tests and shares one server among them
	once  sync.Once
	srv   S
	err   error
	made  bool // srv was started

	mu         sync.Mutex // guards the fields below
	collecting bool       // Main runs the tests: it reports the missed ones
	missed     []string
	missedErr  error
}

// New returns the harness of one kind whose servers start.
func New[S any](k Kind, start func(context.Context) (S, error)) *Shared[S] {
	return &Shared[S]{kind: k, start: start}
}

// Kind returns the kind the harness was made with.
func (h *Shared[S]) Kind() Kind { return h.kind }

// Main runs m's tests (share: with one server among them, started by the
// first test that asks), then, if a shared server was started, done with
// it and the tests' exit code (done stops it), then the summary of the
// tests that got no server. It returns the exit code.
func (h *Shared[S]) Main(m *testing.M, share bool, done func(srv S, code int)) int {
	h.share = share
	h.mu.Lock()
	h.collecting = true
	h.mu.Unlock()
	code := m.Run()
	if h.made {
		done(h.srv, code)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.missed) == 0 {
		return code
	}
	text := h.kind.Summary(testedPackage(), h.missed, h.missedErr, h.kind.SkipAllowed())
	if !h.kind.SkipAllowed() {
		// The tests failed: go test prints the package's output anyway.
		fmt.Fprintf(os.Stderr, "%s: %s\n", h.kind.Prefix, text)
		return code
	}
	h.kind.Progress("%s", text)
	return code
}

// Server returns the shared server under Main, or a new one (private is
// then true: the caller stops it). When none can be had it fails tb, or
// skips it when the kind allows.
func (h *Shared[S]) Server(tb testing.TB) (srv S, private bool) {
	tb.Helper()
	var err error
	if h.share {
		h.once.Do(func() {
			h.srv, h.err = h.start(context.Background())
			h.made = h.err == nil
		})
		srv, err = h.srv, h.err
	} else {
		srv, err = h.start(context.Background())
		private = err == nil
	}
	if err != nil {
		h.noServer(tb, err)
	}
	return srv, private
}

// Shared reports whether Main shares one server among the tests.
func (h *Shared[S]) Shared() bool { return h.share }

// noServer records tb for Main's summary and fails or skips it. Under
// Main the whole reason (a build's output, say) waits for the summary.
func (h *Shared[S]) noServer(tb testing.TB, err error) {
	tb.Helper()
	reason := err.Error()
	h.mu.Lock()
	if h.collecting {
		h.missed, h.missedErr = append(h.missed, tb.Name()), err
		reason, _, _ = strings.Cut(reason, "\n")
	}
	h.mu.Unlock()
	k := h.kind
	if k.SkipAllowed() {
		tb.Skipf("%s: no %s, skipped (%s=1): %s", k.Prefix, k.Server, k.EnvSkip, reason)
	}
	tb.Fatalf("%s: no %s: %s (%s)", k.Prefix, k.Server, reason, k.Remedy())
}

func count(n int) string {
	if n == 1 {
		return "1 test"
	}
	return fmt.Sprintf("%d tests", n)
}

// testedPackage is the import path of the package under test.
func testedPackage() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Path != "" {
		return strings.TrimSuffix(bi.Path, ".test")
	}
	return os.Args[0]
}
