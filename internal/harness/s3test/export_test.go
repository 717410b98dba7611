package s3test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// MainPrivate is Main without the shared server: this package's tests
// start and stop servers of their own.
func MainPrivate(m *testing.M) int { return runMain(m, false) }

// envHelper makes a test process play one builder of
// TestBuildOnceAcrossProcesses instead of running tests; its value is the
// cache directory.
const envHelper = "TIERLOG_S3TEST_BUILD_HELPER"

// BuildHelper plays that builder when envHelper is set and reports whether
// it did. Its progress lines go to stdout; its fake build announces itself
// there, waits for stdin to close, and appends a line to the file "builds".
func BuildHelper() bool {
	dir := os.Getenv(envHelper)
	if dir == "" {
		return false
	}
	say := func(format string, args ...any) { fmt.Printf(format+"\n", args...) }
	b := builder{dir: dir, say: say, build: func(_ context.Context, out string) error {
		say("fake build")
		_, _ = io.Copy(io.Discard, os.Stdin)
		f, err := os.OpenFile(filepath.Join(dir, "builds"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		_, _ = fmt.Fprintln(f, os.Getpid())
		if err := f.Close(); err != nil {
			return err
		}
		return os.WriteFile(out, []byte("fake versitygw"), 0o755)
	}}
	if _, err := b.binary(context.Background()); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	return true
}
