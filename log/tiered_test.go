package log

import (
	"bytes"
	"errors"
	"io"
	iofs "io/fs"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/log/internal/segment"
	"github.com/tierlog/tierlog/log/record"
)

// TestSegmentsAndOpenSegment: the copy task's view of a log. Segments
// lists the floor segment of from onward; OpenSegment returns exactly the
// bytes of the segment's files; a pinned segment stays readable after
// retention and truncation remove it; the active segment cannot be opened.
func TestSegmentsAndOpenSegment(t *testing.T) {
	fs := vfs.NewMem()
	l := openTestLog(t, fs, Options{SegmentBytes: 600, IndexIntervalBytes: 100, RemoteStorageEnabled: true})
	defer l.Close()
	appendRecords(t, l, 0, 20, 1_000)
	appendRecords(t, l, 1, 20, 2_000)
	require.NoError(t, l.Flush())

	all, err := l.Segments(0)
	require.NoError(t, err)
	require.Greater(t, len(all), 3)
	for i, s := range all {
		require.Equal(t, i == len(all)-1, s.Active)
		if i > 0 {
			require.Equal(t, all[i-1].NextOffset, s.BaseOffset)
		}
	}
	require.Equal(t, l.LogEndOffset(), all[len(all)-1].NextOffset)
	// From inside the second segment: the floor segment comes first.
	mid := (all[1].BaseOffset + all[1].NextOffset) / 2
	from, err := l.Segments(mid + 1)
	require.NoError(t, err)
	require.Equal(t, all[1:], from)

	second := all[1]
	f, err := l.OpenSegment(second.BaseOffset)
	require.NoError(t, err)
	require.Equal(t, second, f.Info)
	data := make([]byte, f.Info.SizeBytes)
	_, err = f.Log.ReadAt(data, 0)
	require.NoError(t, err)
	onDisk := readFile(t, fs, "p0/"+segment.LogFileName(second.BaseOffset))
	require.Equal(t, onDisk, data)
	require.Equal(t, readFile(t, fs, "p0/"+segment.IndexFileName(second.BaseOffset)), f.OffsetIndex)
	require.Equal(t, readFile(t, fs, "p0/"+segment.TimeIndexFileName(second.BaseOffset)), f.TimeIndex)
	require.NotEmpty(t, f.OffsetIndex, "segments of 600 bytes with a 100-byte interval have index entries")
	require.Empty(t, f.TxnIndex)
	n, err := f.Log.ReadAt(make([]byte, 10), f.Info.SizeBytes-4)
	require.Equal(t, 4, n)
	require.ErrorIs(t, err, io.EOF)

	// Retention removes the pinned segment: its bytes stay readable.
	l.UpdateHighWatermark(l.LogEndOffset())
	_, err = l.MaybeIncrementLogStartOffset(all[2].BaseOffset)
	require.NoError(t, err)
	_, err = l.DeleteOldSegments()
	require.NoError(t, err)
	_, err = fs.Stat("p0/" + segment.LogFileName(second.BaseOffset))
	require.True(t, errors.Is(err, iofs.ErrNotExist), "the segment's file is deleted: %v", err)
	again := make([]byte, len(data))
	_, err = f.Log.ReadAt(again, 0)
	require.NoError(t, err)
	require.Equal(t, data, again)
	require.NoError(t, f.Close())
	require.NoError(t, f.Close(), "Close is idempotent")

	_, err = l.OpenSegment(second.BaseOffset)
	require.ErrorIs(t, err, ErrSegmentNotFound, "deleted by retention")
	_, err = l.OpenSegment(all[len(all)-1].BaseOffset)
	require.ErrorIs(t, err, ErrSegmentNotFound, "the active segment is never copied")
	_, err = l.OpenSegment(all[2].BaseOffset + 1)
	require.ErrorIs(t, err, ErrSegmentNotFound, "not a base offset")

	// A truncation replaces the pinned segment's files: the pin keeps
	// the old bytes.
	third := all[2]
	g, err := l.OpenSegment(third.BaseOffset)
	require.NoError(t, err)
	before := make([]byte, g.Info.SizeBytes)
	_, err = g.Log.ReadAt(before, 0)
	require.NoError(t, err)
	_, err = l.TruncateTo(third.BaseOffset + 1)
	require.NoError(t, err)
	after := make([]byte, len(before))
	_, err = g.Log.ReadAt(after, 0)
	require.NoError(t, err)
	require.Equal(t, before, after)
	require.NoError(t, g.Close())
}

// TestOpenSegmentTxnIndex: a segment with an aborted transaction gives its
// .txnindex bytes, as the file holds them after the roll.
func TestOpenSegmentTxnIndex(t *testing.T) {
	fs := vfs.NewMem()
	l := openTestLog(t, fs, Options{})
	defer l.Close()
	opts := record.DefaultBuilderOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence, opts.Transactional = 7, 0, 0, true
	b := record.NewBuilder(opts)
	b.Add(1_000, nil, []byte("v"))
	batch, err := b.Build()
	require.NoError(t, err)
	_, err = l.AppendAsLeader(batch, 0, OriginClient)
	require.NoError(t, err)
	marker, err := record.AppendEndTxnBatch(nil, opts, 1_000, record.ControlAbort, 0)
	require.NoError(t, err)
	_, err = l.AppendAsLeader(marker, 0, OriginCoordinator)
	require.NoError(t, err)
	l.UpdateHighWatermark(l.LogEndOffset())
	require.NoError(t, l.Roll())
	require.NoError(t, l.Flush())

	f, err := l.OpenSegment(0)
	require.NoError(t, err)
	defer f.Close()
	require.Len(t, f.TxnIndex, 34, "one aborted transaction: one 34-byte entry")
	require.Equal(t, readFile(t, fs, "p0/"+segment.TxnIndexFileName(0)), f.TxnIndex)
}

// TestEpochEntriesInRange: the two ranges a copy records (a remote
// segment's epochs and its LEADER_EPOCH index; docs/remote-tier.md).
func TestEpochEntriesInRange(t *testing.T) {
	l := openTestLog(t, vfs.NewMem(), Options{})
	defer l.Close()
	appendRecords(t, l, 0, 5, 1_000)
	appendRecords(t, l, 2, 5, 1_000)
	appendRecords(t, l, 3, 5, 1_000)
	require.Equal(t, []epochcache.Entry{{Epoch: 0, StartOffset: 0}, {Epoch: 2, StartOffset: 5}},
		l.EpochEntriesInRange(-1, 10))
	require.Equal(t, []epochcache.Entry{{Epoch: 2, StartOffset: 7}, {Epoch: 3, StartOffset: 10}},
		l.EpochEntriesInRange(7, 12))
}

func readFile(t *testing.T, fs vfs.FS, name string) []byte {
	t.Helper()
	f, err := fs.Open(name)
	require.NoError(t, err)
	defer f.Close()
	var buf bytes.Buffer
	_, err = io.Copy(&buf, f)
	require.NoError(t, err)
	return buf.Bytes()
}
