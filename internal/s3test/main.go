package s3test

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
)

var shared struct {
	active bool // Main is running the tests
	once   sync.Once
	srv    *Server
	err    error
}

// missed holds, while Main runs the tests, those that got no server.
var missed struct {
	active bool
	mu     sync.Mutex
	tests  []string
	err    error
}

// Main runs the tests of a package that shares one server among them
// (call it from TestMain: os.Exit(s3test.Main(m))), stops the server, if
// a test started it, once they are done, and prints the summary of the
// tests that got no server.
func Main(m *testing.M) int { return runMain(m, true) }

func runMain(m *testing.M, share bool) int {
	shared.active, missed.active = share, true
	code := m.Run()
	if shared.srv != nil {
		if code != 0 {
			fmt.Fprintf(os.Stderr, "versitygw log tail (%s):\n%s\n", shared.srv.LogPath, shared.srv.LogTail(8<<10))
		}
		shared.srv.Stop()
	}
	missed.mu.Lock()
	defer missed.mu.Unlock()
	if len(missed.tests) == 0 {
		return code
	}
	text := summary(testedPackage(), missed.tests, missed.err, skipAllowed())
	if !skipAllowed() {
		// The tests failed: go test prints the package's output anyway.
		fmt.Fprintf(os.Stderr, "s3test: %s\n", text)
		return code
	}
	progress("%s", text)
	return code
}

// Start returns a running server: the package's shared one under Main,
// else a new one stopped at tb's cleanup. When no server can be built or
// started it fails tb, or skips it under TIERLOG_SKIP_S3=1.
func Start(tb testing.TB) *Server {
	tb.Helper()
	var srv *Server
	var err error
	if shared.active {
		shared.once.Do(func() { shared.srv, shared.err = start(context.Background()) })
		srv, err = shared.srv, shared.err
	} else {
		srv, err = start(context.Background())
		if srv != nil {
			tb.Cleanup(srv.Stop)
		}
	}
	if err != nil {
		noServer(tb, err)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("versitygw log tail (%s):\n%s", srv.LogPath, srv.LogTail(4<<10))
		}
	})
	return srv
}

// noServer records tb for Main's summary and fails or skips it. Under
// Main the whole reason (a build's output, say) waits for the summary.
func noServer(tb testing.TB, err error) {
	tb.Helper()
	reason := err.Error()
	if missed.active {
		missed.mu.Lock()
		missed.tests, missed.err = append(missed.tests, tb.Name()), err
		missed.mu.Unlock()
		reason, _, _ = strings.Cut(reason, "\n")
	}
	if skipAllowed() {
		tb.Skipf("s3test: no S3 server, skipped (%s=1): %s", EnvSkip, reason)
	}
	tb.Fatalf("s3test: no S3 server: %s (%s)", reason, remedy())
}

// skipAllowed reports whether a test without a server skips.
func skipAllowed() bool {
	return os.Getenv(EnvSkip) == "1" && os.Getenv(EnvRequire) != "1"
}

func remedy() string {
	if os.Getenv(EnvRequire) == "1" {
		return EnvRequire + "=1: the S3 tests must run"
	}
	return "set " + EnvSkip + "=1 to skip the S3 tests instead"
}

// summary is Main's closing report on the tests that got no server.
func summary(pkg string, tests []string, err error, skipped bool) string {
	var b strings.Builder
	if skipped {
		fmt.Fprintf(&b, "SKIPPED %s of %s (%s=1): no S3 server: %v\n", count(len(tests)), pkg, EnvSkip, err)
	} else {
		fmt.Fprintf(&b, "FAILED %s of %s: no S3 server: %v\n", count(len(tests)), pkg, err)
	}
	for _, t := range tests {
		fmt.Fprintf(&b, "  %s\n", t)
	}
	if !skipped {
		b.WriteString("  " + remedy())
	}
	return strings.TrimSuffix(b.String(), "\n")
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

// progress writes "s3test: " and a line to stderr and, when stderr is not
// the terminal, to the terminal as well: go test ./... keeps a passing
// package's output to itself unless -v. Without a terminal (CI) stderr
// alone carries it.
func progress(format string, args ...any) {
	line := "s3test: " + fmt.Sprintf(format, args...) + "\n"
	_, _ = os.Stderr.WriteString(line)
	if fi, err := os.Stderr.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		return
	}
	if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
		_, _ = tty.WriteString(line)
		_ = tty.Close()
	}
}
