package log

import (
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"github.com/tierlog/tierlog/log/record"
)

// TestAppendBuilderAsLeader: a Builder's batch appended without a copy
// reads back as the bytes AppendTo builds with the log's offsets and
// epoch, and the record validation still runs (a timestamp outside the
// log's bounds is refused and nothing is written).
func TestAppendBuilderAsLeader(t *testing.T) {
	l := openTestLog(t, vfs.NewMem(), Options{MessageTimestampBeforeMaxMs: 1000})
	defer l.Close()
	bl := record.NewBuilder(record.DefaultBuilderOptions())
	for round := range 2 {
		bl.Reset(record.DefaultBuilderOptions())
		for i := range 3 {
			bl.Add(1_000_000-int64(i), nil, []byte{byte(round), byte(i)})
		}
		want, err := bl.AppendTo(nil)
		require.NoError(t, err)
		info, err := l.AppendBuilderAsLeader(bl, 4, OriginClient)
		require.NoError(t, err)
		require.Equal(t, int64(3*round), info.FirstOffset)
		require.Equal(t, int64(3*round+2), info.LastOffset)
		wb, err := record.ReadBatch(want)
		require.NoError(t, err)
		wb.SetBaseOffset(info.FirstOffset)
		wb.SetPartitionLeaderEpoch(4)
		got, err := l.Read(nil, info.FirstOffset, 1<<20, IsolationLogEnd, true)
		require.NoError(t, err)
		require.Equal(t, want, got.Records)
	}

	bl.Reset(record.DefaultBuilderOptions())
	bl.Add(1_000_000-5000, nil, []byte("old")) // beyond MessageTimestampBeforeMaxMs
	_, err := l.AppendBuilderAsLeader(bl, 4, OriginClient)
	require.True(t, errors.Is(err, ErrInvalidTimestamp), "%v", err)
	require.Equal(t, int64(6), l.LogEndOffset())

	bl.Reset(record.DefaultBuilderOptions())
	_, err = l.AppendBuilderAsLeader(bl, 4, OriginClient) // no records
	require.ErrorIs(t, err, ErrInvalidRecord)
}
