package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tierlog/tierlog/log/record"
)

// TestBaselinePlainFile: with the compare command's baseline on, acked
// records land in the partition's plain file with the offsets the
// answers gave, and the log stays empty.
func TestBaselinePlainFile(t *testing.T) {
	dir := t.TempDir()
	s, err := Start(Options{Addr: "127.0.0.1:0", Dir: dir, BaselinePlainFile: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := newClient(t, s, kgo.DefaultProduceTopic(testTopic), kgo.AllowAutoTopicCreation())
	var offsets []int64
	for i := range 3 {
		r, err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte{byte('a' + i)}}).First()
		require.NoError(t, err)
		offsets = append(offsets, r.Offset)
	}
	require.Equal(t, []int64{0, 1, 2}, offsets)

	data, err := os.ReadFile(filepath.Join(dir, "plain", testTopic+"-0"))
	require.NoError(t, err)
	var got []int64
	for len(data) > 0 {
		b, err := record.ReadBatch(data)
		require.NoError(t, err)
		got = append(got, b.BaseOffset())
		data = data[b.Size():]
	}
	require.Equal(t, offsets, got)
	l, err := s.mgr.Get(s.mgr.Partitions()[0].Partition)
	require.NoError(t, err)
	require.Zero(t, l.LogEndOffset())
}
