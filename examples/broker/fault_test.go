package main

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TestProduceIOErrorTakesDirOffline: an append that fails with an I/O
// error is answered KAFKA_STORAGE_ERROR and takes the log directory
// offline (logmanager.Manager.ReportError); the next produce is answered
// KAFKA_STORAGE_ERROR from the offline directory, without touching the
// disk, even once the disk works again.
func TestProduceIOErrorTakesDirOffline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dir := t.TempDir()
	var armed atomic.Bool
	prefix := filepath.Join(dir, "logs") + "/"
	fs := errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if armed.Load() && op.Kind.ReadOrWrite() == errorfs.OpIsWrite && strings.HasPrefix(op.Path, prefix) {
			return errorfs.ErrInjected
		}
		return nil
	}))
	s, err := Start(Options{Addr: "127.0.0.1:0", Dir: dir, FS: fs, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	cl, b := rawBroker(ctx, t, s)
	createTopic(ctx, t, cl, testTopic)
	batch := oneBatch(t)
	require.Zero(t, produceRaw(ctx, t, b, testTopic, batch).ErrorCode)

	armed.Store(true)
	require.Equal(t, kerr.KafkaStorageError.Code, produceRaw(ctx, t, b, testTopic, batch).ErrorCode)
	require.Len(t, s.mgr.OfflineDirs(), 1, "the I/O error took the directory offline")
	armed.Store(false)
	require.Equal(t, kerr.KafkaStorageError.Code, produceRaw(ctx, t, b, testTopic, batch).ErrorCode)
}
