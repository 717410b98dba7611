package remote

import (
	"os"
	"testing"

	"github.com/tierlog/tierlog/internal/harness/s3test"
)

// TestMain shares one S3 server (versitygw, started on first use) among the
// package's S3 tests; see internal/harness/s3test.
func TestMain(m *testing.M) { os.Exit(s3test.Main(m)) }
