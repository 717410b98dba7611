package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
)

// TestRunOnDisk runs the program's entry point against a log on the
// operating system's file system, as a user would.
func TestRunOnDisk(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "orders-0")
	l, err := log.Open(dir, log.Options{FS: vfs.Default})
	require.NoError(t, err)
	b := record.NewBuilder(record.DefaultBuilderOptions())
	b.Add(1000, nil, []byte("v"))
	b.Add(1001, nil, []byte("w"))
	buf, err := b.Build()
	require.NoError(t, err)
	_, err = l.AppendAsLeader(buf, 0, log.OriginClient)
	require.NoError(t, err)
	require.NoError(t, l.Close())

	var stdout, stderr bytes.Buffer
	code := run([]string{"describe", dir}, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	require.Contains(t, stdout.String(), "log end offset:          2 ")
	require.Contains(t, stdout.String(), "clean shutdown marker:   present")

	stdout.Reset()
	code = run([]string{"dump-log", "--deep", filepath.Join(dir, "00000000000000000000.log")}, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	require.Equal(t, 2, strings.Count(stdout.String(), "  | offset="))

	require.Equal(t, 2, run(nil, &stdout, &stderr))
}
