package pgtest

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNoServerSummary runs this package's TestNewDatabase in a child test
// process whose binary directory does not exist, under each setting of
// the environment, and checks its exit status and closing summary.
func TestNoServerSummary(t *testing.T) {
	if os.Getenv("PGTEST_CHILD") == "1" {
		t.Skip("in the child")
	}
	const reason = "no PostgreSQL server: TIERLOG_PG_BIN=/nonexistent: no initdb"
	for _, tc := range []struct {
		name   string
		env    []string
		exit   int
		report string
	}{
		{name: "default-fails", exit: 1, report: "pgtest: FAILED 1 test of "},
		{name: "skip", env: []string{EnvSkip + "=1"}, report: "pgtest: SKIPPED 1 test of "},
		{name: "require-beats-skip", env: []string{EnvSkip + "=1", EnvRequire + "=1"}, exit: 1, report: "pgtest: FAILED 1 test of "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestNewDatabase$", "-test.count=1")
			var env []string
			for _, kv := range os.Environ() {
				if !strings.HasPrefix(kv, "TIERLOG_") {
					env = append(env, kv)
				}
			}
			cmd.Env = append(append(env, "PGTEST_CHILD=1", EnvBin+"=/nonexistent"), tc.env...)
			out, err := cmd.CombinedOutput()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, tc.exit, code, "%s", out)
			require.Contains(t, string(out), tc.report)
			require.Contains(t, string(out), reason)
			require.Contains(t, string(out), "\n  TestNewDatabase\n")
		})
	}
}
