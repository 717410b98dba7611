package log

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/atomicfile"
	"github.com/tierlog/tierlog/log/internal/segment"
	"github.com/tierlog/tierlog/log/record"
)

// damageEnv is a log of single-record batches in small segments on a
// crashable MemFS, with the listener's events recorded.
type damageEnv struct {
	t      *testing.T
	fs     *vfs.MemFS
	opts   Options
	l      *UnifiedLog
	events []RecoveryTruncation
	damage []*CorruptionError
}

func newDamageEnv(t *testing.T, segmentBytes int64) *damageEnv {
	e := &damageEnv{t: t, fs: vfs.NewCrashableMem()}
	require.NoError(t, e.fs.MkdirAll("p0", 0o755))
	require.NoError(t, atomicfile.SyncDir(e.fs, ""))
	e.opts = Options{SegmentBytes: segmentBytes, IndexIntervalBytes: 1,
		Listener: Listener{
			RecoveryTruncated: func(r RecoveryTruncation) { e.events = append(e.events, r) },
			DamageFound:       func(c *CorruptionError) { e.damage = append(e.damage, c) },
		}}
	e.l = openTestLog(t, e.fs, e.opts)
	return e
}

func (e *damageEnv) reopen() error {
	e.t.Helper()
	if e.l != nil {
		_ = e.l.Close()
		e.l = nil
	}
	o := e.opts
	o.FS = e.fs
	o.SegmentIndexBytes = 4096
	l, err := Open("p0", o)
	e.l = l
	return err
}

// path returns the path of a file of the log directory.
func (e *damageEnv) path(name string) string { return e.fs.PathJoin("p0", name) }

// bases returns the base offsets of the segment files on disk.
func (e *damageEnv) bases() []int64 {
	names, err := e.fs.List("p0")
	require.NoError(e.t, err)
	var out []int64
	for _, n := range names {
		if b, kind, ok := segment.ParseFileName(n); ok && kind == segment.KindLog {
			out = append(out, b)
		}
	}
	slices.Sort(out)
	return out
}

// rewriteFile replaces a file with f(its bytes), synced.
func (e *damageEnv) rewriteFile(name string, f func([]byte) []byte) {
	e.t.Helper()
	p := e.path(name)
	data := readAll(e.t, e.fs, p)
	require.NoError(e.t, e.fs.Remove(p))
	out, err := e.fs.Create(p, vfs.WriteCategoryUnspecified)
	require.NoError(e.t, err)
	_, err = out.Write(f(data))
	require.NoError(e.t, err)
	require.NoError(e.t, out.Sync())
	require.NoError(e.t, out.Close())
	require.NoError(e.t, atomicfile.SyncDir(e.fs, "p0"))
}

// flipInThirdBatch flips a bit inside the records of the third batch of
// the segment at base (covered by its CRC) and returns the batch's position.
func (e *damageEnv) flipInThirdBatch(base int64) (pos int64) {
	e.rewriteFile(segment.LogFileName(base), func(b []byte) []byte {
		b = slices.Clone(b)
		for i := 0; i < 2; i++ {
			bt, err := record.ReadBatch(b[pos:])
			require.NoError(e.t, err)
			pos += int64(bt.Size())
		}
		b[pos+record.HeaderSize+2] ^= 0x40
		return b
	})
	return pos
}

// remove removes files of the log directory durably.
func (e *damageEnv) remove(names ...string) {
	e.t.Helper()
	for _, n := range names {
		require.NoError(e.t, e.fs.Remove(e.path(n)))
	}
	require.NoError(e.t, atomicfile.SyncDir(e.fs, "p0"))
}

func readAll(t *testing.T, fs vfs.FS, p string) []byte {
	t.Helper()
	f, err := fs.Open(p)
	require.NoError(t, err)
	defer f.Close()
	data, err := io.ReadAll(f)
	require.NoError(t, err)
	return data
}

// readAllRecords reads every batch from the log start and returns the
// offsets read and the error that stopped the read, if any.
func readAllRecords(l *UnifiedLog) ([]int64, error) {
	var offsets []int64
	next := l.LogStartOffset()
	for next < l.LogEndOffset() {
		info, err := l.Read(nil, next, 1<<20, IsolationLogEnd, true)
		if err != nil {
			return offsets, err
		}
		data := info.Records
		if len(data) == 0 {
			return offsets, fmt.Errorf("empty read at %d below the log end %d", next, l.LogEndOffset())
		}
		for len(data) > 0 {
			b, err := record.ReadBatch(data)
			if err != nil {
				return offsets, err
			}
			if err := b.Validate(); err != nil {
				return offsets, err
			}
			for o := max(b.BaseOffset(), next); o <= b.LastOffset(); o++ {
				offsets = append(offsets, o)
			}
			next = max(next, b.NextOffset())
			data = data[b.Size():]
		}
	}
	return offsets, nil
}

func offsetRange(from, to int64) []int64 {
	var out []int64
	for o := from; o < to; o++ {
		out = append(out, o)
	}
	return out
}

// TestCleanOpenVerifiesActiveTail: a clean-shutdown marker with a torn
// active tail (garbage written after the clean close). The next append
// must go where the valid data ends, so that after it is fsynced a crash
// and a recovery keep it. Trusting the file size would write it behind
// the garbage: read back as a batch failing its CRC, and cut by the
// recovery after the crash.
func TestCleanOpenVerifiesActiveTail(t *testing.T) {
	for _, tc := range []struct {
		name    string
		garbage func(valid []byte) []byte
	}{
		{"torn batch", func(valid []byte) []byte { return valid[:len(valid)/2] }},
		{"crc mismatch", func(valid []byte) []byte {
			b := slices.Clone(valid)
			b[len(b)-1] ^= 0xff
			return b
		}},
		{"zeros", func([]byte) []byte { return make([]byte, 100) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newDamageEnv(t, 1<<20)
			appendRecords(t, e.l, 0, 5, 0)
			require.NoError(t, e.l.Close())
			e.l = nil
			one := buildBatches(t, 1, 1, 10, 0, 5, 0)
			e.rewriteFile(segment.LogFileName(0), func(b []byte) []byte { return append(b, tc.garbage(one)...) })
			require.NoError(t, e.reopen())
			require.Equal(t, int64(5), e.l.LogEndOffset())
			info, err := e.l.AppendAsLeader(buildBatches(t, 1, 1, 10, 0, 0, -1), 0, OriginClient)
			require.NoError(t, err)
			require.NoError(t, e.l.Flush())
			acked := info.FirstOffset
			require.Equal(t, int64(5), acked)

			e.fs = e.fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
			e.l = nil
			require.NoError(t, e.reopen())
			got, err := readAllRecords(e.l)
			require.NoError(t, err)
			require.Equal(t, offsetRange(0, 6), got)
		})
	}
}

// flipThirdBaseOffset returns a damage flipping bits of byte i of the
// third batch's base offset field.
func flipThirdBaseOffset(i int, bits byte) func([]byte) []byte {
	return func(b []byte) []byte {
		b = slices.Clone(b)
		pos := 0
		for range 2 {
			bt, err := record.ReadBatch(b[pos:])
			if err != nil {
				panic(err)
			}
			pos += bt.Size()
		}
		b[pos+i] ^= bits
		return b
	}
}

// segmentFiles builds a closed log of n single-record batches in segments
// of about per records, and returns the env and the segment bases.
func segmentFiles(t *testing.T, n int, segmentBytes int64) (*damageEnv, []int64) {
	e := newDamageEnv(t, segmentBytes)
	appendRecords(t, e.l, 0, n, 0)
	require.NoError(t, e.l.Close())
	e.l = nil
	bases := e.bases()
	require.Greater(t, len(bases), 3)
	return e, bases
}

// TestReadOfDamagedRolledSegment: a rolled segment that lost bytes must
// make a read fail with a *CorruptionError naming it, counted, and never
// return the next segment's records.
func TestReadOfDamagedRolledSegment(t *testing.T) {
	for _, tc := range []struct {
		name string
		// damage changes segment 1's .log (given its bytes).
		damage func([]byte) []byte
		// noticed: Open's cheap check (the index) sees the damage.
		noticed bool
	}{
		{"zero-length log beside its index", func([]byte) []byte { return nil }, true},
		{"batch header runs past the end", func(b []byte) []byte { return b[:len(b)-10] }, false},
		{"log shorter than its index", func(b []byte) []byte { return b[:len(b)/2] }, true},
		// The base offset is outside the CRC: a flip there is seen by
		// the offsets' order alone.
		{"base offset far beyond the segment", flipThirdBaseOffset(0, 0x40), false},
		{"base offset skips ahead", flipThirdBaseOffset(7, 0x40), false},
		{"base offset goes back", flipThirdBaseOffset(7, 0x08), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, bases := segmentFiles(t, 40, 800)
			damaged := bases[1]
			e.rewriteFile(segment.LogFileName(damaged), tc.damage)
			require.NoError(t, e.reopen())
			if tc.noticed {
				require.Len(t, e.damage, 1)
				require.Equal(t, damaged, e.damage[0].Segment)
			} else {
				require.Empty(t, e.damage)
			}
			got, err := readAllRecords(e.l)
			var ce *CorruptionError
			require.ErrorAs(t, err, &ce, "read %v", got)
			require.True(t, errors.Is(err, ErrCorruption))
			require.Equal(t, damaged, ce.Segment)
			require.GreaterOrEqual(t, ce.Offset, damaged)
			require.Less(t, ce.Offset, bases[2])
			require.LessOrEqual(t, got[len(got)-1], ce.Offset, "records read past the damage")
			require.Equal(t, int64(1), e.l.Metrics().DamagedReads)
			// The segments after it are still readable.
			info, err := e.l.Read(nil, bases[2], 1<<20, IsolationLogEnd, true)
			require.NoError(t, err)
			require.NotEmpty(t, info.Records)
		})
	}
}

// TestRecoveryMovesDamageAside: with the recovery checkpoint missing,
// one flipped byte in a rolled segment makes recovery cut there; the
// damaged segment's original .log and every later segment are renamed to
// "*.damaged", reported with the offsets lost, never deleted.
func TestRecoveryMovesDamageAside(t *testing.T) {
	e, bases := segmentFiles(t, 300, 2000)
	damaged := bases[1]
	cutAt := e.flipInThirdBatch(damaged)
	e.remove(OffsetsCheckpointFileName, CleanShutdownFileName)
	require.NoError(t, e.reopen())

	newEnd := damaged + 2
	require.Equal(t, newEnd, e.l.LogEndOffset())
	got, err := readAllRecords(e.l)
	require.NoError(t, err)
	require.Equal(t, offsetRange(0, newEnd), got)

	require.Len(t, e.events, 1)
	ev := e.events[0]
	require.True(t, errors.Is(ev.Err, ErrCorruption))
	require.Equal(t, damaged, ev.BaseOffset)
	require.Equal(t, cutAt, ev.Position)
	require.Equal(t, len(bases)-2, ev.SegmentsMovedAside)
	require.Equal(t, newEnd, ev.LostFrom)
	require.Equal(t, int64(300), ev.LostTo)
	m := e.l.Metrics()
	require.Equal(t, int64(len(bases)-1), m.SegmentsMovedAside)
	require.Equal(t, int64(1), m.CorruptionsFound)

	// Nothing was deleted: every later segment's .log is under a
	// .damaged name, with all its bytes, and the damaged one is whole.
	names, err := e.fs.List("p0")
	require.NoError(t, err)
	for _, b := range bases[1:] {
		name := segment.DamagedFileName(segment.LogFileName(b), 0)
		require.Contains(t, names, name)
		require.Contains(t, ev.MovedAside, e.path(name))
	}
	require.Equal(t, []int64{0, damaged}, e.bases())
	var records int64
	for _, b := range bases[1:] {
		data := readAll(t, e.fs, e.path(segment.DamagedFileName(segment.LogFileName(b), 0)))
		for len(data) > 0 {
			bt, err := record.ReadBatch(data)
			require.NoError(t, err)
			records += int64(bt.RecordsCount())
			data = data[bt.Size():]
		}
	}
	require.Equal(t, 300-damaged, records, "records in the moved-aside files")

	// The log accepts writes at the new end, and a second recovery finds
	// nothing more to move.
	_, err = e.l.AppendAsLeader(buildBatches(t, 1, 1, 10, 0, 0, -1), 0, OriginClient)
	require.NoError(t, err)
	require.NoError(t, e.l.Close())
	e.l = nil
	e.remove(OffsetsCheckpointFileName, CleanShutdownFileName)
	e.events = nil
	require.NoError(t, e.reopen())
	require.Empty(t, e.events)
	require.Equal(t, newEnd+1, e.l.LogEndOffset())
}

// TestRecoveryNoticesLostSegmentEnd: a zero-length .log beside its
// non-empty index in a segment that has later ones: recovery (no
// checkpoint) must not keep the later segments after the gap.
func TestRecoveryNoticesLostSegmentEnd(t *testing.T) {
	e, bases := segmentFiles(t, 40, 800)
	e.rewriteFile(segment.LogFileName(bases[1]), func([]byte) []byte { return nil })
	e.remove(OffsetsCheckpointFileName, CleanShutdownFileName)
	require.NoError(t, e.reopen())
	require.Equal(t, bases[1], e.l.LogEndOffset())
	got, err := readAllRecords(e.l)
	require.NoError(t, err)
	require.Equal(t, offsetRange(0, bases[1]), got)
	require.Len(t, e.events, 1)
	require.True(t, errors.Is(e.events[0].Err, ErrCorruption))
	require.Equal(t, len(bases)-2, e.events[0].SegmentsMovedAside)
	require.Equal(t, []int64{0, bases[1]}, e.bases())
}

// TestRollReplacesOrphanIndex: an index file without its .log at the
// next roll offset must not make the roll (and so every later write)
// fail.
func TestRollReplacesOrphanIndex(t *testing.T) {
	for _, name := range []func(int64) string{segment.IndexFileName, segment.TimeIndexFileName, segment.TxnIndexFileName} {
		t.Run(strings.TrimPrefix(name(0), "00000000000000000000"), func(t *testing.T) {
			e := newDamageEnv(t, 1<<20)
			appendRecords(t, e.l, 0, 5, 0)
			f, err := e.fs.Create(e.path(name(5)), vfs.WriteCategoryUnspecified)
			require.NoError(t, err)
			_, err = f.Write([]byte("0123456789abcdef0123456789abcdef"))
			require.NoError(t, err)
			require.NoError(t, f.Close())
			require.NoError(t, e.l.Roll())
			appendRecords(t, e.l, 0, 5, 0)
			require.Equal(t, int64(1), e.l.Metrics().OrphanIndexesRemoved)
			require.NoError(t, e.reopen())
			got, err := readAllRecords(e.l)
			require.NoError(t, err)
			require.Equal(t, offsetRange(0, 10), got)
		})
	}
}

// TestFullTruncationReplacesOrphanIndex: the index files a crash leaves
// inside the removal of a segment (its .log unlinked first) must not make
// a later full truncation, or a rebuild, at that segment's base fail:
// both create their segment there, and a log that cannot create it
// refuses every write. A local retention that crashed removing the
// segment at 92, and a reset to 92 after the restart, did that to a
// follower of the simulation.
func TestFullTruncationReplacesOrphanIndex(t *testing.T) {
	for _, tc := range []struct {
		name     string
		truncate func(l *UnifiedLog, n int64) error
	}{
		{"truncate-fully", func(l *UnifiedLog, n int64) error { return l.TruncateFullyAndStartAt(n, -1) }},
		{"rebuild", func(l *UnifiedLog, n int64) error {
			return l.TruncateFullyAndRestore(RemoteRestore{NextOffset: n, LogStartOffset: 0,
				Epochs: []epochcache.Entry{{Epoch: 0, StartOffset: 0}}})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newDamageEnv(t, 1<<20)
			e.opts.RemoteStorageEnabled = true
			appendRecords(t, e.l, 0, 5, 0)
			for _, name := range []string{segment.IndexFileName(20), segment.TimeIndexFileName(20)} {
				f, err := e.fs.Create(e.path(name), vfs.WriteCategoryUnspecified)
				require.NoError(t, err)
				_, err = f.Write([]byte("0123456789abcdef0123456789abcdef"))
				require.NoError(t, err)
				require.NoError(t, f.Close())
			}
			require.NoError(t, e.reopen())
			require.NoError(t, tc.truncate(e.l, 20))
			require.Equal(t, int64(2), e.l.Metrics().OrphanIndexesRemoved)
			_, err := e.l.AppendAsFollower(buildBatches(t, 1, 1, 10, 0, 20, 0), 0)
			require.NoError(t, err)
			require.NoError(t, e.reopen())
			require.Equal(t, int64(21), e.l.LogEndOffset())
		})
	}
}

// TestCleanOpenReportsLostActiveTail: after a clean shutdown, an active
// .log shorter than its index (here empty) is recovered to what it holds
// and the loss is reported, though recovery has nothing to cut.
func TestCleanOpenReportsLostActiveTail(t *testing.T) {
	e, bases := segmentFiles(t, 40, 800)
	active := bases[len(bases)-1]
	e.rewriteFile(segment.LogFileName(active), func([]byte) []byte { return nil })
	require.NoError(t, e.reopen())
	require.Equal(t, active, e.l.LogEndOffset())
	require.Len(t, e.damage, 1)
	require.Equal(t, active, e.damage[0].Segment)
	require.True(t, errors.Is(e.damage[0], ErrCorruption))
	require.Equal(t, int64(1), e.l.Metrics().CorruptionsFound)
	got, err := readAllRecords(e.l)
	require.NoError(t, err)
	require.Equal(t, offsetRange(0, active), got)
}
