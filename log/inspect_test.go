package log

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"github.com/tierlog/tierlog/log/record"
)

func offsetIndexBytes(pairs ...int32) []byte {
	var b []byte
	for _, v := range pairs {
		b = binary.BigEndian.AppendUint32(b, uint32(v))
	}
	return b
}

func timeIndexBytes(entries ...[2]int64) []byte {
	var b []byte
	for _, e := range entries {
		b = binary.BigEndian.AppendUint64(b, uint64(e[0]))
		b = binary.BigEndian.AppendUint32(b, uint32(e[1]))
	}
	return b
}

func TestDecodeOffsetIndex(t *testing.T) {
	got, err := DecodeOffsetIndex("x.index", 100, offsetIndexBytes(0, 0, 5, 70))
	require.NoError(t, err)
	require.Equal(t, []IndexEntry{{100, 0}, {105, 70}}, got)

	for name, data := range map[string][]byte{
		"offset repeats":   offsetIndexBytes(0, 0, 0, 70),
		"position repeats": offsetIndexBytes(0, 0, 5, 0),
		"negative offset":  offsetIndexBytes(0, 0, -1, 70),
		"torn":             append(offsetIndexBytes(0, 0), 1, 2, 3),
	} {
		got, err := DecodeOffsetIndex("x.index", 100, data)
		var ie *IndexError
		require.ErrorAs(t, err, &ie, name)
		require.True(t, errors.Is(err, ErrCorruption), name)
		require.Equal(t, 1, ie.Entry, name)
		require.Equal(t, int64(8), ie.Position, name)
		require.Equal(t, []IndexEntry{{100, 0}}, got, name) // the valid prefix
	}
}

func TestDecodeTimeIndex(t *testing.T) {
	got, err := DecodeTimeIndex("x.timeindex", 100, timeIndexBytes([2]int64{50, 0}, [2]int64{60, 0}, [2]int64{70, 4}))
	require.NoError(t, err)
	require.Equal(t, []TimeIndexEntry{{50, 100}, {60, 100}, {70, 104}}, got)

	for name, data := range map[string][]byte{
		"timestamp decreases": timeIndexBytes([2]int64{50, 0}, [2]int64{40, 1}),
		"offset decreases":    timeIndexBytes([2]int64{50, 3}, [2]int64{60, 2}),
		"torn":                append(timeIndexBytes([2]int64{50, 0}), 9),
	} {
		_, err := DecodeTimeIndex("x.timeindex", 100, data)
		var ie *IndexError
		require.ErrorAs(t, err, &ie, name)
		require.True(t, errors.Is(err, ErrCorruption), name)
		require.Equal(t, 1, ie.Entry, name)
	}
}

// TestDecodersReadWhatTheLogWrites: the index entries of a rolled segment
// point at batch starts whose last offsets they name, and the offsets
// checkpoint and producer snapshot written by Close decode.
func TestDecodersReadWhatTheLogWrites(t *testing.T) {
	fs := vfs.NewMem()
	l := openTestLog(t, fs, Options{SegmentBytes: 2048, IndexIntervalBytes: 1})
	appendRecords(t, l, 0, 40, 1000)
	require.NoError(t, l.Close())

	names, err := fs.List("p0")
	require.NoError(t, err)
	var checked int
	for _, name := range names {
		base, kind, ok := ParseSegmentFileName(name)
		if !ok || kind != "index" {
			continue
		}
		idx := readAll(t, fs, "p0/"+name)
		entries, err := DecodeOffsetIndex(name, base, idx)
		require.NoError(t, err)
		logBytes := readAll(t, fs, fs.PathJoin("p0", name[:len(name)-len("index")]+"log"))
		for _, e := range entries {
			b, err := record.ReadBatch(logBytes[e.Position:])
			require.NoError(t, err)
			require.Equal(t, e.Offset, b.LastOffset())
			checked++
		}
	}
	require.Greater(t, checked, 0)

	c, err := ParseOffsetsCheckpoint(OffsetsCheckpointFileName, readAll(t, fs, "p0/"+OffsetsCheckpointFileName))
	require.NoError(t, err)
	require.Equal(t, int64(40), c.RecoveryPoint)
	_, err = ParseOffsetsCheckpoint("x", []byte("1\n"))
	require.True(t, errors.Is(err, ErrCorruption))

	snap := readAll(t, fs, "p0/00000000000000000040.snapshot")
	_, err = DecodeProducerSnapshot(snap)
	require.NoError(t, err)
	snap[len(snap)-1] ^= 1
	_, err = DecodeProducerSnapshot(snap)
	require.True(t, errors.Is(err, ErrCorruption))
}
