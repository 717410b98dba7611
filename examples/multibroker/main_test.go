package main

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// The example against the test server: two runs append to the same log.
func TestRun(t *testing.T) {
	url := pgtest.PackageDatabase(t)
	for range 2 {
		var out strings.Builder
		err := run(context.Background(), &out, config{postgres: url, schema: "example", storeDir: t.TempDir() + "/objects",
			calls: 5, partitions: 3})
		require.NoError(t, err, out.String())
		require.Contains(t, out.String(), "every acknowledged record once")
	}
}
