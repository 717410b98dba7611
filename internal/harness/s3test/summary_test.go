//go:build linux || darwin

package s3test

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNoServerSummary runs this package's TestStartStop in a child test
// process whose server binary does not exist, under each setting of the
// environment, and checks its exit status and closing summary.
func TestNoServerSummary(t *testing.T) {
	const pkg = "github.com/tierlog/tierlog/internal/harness/s3test"
	const reason = "no S3 server: TIERLOG_VERSITYGW=/nonexistent: not a file: stat /nonexistent: no such file or directory"
	for _, tc := range []struct {
		name   string
		env    []string
		exit   int
		test   string // the test's own line
		report string // Main's summary
	}{{
		name:   "default-fails",
		exit:   1,
		test:   "s3test: " + reason + " (set TIERLOG_SKIP_S3=1 to skip the S3 tests instead)",
		report: "s3test: FAILED 1 test of " + pkg + ": " + reason + "\n  TestStartStop\n  set TIERLOG_SKIP_S3=1 to skip the S3 tests instead\n",
	}, {
		name:   "skip",
		env:    []string{EnvSkip + "=1"},
		test:   "s3test: no S3 server, skipped (TIERLOG_SKIP_S3=1): " + strings.TrimPrefix(reason, "no S3 server: "),
		report: "s3test: SKIPPED 1 test of " + pkg + " (TIERLOG_SKIP_S3=1): " + reason + "\n  TestStartStop\n",
	}, {
		name:   "require-beats-skip",
		env:    []string{EnvSkip + "=1", EnvRequire + "=1"},
		exit:   1,
		test:   "s3test: " + reason + " (TIERLOG_REQUIRE_S3=1: the S3 tests must run)",
		report: "s3test: FAILED 1 test of " + pkg + ": " + reason + "\n  TestStartStop\n  TIERLOG_REQUIRE_S3=1: the S3 tests must run\n",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestStartStop$", "-test.v")
			cmd.Env = append(envWithoutS3(), EnvBinary+"=/nonexistent")
			cmd.Env = append(cmd.Env, tc.env...)
			// A session of its own: no terminal to write the summary to.
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if tc.exit == 0 {
				require.NoError(t, err, string(out))
			} else {
				require.True(t, errors.As(err, &exit), "%v\n%s", err, out)
				require.Equal(t, tc.exit, exit.ExitCode(), string(out))
			}
			require.Contains(t, string(out), tc.test)
			require.Contains(t, string(out), tc.report)
		})
	}
}

func envWithoutS3() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TIERLOG_") {
			env = append(env, kv)
		}
	}
	return env
}
