package s3test_test

import (
	"os"
	"testing"

	"github.com/tierlog/tierlog/internal/harness/s3test"
)

func TestMain(m *testing.M) {
	if s3test.BuildHelper() {
		os.Exit(0)
	}
	os.Exit(s3test.MainPrivate(m))
}
