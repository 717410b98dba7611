package badinput

import (
	"io"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
)

func init() { rowSets = append(rowSets, inspectRows) }

// inspectFiles closes a log of two segments (an offset and a time index
// entry per batch, an idempotent producer) and returns its files by name:
// the inputs of the public file decoders an inspector uses.
func inspectFiles(t *testing.T) map[string][]byte {
	t.Helper()
	fs := vfs.NewMem()
	l, err := log.Open("p0", log.Options{FS: fs, SegmentBytes: 300, IndexIntervalBytes: 1, SegmentIndexBytes: 4096,
		Now: func() time.Time { return time.UnixMilli(1_000_000) }})
	must(t, err)
	opts := record.DefaultBuilderOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = 5, 0, 0
	for i := range 6 {
		b := record.NewBuilder(opts)
		b.Add(int64(1000+i), nil, []byte("value"))
		buf, err := b.Build()
		must(t, err)
		_, err = l.AppendAsLeader(buf, 0, log.OriginClient)
		must(t, err)
		opts.BaseSequence++
	}
	must(t, l.Close())
	names, err := fs.List("p0")
	must(t, err)
	files := map[string][]byte{}
	for _, n := range names {
		f, err := fs.Open(fs.PathJoin("p0", n))
		must(t, err)
		data, err := io.ReadAll(f)
		must(t, err)
		must(t, f.Close())
		files[n] = data
	}
	return files
}

const (
	inspectIndex     = "00000000000000000000.index"
	inspectTimeIndex = "00000000000000000000.timeindex"
	inspectSnapshot  = "00000000000000000006.snapshot"
)

// decodeRow damages the named file's bytes and runs its decoder.
func decodeRow(a area, damage string, want error, file string, mutate func([]byte) []byte) row {
	return row{area: a, damage: damage, want: outcome{err: want, readableTo: -1}, run: func(t *testing.T) outcome {
		data := inspectFiles(t)[file]
		if len(data) == 0 {
			t.Fatalf("%s is empty or missing", file)
		}
		data = mutate(data)
		var err error
		switch a {
		case areaIndex:
			if file == inspectIndex {
				_, err = log.DecodeOffsetIndex(file, 0, data)
			} else {
				_, err = log.DecodeTimeIndex(file, 0, data)
			}
		case areaSnapshot:
			_, err = log.DecodeProducerSnapshot(data)
		case areaCheckpoint:
			_, err = log.ParseOffsetsCheckpoint(file, data)
		}
		return outcome{err: err, readableTo: -1}
	}}
}

func inspectRows() []row {
	same := func(b []byte) []byte { return b }
	return []row{
		decodeRow(areaIndex, "decoded offset index, undamaged", nil, inspectIndex, same),
		decodeRow(areaIndex, "decoded offset index with a torn entry", log.ErrCorruption, inspectIndex,
			func(b []byte) []byte { return b[:len(b)-3] }),
		decodeRow(areaIndex, "decoded offset index with entries out of order", log.ErrCorruption, inspectIndex,
			func(b []byte) []byte { return append(b, b[:8]...) }),
		decodeRow(areaIndex, "decoded time index with a torn entry", log.ErrCorruption, inspectTimeIndex,
			func(b []byte) []byte { return b[:len(b)-1] }),
		decodeRow(areaIndex, "decoded time index with an entry going back", log.ErrCorruption, inspectTimeIndex,
			func(b []byte) []byte { return append(b, make([]byte, 12)...) }),
		decodeRow(areaSnapshot, "decoded snapshot with a flipped byte", log.ErrCorruption, inspectSnapshot,
			func(b []byte) []byte { b[len(b)-1] ^= 0xff; return b }),
		decodeRow(areaSnapshot, "decoded snapshot cut short", log.ErrCorruption, inspectSnapshot,
			func(b []byte) []byte { return b[:len(b)-5] }),
		decodeRow(areaCheckpoint, "decoded offsets-checkpoint with an unknown key", log.ErrCorruption, log.OffsetsCheckpointFileName,
			func([]byte) []byte { return []byte("0\n1\nhigh-watermark 3\n") }),
	}
}
