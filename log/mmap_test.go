//go:build linux

package log

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"github.com/tierlog/tierlog/internal/harness/testseed"
)

// openOSLog opens a log on the operating system's file system, where
// segments are read through mappings unless o disables them.
func openOSLog(t *testing.T, o Options) *UnifiedLog {
	t.Helper()
	o.FS = vfs.Default
	l, err := Open(filepath.Join(t.TempDir(), "p0"), o)
	require.NoError(t, err)
	return l
}

// TestMappedLogReadsEqualPreadReads: the same appends to a log read
// through mappings and to one read with pread (DisableMmapReads) give the
// same Read and ReadSlice answers at random offsets, sizes and isolation
// bounds, over rolled segments and the active one; ReadSlice's Data is
// set on the mapped log only and holds the bytes File has there.
func TestMappedLogReadsEqualPreadReads(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Seed(t, 1), 5))
	mapped := openOSLog(t, Options{SegmentBytes: 256 << 10})
	defer mapped.Close()
	pread := openOSLog(t, Options{SegmentBytes: 256 << 10, DisableMmapReads: true})
	defer pread.Close()
	for range 300 {
		count := 1 + rng.IntN(16)
		b := buildBatches(t, 1, count, rng.IntN(2000), 1_000_000, 0, -1)
		for _, l := range []*UnifiedLog{mapped, pread} {
			_, err := l.AppendAsLeader(bytes.Clone(b), 0, OriginClient)
			require.NoError(t, err)
		}
	}
	require.Greater(t, mapped.Metrics().Segments, 3)
	leo := mapped.LogEndOffset()
	mapped.UpdateHighWatermark(leo - 7)
	pread.UpdateHighWatermark(leo - 7)
	var bm, bp []byte
	for range 2000 {
		o := rng.Int64N(leo + 1)
		maxBytes := []int{1, rng.IntN(32 << 10), 1 << 20}[rng.IntN(3)]
		iso := Isolation(rng.IntN(3))
		minOne := rng.IntN(2) == 0
		im, errm := mapped.Read(bm, o, maxBytes, iso, minOne)
		ip, errp := pread.Read(bp, o, maxBytes, iso, minOne)
		require.Equal(t, errp == nil, errm == nil, "offset %d", o)
		require.True(t, bytes.Equal(im.Records, ip.Records), "Read(%d, %d, %s, %t) differs", o, maxBytes, iso, minOne)
		require.Equal(t, ip.Position, im.Position)
		bm, bp = im.Records[:0], ip.Records[:0]

		sm, errm := mapped.ReadSlice(o, maxBytes, iso, minOne)
		sp, errp := pread.ReadSlice(o, maxBytes, iso, minOne)
		require.Equal(t, errp == nil, errm == nil, "offset %d", o)
		require.Equal(t, sp.Position, sm.Position)
		require.Equal(t, sp.Size, sm.Size)
		require.Nil(t, sp.Data)
		if sm.Size > 0 {
			want := make([]byte, sp.Size)
			_, err := sp.File.ReadAt(want, sp.Position)
			require.NoError(t, err)
			require.True(t, bytes.Equal(sm.Data, want), "ReadSlice(%d).Data differs from the file", o)
		} else {
			require.Nil(t, sm.Data)
		}
		sm.Release()
		sp.Release()
	}
}

// TestMappedSliceOutlivesDeletionTruncationAndClose: a reader holding
// FileSlice.Data of a rolled segment and of the active one keeps seeing
// the bytes it was given while retention deletes the rolled segment, a
// truncation rewrites the active one (and new appends land where the old
// bytes were), and the log closes and is deleted: the mapping is unmapped
// only when the reader releases the last view. Run under -race, with a
// reader goroutine checking the bytes meanwhile.
func TestMappedSliceOutlivesDeletionTruncationAndClose(t *testing.T) {
	l := openOSLog(t, Options{SegmentBytes: 128 << 10})
	for range 80 {
		_, err := l.AppendAsLeader(buildBatches(t, 1, 8, 500, 1_000_000, 0, -1), 0, OriginClient)
		require.NoError(t, err)
	}
	require.Greater(t, l.Metrics().Segments, 2)
	leo := l.LogEndOffset()
	l.UpdateHighWatermark(leo)

	first, err := l.ReadSlice(8, 64<<10, IsolationLogEnd, true)
	require.NoError(t, err)
	last, err := l.ReadSlice(leo-20, 64<<10, IsolationLogEnd, true)
	require.NoError(t, err)
	require.NotNil(t, first.Data)
	require.NotNil(t, last.Data)
	require.NotEqual(t, first.SegmentBaseOffset, last.SegmentBaseOffset)
	wantFirst, wantLast := bytes.Clone(first.Data), bytes.Clone(last.Data)

	stop := make(chan struct{})
	checked := make(chan error)
	go func() {
		var err error
		for n := 0; ; n++ {
			select {
			case <-stop:
				checked <- err
				return
			default:
			}
			if !bytes.Equal(first.Data, wantFirst) || !bytes.Equal(last.Data, wantLast) {
				err = fmt.Errorf("held bytes changed (check %d)", n)
			}
		}
	}()

	// Retention: the first segment's files go.
	_, err = l.MaybeIncrementLogStartOffset(last.SegmentBaseOffset)
	require.NoError(t, err)
	deleted, err := l.DeleteOldSegments()
	require.NoError(t, err)
	require.Positive(t, deleted)
	// Truncation inside the active segment, below the held range, then
	// appends over the same positions of the new file.
	_, err = l.TruncateTo(last.BatchBaseOffset - 8)
	require.NoError(t, err)
	for range 10 {
		_, err := l.AppendAsLeader(buildBatches(t, 1, 8, 400, 1_000_000, 0, -1), 0, OriginClient)
		require.NoError(t, err)
	}
	require.NoError(t, l.Close())
	require.NoError(t, l.Delete())

	close(stop)
	require.NoError(t, <-checked)
	require.True(t, bytes.Equal(first.Data, wantFirst))
	require.True(t, bytes.Equal(last.Data, wantLast))
	first.Release()
	last.Release()
	require.Nil(t, first.Data)
}

// TestSliceDataOnlyWhenMapped: ReadSlice's Data is nil when the log does
// not read through mappings (DisableMmapReads, or an FS other than
// vfs.Default), and File serves the bytes.
func TestSliceDataOnlyWhenMapped(t *testing.T) {
	for name, l := range map[string]*UnifiedLog{
		"disabled": openOSLog(t, Options{DisableMmapReads: true}),
		"memfs":    openTestLog(t, vfs.NewMem(), Options{}),
	} {
		for range 4 {
			_, err := l.AppendAsLeader(buildBatches(t, 1, 4, 100, 1_000_000, 0, -1), 0, OriginClient)
			require.NoError(t, err)
		}
		sl, err := l.ReadSlice(5, 1<<20, IsolationLogEnd, true)
		require.NoError(t, err)
		require.Positive(t, sl.Size, name)
		require.Nil(t, sl.Data, name)
		sl.Release()
		require.NoError(t, l.Close())
	}
}
