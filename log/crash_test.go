package log

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/tierlog/tierlog/internal/harness/testseed"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"
	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/atomicfile"
	"github.com/tierlog/tierlog/log/internal/producer"
	"github.com/tierlog/tierlog/log/record"
)

// crashBatch is one batch the workload appended, as it must read back:
// offsets and leader epoch stamped.
type crashBatch struct {
	base, next int64
	epoch      int32
	data       []byte
}

// crashCandidate is one durable state a crash may legally leave: a
// recovered log passes if it matches any candidate. A candidate bounds the
// recovered log start offset from above and lists the flushed batches
// that must be present from the recovered log start on.
type crashCandidate struct {
	logStart int64
	flushed  []crashBatch
}

func (c crashCandidate) key() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d:", c.logStart)
	for _, x := range c.flushed {
		fmt.Fprintf(&b, "%d@%d,", x.base, x.epoch)
	}
	return b.String()
}

// crashModel is what the workload knows about the log.
type crashModel struct {
	live      []crashBatch // the live log's batches, from its log start
	liveStart int64
	liveEnd   int64
	// cands are the durable states a crash may leave. A successful Flush
	// (or Close) collapses them to the live state; a truncation or
	// retention adds its outcome next to the states before it, since
	// neither is durable before the next flush (truncateFullyLocked's
	// comment).
	cands []crashCandidate
	// history holds every batch ever appended (bytes include offsets and
	// epoch): a recovered batch must be one of them.
	history map[string]bool
}

func (m *crashModel) flushed() {
	m.cands = []crashCandidate{{logStart: m.liveStart, flushed: slices.Clone(m.live)}}
}

// derive adds, for every candidate, the outcome of f applied to it.
func (m *crashModel) derive(f func(crashCandidate) crashCandidate) {
	seen := map[string]bool{}
	for _, c := range m.cands {
		seen[c.key()] = true
	}
	for _, c := range slices.Clone(m.cands) {
		d := f(c)
		if k := d.key(); !seen[k] {
			seen[k] = true
			m.cands = append(m.cands, d)
		}
	}
}

func batchesBelow(bs []crashBatch, t int64) []crashBatch {
	var out []crashBatch
	for _, b := range bs {
		if b.base < t {
			out = append(out, b)
		}
	}
	return out
}

func batchesFrom(bs []crashBatch, t int64) []crashBatch {
	var out []crashBatch
	for _, b := range bs {
		if b.base >= t {
			out = append(out, b)
		}
	}
	return out
}

// logState is what a reopened log shows.
type logState struct {
	logStart, leo, hw int64
	epochs            []epochcache.Entry
	batches           []crashBatch
}

func (s logState) String() string {
	var bs []string
	for _, b := range s.batches {
		bs = append(bs, fmt.Sprintf("[%d, %d)@%d", b.base, b.next, b.epoch))
	}
	return fmt.Sprintf("log-start=%d hw=%d leo=%d epochs=%s batches=%s", s.logStart, s.hw, s.leo,
		epochcache.FormatEntries(s.epochs), strings.Join(bs, " "))
}

// newCrashDisk is a crashable MemFS holding the partition directory p0,
// created durably (the directory is the caller's, as a log manager's).
func newCrashDisk(t testing.TB) *vfs.MemFS {
	t.Helper()
	mem := vfs.NewCrashableMem()
	require.NoError(t, mem.MkdirAll("p0", 0o755))
	for _, d := range []string{"", "p0"} {
		require.NoError(t, atomicfile.SyncDir(mem, d))
	}
	return mem
}

// openImage opens the log p0 of a crash image and reads it
// (readLogState); the caller closes the log when it is not nil.
func openImage(clone *vfs.MemFS, opts Options) (*UnifiedLog, logState, error) {
	opts.FS = clone
	l, err := Open("p0", opts)
	if err != nil {
		return nil, logState{}, fmt.Errorf("open: %w", err)
	}
	s, err := readLogState(l)
	if err != nil {
		return l, s, fmt.Errorf("%w\n%s", err, s)
	}
	return l, s, nil
}

// readLogState reads every batch from the log start to the end and
// checks the invariants that hold for any log: offsets, batch order, the
// epoch cache against the log.
func readLogState(l *UnifiedLog) (logState, error) {
	s := logState{logStart: l.LogStartOffset(), leo: l.LogEndOffset(), hw: l.HighWatermark(), epochs: l.EpochEntries()}
	if !(s.logStart <= s.hw && s.hw <= s.leo) {
		return s, fmt.Errorf("offsets: log start %d, high watermark %d, log end %d", s.logStart, s.hw, s.leo)
	}
	for off := s.logStart; off < s.leo; {
		info, err := l.Read(nil, off, 1<<20, IsolationLogEnd, true)
		if err != nil {
			return s, fmt.Errorf("read at %d: %w", off, err)
		}
		if len(info.Records) == 0 {
			break // nothing more (the log may end in empty segments)
		}
		sc := record.NewScanner(info.Records, record.ScannerOptions{})
		for sc.Next() {
			b := sc.Batch()
			if b.LastOffset() < off {
				continue // the first batch may start below off
			}
			if n := len(s.batches); n > 0 && b.BaseOffset() < s.batches[n-1].next {
				return s, fmt.Errorf("batch [%d, %d) after [%d, %d)", b.BaseOffset(), b.NextOffset(),
					s.batches[n-1].base, s.batches[n-1].next)
			}
			if b.NextOffset() > s.leo {
				return s, fmt.Errorf("batch [%d, %d) beyond the log end offset %d", b.BaseOffset(), b.NextOffset(), s.leo)
			}
			if int64(b.RecordsCount()) != b.NextOffset()-b.BaseOffset() {
				return s, fmt.Errorf("batch [%d, %d) holds %d records: offsets not contiguous",
					b.BaseOffset(), b.NextOffset(), b.RecordsCount())
			}
			s.batches = append(s.batches, crashBatch{b.BaseOffset(), b.NextOffset(), b.PartitionLeaderEpoch(),
				bytes.Clone(b.Bytes())})
			off = b.NextOffset()
		}
		if err := sc.Err(); err != nil {
			return s, fmt.Errorf("read at %d returned bad batches: %w", off, err)
		}
	}
	for i, e := range s.epochs {
		if e.StartOffset > s.leo {
			return s, fmt.Errorf("epoch entry %d@%d beyond the log end offset %d", e.Epoch, e.StartOffset, s.leo)
		}
		if i > 0 && (e.Epoch <= s.epochs[i-1].Epoch || e.StartOffset <= s.epochs[i-1].StartOffset) {
			return s, fmt.Errorf("epoch cache not strictly increasing: %s", epochcache.FormatEntries(s.epochs))
		}
	}
	// Every batch from the log start on has its epoch in the cache: a
	// batch the cache does not cover (below its first entry, or an empty
	// cache beside records) would answer OffsetsForLeaderEpoch and a
	// follower's lineage check wrongly.
	for _, b := range s.batches {
		if b.epoch < 0 {
			continue
		}
		if e, ok := l.EpochForOffset(max(b.base, s.logStart)); !ok || e != b.epoch {
			return s, fmt.Errorf("batch [%d, %d) has epoch %d, the cache says %d (%t): %s",
				b.base, b.next, b.epoch, e, ok, epochcache.FormatEntries(s.epochs))
		}
	}
	return s, nil
}

// matches reports why s is not an outcome c allows, or nil.
func (c crashCandidate) matches(s logState) error {
	if s.logStart > c.logStart {
		return fmt.Errorf("log start %d above %d", s.logStart, c.logStart)
	}
	got := map[int64]crashBatch{}
	for _, b := range s.batches {
		got[b.base] = b
	}
	for _, want := range c.flushed {
		if want.base < s.logStart {
			continue
		}
		b, ok := got[want.base]
		if !ok {
			return fmt.Errorf("flushed batch [%d, %d)@%d lost", want.base, want.next, want.epoch)
		}
		if !bytes.Equal(b.data, want.data) {
			return fmt.Errorf("flushed batch [%d, %d)@%d reads back as [%d, %d)@%d with other bytes",
				want.base, want.next, want.epoch, b.base, b.next, b.epoch)
		}
	}
	return nil
}

// checkCrashClone opens the log on a crash clone and checks it against
// the model; then it crashes the reopened log (a clone of the clone,
// nothing unsynced kept), reopens it and requires the same state.
func checkCrashClone(clone *vfs.MemFS, opts Options, m *crashModel, resumed *int) (err error) {
	opts.FS = clone
	opts.Listener = Listener{}
	l, err := Open(testDir, opts)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	if l.Metrics().RecoverySkippedBytes > 0 {
		*resumed++
	}
	defer func() { err = errors.Join(err, l.Close()) }()
	s, err := readLogState(l)
	if err != nil {
		return fmt.Errorf("recovered log: %w\n%s", err, s)
	}
	if err := checkProducerState(l, s); err != nil {
		return fmt.Errorf("recovered producer state: %w\n%s", err, s)
	}
	for _, b := range s.batches {
		if !m.history[string(b.data)] {
			return fmt.Errorf("recovered batch [%d, %d)@%d was never appended\n%s", b.base, b.next, b.epoch, s)
		}
	}
	var whys []string
	ok := false
	for _, c := range m.cands {
		why := c.matches(s)
		if why == nil {
			ok = true
			break
		}
		whys = append(whys, why.Error())
	}
	if !ok {
		return fmt.Errorf("recovered log matches no allowed outcome: %s\n%s", strings.Join(whys, "; "), s)
	}

	again := clone.CrashClone(vfs.CrashCloneCfg{})
	opts.FS = again
	l2, err := Open(testDir, opts)
	if err != nil {
		return fmt.Errorf("second open: %w", err)
	}
	defer func() { err = errors.Join(err, l2.Close()) }()
	s2, err := readLogState(l2)
	if err != nil {
		return fmt.Errorf("log recovered twice: %w\n%s", err, s2)
	}
	if err := checkProducerState(l2, s2); err != nil {
		return fmt.Errorf("producer state recovered twice: %w\n%s", err, s2)
	}
	if s.String() != s2.String() {
		return fmt.Errorf("recovering twice changed the log:\nonce:  %s\ntwice: %s", s, s2)
	}
	for i := range s.batches {
		if !bytes.Equal(s.batches[i].data, s2.batches[i].data) {
			return fmt.Errorf("recovering twice changed the bytes of [%d, %d)", s.batches[i].base, s.batches[i].next)
		}
	}
	return nil
}

// crashRun drives one seeded workload on a crashable MemFS and checks a
// crash clone at every mutating file operation.
type crashRun struct {
	t        *testing.T
	seed     uint64
	rng      *rand.Rand // the workload's choices
	cloneRNG *rand.Rand // the clones' choices of unsynced data
	mem      *vfs.MemFS
	opts     Options // FS is the wrapped mem
	l        *UnifiedLog
	epoch    int32
	m        crashModel
	// points counts mutating file operations; a clone is checked at every
	// stride-th one.
	points, stride, checked int
	resumed                 int // recoveries that resumed at a segment recovery point
	pcts                    []int
	step                    int    // workload step
	doing                   string // what the workload step does
	done                    []string
}

func newCrashRun(t *testing.T, seed uint64, stride int) *crashRun {
	r := &crashRun{
		t:        t,
		seed:     seed,
		rng:      rand.New(rand.NewPCG(seed, 1)),
		cloneRNG: rand.New(rand.NewPCG(seed, 2)),
		mem:      vfs.NewCrashableMem(),
		stride:   stride,
		pcts:     []int{0, 50},
		m:        crashModel{history: map[string]bool{}},
	}
	// The partition directory is the caller's, created durably; or, in
	// half the runs, created by the first Open, whose fsync of it into
	// its parent waits for the first fsync beneath it (dir.go): crashes
	// before that may lose the directory, never what a flush made
	// durable.
	if rand.New(rand.NewPCG(seed, 4)).IntN(2) == 0 {
		if err := r.mem.MkdirAll(testDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, d := range []string{"", testDir} {
			if err := atomicfile.SyncDir(r.mem, d); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Small segments roll often; segments over 4 KiB (pebble's crash
	// block) can also lose a middle block of unsynced data, leaving
	// zeros before surviving bytes: torn and corrupt tails for recovery.
	segBytes := int64(1024 + r.rng.IntN(3*1024))
	if r.rng.IntN(2) == 0 {
		segBytes = int64(6*1024 + r.rng.IntN(6*1024))
	}
	r.opts = Options{
		FS:                 errorfs.Wrap(r.mem, errorfs.InjectorFunc(r.maybeCrash)),
		Now:                func() time.Time { return time.UnixMilli(1_000_000) },
		SegmentBytes:       segBytes,
		SegmentIndexBytes:  4096,
		IndexIntervalBytes: 256 + r.rng.IntN(512),
		RetentionBytes:     segBytes * int64(2+r.rng.IntN(3)),
	}
	if r.rng.IntN(2) == 0 {
		r.opts.FlushMessages = int64(3 + r.rng.IntN(20))
	}
	r.opts.RecoveryPointIntervalBytes = -1
	if pts := rand.New(rand.NewPCG(seed, 3)); pts.IntN(3) > 0 && !noSegmentPoints() {
		// Segment recovery points every few batches, so crashes hit
		// every step of writing one and recoveries resume at them.
		// FlushMs, which the frozen clock never reaches, turns off the
		// background flush (it would race the model).
		r.opts.RecoveryPointIntervalBytes = int64(128 + pts.IntN(1024))
		r.opts.FlushMs = 1 << 40
	}
	r.m.flushed()
	return r
}

// maybeCrash is the injector: it never injects, it takes clones.
func (r *crashRun) maybeCrash(op errorfs.Op) error {
	if op.Kind.ReadOrWrite() != errorfs.OpIsWrite {
		return nil
	}
	r.points++
	if r.points%r.stride != 0 {
		return nil
	}
	r.checked++
	for _, pct := range r.pcts {
		clone := r.mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: r.cloneRNG})
		if err := checkCrashClone(clone, r.opts, &r.m, &r.resumed); err != nil {
			r.t.Fatalf("seed %d, crash point %d (before %s %s), step %d (%s), %d%% unsynced kept: %v\nlast steps:\n%s",
				r.seed, r.points, opKindName(op.Kind), op.Path, r.step, r.doing, pct, err, r.lastSteps())
		}
	}
	return nil
}

func (r *crashRun) lastSteps() string {
	return strings.Join(r.done[max(0, len(r.done)-12):], "\n")
}

func (r *crashRun) fatalf(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("seed %d, step %d (%s): %s", r.seed, r.step, r.doing, fmt.Sprintf(format, args...))
}

func (r *crashRun) open() {
	r.doing = "open"
	l, err := Open(testDir, r.opts)
	if err != nil {
		r.fatalf("open: %v", err)
	}
	r.l = l
	if l.LogEndOffset() != r.m.liveEnd || l.LogStartOffset() != r.m.liveStart {
		r.fatalf("reopened at [%d, %d), model [%d, %d)", l.LogStartOffset(), l.LogEndOffset(),
			r.m.liveStart, r.m.liveEnd)
	}
}

// appendBatches appends as leader 1-3 plain batches of 1-5 records, or
// (half the time) an idempotent or transactional batch of one of three
// producers, or a transaction marker closing one's open transaction.
func (r *crashRun) appendBatches() {
	n := 1 + r.rng.IntN(3)
	var buf []byte
	origin := OriginClient
	if r.rng.IntN(2) == 0 {
		buf, origin = r.producerBatch()
		n = 1
	}
	for i := range n {
		if origin != OriginClient || len(buf) > 0 {
			break
		}
		b := buildBatches(r.t, 1, 1+r.rng.IntN(4), r.rng.IntN(200), 1_000_000, 0, -1) // < 1 KiB
		if int64(len(buf)+len(b)) > r.opts.SegmentBytes {
			n = i // an append must fit a segment
			break
		}
		buf = append(buf, b...)
	}
	// The batches as the log must store them, stamped here (vfs.File.Write
	// may modify its argument) and known before any byte is written.
	var want []crashBatch
	next := r.m.liveEnd
	for rest := bytes.Clone(buf); len(rest) > 0; {
		b, _ := record.ReadBatch(rest)
		b.SetBaseOffset(next)
		b.SetPartitionLeaderEpoch(r.epoch)
		next = b.NextOffset()
		want = append(want, crashBatch{b.BaseOffset(), next, r.epoch, b.Bytes()})
		r.m.history[string(b.Bytes())] = true
		rest = rest[b.Size():]
	}
	r.doing = fmt.Sprintf("append %d batches in epoch %d at %d", n, r.epoch, r.m.liveEnd)
	info, err := r.l.AppendAsLeader(buf, r.epoch, origin)
	if err != nil {
		r.fatalf("append: %v", err)
	}
	if info.Duplicate {
		r.fatalf("append of a new sequence reported as a duplicate")
	}
	if info.FirstOffset != r.m.liveEnd {
		r.fatalf("appended at %d, model LEO %d", info.FirstOffset, r.m.liveEnd)
	}
	r.m.live = append(r.m.live, want...)
	r.m.liveEnd = next
	r.l.mu.Lock()
	policyFlushed := r.l.mu.unflushedRecords == 0
	r.l.mu.Unlock()
	if policyFlushed { // FlushMessages flushed within the append
		r.m.flushed()
	}
}

// producerBatch builds the next batch of a random producer (ids 1-3)
// from the live log's producer state, so that it is always accepted: the
// next sequence in the producer's epoch, transactional if its transaction
// is open (or, half the time, to open one); or, a third of the time a
// transaction is open, its COMMIT or ABORT marker (OriginCoordinator).
func (r *crashRun) producerBatch() ([]byte, AppendOrigin) {
	pid := int64(1 + r.rng.IntN(3))
	opts := record.DefaultBuilderOptions()
	opts.ProducerID, opts.ProducerEpoch = pid, 0
	seq, open := int32(0), false
	for _, p := range r.l.ActiveProducers() {
		if p.ProducerID != pid {
			continue
		}
		opts.ProducerEpoch = p.ProducerEpoch
		if n := len(p.Batches); n > 0 {
			seq = p.Batches[n-1].LastSeq + 1
		}
		open = p.CurrentTxnFirstOffset >= 0
	}
	if open && r.rng.IntN(3) == 0 {
		typ := record.ControlCommit
		if r.rng.IntN(2) == 0 {
			typ = record.ControlAbort
		}
		buf, err := record.AppendEndTxnBatch(nil, opts, 1_000_000, typ, 0)
		if err != nil {
			r.fatalf("marker: %v", err)
		}
		return buf, OriginCoordinator
	}
	opts.BaseSequence = seq
	opts.Transactional = open || r.rng.IntN(2) == 0
	b := record.NewBuilder(opts)
	for range 1 + r.rng.IntN(3) {
		b.Add(1_000_000, nil, make([]byte, r.rng.IntN(100)))
	}
	buf, err := b.Build()
	if err != nil {
		r.fatalf("producer batch: %v", err)
	}
	return buf, OriginClient
}

// checkProducerState compares the producer state of a recovered log with
// a fresh producer.Manager replaying every batch the log holds (from its
// log start), both with the high watermark at the log end: the open
// transactions, the first unstable offset and the last stable offset, and
// each producer's epoch and last batch (the dedup window a snapshot
// keeps: Kafka's snapshot format holds only the last batch, so a reload
// shortens the window to it).
//
// A transaction opened below the log start (retention ran while it was
// open, or a truncation reopened it) is compared by producer only: the
// log clamps it to the log start, a replay from the log start cannot see
// where it began.
func checkProducerState(l *UnifiedLog, s logState) error {
	l.UpdateHighWatermark(l.LogEndOffset())
	oracle := producer.NewManager(producer.Options{})
	oracle.SetMapEndOffset(s.logStart)
	var wantAborted []AbortedTxn
	for _, b := range s.batches {
		bt, err := record.ReadBatch(b.data)
		if err != nil {
			return err
		}
		completed, err := oracle.Replay(bt)
		if err != nil {
			return fmt.Errorf("oracle replay of [%d, %d): %w", b.base, b.next, err)
		}
		for _, c := range completed {
			if c.IsAborted && c.FirstOffset >= s.logStart {
				wantAborted = append(wantAborted, c.AbortedTxn())
			}
		}
	}
	if err := checkResumedTxnIndex(l, s.logStart, wantAborted); err != nil {
		return err
	}
	if err := checkAllTxnIndexes(l, s.logStart, wantAborted); err != nil {
		return err
	}
	oracle.OnHighWatermarkUpdated(s.leo)
	got, want := l.OngoingTransactions(), oracle.OngoingTxns()
	// A transaction that began below the log start is invisible to a
	// replay of the retained batches (KIP-360 keeps its producer across
	// the log start advance), or the replay sees it begin later, at the
	// producer's first retained batch. So every transaction the replay
	// finds must be open in the log at the same first offset or below the
	// log start, and any other open transaction must begin below it.
	spanning := false
	open := map[int64]int64{}
	for _, t := range got {
		spanning = spanning || t.FirstOffset < s.logStart
		open[t.ProducerID] = t.FirstOffset
	}
	mismatch := func() error { return fmt.Errorf("open transactions %v, a replay of the log has %v", got, want) }
	for _, t := range want {
		first, ok := open[t.ProducerID]
		if !ok || (first != t.FirstOffset && first >= s.logStart) {
			return mismatch()
		}
		delete(open, t.ProducerID)
	}
	for _, first := range open {
		if first >= s.logStart {
			return mismatch()
		}
	}
	if !spanning {
		wantLSO := oracle.LastStableOffset(s.leo)
		if lso := l.LastStableOffset(); lso != wantLSO {
			return fmt.Errorf("last stable offset %d, a replay of the log gives %d", lso, wantLSO)
		}
	}
	last := func(ps []ProducerState) map[int64]string {
		out := map[int64]string{}
		for _, p := range ps {
			if n := len(p.Batches); n > 0 {
				out[p.ProducerID] = fmt.Sprintf("epoch %d last batch %+v", p.ProducerEpoch, p.Batches[n-1])
			}
		}
		return out
	}
	// Producers whose last batch lies below the log start are kept too
	// (KIP-360) and are unknown to the replay.
	retained := l.ActiveProducers()
	retained = slices.DeleteFunc(retained, func(p ProducerState) bool {
		n := len(p.Batches)
		return n > 0 && p.Batches[n-1].LastOffset < s.logStart
	})
	if g, w := last(retained), last(oracle.ActiveProducers()); !maps.Equal(g, w) {
		return fmt.Errorf("producers %v, a replay of the log has %v", g, w)
	}
	return nil
}

func (r *crashRun) flush() {
	r.doing = "flush"
	if err := r.l.Flush(); err != nil {
		r.fatalf("flush: %v", err)
	}
	r.m.flushed()
}

func (r *crashRun) truncateTo() {
	t := r.m.liveEnd
	if len(r.m.live) > 0 && r.rng.IntN(5) > 0 {
		t = r.m.live[r.rng.IntN(len(r.m.live))].base
	}
	r.doing = fmt.Sprintf("truncate to %d of [%d, %d)", t, r.m.liveStart, r.m.liveEnd)
	r.m.derive(func(c crashCandidate) crashCandidate {
		return crashCandidate{logStart: min(c.logStart, t), flushed: batchesBelow(c.flushed, t)}
	})
	if _, err := r.l.TruncateTo(t); err != nil {
		r.fatalf("truncate: %v", err)
	}
	r.m.live = batchesBelow(r.m.live, t)
	r.m.liveEnd = min(r.m.liveEnd, t)
}

func (r *crashRun) truncateFully() {
	// Below the log start as often as beyond the log end: a follower
	// whose leader ended below its log start (Kafka's
	// truncateFullyAndStartAt(leaderEndOffset)) does the former.
	n := r.m.liveEnd + int64(r.rng.IntN(50))
	if r.rng.IntN(2) == 0 {
		n = int64(r.rng.IntN(int(r.m.liveStart) + 1))
	}
	r.doing = fmt.Sprintf("truncate fully and start at %d, log [%d, %d)", n, r.m.liveStart, r.m.liveEnd)
	// A log start below the old one is checkpointed once the old
	// segments are durably gone: a crash before may leave an empty log
	// at the old log start.
	r.m.derive(func(c crashCandidate) crashCandidate { return crashCandidate{logStart: max(n, c.logStart)} })
	if err := r.l.TruncateFullyAndStartAt(n, -1); err != nil {
		r.fatalf("truncate fully: %v", err)
	}
	r.m.live, r.m.liveStart, r.m.liveEnd = nil, n, n
}

func (r *crashRun) retention() {
	hw := r.l.UpdateHighWatermark(r.m.liveStart + r.rng.Int64N(r.m.liveEnd-r.m.liveStart+1))
	r.doing = fmt.Sprintf("delete old segments, hw %d, log [%d, %d)", hw, r.m.liveStart, r.m.liveEnd)
	// In flight, the retention may have moved the log start anywhere up
	// to the high watermark; exactly known once it returns.
	before := len(r.m.cands)
	r.m.derive(func(c crashCandidate) crashCandidate {
		return crashCandidate{logStart: max(c.logStart, hw), flushed: c.flushed}
	})
	if _, err := r.l.DeleteOldSegments(); err != nil {
		r.fatalf("delete old segments: %v", err)
	}
	start := r.l.LogStartOffset()
	r.m.cands = r.m.cands[:before]
	r.m.derive(func(c crashCandidate) crashCandidate {
		return crashCandidate{logStart: max(c.logStart, start), flushed: c.flushed}
	})
	r.m.live = batchesFrom(r.m.live, start)
	r.m.liveStart = start
}

// deleteRecords raises the log start to an offset up to a random high
// watermark, most often inside a segment or a batch (a DeleteRecords, or
// a follower taking its leader's log start). The raise is durable once it
// returns (MaybeIncrementLogStartOffset); before, a crash may leave
// either log start.
func (r *crashRun) deleteRecords() {
	hw := r.l.UpdateHighWatermark(r.m.liveStart + r.rng.Int64N(r.m.liveEnd-r.m.liveStart+1))
	n := r.m.liveStart + r.rng.Int64N(hw-r.m.liveStart+1)
	r.doing = fmt.Sprintf("raise the log start to %d, hw %d, log [%d, %d)", n, hw, r.m.liveStart, r.m.liveEnd)
	r.m.derive(func(c crashCandidate) crashCandidate {
		return crashCandidate{logStart: max(c.logStart, n), flushed: c.flushed}
	})
	if _, err := r.l.MaybeIncrementLogStartOffset(n); err != nil {
		r.fatalf("raise the log start: %v", err)
	}
	r.m.live = batchesFrom(r.m.live, n)
	r.m.liveStart = max(r.m.liveStart, n)
}

func (r *crashRun) closeAndReopen() {
	r.doing = "close"
	if err := r.l.Close(); err != nil {
		r.fatalf("close: %v", err)
	}
	r.m.flushed()
	r.open()
}

// run executes steps workload steps.
func (r *crashRun) run(steps int) {
	r.open()
	for r.step = 0; r.step < steps; r.step++ {
		if len(r.m.cands) > 8 {
			r.flush() // bound the candidates
			continue
		}
		if r.doing != "" {
			r.done = append(r.done, fmt.Sprintf("%d: %s", r.step-1, r.doing))
		}
		switch p := r.rng.IntN(100); {
		case p < 50:
			r.appendBatches()
		case p < 55:
			r.epoch++
			r.appendBatches()
		case p < 67:
			r.flush()
		case p < 77:
			r.truncateTo()
		case p < 79:
			r.truncateFully()
		case p < 94 && len(r.l.OngoingTransactions()) > 0:
			r.flush() // retention only between transactions; see checkProducerState
		case p < 89:
			r.retention()
		case p < 94:
			r.deleteRecords()
		default:
			r.closeAndReopen()
		}
	}
	r.doing = "final close"
	if err := r.l.Close(); err != nil {
		r.fatalf("close: %v", err)
	}
}

// TestCrashSweep runs seeded workloads of appends (epoch bumps,
// idempotent and transactional batches and transaction markers
// included), flushes (explicit and by FlushMessages), rolls on small
// segments, truncations, full truncations, retention, log start raises
// (DeleteRecords) and clean reopens,
// and before every mutating file operation crashes the file system twice:
// keeping none and half of the unsynced data. Each crash clone must open
// and recover to a log that
//
//   - keeps every flushed batch, bytes, offsets and epoch included, that
//     no completed truncation or retention removed (a truncation or
//     retention not yet made durable by a flush may or may not show);
//   - holds only batches that were appended, in strictly increasing,
//     contiguous-within-batch offsets below the log end offset;
//   - has an epoch cache strictly increasing in both fields, ending at or
//     below the log end offset, that gives each batch from the log start
//     on its own epoch (none lies below the cache's first entry);
//   - has log start <= high watermark <= log end;
//   - has the producer state of a replay of its batches: open
//     transactions, last stable offset, each producer's epoch and last
//     batch (checkProducerState), and in every segment the transaction
//     index that replay gives (checkAllTxnIndexes);
//   - recovers to the same state when crashed again right after Open.
//
// TIERLOG_SEED=n reruns one seed; a failure prints the seed and crash point.
// TIERLOG_CRASH_NO_POINTS=1 turns segment recovery points off, so every
// recovery starts at a segment's base.
func TestCrashSweep(t *testing.T) {
	runs, steps := 10, 150
	if testing.Short() {
		runs, steps = 2, 60
	}
	seed := testseed.Seed(t, 1795984179168451882)
	total, resumed := 0, 0
	for i := range runs {
		r := newCrashRun(t, seed+uint64(i), 1)
		r.run(steps)
		total += r.checked
		resumed += r.resumed
	}
	t.Logf("%d crash points, each strict (0%%) and fuzzy (50%%); %d recoveries resumed at a segment recovery point",
		total, resumed)
	if noSegmentPoints() {
		return
	}
	require.Positive(t, resumed, "no recovery resumed inside a segment: the sweep does not test segment recovery points")
}

// noSegmentPoints reports whether TIERLOG_CRASH_NO_POINTS asks the sweep
// to run without segment recovery points.
func noSegmentPoints() bool { return os.Getenv("TIERLOG_CRASH_NO_POINTS") != "" }

// opKindName names a file operation for failure messages.
func opKindName(k errorfs.OpKind) string {
	return map[errorfs.OpKind]string{
		errorfs.OpCreate: "create", errorfs.OpLink: "link", errorfs.OpRemove: "remove",
		errorfs.OpRemoveAll: "remove-all", errorfs.OpRename: "rename", errorfs.OpReuseForWrite: "reuse",
		errorfs.OpMkdirAll: "mkdir", errorfs.OpLock: "lock", errorfs.OpFileClose: "close",
		errorfs.OpFileWrite: "write", errorfs.OpFileWriteAt: "write-at", errorfs.OpFileSync: "sync",
		errorfs.OpFileSyncData: "sync-data", errorfs.OpFileSyncTo: "sync-to", errorfs.OpFileFlush: "flush",
		errorfs.OpFilePreallocate: "preallocate", errorfs.OpOpen: "open", errorfs.OpOpenDir: "open-dir",
		errorfs.OpList: "list", errorfs.OpStat: "stat", errorfs.OpFileRead: "read",
		errorfs.OpFileReadAt: "read-at", errorfs.OpFileStat: "file-stat",
	}[k]
}

// checkResumedTxnIndex checks the transaction index of the segment whose
// recovery resumed at a segment recovery point (its entries below the
// point come from the file written with the point, the others from the
// replay): exactly the aborted transactions a replay of the log finds
// with their marker in that segment. want is the replay's list.
func checkResumedTxnIndex(l *UnifiedLog, logStart int64, want []AbortedTxn) error {
	if l.Metrics().RecoverySkippedBytes == 0 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	segs := l.mu.segments
	for i, seg := range segs {
		if seg.BaseOffset() != l.mu.segmentPointBase {
			continue
		}
		end := l.logEndOffset.Load()
		if i+1 < len(segs) {
			end = segs[i+1].BaseOffset()
		}
		in := func(ts []AbortedTxn) []AbortedTxn {
			var out []AbortedTxn
			for _, t := range ts {
				if t.LastOffset >= seg.BaseOffset() && t.LastOffset < end {
					out = append(out, t)
				}
			}
			return out
		}
		format := func(ts []AbortedTxn) []string {
			var out []string
			for _, t := range ts {
				out = append(out, fmt.Sprintf("pid %d [%d, %d]", t.ProducerID, t.FirstOffset, t.LastOffset))
			}
			return out
		}
		// A transaction that began below the log start: as in
		// checkAllTxnIndexes, the replay sees it begin later.
		g, w := in(seg.txn.Entries()), in(want)
		same := len(g) == len(w)
		for j := 0; same && j < len(g); j++ {
			same = g[j].ProducerID == w[j].ProducerID && g[j].LastOffset == w[j].LastOffset &&
				(g[j].FirstOffset == w[j].FirstOffset || (g[j].FirstOffset <= logStart && w[j].FirstOffset >= logStart))
		}
		if !same {
			return fmt.Errorf("segment %d (recovery resumed at %d): transaction index holds aborted %v, a replay of the log has %v",
				seg.BaseOffset(), l.mu.segmentPoint, format(g), format(w))
		}
		return nil
	}
	return fmt.Errorf("recovery resumed, but no segment holds the segment recovery point %d", l.mu.segmentPoint)
}

// checkAllTxnIndexes checks every segment's transaction index against a
// replay of the log: the aborted transactions at or above the log start
// whose marker lies in that segment, the same producers and last offsets.
// Their first offsets must match, except for a transaction that began
// below the log start: the log keeps where it began (or clamps it to the
// log start), a replay of the retained batches sees it begin at the
// producer's first retained batch. want is the replay's list.
func checkAllTxnIndexes(l *UnifiedLog, logStart int64, want []AbortedTxn) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	segs := l.mu.segments
	for i, seg := range segs {
		end := l.logEndOffset.Load()
		if i+1 < len(segs) {
			end = segs[i+1].BaseOffset()
		}
		in := func(ts []AbortedTxn) []AbortedTxn {
			var out []AbortedTxn
			for _, t := range ts {
				if t.LastOffset >= max(seg.BaseOffset(), logStart) && t.LastOffset < end {
					out = append(out, t)
				}
			}
			return out
		}
		g, w := in(seg.txn.Entries()), in(want)
		same := len(g) == len(w)
		for j := 0; same && j < len(g); j++ {
			same = g[j].ProducerID == w[j].ProducerID && g[j].LastOffset == w[j].LastOffset &&
				(g[j].FirstOffset == w[j].FirstOffset || (g[j].FirstOffset <= logStart && w[j].FirstOffset >= logStart))
		}
		if !same {
			format := func(ts []AbortedTxn) []string {
				var out []string
				for _, t := range ts {
					out = append(out, fmt.Sprintf("pid %d [%d, %d]", t.ProducerID, t.FirstOffset, t.LastOffset))
				}
				return out
			}
			return fmt.Errorf("segment %d [%d, %d) (log start %d): transaction index holds aborted %v, a replay of the log has %v",
				seg.BaseOffset(), seg.BaseOffset(), end, logStart, format(g), format(w))
		}
	}
	return nil
}
