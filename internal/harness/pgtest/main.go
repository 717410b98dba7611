package pgtest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/tierlog/tierlog/internal/harness/testserver"
)

// harness shares one server among a package's tests and reports those
// that got none (internal/harness/testserver).
var harness = testserver.New(testserver.Kind{
	Prefix: "pgtest", Server: "PostgreSQL server", Tests: "the PostgreSQL tests",
	EnvSkip: EnvSkip, EnvRequire: EnvRequire,
}, func(ctx context.Context) (*Server, error) { return start(ctx) })

// packageDB is the test package's own database (PackageDatabase).
var packageDB struct {
	once sync.Once
	name string
	err  error
}

// Main runs the tests of a package that shares one server among them
// (call it from TestMain: os.Exit(pgtest.Main(m))), stops the server, if
// a test started it, once they are done, and prints the summary of the
// tests that got no server.
func Main(m *testing.M) int {
	return harness.Main(m, true, func(srv *Server, code int) {
		if srv.external && packageDB.name != "" {
			if err := srv.dropDatabase(packageDB.name); err != nil {
				fmt.Fprintf(os.Stderr, "pgtest: drop database %s: %v\n", packageDB.name, err)
			}
		}
		if code != 0 {
			fmt.Fprintf(os.Stderr, "postgres log tail (%s):\n%s\n", srv.LogPath, srv.LogTail(8<<10))
		}
		srv.Stop()
	})
}

// Start returns a running server: the package's shared one under Main,
// else a new one stopped at tb's cleanup. When none can be had it fails
// tb, or skips it under TIERLOG_SKIP_POSTGRES=1.
func Start(tb testing.TB) *Server {
	tb.Helper()
	srv, private := harness.Server(tb)
	if private {
		tb.Cleanup(srv.Stop)
		tb.Cleanup(func() {
			if tb.Failed() {
				tb.Logf("postgres log tail (%s):\n%s", srv.LogPath, srv.LogTail(4<<10))
			}
		})
	}
	return srv
}

// PackageDatabase returns the URL of the test package's own database,
// created on first use and shared by the package's tests (which keep
// apart by schema, say); on an existing server Main drops it at the end.
// It needs Main.
func PackageDatabase(tb testing.TB) string {
	tb.Helper()
	if !harness.Shared() {
		tb.Fatalf("pgtest: PackageDatabase needs pgtest.Main in TestMain")
	}
	srv := Start(tb)
	packageDB.once.Do(func() { packageDB.name, packageDB.err = srv.createDatabase() })
	if packageDB.err != nil {
		tb.Fatalf("pgtest: create the package database: %v", packageDB.err)
	}
	return WithDatabase(srv.URL, packageDB.name)
}

// NewDatabase is Start(tb).NewDatabase(tb).
func NewDatabase(tb testing.TB) string {
	tb.Helper()
	return Start(tb).NewDatabase(tb)
}
