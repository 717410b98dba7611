package s3test_test

import (
	"os"
	"testing"

	"github.com/tierlog/tierlog/internal/s3test"
)

func TestMain(m *testing.M) { os.Exit(s3test.MainPrivate(m)) }
