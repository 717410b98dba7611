package pgtest

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

	dbOnce sync.Once
	dbName string
	dbErr  error
}

// missed holds, while Main runs the tests, those that got no server.
var missed struct {
	active bool
	mu     sync.Mutex
	tests  []string
	err    error
}

// Main runs the tests of a package that shares one server among them
// (call it from TestMain: os.Exit(pgtest.Main(m))), stops the server, if
// a test started it, once they are done, and prints the summary of the
// tests that got no server.
func Main(m *testing.M) int {
	shared.active, missed.active = true, true
	code := m.Run()
	if shared.srv != nil && shared.srv.external && shared.dbName != "" {
		if err := shared.srv.dropDatabase(shared.dbName); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: drop database %s: %v\n", shared.dbName, err)
		}
	}
	if shared.srv != nil {
		if code != 0 {
			fmt.Fprintf(os.Stderr, "postgres log tail (%s):\n%s\n", shared.srv.LogPath, shared.srv.LogTail(8<<10))
		}
		shared.srv.Stop()
	}
	missed.mu.Lock()
	defer missed.mu.Unlock()
	if len(missed.tests) == 0 {
		return code
	}
	text := summary(testedPackage(), missed.tests, missed.err, skipAllowed())
	fmt.Fprintf(os.Stderr, "pgtest: %s\n", text)
	return code
}

// Start returns a running server: the package's shared one under Main,
// else a new one stopped at tb's cleanup. When none can be had it fails
// tb, or skips it under TIERLOG_SKIP_POSTGRES=1.
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
		if tb.Failed() && !shared.active {
			tb.Logf("postgres log tail (%s):\n%s", srv.LogPath, srv.LogTail(4<<10))
		}
	})
	return srv
}

// PackageDatabase returns the URL of the test package's own database,
// created on first use and shared by the package's tests (which keep
// apart by schema, say); on an existing server Main drops it at the end.
// It needs Main.
func PackageDatabase(tb testing.TB) string {
	tb.Helper()
	if !shared.active {
		tb.Fatalf("pgtest: PackageDatabase needs pgtest.Main in TestMain")
	}
	srv := Start(tb)
	shared.dbOnce.Do(func() { shared.dbName, shared.dbErr = srv.createDatabase() })
	if shared.dbErr != nil {
		tb.Fatalf("pgtest: create the package database: %v", shared.dbErr)
	}
	return WithDatabase(srv.URL, shared.dbName)
}

// NewDatabase is Start(tb).NewDatabase(tb).
func NewDatabase(tb testing.TB) string {
	tb.Helper()
	return Start(tb).NewDatabase(tb)
}

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
		tb.Skipf("pgtest: no PostgreSQL server, skipped (%s=1): %s", EnvSkip, reason)
	}
	tb.Fatalf("pgtest: no PostgreSQL server: %s (%s)", reason, remedy())
}

func skipAllowed() bool {
	return os.Getenv(EnvSkip) == "1" && os.Getenv(EnvRequire) != "1"
}

func remedy() string {
	if os.Getenv(EnvRequire) == "1" {
		return EnvRequire + "=1: the PostgreSQL tests must run"
	}
	return "set " + EnvSkip + "=1 to skip the PostgreSQL tests instead"
}

// summary is Main's closing report on the tests that got no server.
func summary(pkg string, tests []string, err error, skipped bool) string {
	var b strings.Builder
	if skipped {
		fmt.Fprintf(&b, "SKIPPED %s of %s (%s=1): no PostgreSQL server: %v\n", count(len(tests)), pkg, EnvSkip, firstLine(err))
	} else {
		fmt.Fprintf(&b, "FAILED %s of %s: no PostgreSQL server: %v\n", count(len(tests)), pkg, err)
	}
	for _, t := range tests {
		fmt.Fprintf(&b, "  %s\n", t)
	}
	if !skipped {
		b.WriteString("  " + remedy())
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

func count(n int) string {
	if n == 1 {
		return "1 test"
	}
	return fmt.Sprintf("%d tests", n)
}

func testedPackage() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Path != "" {
		return strings.TrimSuffix(bi.Path, ".test")
	}
	return os.Args[0]
}
