package log

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"github.com/tierlog/tierlog/internal/harness/testseed"
	"github.com/tierlog/tierlog/log/internal/producer"
	"github.com/tierlog/tierlog/log/record"
)

// restartNowMs is the clock of the logs these tests open (openTestLog's).
const restartNowMs = 1_000_000

// idempotentBatch builds one client batch of producer pid: count records
// with timestamp ts, sequences from seq.
func idempotentBatch(t testing.TB, pid int64, epoch int16, seq int32, count int, ts int64) []byte {
	t.Helper()
	opts := record.DefaultBuilderOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = pid, epoch, seq
	buf, err := appendPlainBatch(nil, opts, count, ts)
	require.NoError(t, err)
	return buf
}

// snapshotFiles lists the offsets of the files ending in suffix in the
// log directory p0.
func snapshotFiles(t testing.TB, fs vfs.FS, suffix string) []int64 {
	t.Helper()
	names, err := fs.List("p0")
	require.NoError(t, err)
	var out []int64
	for _, n := range names {
		if digits, ok := strings.CutSuffix(n, suffix); ok {
			off, err := strconv.ParseInt(digits, 10, 64)
			require.NoError(t, err, n)
			out = append(out, off)
		}
	}
	slices.Sort(out)
	return out
}

// lastSeqs returns each producer's last sequence (Kafka's
// activeProducersWithLastSequence).
func lastSeqs(l *UnifiedLog) map[int64]int32 {
	out := map[int64]int32{}
	for _, p := range l.ActiveProducers() {
		if n := len(p.Batches); n > 0 {
			out[p.ProducerID] = p.Batches[n-1].LastSeq
		}
	}
	return out
}

// TestLoadProducersAfterDeleteRecordsMidSegment (Kafka's LogLoaderTest):
// producers 1 and 2 append one record each into the only segment, the log
// start rises to 1 inside it (DeleteRecords), and the log reopens after an
// unclean shutdown. Deleting records keeps producer state, and so must the
// recovery: it replays the whole segment, from its base, not from the log
// start. Beyond Kafka's assertions, the retry of producer 1's batch is
// answered as a duplicate of offset 0 instead of being appended at 2.
func TestLoadProducersAfterDeleteRecordsMidSegment(t *testing.T) {
	fs := vfs.NewMem()
	opts := Options{SegmentBytes: 2048 * 5}
	l := openTestLog(t, fs, opts)
	const pid1, pid2 = 1, 2
	a := idempotentBatch(t, pid1, 0, 0, 1, restartNowMs)
	_, err := l.AppendAsLeader(a, 0, OriginClient)
	require.NoError(t, err)
	_, err = l.AppendAsLeader(idempotentBatch(t, pid2, 0, 0, 1, restartNowMs), 0, OriginClient)
	require.NoError(t, err)
	require.Len(t, lastSeqs(l), 2)

	l.UpdateHighWatermark(l.LogEndOffset())
	moved, err := l.MaybeIncrementLogStartOffset(1)
	require.NoError(t, err)
	require.True(t, moved)
	// Deleting records does not remove producer state.
	retained := lastSeqs(l)
	require.Equal(t, map[int64]int32{pid1: 0, pid2: 0}, retained)
	require.NoError(t, l.Close())

	// lastShutdownClean = false: the marker is gone, the log recovers
	// (its checkpointed log start is 1).
	require.NoError(t, fs.Remove(fs.PathJoin("p0", CleanShutdownFileName)))
	reloaded := openTestLog(t, fs, opts)
	defer reloaded.Close()
	require.Equal(t, int64(1), reloaded.LogStartOffset())
	require.Equal(t, retained, lastSeqs(reloaded))

	info, err := reloaded.AppendAsLeader(idempotentBatch(t, pid1, 0, 0, 1, restartNowMs), 0, OriginClient)
	require.NoError(t, err)
	require.True(t, info.Duplicate, "retry of producer 1's batch appended at %d", info.FirstOffset)
	require.Equal(t, int64(0), info.FirstOffset)
	require.Equal(t, int64(2), reloaded.LogEndOffset())
}

// TestLoadingLogKeepsLargestStrayProducerStateSnapshot (Kafka's
// LogLoaderTest): one producer's records a, b, c, d in segments [0, 1),
// [1, 2), [2, 4); the rolls and the close leave snapshots 1, 2 and 4. A
// stray snapshot injected at 3 is removed by an unclean reopen that
// recovers from 0 (Kafka's createLog recovery point), and the snapshots 1,
// 2 and the largest, 4, are there afterwards: recovery snapshots each
// segment base it passes and the log end, so the next crash does not
// replay the log from its start.
func TestLoadingLogKeepsLargestStrayProducerStateSnapshot(t *testing.T) {
	fs := vfs.NewMem()
	opts := Options{SegmentBytes: 2048 * 5}
	l := openTestLog(t, fs, opts)
	const pid1 = 1
	appendSeq := func(l *UnifiedLog, seq int32) {
		_, err := l.AppendAsLeader(idempotentBatch(t, pid1, 0, seq, 1, restartNowMs), 0, OriginClient)
		require.NoError(t, err)
	}
	appendSeq(l, 0)
	require.NoError(t, l.Roll())
	appendSeq(l, 1)
	require.NoError(t, l.Roll())
	appendSeq(l, 2)
	appendSeq(l, 3)

	// Close: three segments, snapshots for the two rolls and the close.
	require.NoError(t, l.Close())
	require.Equal(t, []int64{0, 1, 2}, snapshotFiles(t, fs, ".log"))
	require.Equal(t, []int64{1, 2, 4}, snapshotFiles(t, fs, producer.SnapshotSuffix))
	// A stray (empty) snapshot file inside the log at offset 3.
	f, err := fs.Create(fs.PathJoin("p0", producer.SnapshotFileName(3)), vfs.WriteCategoryUnspecified)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.Equal(t, []int64{1, 2, 3, 4}, snapshotFiles(t, fs, producer.SnapshotSuffix))

	// lastShutdownClean = false, recovery point 0.
	require.NoError(t, fs.Remove(fs.PathJoin("p0", CleanShutdownFileName)))
	require.NoError(t, writeOffsetsCheckpoint(fs, "p0", offsetsCheckpoint{}))
	reloaded := openTestLog(t, fs, opts)
	defer reloaded.Close()
	// The stray snapshot is gone, the largest (4) is kept.
	require.Equal(t, []int64{1, 2, 4}, snapshotFiles(t, fs, producer.SnapshotSuffix))
	require.Equal(t, []int64{1, 2, 4}, snapshotFiles(t, fs, producer.BatchesSuffix))
	ps := reloaded.ActiveProducers()
	require.Len(t, ps, 1)
	require.Len(t, ps[0].Batches, 4)
}

// TestProducerDedupWindowSurvivesRestart: producer 7 appends six batches;
// its dedup window holds the last five (Kafka: NUM_BATCHES_TO_RETAIN).
// After a clean close and open, after a crash, and after a crash whose
// recovery loads the snapshot of a roll inside the window, the retry of the
// first batch of the five is a duplicate answered with its original
// offsets and timestamp, and the retry of the sixth batch back is out of
// order, as before the restart. Kafka's snapshot alone keeps the last
// batch only: the batches file beside it keeps the rest.
func TestProducerDedupWindowSurvivesRestart(t *testing.T) {
	const pid = 7
	for _, tc := range []struct {
		name    string
		crash   bool
		rollAt  int // roll before this batch (0: never)
		between bool
	}{
		{name: "clean"},
		{name: "crash", crash: true},
		{name: "crash-after-roll", crash: true, rollAt: 3},
		{name: "clean-after-roll", rollAt: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewCrashableMem()
			opts := Options{SegmentBytes: 1 << 20}
			l := openTestLog(t, mem, opts)
			var sent [][]byte
			var infos []AppendInfo
			for i := range 6 {
				if tc.rollAt > 0 && i == tc.rollAt {
					require.NoError(t, l.Roll())
				}
				b := idempotentBatch(t, pid, 0, int32(2*i), 2, restartNowMs-100+int64(i))
				sent = append(sent, b)
				info, err := l.AppendAsLeader(slices.Clone(b), 0, OriginClient)
				require.NoError(t, err)
				infos = append(infos, info)
				// Plain records between the producer's batches.
				_, err = l.AppendAsLeader(buildBatches(t, 1, 1, 10, restartNowMs, 0, -1), 0, OriginClient)
				require.NoError(t, err)
			}
			check := func(l *UnifiedLog, when string) {
				t.Helper()
				leo := l.LogEndOffset()
				got, err := l.AppendAsLeader(slices.Clone(sent[1]), 0, OriginClient)
				require.NoError(t, err, when)
				require.True(t, got.Duplicate, "%s: retry of batch 1 appended at %d", when, got.FirstOffset)
				require.Equal(t, [3]int64{infos[1].FirstOffset, infos[1].LastOffset, infos[1].MaxTimestamp},
					[3]int64{got.FirstOffset, got.LastOffset, got.MaxTimestamp}, when)
				_, err = l.AppendAsLeader(slices.Clone(sent[0]), 0, OriginClient)
				require.ErrorIs(t, err, ErrOutOfOrderSequence, when)
				require.Equal(t, leo, l.LogEndOffset(), when)
			}
			check(l, "before the restart")
			if tc.crash {
				require.NoError(t, l.Flush())
				clone := mem.CrashClone(vfs.CrashCloneCfg{})
				require.NoError(t, l.Close())
				l = openTestLog(t, clone, opts)
			} else {
				require.NoError(t, l.Close())
				l = openTestLog(t, mem, opts)
			}
			defer l.Close()
			check(l, "after the restart")
		})
	}
}

// restartProducer is one producer of the randomized restart test.
type restartProducer struct {
	pid   int64
	epoch int16
	seq   int32
	sent  []restartBatch // every batch appended, oldest first
}

// restartBatch is one appended batch and the answer its append got.
type restartBatch struct {
	epoch int16
	data  []byte
	info  AppendInfo
}

// probe is the answers of one log to the retries of every producer's
// last five batches and of the one before them, as text.
func probeRetries(t *testing.T, l *UnifiedLog, ps []*restartProducer) []string {
	t.Helper()
	var out []string
	for _, p := range ps {
		n := len(p.sent)
		if n == 0 {
			continue
		}
		// The window: the last five batches of the producer's last
		// epoch; then one older batch, if any.
		lastEpoch := p.sent[n-1].epoch
		from := n
		for from > 0 && n-from < producer.NumBatchesToRetain && p.sent[from-1].epoch == lastEpoch {
			from--
		}
		for i := max(from-1, 0); i < n; i++ {
			b := p.sent[i]
			leo := l.LogEndOffset()
			got, err := l.AppendAsLeader(slices.Clone(b.data), 0, OriginClient)
			var ans string
			switch {
			case err != nil && errors.Is(err, ErrOutOfOrderSequence):
				ans = "out-of-order"
			case err != nil && errors.Is(err, ErrInvalidProducerEpoch):
				ans = "invalid-epoch"
			case err != nil:
				ans = "error: " + err.Error()
			case got.Duplicate:
				ans = fmt.Sprintf("duplicate [%d, %d] ts=%d", got.FirstOffset, got.LastOffset, got.MaxTimestamp)
			default:
				ans = fmt.Sprintf("appended at [%d, %d]", got.FirstOffset, got.LastOffset)
			}
			if l.LogEndOffset() != leo {
				ans += fmt.Sprintf(" (log end %d -> %d)", leo, l.LogEndOffset())
			}
			out = append(out, fmt.Sprintf("pid %d batch %d (epoch %d, [%d, %d]): %s", p.pid, i, b.epoch,
				b.info.FirstOffset, b.info.LastOffset, ans))
		}
	}
	return out
}

// wantRetries is what probeRetries must find: the window's batches are
// duplicates with their original offsets and timestamp; the batch before
// it is out of order (same epoch) or from an older epoch.
func wantRetries(ps []*restartProducer) []string {
	var out []string
	for _, p := range ps {
		n := len(p.sent)
		if n == 0 {
			continue
		}
		lastEpoch := p.sent[n-1].epoch
		from := n
		for from > 0 && n-from < producer.NumBatchesToRetain && p.sent[from-1].epoch == lastEpoch {
			from--
		}
		for i := max(from-1, 0); i < n; i++ {
			b := p.sent[i]
			var ans string
			switch {
			case i >= from:
				ans = fmt.Sprintf("duplicate [%d, %d] ts=%d", b.info.FirstOffset, b.info.LastOffset, b.info.MaxTimestamp)
			case b.epoch == lastEpoch:
				ans = "out-of-order"
			default:
				ans = "invalid-epoch"
			}
			out = append(out, fmt.Sprintf("pid %d batch %d (epoch %d, [%d, %d]): %s", p.pid, i, b.epoch,
				b.info.FirstOffset, b.info.LastOffset, ans))
		}
	}
	return out
}

// TestProducerStateRestartProperty: random producers (with epoch bumps)
// append interleaved batches of random sizes beside plain ones, with
// random rolls, log start advances inside segments (DeleteRecords) and
// retention; the log is flushed, and then restarted cleanly (Close,
// Open) and crashed (a crash clone of the flushed state, and one taken
// right after the clean open, each opened). Before the restart, after the
// clean restart and after each crash, the retries of
// every producer's last five batches are duplicates answered with their
// original offsets, and the retry of the batch before them is out of
// order (or from an older epoch): a restart, clean or not, changes no
// answer (Kafka's snapshot keeps only the last batch, and a recovery that
// replays from the log start forgets the producers below it).
func TestProducerStateRestartProperty(t *testing.T) {
	seed := testseed.Seed(t, 20261205)
	runs := 200
	if testing.Short() {
		runs = 60
	}
	for run := range runs {
		rng := rand.New(rand.NewPCG(seed, uint64(run)))
		if err := runRestartProperty(t, rng); err != nil {
			t.Fatalf("seed %d run %d: %v", seed, run, err)
		}
	}
}

func runRestartProperty(t *testing.T, rng *rand.Rand) error {
	mem := vfs.NewCrashableMem()
	opts := Options{SegmentBytes: int64(300 + rng.IntN(1500))}
	if rng.IntN(3) == 0 {
		opts.SegmentBytes = 1 << 20 // rolls only by Roll
	}
	if rng.IntN(2) == 0 {
		opts.RecoveryPointIntervalBytes = int64(200 + rng.IntN(400))
	}
	l := openTestLog(t, mem, opts)
	defer func() { _ = l.Close() }()
	var ps []*restartProducer
	for i := range 1 + rng.IntN(5) {
		ps = append(ps, &restartProducer{pid: int64(100 + i)})
	}
	var steps []string
	ts := int64(restartNowMs - 10_000)
	for range 10 + rng.IntN(60) {
		ts++
		switch k := rng.IntN(20); {
		case k < 12:
			p := ps[rng.IntN(len(ps))]
			if len(p.sent) > 0 && rng.IntN(10) == 0 {
				p.epoch++
				p.seq = 0
			}
			count := 1 + rng.IntN(3)
			data := idempotentBatch(t, p.pid, p.epoch, p.seq, count, ts)
			info, err := l.AppendAsLeader(slices.Clone(data), 0, OriginClient)
			if err != nil {
				return fmt.Errorf("append pid %d epoch %d seq %d: %w", p.pid, p.epoch, p.seq, err)
			}
			p.seq += int32(count)
			p.sent = append(p.sent, restartBatch{epoch: p.epoch, data: data, info: info})
			steps = append(steps, fmt.Sprintf("p%d/%d@%d", p.pid, p.epoch, info.FirstOffset))
		case k < 15:
			if _, err := l.AppendAsLeader(buildBatches(t, 1, 1+rng.IntN(3), 20, ts, 0, -1), 0, OriginClient); err != nil {
				return err
			}
			steps = append(steps, "plain")
		case k < 17:
			if err := l.Roll(); err != nil {
				return err
			}
			steps = append(steps, fmt.Sprintf("roll@%d", l.LogEndOffset()))
		case k < 19:
			l.UpdateHighWatermark(l.LogEndOffset())
			start := l.LogStartOffset()
			n := start + rng.Int64N(l.LogEndOffset()-start+1)
			if _, err := l.MaybeIncrementLogStartOffset(n); err != nil {
				return err
			}
			steps = append(steps, fmt.Sprintf("log-start=%d", n))
		default:
			l.UpdateHighWatermark(l.LogEndOffset())
			if _, err := l.DeleteOldSegments(); err != nil {
				return err
			}
			steps = append(steps, "retention")
		}
	}
	want := wantRetries(ps)
	if err := l.Flush(); err != nil {
		return err
	}
	crashed := mem.CrashClone(vfs.CrashCloneCfg{})
	files := fmt.Sprintf("segments %v snapshots %v", snapshotFiles(t, mem, ".log"), snapshotFiles(t, mem, producer.SnapshotSuffix))
	compare := func(when string, got []string) error {
		if slices.Equal(got, want) {
			return nil
		}
		var diff []string
		for i := range max(len(got), len(want)) {
			g, w := "(none)", "(none)"
			if i < len(got) {
				g = got[i]
			}
			if i < len(want) {
				w = want[i]
			}
			if g != w {
				diff = append(diff, fmt.Sprintf("  got  %s\n  want %s", g, w))
			}
		}
		return fmt.Errorf("%s (segment bytes %d, recovery point interval %d, before it %s), steps %s:\n%s", when,
			opts.SegmentBytes, opts.RecoveryPointIntervalBytes, files, strings.Join(steps, " "), strings.Join(diff, "\n"))
	}
	if err := compare("before the restart", probeRetries(t, l, ps)); err != nil {
		return err
	}
	if err := l.Close(); err != nil {
		return err
	}
	var err error
	opts.FS = mem
	if l, err = Open("p0", withTestClock(opts)); err != nil {
		return fmt.Errorf("clean open: %w", err)
	}
	// A crash right after the clean open: the close checkpointed the log
	// start, so this recovery starts from a log start that may lie
	// inside the recovered segment (Kafka's
	// testLoadProducersAfterDeleteRecordsMidSegment).
	crashedAfterOpen := mem.CrashClone(vfs.CrashCloneCfg{})
	if err := compare("after a clean restart", probeRetries(t, l, ps)); err != nil {
		return err
	}
	if err := l.Close(); err != nil {
		return err
	}
	for _, c := range []struct {
		when string
		fs   *vfs.MemFS
	}{{"after a crash", crashed}, {"after a crash following a clean restart", crashedAfterOpen}} {
		opts.FS = c.fs
		if l, err = Open("p0", withTestClock(opts)); err != nil {
			return fmt.Errorf("open %s: %w", c.when, err)
		}
		if err := compare(c.when, probeRetries(t, l, ps)); err != nil {
			return err
		}
		if err := l.Close(); err != nil {
			return err
		}
	}
	return nil
}

// withTestClock is openTestLog's options without the test's failure on
// error.
func withTestClock(o Options) Options {
	o.Now = func() time.Time { return time.UnixMilli(restartNowMs) }
	if o.SegmentIndexBytes == 0 {
		o.SegmentIndexBytes = 4096
	}
	return o
}

// TestDamagedProducerBatchesFileIsReplayed: a clean close leaves the
// snapshot at the log end with its batches file; damage in the batches
// file makes the open drop the pair (reported as corruption) and rebuild
// the state from the older snapshot of the roll and a replay, so the
// whole dedup window is still there: a retry of the first of the last
// five batches is a duplicate with its original offsets.
func TestDamagedProducerBatchesFileIsReplayed(t *testing.T) {
	fs := vfs.NewMem()
	opts := Options{SegmentBytes: 1 << 20}
	l := openTestLog(t, fs, opts)
	const pid = 9
	var sent [][]byte
	var infos []AppendInfo
	for i := range 6 {
		if i == 2 {
			require.NoError(t, l.Roll())
		}
		b := idempotentBatch(t, pid, 0, int32(i), 1, restartNowMs)
		sent = append(sent, b)
		info, err := l.AppendAsLeader(slices.Clone(b), 0, OriginClient)
		require.NoError(t, err)
		infos = append(infos, info)
	}
	leo := l.LogEndOffset()
	require.NoError(t, l.Close())
	path := fs.PathJoin("p0", producer.BatchesFileName(leo))
	f, err := fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{0xee}, producer.BatchesHeaderSize+2)
	require.NoError(t, err)
	require.NoError(t, errors.Join(f.Sync(), f.Close()))

	l = openTestLog(t, fs, opts)
	defer l.Close()
	require.Equal(t, int64(1), l.Metrics().CorruptionsFound)
	got, err := l.AppendAsLeader(slices.Clone(sent[1]), 0, OriginClient)
	require.NoError(t, err)
	require.True(t, got.Duplicate)
	require.Equal(t, infos[1].FirstOffset, got.FirstOffset)
	_, err = l.AppendAsLeader(slices.Clone(sent[0]), 0, OriginClient)
	require.ErrorIs(t, err, ErrOutOfOrderSequence)
	// The open wrote a new pair at the log end.
	require.Contains(t, snapshotFiles(t, fs, producer.BatchesSuffix), leo)
}
