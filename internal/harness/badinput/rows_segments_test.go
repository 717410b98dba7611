package badinput

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tierlog/tierlog/internal/atomicfile"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
)

func init() { rowSets = append(rowSets, segmentRows) }

// segLog is a closed log of single-record batches in small segments,
// built through the public API, whose files a row then damages.
type segLog struct {
	t    *testing.T
	fs   *vfs.MemFS
	opts log.Options
	n    int64 // records appended
}

const segDir = "p0"

func newSegLog(t *testing.T, records int64, segmentBytes int64) *segLog {
	s := &segLog{t: t, fs: vfs.NewCrashableMem(), n: records}
	s.opts = log.Options{FS: s.fs, SegmentBytes: segmentBytes, IndexIntervalBytes: 1, SegmentIndexBytes: 4096,
		Now: func() time.Time { return time.UnixMilli(1_000_000) }}
	s.must(s.fs.MkdirAll(segDir, 0o755))
	s.must(atomicfile.SyncDir(s.fs, ""))
	l, err := log.Open(segDir, s.opts)
	s.must(err)
	for i := int64(0); i < records; i++ {
		_, err := l.AppendAsLeader(oneRecordBatch(t), 0, log.OriginClient)
		s.must(err)
	}
	s.must(l.Close())
	return s
}

func oneRecordBatch(t *testing.T) []byte {
	b := record.NewBuilder(record.DefaultBuilderOptions())
	b.Add(1000, nil, []byte("0123456789"))
	buf, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return buf
}

func (s *segLog) must(err error) {
	s.t.Helper()
	if err != nil {
		s.t.Fatal(err)
	}
}

func (s *segLog) path(name string) string { return s.fs.PathJoin(segDir, name) }

func segName(base int64, ext string) string { return fmt.Sprintf("%020d%s", base, ext) }

// bases returns the base offsets of the .log files, sorted.
func (s *segLog) bases() []int64 {
	names, err := s.fs.List(segDir)
	s.must(err)
	var out []int64
	for _, n := range names {
		if len(n) == 24 && strings.HasSuffix(n, ".log") {
			if b, err := strconv.ParseInt(n[:20], 10, 64); err == nil {
				out = append(out, b)
			}
		}
	}
	slices.Sort(out)
	if len(out) < 3 {
		s.t.Fatalf("want at least 3 segments, have %v", out)
	}
	return out
}

func (s *segLog) read(name string) []byte {
	f, err := s.fs.Open(s.path(name))
	s.must(err)
	defer f.Close()
	data, err := io.ReadAll(f)
	s.must(err)
	return data
}

// write replaces a file durably.
func (s *segLog) write(name string, data []byte) {
	_ = s.fs.Remove(s.path(name))
	f, err := s.fs.Create(s.path(name), vfs.WriteCategoryUnspecified)
	s.must(err)
	_, err = f.Write(bytes.Clone(data))
	s.must(err)
	s.must(f.Sync())
	s.must(f.Close())
	s.must(atomicfile.SyncDir(s.fs, segDir))
}

func (s *segLog) change(name string, f func([]byte) []byte) { s.write(name, f(s.read(name))) }

func (s *segLog) remove(name string) {
	s.must(s.fs.Remove(s.path(name)))
	s.must(atomicfile.SyncDir(s.fs, segDir))
}

// unclean makes the next open recover from offset 0, as after a crash
// with the recovery checkpoint lost.
func (s *segLog) unclean() {
	s.remove(log.CleanShutdownFileName)
	s.remove(log.OffsetsCheckpointFileName)
}

// batchPos returns the position of batch i of a segment's .log.
func batchPos(t *testing.T, data []byte, i int) int {
	pos := 0
	for ; i > 0; i-- {
		b, err := record.ReadBatch(data[pos:])
		if err != nil {
			t.Fatal(err)
		}
		pos += b.Size()
	}
	return pos
}

// reopen opens the damaged log and observes the outcome: the error of
// Open, or of the first read that fails reading from the log start; how
// far the reads got; and whether the log repaired and reported the damage
// (a recovery cut, segments moved aside, orphans removed) and then takes
// an append.
func (s *segLog) reopen() outcome {
	l, err := log.Open(segDir, s.opts)
	if err != nil {
		return outcome{err: err, readableTo: -1}
	}
	defer l.Close()
	to, rerr := readFromStart(l)
	m := l.Metrics()
	repaired := m.RecoveryCuts > 0 || m.SegmentsMovedAside > 0 || m.OrphanIndexesRemoved > 0
	if repaired {
		if _, err := l.AppendAsLeader(oneRecordBatch(s.t), 0, log.OriginClient); err != nil {
			repaired = false
		}
	}
	return outcome{err: rerr, repaired: repaired, readableTo: to}
}

// readFromStart reads batches from the log start up to the log end, one
// batch a read (so every offset goes through the index lookup), and
// returns the offset it reached and the error that stopped it. Every
// batch must frame, pass its CRC and continue the offsets.
func readFromStart(l *log.UnifiedLog) (int64, error) {
	next := l.LogStartOffset()
	for next < l.LogEndOffset() {
		info, err := l.Read(nil, next, 1, log.IsolationLogEnd, true)
		if err != nil {
			return next, err
		}
		data := info.Records
		if len(data) == 0 {
			return next, fmt.Errorf("empty read at %d below the log end %d", next, l.LogEndOffset())
		}
		for len(data) > 0 {
			b, err := record.ReadBatch(data)
			if err == nil {
				err = b.Validate()
			}
			if err != nil {
				return next, err
			}
			if b.LastOffset() < next || b.BaseOffset() > next {
				return next, fmt.Errorf("batch [%d, %d] read at %d", b.BaseOffset(), b.LastOffset(), next)
			}
			next = b.NextOffset()
			data = data[b.Size():]
		}
	}
	return next, nil
}

// segRow builds a 60-record log in segments of 10 records (800 bytes),
// lets damage change it and reopens it.
func segRow(a area, damage string, want outcome, f func(s *segLog, bases []int64)) row {
	return row{area: a, damage: damage, want: want, run: func(t *testing.T) outcome {
		s := newSegLog(t, 60, 800)
		f(s, s.bases())
		return s.reopen()
	}}
}

func segmentRows() []row {
	last := func(b []int64) int64 { return b[len(b)-1] }
	flip := func(at func([]byte) int, bits byte) func([]byte) []byte {
		return func(b []byte) []byte {
			b = bytes.Clone(b)
			b[at(b)] ^= bits
			return b
		}
	}
	return []row{
		// Segment files.
		segRow(areaSegment, "torn tail of the active segment after a crash", outcome{repaired: true, readableTo: 60},
			func(s *segLog, b []int64) {
				s.change(segName(last(b), ".log"), func(d []byte) []byte { return append(d, oneRecordBatch(s.t)[:30]...) })
				s.unclean()
			}),
		segRow(areaSegment, "torn tail of the active segment behind a clean-shutdown marker", outcome{repaired: true, readableTo: 60},
			func(s *segLog, b []int64) {
				s.change(segName(last(b), ".log"), func(d []byte) []byte { return append(d, oneRecordBatch(s.t)[:40]...) })
			}),
		// A preallocated tail whose trim at close was lost looks the same:
		// all zeros are free space for the next append, not damage
		// (log.TestPreallocatedZeroTailCrash appends over it).
		segRow(areaSegment, "zeros after the active segment behind a clean-shutdown marker", outcome{readableTo: 60},
			func(s *segLog, b []int64) {
				s.change(segName(last(b), ".log"), func(d []byte) []byte { return append(d, make([]byte, 100)...) })
			}),
		segRow(areaSegment, "crc mismatch in the active segment's last batch behind a clean-shutdown marker",
			outcome{repaired: true, readableTo: 59},
			func(s *segLog, b []int64) {
				s.change(segName(last(b), ".log"), flip(func(d []byte) int { return len(d) - 2 }, 1))
			}),
		segRow(areaSegment, "flipped byte in a rolled segment, recovery checkpoint missing", outcome{repaired: true, readableTo: 12},
			func(s *segLog, b []int64) {
				s.change(segName(b[1], ".log"), flip(func(d []byte) int { return batchPos(s.t, d, 2) + record.HeaderSize + 3 }, 0x10))
				s.unclean()
			}),
		verifiedReadRow(),
		segRow(areaSegment, "flipped byte in the active segment's last batch after a crash", outcome{repaired: true, readableTo: 59},
			func(s *segLog, b []int64) {
				s.change(segName(last(b), ".log"), flip(func(d []byte) int { return len(d) - 3 }, 0x20))
				s.unclean()
			}),
		segRow(areaSegment, "rolled segment cut inside its last batch (header runs past the end)",
			outcome{err: log.ErrCorruption, readableTo: 19},
			func(s *segLog, b []int64) {
				s.change(segName(b[1], ".log"), func(d []byte) []byte { return d[:len(d)-10] })
			}),
		segRow(areaSegment, "zero-length rolled .log beside its non-empty .index",
			outcome{err: log.ErrCorruption, readableTo: 10},
			func(s *segLog, b []int64) { s.write(segName(b[1], ".log"), nil) }),
		segRow(areaSegment, "zero-length rolled .log beside its .index, recovery checkpoint missing",
			outcome{repaired: true, readableTo: 10},
			func(s *segLog, b []int64) {
				s.write(segName(b[1], ".log"), nil)
				s.unclean()
			}),
		segRow(areaSegment, "rolled .log shorter than its index by whole batches",
			outcome{err: log.ErrCorruption, readableTo: 10},
			func(s *segLog, b []int64) {
				s.change(segName(b[1], ".log"), func(d []byte) []byte { return d[:batchPos(s.t, d, 4)] })
			}),
		segRow(areaSegment, "base offset field (outside the crc) raised in a rolled segment",
			outcome{err: log.ErrCorruption, readableTo: 12},
			func(s *segLog, b []int64) {
				s.change(segName(b[1], ".log"), flip(func(d []byte) int { return batchPos(s.t, d, 2) + 7 }, 0x40))
			}),
		segRow(areaSegment, "base offset field (outside the crc) lowered in a rolled segment",
			outcome{err: log.ErrCorruption, readableTo: 12},
			func(s *segLog, b []int64) {
				s.change(segName(b[1], ".log"), flip(func(d []byte) int { return batchPos(s.t, d, 2) + 7 }, 0x08))
			}),
		segRow(areaSegment, "zero-length active .log beside its non-empty .index behind a clean-shutdown marker",
			outcome{readableTo: 50},
			func(s *segLog, b []int64) { s.write(segName(last(b), ".log"), nil) }),
		segRow(areaSegment, "batch length above the maximum batch size after a crash", outcome{repaired: true, readableTo: 55},
			func(s *segLog, b []int64) {
				s.change(segName(last(b), ".log"), func(d []byte) []byte {
					d = bytes.Clone(d)
					binary.BigEndian.PutUint32(d[batchPos(s.t, d, 5)+8:], 0x7ffffff0)
					return d
				})
				s.unclean()
			}),
		segRow(areaSegment, "active .log of garbage after a crash", outcome{repaired: true, readableTo: 50},
			func(s *segLog, b []int64) {
				s.write(segName(last(b), ".log"), bytes.Repeat([]byte("garbage!"), 40))
				s.unclean()
			}),

		// Index files.
		segRow(areaIndex, "rolled .index of garbage", outcome{readableTo: 60},
			func(s *segLog, b []int64) { s.write(segName(b[1], ".index"), bytes.Repeat([]byte{0xee}, 64)) }),
		segRow(areaIndex, "rolled .index with a torn last entry", outcome{readableTo: 60},
			func(s *segLog, b []int64) {
				s.change(segName(b[1], ".index"), func(d []byte) []byte { return d[:len(d)-3] })
			}),
		segRow(areaIndex, "rolled .index missing", outcome{readableTo: 60},
			func(s *segLog, b []int64) { s.remove(segName(b[1], ".index")) }),
		segRow(areaIndex, "rolled .index entries shifted to later batches", outcome{readableTo: 60},
			func(s *segLog, b []int64) {
				// Each offset keeps its place but gets the next entry's
				// position: well-formed, and every entry wrong.
				s.change(segName(b[1], ".index"), func(d []byte) []byte {
					d = bytes.Clone(d)
					for i := 0; i+16 <= len(d); i += 8 {
						copy(d[i+4:i+8], d[i+12:i+16])
					}
					return d[:len(d)-8]
				})
			}),
		segRow(areaIndex, "rolled .index entry pointing at a later batch", outcome{readableTo: 60},
			func(s *segLog, b []int64) {
				d := s.read(segName(b[1], ".log"))
				e := binary.BigEndian.AppendUint32(nil, 1)
				e = binary.BigEndian.AppendUint32(e, uint32(batchPos(s.t, d, 6)))
				s.write(segName(b[1], ".index"), e)
			}),
		orphanRow(".index"),
		orphanRow(".timeindex"),
		orphanRow(".txnindex"),
		segRow(areaIndex, "rolled .timeindex of garbage", outcome{readableTo: 60},
			func(s *segLog, b []int64) { s.write(segName(b[1], ".timeindex"), bytes.Repeat([]byte{0x80}, 36)) }),
		segRow(areaIndex, "rolled .timeindex missing", outcome{readableTo: 60},
			func(s *segLog, b []int64) { s.remove(segName(b[1], ".timeindex")) }),

		// Checkpoints.
		segRow(areaCheckpoint, "offsets-checkpoint of garbage", outcome{err: log.ErrCorruption, readableTo: -1},
			func(s *segLog, b []int64) { s.write(log.OffsetsCheckpointFileName, []byte("\x00\xffgarbage")) }),
		segRow(areaCheckpoint, "offsets-checkpoint empty", outcome{err: log.ErrCorruption, readableTo: -1},
			func(s *segLog, b []int64) { s.write(log.OffsetsCheckpointFileName, nil) }),
		segRow(areaCheckpoint, "offsets-checkpoint recovery point beyond the log end", outcome{readableTo: 60},
			func(s *segLog, b []int64) {
				s.write(log.OffsetsCheckpointFileName, []byte("0\n2\nlog-start-offset 0\nrecovery-point 1000\n"))
				s.remove(log.CleanShutdownFileName)
			}),
		segRow(areaCheckpoint, "offsets-checkpoint log start beyond the log end", outcome{readableTo: 1000},
			func(s *segLog, b []int64) {
				s.write(log.OffsetsCheckpointFileName, []byte("0\n2\nlog-start-offset 1000\nrecovery-point 0\n"))
			}),
		segRow(areaCheckpoint, "offsets-checkpoint with a negative offset", outcome{err: log.ErrCorruption, readableTo: -1},
			func(s *segLog, b []int64) {
				s.write(log.OffsetsCheckpointFileName, []byte("0\n2\nlog-start-offset -1\nrecovery-point 0\n"))
			}),

		// Partition directory contents and names.
		segRow(areaDirName, "files with foreign names beside the segments", outcome{readableTo: 60},
			func(s *segLog, b []int64) {
				for _, n := range []string{"123.log", "x.index", "00000000000000000010.log.bak", "0000000000000000001a.log"} {
					s.write(n, []byte("not a segment"))
				}
			}),
		segRow(areaDirName, "segment name beyond the int64 range", outcome{readableTo: 60},
			func(s *segLog, b []int64) { s.write("99999999999999999999.log", oneRecordBatch(s.t)) }),
		segRow(areaDirName, "moved-aside .damaged files from an earlier recovery", outcome{readableTo: 60},
			func(s *segLog, b []int64) { s.write(segName(60, ".log.damaged"), bytes.Repeat([]byte{7}, 100)) }),
		segRow(areaDirName, "leftover .log.tmp of an interrupted rewrite", outcome{readableTo: 60},
			func(s *segLog, b []int64) { s.write(segName(b[1], ".log.tmp"), bytes.Repeat([]byte{7}, 100)) }),
	}
}

// orphanRow puts an index file without its .log at the log end offset,
// where the next roll creates a segment, and appends across the roll.
func orphanRow(ext string) row {
	return row{area: areaIndex, damage: "orphan " + ext + " at the next roll offset",
		want: outcome{repaired: true, readableTo: 65},
		run: func(t *testing.T) outcome {
			s := newSegLog(t, 60, 800)
			s.write(segName(60, ext), bytes.Repeat([]byte{1}, 24))
			l, err := log.Open(segDir, s.opts)
			if err != nil {
				return outcome{err: err, readableTo: -1}
			}
			defer l.Close()
			for range 5 { // the first append rolls: the active segment is full
				if _, err := l.AppendAsLeader(oneRecordBatch(t), 0, log.OriginClient); err != nil {
					return outcome{err: err, readableTo: -1}
				}
			}
			to, err := readFromStart(l)
			return outcome{err: err, repaired: l.Metrics().OrphanIndexesRemoved > 0, readableTo: to}
		}}
}

// verifiedReadRow flips a byte under the CRC of batch 2 of a rolled
// segment behind a clean-shutdown marker, which Open does not recover,
// and reads with Options.VerifyReads: the read at the batch must fail
// with the log's own *log.CorruptionError naming the segment, the batch's
// position and the offset (not merely the CRC check readFromStart makes
// of what it is served), and a read from the segment's base must return
// the two batches before it.
func verifiedReadRow() row {
	return row{area: areaSegment, damage: "flipped byte in a rolled segment behind a clean-shutdown marker, verifying read",
		want: outcome{err: log.ErrCorruption, readableTo: 12},
		run: func(t *testing.T) outcome {
			s := newSegLog(t, 60, 800)
			b := s.bases()
			var pos int
			s.change(segName(b[1], ".log"), func(d []byte) []byte {
				d = bytes.Clone(d)
				pos = batchPos(s.t, d, 2)
				d[pos+record.HeaderSize+3] ^= 0x10
				return d
			})
			s.opts.VerifyReads = true
			l, err := log.Open(segDir, s.opts)
			if err != nil {
				return outcome{err: err, readableTo: -1}
			}
			defer l.Close()
			info, err := l.Read(nil, b[1], 1<<20, log.IsolationLogEnd, true)
			if err != nil {
				return outcome{err: fmt.Errorf("read from %d: %v", b[1], err), readableTo: -1}
			}
			if n := len(info.Records); n != pos {
				return outcome{err: fmt.Errorf("read from %d returned %d bytes, want the %d before the damage", b[1], n, pos), readableTo: -1}
			}
			to, err := readFromStart(l)
			var ce *log.CorruptionError
			if err != nil && !(errors.As(err, &ce) && ce.Segment == b[1] && ce.Offset == to && ce.Position == int64(pos)) {
				// Not the log's located error: the row fails.
				return outcome{err: fmt.Errorf("want the log's *CorruptionError at segment %d, offset %d, position %d; got %v",
					b[1], to, pos, err), readableTo: to}
			}
			return outcome{err: err, readableTo: to}
		}}
}
