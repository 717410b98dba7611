package log

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/log/internal/segment"
	"github.com/tierlog/tierlog/log/record"
)

// flippedRolledSegment builds, on the real file system, a closed log of
// 40 single-record batches in 800-byte segments and flips one bit of the
// value of batch 2 of the second segment (inside the CRC: the header
// checks of a read cannot see it). It returns the directory, the damaged
// segment's base and the damaged batch's position and offset.
func flippedRolledSegment(t *testing.T) (dir string, seg, pos, offset int64) {
	dir = filepath.Join(t.TempDir(), "p0")
	l := openVerifyLog(t, dir, false, false)
	appendRecords(t, l, 0, 40, 1_000_000)
	var bases []int64
	for _, s := range l.acquireViewForTest(t).segments {
		bases = append(bases, s.BaseOffset())
	}
	require.NoError(t, l.Close())
	require.Greater(t, len(bases), 3)
	seg = bases[1]

	name := filepath.Join(dir, segment.LogFileName(seg))
	data, err := os.ReadFile(name)
	require.NoError(t, err)
	p := 0
	for range 2 {
		b, err := record.ReadBatch(data[p:])
		require.NoError(t, err)
		p += b.Size()
	}
	b, err := record.ReadBatch(data[p:])
	require.NoError(t, err)
	data[p+b.Size()-2] ^= 0x04 // the last byte of the value
	require.NoError(t, os.WriteFile(name, data, 0o644))
	return dir, seg, int64(p), b.BaseOffset()
}

func openVerifyLog(t *testing.T, dir string, verify, noMmap bool) *UnifiedLog {
	t.Helper()
	l, err := Open(dir, Options{FS: vfs.Default, SegmentBytes: 800, IndexIntervalBytes: 1, SegmentIndexBytes: 4096,
		VerifyReads: verify, DisableMmapReads: noMmap, Now: func() time.Time { return time.UnixMilli(1_000_000) }})
	require.NoError(t, err)
	return l
}

func (l *UnifiedLog) acquireViewForTest(t *testing.T) *segmentView {
	v, err := l.acquireView()
	require.NoError(t, err)
	t.Cleanup(v.unref)
	return v
}

// requireValidBatches checks that data is whole batches passing their
// CRC, and returns the offset after the last.
func requireValidBatches(t *testing.T, data []byte) int64 {
	t.Helper()
	next := int64(-1)
	for len(data) > 0 {
		b, err := record.ReadBatch(data)
		require.NoError(t, err)
		require.NoError(t, b.Validate())
		next = b.NextOffset()
		data = data[b.Size():]
	}
	return next
}

// TestReadOfFlippedByteInRolledSegment: a bit flipped under the CRC of a
// rolled segment, behind a clean shutdown (Open recovers nothing). By
// default a read serves the batch as it is, as Kafka's broker does. With
// VerifyReads, through the mapping and through pread alike, Read and
// ReadSlice fail at the batch with a counted *CorruptionError naming the
// segment, the batch's position and the offset read; a read from an
// earlier offset returns the batches before it, counted as cut; a read
// after it is served.
func TestReadOfFlippedByteInRolledSegment(t *testing.T) {
	dir, seg, pos, bad := flippedRolledSegment(t)

	t.Run("default", func(t *testing.T) {
		l := openVerifyLog(t, dir, false, false)
		defer l.Close()
		info, err := l.Read(nil, bad, 1, IsolationLogEnd, true)
		require.NoError(t, err)
		b, err := record.ReadBatch(info.Records)
		require.NoError(t, err)
		require.ErrorIs(t, b.Validate(), ErrCorruption, "the damaged batch is served unchecked")
		require.Zero(t, l.Metrics().DamagedReads)
	})

	for _, mapped := range []bool{true, false} {
		name := "pread"
		if mapped {
			name = "mmap"
		}
		t.Run(name, func(t *testing.T) {
			l := openVerifyLog(t, dir, true, !mapped)
			defer l.Close()

			info, err := l.Read(nil, bad, 1, IsolationLogEnd, true)
			var ce *CorruptionError
			require.ErrorAs(t, err, &ce)
			require.ErrorIs(t, err, ErrCorruption)
			require.Equal(t, CorruptionError{Segment: seg, Offset: bad, Position: pos, Err: ce.Err}, *ce)
			require.Empty(t, info.Records)
			require.Equal(t, int64(1), l.Metrics().DamagedReads)

			info, err = l.Read(nil, seg, 1<<20, IsolationLogEnd, true)
			require.NoError(t, err)
			require.Equal(t, bad, requireValidBatches(t, info.Records), "the batches before the damage")
			require.Equal(t, int64(1), l.Metrics().ReadsCutAtDamage)

			info, err = l.Read(nil, bad+1, 1<<20, IsolationLogEnd, true)
			require.NoError(t, err)
			require.Greater(t, requireValidBatches(t, info.Records), bad+1)

			fs, err := l.ReadSlice(bad, 1, IsolationLogEnd, true)
			require.ErrorAs(t, err, &ce)
			require.Equal(t, CorruptionError{Segment: seg, Offset: bad, Position: pos, Err: ce.Err}, *ce)
			require.Nil(t, fs.File)
			require.Equal(t, int64(2), l.Metrics().DamagedReads)

			fs, err = l.ReadSlice(seg, 1<<20, IsolationLogEnd, true)
			require.NoError(t, err)
			defer fs.Release()
			require.Equal(t, mapped, fs.Data != nil, "the read path under test")
			got := make([]byte, fs.Size)
			_, err = fs.File.ReadAt(got, fs.Position)
			require.NoError(t, err)
			require.Equal(t, bad, requireValidBatches(t, got), "the slice ends before the damage")
			require.Equal(t, int64(2), l.Metrics().ReadsCutAtDamage)
		})
	}
}

// TestReadCutAtHeaderDamageIsCounted: without VerifyReads, a read that
// meets a batch header out of order after its first batch returns the
// batches before it and counts the cut; the next read, at the damage,
// fails with a counted *CorruptionError.
func TestReadCutAtHeaderDamageIsCounted(t *testing.T) {
	e, bases := segmentFiles(t, 40, 800)
	e.rewriteFile(segment.LogFileName(bases[1]), flipThirdBaseOffset(7, 0x40))
	require.NoError(t, e.reopen())
	info, err := e.l.Read(nil, bases[1], 1<<20, IsolationLogEnd, true)
	require.NoError(t, err)
	next := requireValidBatches(t, info.Records)
	require.Equal(t, bases[1]+2, next)
	require.Equal(t, int64(1), e.l.Metrics().ReadsCutAtDamage)
	require.Zero(t, e.l.Metrics().DamagedReads)

	_, err = e.l.Read(nil, next, 1<<20, IsolationLogEnd, true)
	require.ErrorIs(t, err, ErrCorruption)
	require.Equal(t, int64(1), e.l.Metrics().DamagedReads)
}

// TestTimestampLookupOfDamagedBatchIsTyped: a timestamp lookup whose
// header scan meets damage (a base offset out of order) fails with a
// counted *CorruptionError naming the segment, as a read does.
func TestTimestampLookupOfDamagedBatchIsTyped(t *testing.T) {
	e, bases := segmentFiles(t, 40, 800)
	e.rewriteFile(segment.LogFileName(bases[1]), flipThirdBaseOffset(7, 0x08))
	require.NoError(t, e.reopen())
	e.l.UpdateHighWatermark(e.l.LogEndOffset())
	_, err := e.l.MaybeIncrementLogStartOffset(bases[1] + 2)
	require.NoError(t, err)
	_, _, err = e.l.FetchOffsetByTimestamp(0)
	var ce *CorruptionError
	require.ErrorAs(t, err, &ce)
	require.ErrorIs(t, err, ErrCorruption)
	require.Equal(t, bases[1], ce.Segment)
	require.Equal(t, int64(1), e.l.Metrics().DamagedReads)
}
