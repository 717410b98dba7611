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

// TestRecreateExample checks the state the example ends in, on the
// embedded defaults and on the real S3 server: the first example of
// https://github.com/aiven/inkless/pull/857 with its exact numbers.
func TestRecreateExample(t *testing.T) {
	want := outcome{
		beforeEpochs:  "0@0 1@80",
		afterEpochs:   "0@0 2@80 3@100",
		failures:      []string{"epoch-at-seal (epoch at 99 is 1, recorded epoch 2)"},
		rebuiltAt:     100,
		logStart:      0,
		localLogStart: 100,
		value80:       "A-80",
		value99:       "A-99",
	}
	check := func(t *testing.T, cfg config) {
		var out bytes.Buffer
		got, err := run(context.Background(), &out, cfg)
		require.NoError(t, err, out.String())
		require.Equal(t, want, got, out.String())
	}
	t.Run("fs", func(t *testing.T) { check(t, config{dir: t.TempDir()}) })
	t.Run("default-flags", func(t *testing.T) { check(t, config{}) })
	t.Run("output", func(t *testing.T) {
		// The legend first, the partition as orders-0 with its topic id
		// said once, and the same output on every run.
		var out, again bytes.Buffer
		_, err := run(context.Background(), &out, config{})
		require.NoError(t, err)
		_, rest, _ := strings.Cut(out.String(), "\n")
		require.True(t, strings.HasPrefix(rest, "Notation:\n"), out.String())
		require.Equal(t, 1, strings.Count(out.String(), demo.Partition.TopicID.String()), out.String())
		require.Contains(t, out.String(), "phase-2 rebuild of orders-0:")
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
