package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/internal/harness/demo"
	"github.com/tierlog/tierlog/internal/harness/s3test"
)

func TestMain(m *testing.M) { os.Exit(s3test.Main(m)) }

// TestRebuildExample runs the example on the embedded defaults and on the
// real S3 server and checks the state it verified: every record read
// back, the prefix from remote storage, the follower rebuilt at the
// leader's local log start with the leader's epochs.
func TestRebuildExample(t *testing.T) {
	check := func(t *testing.T, cfg config) {
		var out bytes.Buffer
		got, err := run(context.Background(), &out, cfg)
		require.NoError(t, err, out.String())
		require.Equal(t, outcome{records: 350, fromRemote: 300, rebuiltAt: 300, epochs: "0@0 1@100 3@200"}, got, out.String())
		require.Contains(t, out.String(), "OFFSET_MOVED_TO_TIERED_STORAGE")
		require.Contains(t, out.String(), "producer snapshot restored")
	}
	t.Run("fs", func(t *testing.T) {
		check(t, config{dir: t.TempDir(), perEpoch: 100})
	})
	t.Run("s3", func(t *testing.T) {
		srv := s3test.Start(t)
		t.Setenv("AWS_ACCESS_KEY_ID", s3test.AccessKeyID)
		t.Setenv("AWS_SECRET_ACCESS_KEY", s3test.SecretAccessKey)
		cfg := config{dir: t.TempDir(), perEpoch: 100, store: demo.StoreFlags{
			Endpoint: srv.URL, Bucket: s3test.NewBucketName(t), Region: s3test.Region, RootCAs: srv.RootCAs,
		}}
		check(t, cfg)
	})
	t.Run("default-flags", func(t *testing.T) {
		// What `go run ./examples/rebuild` does: its own temporary directory.
		var out bytes.Buffer
		got, err := run(context.Background(), &out, config{perEpoch: 200})
		require.NoError(t, err)
		require.Equal(t, 700, got.records)
		require.True(t, strings.HasPrefix(out.String(), "tierlog rebuild example"))
		requireLegendAndNames(t, out.String())
		// The output is the same on every run.
		var again bytes.Buffer
		_, err = run(context.Background(), &again, config{perEpoch: 200})
		require.NoError(t, err)
		require.Equal(t, out.String(), again.String())
	})
}

// requireLegendAndNames: the notation is explained first, and the
// partition is written orders-0, its topic id said once (in the legend).
func requireLegendAndNames(t *testing.T, out string) {
	t.Helper()
	_, rest, ok := strings.Cut(out, "\n")
	require.True(t, ok)
	require.True(t, strings.HasPrefix(rest, "Notation:\n"), "the legend follows the title:\n%s", out)
	require.Equal(t, 1, strings.Count(out, demo.Partition.TopicID.String()), "topic id printed once:\n%s", out)
	require.Contains(t, out, "rebuild of orders-0:")
}
