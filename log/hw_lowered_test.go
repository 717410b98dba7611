package log

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// TestHighWatermarkLoweredListener: Listener.HighWatermarkLowered is
// called once for each truncation that lowers the high watermark, with
// the new value, and never for one that does not (at or above the high
// watermark, or a truncation that raises it). It runs with no lock of the
// log held: the callback reads the log and flushes it.
func TestHighWatermarkLoweredListener(t *testing.T) {
	var l *UnifiedLog
	var got []int64
	l = openTestLog(t, vfs.NewMem(), Options{SegmentBytes: 1024, Listener: Listener{
		HighWatermarkLowered: func(hw int64) {
			require.Equal(t, hw, l.HighWatermark())
			require.NoError(t, l.Flush())
			got = append(got, hw)
		},
	}})
	defer l.Close()
	appendRecords(t, l, 0, 20, 1000)
	l.UpdateHighWatermark(15)

	_, err := l.TruncateTo(18) // above the high watermark
	require.NoError(t, err)
	require.Empty(t, got)
	_, err = l.TruncateTo(15) // at it
	require.NoError(t, err)
	require.Empty(t, got)
	_, err = l.TruncateTo(12)
	require.NoError(t, err)
	require.Equal(t, []int64{12}, got)
	require.NoError(t, l.TruncateFullyAndStartAt(5, 5))
	require.Equal(t, []int64{12, 5}, got)
	require.NoError(t, l.TruncateFullyAndStartAt(30, 30)) // raises it
	require.Equal(t, []int64{12, 5}, got)
	require.Equal(t, int64(30), l.HighWatermark())
}
