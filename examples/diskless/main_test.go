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

// TestDisklessExample checks the state the example ends in, on the
// embedded defaults and on the real S3 server: the seal at 100 after the
// abort marker at 99, R = 2 and E_d = 3, the first prune moving W to the
// seal, the first example of github.com/aiven/inkless/pull/857 (B
// recreated, rebuilt to 100 with the epochs below the seal, consolidating
// from there), the prune after B tiered [100, 159] (W = 160), every
// record read back through its tier, and pull/855's W = 600.
func TestDisklessExample(t *testing.T) {
	want := outcome{
		sealed: 100, walStart: 160, recordedEpoch: 2, disklessEpoch: 3,
		aEpochs: "0@0 2@80 3@100", bBefore: "0@0 1@80", bRebuilt: "0@0 2@80", bEpochs: "0@0 2@80 3@100",
		bRebuiltAt: 100, firstPruneW: 100, pruneW: 160,
		// [0, 160) less the marker at 99 from remote storage, [160, 180)
		// from the WAL.
		read:    map[string]int{"remote": 159, "wal": 20},
		lowered: 600,
	}
	check := func(t *testing.T, cfg config) {
		var out bytes.Buffer
		got, err := run(context.Background(), &out, cfg)
		require.NoError(t, err, out.String())
		require.Equal(t, want, got, out.String())
	}
	t.Run("fs", func(t *testing.T) { check(t, config{dir: t.TempDir()}) })
	t.Run("output", func(t *testing.T) {
		var out, again bytes.Buffer
		_, err := run(context.Background(), &out, config{})
		require.NoError(t, err)
		_, rest, _ := strings.Cut(out.String(), "\n")
		require.True(t, strings.HasPrefix(rest, "Notation:\n"), out.String())
		require.Equal(t, 1, strings.Count(out.String(), demo.Partition.TopicID.String()), out.String())
		for _, line := range []string{
			"   aborted producer 7's transaction from 98: the ABORT marker at 99\n",
			"   InitDisklessLog on the control plane: W = 0, HW = S = 100, 1 producer state(s) carried over\n",
			"   A's remote-log manager copied [0, 99] epochs 0@0 2@80: h = 99\n",
			"   A's pruner: prune at h = 99 (floor 99, log end 160): W = 100\n",
			"   B's new log is empty; the endpoint answers its consolidation fetch at 0 with OFFSET_MOVED_TO_TIERED_STORAGE\n",
			"   B's log now starts at 100 (log start 0), epochs 0@0 2@80; consolidation resumes at 100\n",
			"   B's pruner: prune at h = 159 (floor 99, log end 160): W = 160\n",
			"   prune at h = 599: W = 600 (capped at h + 1;",
		} {
			require.Contains(t, out.String(), line)
		}
		_, err = run(context.Background(), &again, config{})
		require.NoError(t, err)
		require.Equal(t, out.String(), again.String())
	})
	t.Run("s3", func(t *testing.T) {
		srv := s3test.Start(t)
		t.Setenv("AWS_ACCESS_KEY_ID", s3test.AccessKeyID)
		t.Setenv("AWS_SECRET_ACCESS_KEY", s3test.SecretAccessKey)
		check(t, config{dir: t.TempDir(), store: demo.StoreFlags{
			Endpoint: srv.URL, Bucket: s3test.NewBucketName(t), Region: s3test.Region, RootCAs: srv.RootCAs,
		}})
	})
}
