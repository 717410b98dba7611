package log

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tierlog/tierlog/internal/atomicfile"
	"github.com/tierlog/tierlog/log/internal/segment"
	"github.com/tierlog/tierlog/log/record"
)

// fuzzSegmentSeed is three valid batches, the first with epoch 0.
func fuzzSegmentSeed(t testing.TB) []byte {
	var out []byte
	for i := int64(0); i < 3; i++ {
		opts := record.DefaultBuilderOptions()
		opts.BaseOffset = i * 2
		b := record.NewBuilder(opts)
		b.Add(1000+i, nil, []byte("value"))
		b.Add(1000+i, []byte("k"), nil)
		var err error
		if out, err = b.AppendTo(out); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// FuzzRecoverSegment opens a log directory whose only .log holds
// arbitrary bytes, after an unclean shutdown or (clean) with the
// clean-shutdown marker. Open never panics and succeeds; after the
// unclean open what it kept is a prefix of the bytes, every batch of it
// valid; either way an append after the open is read back at its offset
// after a crash and a recovery (the acknowledged record is never lost).
func FuzzRecoverSegment(f *testing.F) {
	good := fuzzSegmentSeed(f)
	f.Add(good, false)
	f.Add(good, true)
	f.Add(good[:len(good)-7], true) // torn tail behind the marker
	flipped := bytes.Clone(good)
	flipped[len(flipped)/2] ^= 1
	f.Add(flipped, false)
	f.Add(flipped, true)
	f.Add([]byte{}, true)
	f.Add(make([]byte, 200), false)
	f.Fuzz(func(t *testing.T, data []byte, clean bool) {
		if len(data) > 1<<16 {
			return
		}
		fs := vfs.NewCrashableMem()
		must := func(err error) {
			if err != nil {
				t.Fatal(err)
			}
		}
		must(fs.MkdirAll("p0", 0o755))
		must(atomicfile.SyncDir(fs, ""))
		write := func(name string, b []byte) {
			w, err := fs.Create(fs.PathJoin("p0", name), vfs.WriteCategoryUnspecified)
			must(err)
			_, err = w.Write(bytes.Clone(b))
			must(err)
			must(w.Sync())
			must(w.Close())
		}
		write(segment.LogFileName(0), data)
		if clean {
			write(CleanShutdownFileName, nil)
		}
		d, err := fs.OpenDir("p0")
		must(err)
		must(d.Sync())
		must(d.Close())
		opts := Options{FS: fs, Now: func() time.Time { return time.UnixMilli(1_000_000) }}
		l, err := Open("p0", opts)
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		_, err = readAllRecords(l)
		if !clean {
			if err != nil {
				t.Fatalf("read after recovery: %v", err)
			}
			kept := readAll(t, fs, fs.PathJoin("p0", segment.LogFileName(0)))
			if !bytes.HasPrefix(data, kept) {
				t.Fatalf("recovered %d bytes that are not a prefix of the input", len(kept))
			}
		} else if err != nil && !errors.Is(err, ErrCorruption) {
			// A clean open checks only the active tail: damage before it
			// may be served (consumers check CRCs), or read as typed
			// corruption, never as an untyped error.
			t.Fatalf("read: untyped error %v", err)
		}
		// The bytes may carry any leader epoch (it is outside the CRC):
		// append in the latest one.
		epoch, _ := l.LatestEpoch()
		epoch = max(epoch, 0)
		info, err := l.AppendAsLeader(buildBatches(t, 1, 1, 3, 0, 0, -1), epoch, OriginClient)
		if err != nil {
			t.Fatalf("append: %v", err)
		}
		must(l.Flush())
		crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
		_ = l.Close()
		opts.FS = crashed
		l2, err := Open("p0", opts)
		if err != nil {
			t.Fatalf("reopen after crash: %v", err)
		}
		defer l2.Close()
		r, err := l2.Read(nil, info.FirstOffset, 1<<20, IsolationLogEnd, true)
		if err != nil {
			t.Fatalf("read acked offset %d: %v", info.FirstOffset, err)
		}
		b, err := record.ReadBatch(r.Records)
		if err != nil || b.BaseOffset() != info.FirstOffset || b.Validate() != nil {
			t.Fatalf("acked offset %d read back as %v (%v)", info.FirstOffset, r.Records, err)
		}
	})
}

// FuzzParseOffsetsCheckpoint: arbitrary bytes as the offsets-checkpoint
// file. The parser never panics, fails only with a *CheckpointError, and
// what it accepts encodes to a file it parses back the same.
func FuzzParseOffsetsCheckpoint(f *testing.F) {
	f.Add([]byte("0\n2\nlog-start-offset 5\nrecovery-point 17\n"))
	f.Add([]byte("0\n1\nrecovery-point 17"))
	f.Add([]byte("0\n0\n"))
	f.Add([]byte(""))
	f.Add([]byte("1\n0\n"))
	f.Add([]byte("0\n2\nlog-start-offset -5\nrecovery-point 9223372036854775808\n"))
	f.Add([]byte("0\n3\nlog-start-offset 1\n"))
	f.Add([]byte("0\n1\nbogus 1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := parseOffsetsCheckpoint("p0/"+OffsetsCheckpointFileName, data)
		if err != nil {
			var ce *CheckpointError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCorruption) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if c.logStartOffset < 0 || c.recoveryPoint < 0 {
			t.Fatalf("negative offsets accepted: %+v", c)
		}
		again, err := parseOffsetsCheckpoint("x", c.encode())
		if err != nil || again != c {
			t.Fatalf("re-parse of %q: %+v, %v; want %+v", c.encode(), again, err, c)
		}
	})
}
