package s3test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/tierlog/tierlog/internal/harness/testserver"
)

// harness shares one server among a package's tests and reports those
// that got none (internal/harness/testserver).
var harness = testserver.New(kind, func(ctx context.Context) (*Server, error) { return start(ctx) })

var kind = testserver.Kind{
	Prefix: "s3test", Server: "S3 server", Tests: "the S3 tests",
	EnvSkip: EnvSkip, EnvRequire: EnvRequire,
}

// Main runs the tests of a package that shares one server among them
// (call it from TestMain: os.Exit(s3test.Main(m))), stops the server, if
// a test started it, once they are done, and prints the summary of the
// tests that got no server.
func Main(m *testing.M) int { return runMain(m, true) }

func runMain(m *testing.M, share bool) int {
	return harness.Main(m, share, func(srv *Server, code int) {
		if code != 0 {
			fmt.Fprintf(os.Stderr, "versitygw log tail (%s):\n%s\n", srv.LogPath, srv.LogTail(8<<10))
		}
		srv.Stop()
	})
}

// Start returns a running server: the package's shared one under Main,
// else a new one stopped at tb's cleanup. When no server can be built or
// started it fails tb, or skips it under TIERLOG_SKIP_S3=1.
func Start(tb testing.TB) *Server {
	tb.Helper()
	srv, private := harness.Server(tb)
	if private {
		tb.Cleanup(srv.Stop)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("versitygw log tail (%s):\n%s", srv.LogPath, srv.LogTail(4<<10))
		}
	})
	return srv
}

// progress writes "s3test: " and a line to stderr and to the terminal
// (testserver.Kind.Progress).
func progress(format string, args ...any) { kind.Progress(format, args...) }
