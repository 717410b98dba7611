package wal_test

import (
	"os"
	"testing"

	"github.com/tierlog/tierlog/internal/harness/s3test"
)

// TestMain shares one S3 server among the package's S3 tests (started on
// first use); under TIERLOG_REQUIRE_S3=1 a missing server fails them.
func TestMain(m *testing.M) { os.Exit(s3test.Main(m)) }
