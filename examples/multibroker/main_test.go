package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/internal/harness/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// The example against the test server: three runs append to the same log.
// The consolidating leader's local logs persist in one directory over the
// first two, so the second carries on where the first left them; the
// third has a new directory and starts its logs at that run's offsets.
func TestRun(t *testing.T) {
	url := pgtest.PackageDatabase(t)
	kept := t.TempDir()
	for _, leaderDir := range []string{kept, kept, t.TempDir()} {
		var out strings.Builder
		err := run(context.Background(), &out, config{postgres: url, schema: "example", storeDir: t.TempDir() + "/objects",
			leaderDir: leaderDir, calls: 5, partitions: 3})
		require.NoError(t, err, out.String())
		t.Log(out.String())
		require.Contains(t, out.String(), "every acknowledged record once")
		for p := range 3 {
			require.Contains(t, out.String(), fmt.Sprintf("5. leader: partition %d local log", p))
		}
	}
}
