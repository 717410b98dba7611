package log

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/atomicfile"
	"github.com/tierlog/tierlog/log/internal/segment"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/truncation"
)

// TestDataDriven runs the scenario files in testdata/. Each file starts
// with an open command; errors are printed as output, never t.Fatal.
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		if isFuzzCorpus(path) {
			return // go test -fuzz's inputs live under testdata/fuzz
		}
		env := newTestEnv()
		defer env.close()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return env.handle(t, d)
		})
	})
}

// testEnv is one log on a crashable in-memory file system with a fake
// clock.
type testEnv struct {
	fs    *vfs.MemFS
	opts  Options
	log   *UnifiedLog
	nowMs int64
	// count is a truncation count remembered by read-count, for set-remote.
	count truncation.Count
	// listener events, printed by the next command that asks.
	events []string
	// savedSnapshot holds producer snapshot bytes between commands.
	savedSnapshot []byte
}

const testDir = "p0"

func newTestEnv() *testEnv {
	return &testEnv{fs: vfs.NewCrashableMem(), nowMs: 1_000_000}
}

func (e *testEnv) close() {
	if e.log != nil {
		_ = e.log.Close()
	}
}

func (e *testEnv) now() time.Time { return time.UnixMilli(e.nowMs) }

func (e *testEnv) handle(t *testing.T, d *datadriven.TestData) string {
	if d.Cmd != "open" && e.log == nil {
		return "error: run open first"
	}
	switch d.Cmd {
	case "open":
		return e.open(t, d)
	case "append-leader":
		return e.appendLeader(t, d)
	case "append-follower":
		return e.appendFollower(t, d)
	case "read":
		return e.read(t, d)
	case "set-hw", "inc-hw", "inc-log-start", "log-start-from-remote":
		return e.offsets(t, d)
	case "truncate-to", "truncate-fully":
		return e.truncate(t, d)
	case "roll":
		return result(e.log.Roll(), e.state())
	case "flush":
		return result(e.log.Flush(), fmt.Sprintf("recovery-point=%d", e.log.Metrics().RecoveryPoint))
	case "delete-old-segments":
		n, err := e.log.DeleteOldSegments()
		return result(err, fmt.Sprintf("deleted %d\n%s", n, e.state()))
	case "read-count":
		e.count = e.log.TruncationCount()
		return fmt.Sprintf("truncation-count=%d", e.count)
	case "set-remote":
		return e.setRemote(t, d)
	case "assign-epoch-start":
		var epoch int32
		var offset int64
		d.ScanArgs(t, "epoch", &epoch)
		d.ScanArgs(t, "offset", &offset)
		return result(e.log.AssignEpochStartOffset(epoch, offset), epochcache.FormatEntries(e.log.EpochEntries()))
	case "end-offset-for":
		var epoch int32
		d.ScanArgs(t, "epoch", &epoch)
		ans := e.log.EndOffsetForEpoch(epoch)
		off, got, ok := ans.EndOffset, ans.Epoch, !ans.Undefined()
		return fmt.Sprintf("ok=%t epoch=%d end=%d", ok, got, off)
	case "list-offsets":
		var ts int64
		d.ScanArgs(t, "ts", &ts)
		o, found, err := e.log.ListOffsets(ts)
		return result(err, fmt.Sprintf("found=%t %s", found, o))
	case "advance-clock":
		var ms int64
		d.ScanArgs(t, "ms", &ms)
		e.nowMs += ms
		return fmt.Sprintf("now=%d", e.nowMs)
	case "state":
		return e.state()
	case "epochs":
		return epochcache.FormatEntries(e.log.EpochEntries())
	case "close":
		err := e.log.Close()
		return result(err, "closed")
	case "reopen":
		return e.reopen(t, d)
	case "crash":
		return e.crash(t, d)
	case "corrupt":
		return e.corrupt(t, d)
	case "truncate-file":
		// Cut a segment file of a closed log, as a crash mid-write does.
		var base, size int64
		d.ScanArgs(t, "segment", &base)
		d.ScanArgs(t, "size", &size)
		path := e.fs.PathJoin(testDir, segment.LogFileName(base))
		f, err := e.fs.Open(path)
		require.NoError(t, err)
		data := make([]byte, size)
		_, err = f.ReadAt(data, 0)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		require.NoError(t, e.fs.Remove(path))
		nf, err := e.fs.Create(path, vfs.WriteCategoryUnspecified)
		require.NoError(t, err)
		_, err = nf.Write(data)
		require.NoError(t, err)
		require.NoError(t, errors.Join(nf.Sync(), nf.Close()))
		return "ok"
	case "cache-truncate-from-end":
		// Truncate the epoch cache alone, as Kafka's test does to lose a
		// flushed entry (testdata/recover_epochs).
		var offset int64
		d.ScanArgs(t, "offset", &offset)
		e.log.epochs.TruncateFromEnd(offset)
		return result(e.log.epochs.Flush(), epochcache.FormatEntries(e.log.EpochEntries()))
	case "write-checkpoint":
		// Overwrite the offsets checkpoint of a closed log.
		var c offsetsCheckpoint
		d.ScanArgs(t, "log-start", &c.logStartOffset)
		d.ScanArgs(t, "recovery-point", &c.recoveryPoint)
		return result(writeOffsetsCheckpoint(e.fs, testDir, c), "ok")
	case "remove-marker":
		// Make the last close look unclean.
		return result(e.fs.Remove(e.fs.PathJoin(testDir, CleanShutdownFileName)), "ok")
	case "events":
		out := strings.Join(e.events, "\n")
		e.events = nil
		if out == "" {
			return "(none)"
		}
		return out
	case "metrics":
		m := e.log.Metrics()
		return fmt.Sprintf("segments=%d bytes=%d rolls=%d deleted=%d truncations=%d recovery-cuts=%d corruptions=%d",
			m.Segments, m.Bytes, m.Rolls, m.SegmentsDeleted, m.Truncations, m.RecoveryCuts, m.CorruptionsFound)
	}
	if out, ok := e.handleProducer(t, d); ok {
		return out
	}
	d.Fatalf(t, "unknown command %s", d.Cmd)
	return ""
}

func result(err error, ok string) string {
	if err != nil {
		return "error: " + err.Error()
	}
	return ok
}

// open starts a fresh log: any open log is closed and its directory
// removed first.
func (e *testEnv) open(t *testing.T, d *datadriven.TestData) string {
	if e.log != nil {
		_ = e.log.Close()
		e.log = nil
		require.NoError(t, e.fs.RemoveAll(testDir))
	}
	o := Options{FS: e.fs, Now: e.now, SegmentIndexBytes: 4096}
	for _, arg := range d.CmdArgs {
		var v int64
		if len(arg.Vals) > 0 {
			fmt.Sscan(arg.Vals[0], &v)
		}
		switch arg.Key {
		case "remote":
			o.RemoteStorageEnabled = true
		case "copy-disabled":
			o.RemoteLogCopyDisabled = true
		case "segment-bytes":
			o.SegmentBytes = v
		case "segment-ms":
			o.SegmentMs = v
		case "index-interval":
			o.IndexIntervalBytes = int(v)
		case "max-message-bytes":
			o.MaxMessageBytes = int(v)
		case "retention-bytes":
			o.RetentionBytes = v
		case "retention-ms":
			o.RetentionMs = v
		case "local-retention-bytes":
			o.LocalRetentionBytes = v
		case "local-retention-ms":
			o.LocalRetentionMs = v
		case "flush-messages":
			o.FlushMessages = v
		case "producer-expiration-ms":
			o.ProducerIDExpirationMs = v
		default:
			d.Fatalf(t, "unknown open argument %s", arg.Key)
		}
	}
	o.Listener = Listener{
		SegmentRolled: func(b int64) { e.events = append(e.events, fmt.Sprintf("rolled %d", b)) },
		SegmentDeleted: func(i SegmentDeleteInfo) {
			e.events = append(e.events, fmt.Sprintf("deleted segment %d (%s)", i.BaseOffset, i.Reason))
		},
		RecoveryTruncated: func(r RecoveryTruncation) {
			kind := "torn tail"
			if errors.Is(r.Err, ErrCorruption) {
				kind = "corruption"
			}
			e.events = append(e.events, fmt.Sprintf("recovery cut segment %d at %d: %d bytes, %d later segments moved aside, lost [%d, %d) (%s)",
				r.BaseOffset, r.Position, r.BytesRemoved, r.SegmentsMovedAside, r.LostFrom, r.LostTo, kind))
			for _, f := range r.MovedAside {
				e.events = append(e.events, "  moved aside "+f)
			}
		},
		DamageFound: func(err *CorruptionError) {
			e.events = append(e.events, fmt.Sprintf("damage found in segment %d at position %d", err.Segment, err.Position))
		},
	}
	e.opts = o
	l, err := Open(testDir, o)
	if err != nil {
		return "error: " + err.Error()
	}
	// The partition directory is the caller's: make its entry durable, so
	// that crash keeps it.
	require.NoError(t, atomicfile.SyncDir(e.fs, ""))
	e.log = l
	return e.state()
}

func (e *testEnv) reopen(t *testing.T, d *datadriven.TestData) string {
	if d.HasArg("remote") {
		e.opts.RemoteStorageEnabled = true
	}
	if d.HasArg("no-remote") {
		e.opts.RemoteStorageEnabled = false
	}
	_ = e.log.Close()
	l, err := Open(testDir, e.opts)
	if err != nil {
		e.log = nil
		return "error: " + err.Error()
	}
	e.log = l
	return e.state()
}

// crash simulates a power cut: only synced data survives (or a seeded
// share of unsynced data), and the log reopens on the clone.
func (e *testEnv) crash(t *testing.T, d *datadriven.TestData) string {
	percent, seed := 0, uint64(1)
	if d.HasArg("unsynced-percent") {
		d.ScanArgs(t, "unsynced-percent", &percent)
	}
	if d.HasArg("seed") {
		d.ScanArgs(t, "seed", &seed)
	}
	clone := e.fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: percent, RNG: rand.New(rand.NewPCG(seed, seed))})
	old := e.log
	e.fs = clone
	e.opts.FS = clone
	_ = old.Close() // on the old file system; the clone is unaffected
	l, err := Open(testDir, e.opts)
	if err != nil {
		e.log = nil
		return "error: " + err.Error()
	}
	e.log = l
	return e.state()
}

// corrupt overwrites bytes of a segment file at a position.
func (e *testEnv) corrupt(t *testing.T, d *datadriven.TestData) string {
	var base, pos int64
	var with string
	d.ScanArgs(t, "segment", &base)
	d.ScanArgs(t, "pos", &pos)
	d.ScanArgs(t, "with", &with)
	path := e.fs.PathJoin(testDir, segment.LogFileName(base))
	f, err := e.fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.WriteAt([]byte(with), pos)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	return "ok"
}

// buildBatches builds n batches of count records each, with value size
// valueBytes and timestamps from ts.
func buildBatches(t *testing.T, n, count, valueBytes int, ts int64, baseOffset int64, epoch int32) []byte {
	var out []byte
	value := make([]byte, valueBytes)
	for i := 0; i < n; i++ {
		opts := record.DefaultBuilderOptions()
		opts.BaseOffset = baseOffset
		opts.PartitionLeaderEpoch = epoch
		b := record.NewBuilder(opts)
		for r := 0; r < count; r++ {
			b.Add(ts, nil, value)
		}
		var err error
		out, err = b.AppendTo(out)
		require.NoError(t, err)
		baseOffset += int64(count)
	}
	return out
}

func (e *testEnv) appendLeader(t *testing.T, d *datadriven.TestData) string {
	var epoch int32
	count, batches, valueBytes := 1, 1, 10
	ts := e.nowMs
	d.ScanArgs(t, "epoch", &epoch)
	d.MaybeScanArgs(t, "count", &count)
	d.MaybeScanArgs(t, "batches", &batches)
	d.MaybeScanArgs(t, "value-bytes", &valueBytes)
	d.MaybeScanArgs(t, "ts", &ts)
	var buf []byte
	for i := 0; i < batches; i++ { // client batches all start at offset 0
		buf = append(buf, buildBatches(t, 1, count, valueBytes, ts, 0, -1)...)
	}
	if d.HasArg("base") { // a client batch with a non-zero base offset
		var b int64
		d.ScanArgs(t, "base", &b)
		bt, err := record.ReadBatch(buf)
		require.NoError(t, err)
		bt.SetBaseOffset(b)
	}
	info, err := e.log.AppendAsLeader(buf, epoch, OriginClient)
	if err != nil {
		return fmt.Sprintf("error: %v\n%s", err, e.state())
	}
	return fmt.Sprintf("[%d, %d) epoch=%d leo=%d", info.FirstOffset, info.LastOffset+1, epoch, e.log.LogEndOffset())
}

// appendFollower appends batches given as base:count:epoch tokens.
func (e *testEnv) appendFollower(t *testing.T, d *datadriven.TestData) string {
	var fetchEpoch int32
	d.ScanArgs(t, "fetch-epoch", &fetchEpoch)
	var buf []byte
	for _, arg := range d.CmdArgs {
		if arg.Key == "fetch-epoch" {
			continue
		}
		var base int64
		var count int
		var epoch int32
		_, err := fmt.Sscanf(arg.Key, "%d:%d:%d", &base, &count, &epoch)
		require.NoError(t, err, "batch token %q", arg.Key)
		buf = append(buf, buildBatches(t, 1, count, 10, e.nowMs, base, epoch)...)
	}
	info, err := e.log.AppendAsFollower(buf, fetchEpoch)
	if err != nil {
		return fmt.Sprintf("error: %v\n%s", err, e.state())
	}
	if info.Batches == 0 {
		return fmt.Sprintf("nothing appended, skipped %d\nleo=%d", info.SkippedBatches, e.log.LogEndOffset())
	}
	return fmt.Sprintf("[%d, %d) skipped=%d leo=%d", info.FirstOffset, info.LastOffset+1, info.SkippedBatches,
		e.log.LogEndOffset())
}

func (e *testEnv) read(t *testing.T, d *datadriven.TestData) string {
	var offset int64
	maxBytes := 1 << 20
	iso := "log-end"
	d.ScanArgs(t, "offset", &offset)
	d.MaybeScanArgs(t, "max-bytes", &maxBytes)
	d.MaybeScanArgs(t, "isolation", &iso)
	isolation := map[string]Isolation{"log-end": IsolationLogEnd, "hw": IsolationHighWatermark,
		"committed": IsolationCommitted}[iso]
	info, err := e.log.Read(nil, offset, maxBytes, isolation, d.HasArg("min-one"))
	if err != nil {
		return "error: " + err.Error()
	}
	if isolation == IsolationCommitted && d.HasArg("aborted") {
		return formatBatches(t, info.Records) + "\n" + formatAborted(info.AbortedTransactions)
	}
	return formatBatches(t, info.Records)
}

// formatBatches prints batches as [base, next)@epoch.
func formatBatches(t *testing.T, data []byte) string {
	if len(data) == 0 {
		return "(empty)"
	}
	var parts []string
	s := record.NewScanner(data, record.ScannerOptions{})
	for s.Next() {
		b := s.Batch()
		parts = append(parts, fmt.Sprintf("[%d, %d)@%d", b.BaseOffset(), b.NextOffset(), b.PartitionLeaderEpoch()))
	}
	require.NoError(t, s.Err())
	return strings.Join(parts, " ")
}

func (e *testEnv) offsets(t *testing.T, d *datadriven.TestData) string {
	var offset int64
	d.ScanArgs(t, "offset", &offset)
	switch d.Cmd {
	case "set-hw":
		return fmt.Sprintf("hw=%d", e.log.UpdateHighWatermark(offset))
	case "inc-hw":
		moved, err := e.log.MaybeIncrementHighWatermark(offset)
		return result(err, fmt.Sprintf("moved=%t hw=%d", moved, e.log.HighWatermark()))
	case "inc-log-start":
		moved, err := e.log.MaybeIncrementLogStartOffset(offset)
		return result(err, fmt.Sprintf("moved=%t\n%s", moved, e.state()))
	case "log-start-from-remote":
		moved, err := e.log.UpdateLogStartOffsetFromRemoteTier(offset)
		return result(err, fmt.Sprintf("moved=%t\n%s", moved, e.state()))
	}
	return ""
}

func (e *testEnv) truncate(t *testing.T, d *datadriven.TestData) string {
	var offset int64
	d.ScanArgs(t, "offset", &offset)
	if d.Cmd == "truncate-to" {
		changed, err := e.log.TruncateTo(offset)
		return result(err, fmt.Sprintf("changed=%t\n%s", changed, e.state()))
	}
	logStart := int64(-1)
	d.MaybeScanArgs(t, "log-start", &logStart)
	return result(e.log.TruncateFullyAndStartAt(offset, logStart), e.state())
}

func (e *testEnv) setRemote(t *testing.T, d *datadriven.TestData) string {
	var offset int64
	d.ScanArgs(t, "offset", &offset)
	count := e.count
	if d.HasArg("count") {
		var c uint64
		d.ScanArgs(t, "count", &c)
		count = truncation.Count(c)
	}
	installed := e.log.UpdateHighestOffsetInRemoteStorage(offset, count)
	return fmt.Sprintf("installed=%t highest-offset-in-remote-storage=%d", installed, e.log.HighestOffsetInRemoteStorage())
}

// state prints the log's offsets, segments and epochs.
func (e *testEnv) state() string {
	l := e.log
	v, err := l.acquireView()
	if err != nil {
		return "error: " + err.Error()
	}
	defer v.unref()
	var segs []string
	for i, s := range v.segments {
		end := "LEO"
		if i+1 < len(v.segments) {
			end = fmt.Sprint(v.segments[i+1].BaseOffset())
		}
		segs = append(segs, fmt.Sprintf("[%d, %s)", s.BaseOffset(), end))
	}
	return fmt.Sprintf("log-start=%d local-log-start=%d hw=%d leo=%d\nsegments: %s\nepochs: %s",
		l.LogStartOffset(), l.LocalLogStartOffset(), l.HighWatermark(), l.LogEndOffset(),
		strings.Join(segs, " "), epochcache.FormatEntries(l.EpochEntries()))
}

// isFuzzCorpus reports whether path is a fuzz input (testdata/fuzz/FuzzX/...)
// rather than a scenario file.
func isFuzzCorpus(path string) bool {
	return strings.Contains(filepath.ToSlash(path), "testdata/fuzz/")
}
