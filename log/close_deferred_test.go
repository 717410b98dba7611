package log

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"
)

// TestCloseDeferred: CloseDeferred needs ManagedCleanShutdown; it
// fsyncs nothing and replaces no file (the offsets checkpoint keeps its
// old contents until Publish); after every Publish step the log opens
// clean at its end; a second close returns no new error.
func TestCloseDeferred(t *testing.T) {
	mem := vfs.NewMem()
	var syncs, armed atomic.Bool
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if armed.Load() && (op.Kind == errorfs.OpFileSync || op.Kind == errorfs.OpFileSyncData || op.Kind == errorfs.OpFileSyncTo) {
			syncs.Store(true)
		}
		return nil
	}))
	l := openTestLog(t, fs, Options{})
	_, err := l.CloseDeferred()
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.NoError(t, l.Close())

	managed := Options{ManagedCleanShutdown: true}
	l = openTestLog(t, fs, managed)
	appendRecords(t, l, 0, 5, 1_000_000)
	require.NoError(t, l.Flush())
	appendRecords(t, l, 5, 5, 1_000_000)
	before, _, err := readOffsetsCheckpoint(mem, "p0")
	require.NoError(t, err)
	armed.Store(true)
	d, err := l.CloseDeferred()
	armed.Store(false)
	require.NoError(t, err)
	require.False(t, syncs.Load(), "CloseDeferred fsynced a file")
	require.NoError(t, l.Close(), "a Close after CloseDeferred")
	still, _, err := readOffsetsCheckpoint(mem, "p0")
	require.NoError(t, err)
	require.Equal(t, before, still, "the offsets checkpoint was replaced before Publish")
	require.Error(t, d.Publish(PublishSteps))
	for step := range PublishSteps {
		require.NoError(t, d.Publish(step))
	}
	after, _, err := readOffsetsCheckpoint(mem, "p0")
	require.NoError(t, err)
	require.Equal(t, int64(10), after.recoveryPoint)
	names, err := mem.List("p0")
	require.NoError(t, err)
	for _, n := range names {
		require.False(t, strings.HasSuffix(n, ".tmp"), "temp file %s left after Publish", n)
	}
	o := managed
	o.CleanShutdown = true
	l = openTestLog(t, fs, o)
	require.Equal(t, int64(10), l.LogEndOffset())
	require.Equal(t, int64(10), l.Metrics().RecoveryPoint)

	// Closed again without a write since the clean open: the producer
	// snapshot and the offsets checkpoint there are kept, not rewritten.
	d, err = l.CloseDeferred()
	require.NoError(t, err)
	for step := range PublishSteps {
		require.Empty(t, d.renames[step], "an idle log's close replaced %v", d.renames[step])
	}
}
