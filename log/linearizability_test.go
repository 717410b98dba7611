package log

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"github.com/tierlog/tierlog/internal/harness/testseed"
	"github.com/tierlog/tierlog/log/record"
)

// The sequential model is in linearizability_model_test.go; this file
// records the histories and runs the checks.

// linRecorder collects operations with call and return stamps from one
// logical clock shared by all goroutines (no wall time).
type linRecorder struct {
	clock atomic.Int64
	mu    sync.Mutex
	ops   []porcupine.Operation
}

// do records f as op, called and returned around f.
func (r *linRecorder) do(client int, op linOp, f func() linResult) {
	call := r.begin()
	r.end(client, call, op, f())
}

// begin stamps a call. It then yields, as end does before it stamps the
// return: other clients' operations run inside this one's interval even
// on a single CPU, so the histories have overlapping operations whose
// order the checker must find. (Real parallelism, when the machine has
// it, adds operations that overlap inside the log too.)
func (r *linRecorder) begin() int64 {
	call := r.clock.Add(1)
	runtime.Gosched()
	return call
}

// end records an operation called at call that returns now.
func (r *linRecorder) end(client int, call int64, op linOp, res linResult) {
	runtime.Gosched()
	ret := r.clock.Add(1)
	r.mu.Lock()
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: op, Call: call, Output: res, Return: ret})
	r.mu.Unlock()
}

// linDriver runs operations against one log.
type linDriver struct {
	l *UnifiedLog
	// writerMu is the caller's serialization of the writer operations
	// (UnifiedLog's contract): several goroutines write, one at a time.
	writerMu sync.Mutex
	epoch    int32 // guarded by writerMu
	tag      atomic.Int64
}

// linOptions are small segments (rolls and retention every few batches),
// no retention by time or size: only the log start offset deletes.
var linOptions = Options{SegmentBytes: 400, RetentionMs: RetentionInfinite, RetentionBytes: RetentionInfinite}

// buildTaggedBatch builds one batch of n records whose values carry a
// unique tag, so its CRC tells it apart from every other batch.
func (d *linDriver) buildTaggedBatch(t *testing.T, n int) ([]byte, linBatch) {
	b := record.NewBuilder(record.DefaultBuilderOptions())
	for i := 0; i < n; i++ {
		b.Add(1_000_000, nil, fmt.Appendf(nil, "tag-%d", d.tag.Add(1)))
	}
	buf, err := b.Build()
	require.NoError(t, err)
	rb, err := record.ReadBatch(buf)
	require.NoError(t, err)
	return buf, linBatch{records: int32(n), crc: rb.CRC()}
}

// writerOp picks and runs one writer operation, its arguments drawn from
// the offsets the (serialized) writer sees. The call is stamped before
// the writer takes its turn, so the writers' operations overlap in the
// history as they do for their callers: the checker, not the stamps, has
// to find their order.
func (d *linDriver) writerOp(t *testing.T, rng *rand.Rand, rec *linRecorder, client int) {
	call := rec.begin()
	d.writerMu.Lock()
	defer d.writerMu.Unlock()
	op, res := d.runWriterOp(t, rng)
	rec.end(client, call, op, res)
}

func (d *linDriver) runWriterOp(t *testing.T, rng *rand.Rand) (linOp, linResult) {
	o := d.l.Offsets()
	switch p := rng.IntN(100); {
	case p < 15:
		return d.txnOp(t, rng)
	case p < 45:
		if rng.IntN(10) == 0 {
			d.epoch++ // a new leader epoch
		}
		op := linOp{kind: linAppend, epoch: d.epoch}
		var buf []byte
		for range 1 + rng.IntN(2) {
			b, mb := d.buildTaggedBatch(t, 1+rng.IntN(4))
			buf = append(buf, b...)
			op.batches = append(op.batches, mb)
		}
		info, err := d.l.AppendAsLeader(buf, op.epoch, OriginClient)
		return op, linResult{err: linErrorKind(err), first: info.FirstOffset}
	case p < 65:
		op := linOp{kind: linUpdateHW, offset: o.LogStartOffset - 1 + rng.Int64N(o.LogEndOffset-o.LogStartOffset+3)}
		return op, linResult{first: d.l.UpdateHighWatermark(op.offset)}
	case p < 82:
		op := linOp{kind: linTruncate, offset: o.LogStartOffset + rng.Int64N(o.LogEndOffset-o.LogStartOffset+2)}
		changed, err := d.l.TruncateTo(op.offset)
		return op, linResult{err: linErrorKind(err), changed: changed}
	default:
		op := linOp{kind: linRetention, offset: o.LogStartOffset + rng.Int64N(o.HighWatermark-o.LogStartOffset+2)}
		moved, err := d.l.MaybeIncrementLogStartOffset(op.offset)
		if err == nil {
			_, err = d.l.DeleteOldSegments()
		}
		return op, linResult{err: linErrorKind(err), changed: moved}
	}
}

// linProducerID is the one transactional producer.
const linProducerID = 1

// txnOp appends the next step of the producer's transaction: a marker
// (commit or abort, from the coordinator) if the log says one is open and
// the draw says so, else a transactional data batch with the next
// sequence number the log's producer state expects.
func (d *linDriver) txnOp(t *testing.T, rng *rand.Rand) (linOp, linResult) {
	open := false
	for _, txn := range d.l.OngoingTransactions() {
		open = open || txn.ProducerID == linProducerID
	}
	seq := int32(0)
	for _, p := range d.l.ActiveProducers() {
		if p.ProducerID == linProducerID && len(p.Batches) > 0 {
			seq = p.Batches[len(p.Batches)-1].LastSeq + 1
		}
	}
	opts := record.DefaultBuilderOptions()
	opts.ProducerID, opts.ProducerEpoch = linProducerID, 0
	op := linOp{kind: linAppend, epoch: d.epoch}
	var buf []byte
	origin := OriginClient
	if open && rng.IntN(2) == 0 {
		typ := []record.ControlType{record.ControlCommit, record.ControlAbort}[rng.IntN(2)]
		var err error
		buf, err = record.AppendEndTxnBatch(nil, opts, 1_000_000, typ, 0)
		require.NoError(t, err)
		rb, err := record.ReadBatch(buf)
		require.NoError(t, err)
		op.batches = []linBatch{{records: 1, crc: rb.CRC(), txn: true, control: true}}
		origin = OriginCoordinator
	} else {
		opts.BaseSequence, opts.Transactional = seq, true
		n := 1 + rng.IntN(3)
		b := record.NewBuilder(opts)
		for range n {
			b.Add(1_000_000, nil, fmt.Appendf(nil, "tag-%d", d.tag.Add(1)))
		}
		var err error
		buf, err = b.Build()
		require.NoError(t, err)
		rb, err := record.ReadBatch(buf)
		require.NoError(t, err)
		op.batches = []linBatch{{records: int32(n), crc: rb.CRC(), txn: true}}
	}
	info, err := d.l.AppendAsLeader(buf, op.epoch, origin)
	return op, linResult{err: linErrorKind(err), first: info.FirstOffset}
}

// readerOp runs one read (or offsets call) through read, with arguments
// around the current offsets, including just outside them.
func (d *linDriver) readerOp(rng *rand.Rand, rec *linRecorder, client int,
	read func(offset int64, maxBytes int, iso Isolation) (FetchDataInfo, error)) {
	if rng.IntN(5) == 0 {
		rec.do(client, linOp{kind: linOffsets}, func() linResult { return linResult{offsets: d.l.Offsets()} })
		return
	}
	o := d.l.Offsets()
	op := linOp{kind: linRead, offset: o.LogStartOffset - 1 + rng.Int64N(o.LogEndOffset-o.LogStartOffset+3),
		isolation: Isolation(rng.IntN(3)), maxBytes: []int{1, 200, 1 << 16}[rng.IntN(3)]}
	rec.do(client, op, func() linResult {
		info, err := read(op.offset, op.maxBytes, op.isolation)
		return linReadResult(info, err)
	})
}

// linReadResult is a read's output. FetchDataInfo has no local log start
// offset and no first unstable offset: they are filled with what the
// model expects without remote storage and transactions.
func linReadResult(info FetchDataInfo, err error) linResult {
	return linResult{err: linErrorKind(err), batches: linBatches(info.Records),
		offsets: Offsets{LogStartOffset: info.LogStartOffset, LocalLogStartOffset: info.LogStartOffset,
			HighWatermark: info.HighWatermark, LastStableOffset: info.LastStableOffset,
			FirstUnstableOffset: -1, LogEndOffset: info.LogEndOffset}}
}

// linBatches lists the whole batches of a read.
func linBatches(data []byte) []linBatch {
	var out []linBatch
	for len(data) > 0 {
		b, err := record.ReadBatch(data)
		if err != nil {
			out = append(out, linBatch{base: -1}) // a torn batch matches no model
			break
		}
		out = append(out, linBatch{base: b.BaseOffset(), records: b.LastOffsetDelta() + 1,
			epoch: b.PartitionLeaderEpoch(), crc: b.CRC(), txn: b.IsTransactional(), control: b.IsControl()})
		data = data[b.Size():]
	}
	return out
}

// runLinEpisode runs writers and readers concurrently against a fresh log
// and returns the history.
func runLinEpisode(t *testing.T, seed uint64, writers, readers, opsPerClient int,
	read func(l *UnifiedLog) func(int64, int, Isolation) (FetchDataInfo, error)) []porcupine.Operation {
	l := openTestLog(t, vfs.NewMem(), linOptions)
	defer l.Close()
	d := &linDriver{l: l}
	rec := &linRecorder{}
	start := make(chan struct{})
	var written atomic.Int64 // writer operations done
	var wg sync.WaitGroup
	for c := 0; c < writers+readers; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(c)))
			<-start
			for i := range opsPerClient {
				if c < writers {
					d.writerOp(t, rng, rec, c)
					written.Add(1)
				} else {
					// Pace the readers by the writers' progress (not by
					// time), so reads are spread over the whole history
					// instead of running before the first append.
					for written.Load() < int64(i*writers) && written.Load() < int64(writers*opsPerClient) {
						runtime.Gosched()
					}
					d.readerOp(rng, rec, c, read(l))
				}
				runtime.Gosched()
			}
		}()
	}
	close(start)
	wg.Wait()
	return rec.ops
}

func correctRead(l *UnifiedLog) func(int64, int, Isolation) (FetchDataInfo, error) {
	return func(offset int64, maxBytes int, iso Isolation) (FetchDataInfo, error) {
		return l.Read(nil, offset, maxBytes, iso, true)
	}
}

// TestLinearizable runs seeded episodes (2 writers, 3 readers) and checks
// each history against the model.
func TestLinearizable(t *testing.T) {
	episodes, ops := 200, 60
	if testing.Short() {
		episodes, ops = 40, 40
	}
	seed := testseed.Seed(t, 20261201)
	var total int
	for e := range episodes {
		history := runLinEpisode(t, seed+uint64(e), 2, 3, ops, correctRead)
		total += len(history)
		res, info := porcupine.CheckOperationsVerbose(linModel, history, 30*time.Second)
		if res != porcupine.Ok {
			t.Fatalf("episode %d (seed %d): history of %d operations is %s\n%s",
				e, seed+uint64(e), len(history), res, describeLinFailure(info, history))
		}
	}
	t.Logf("%d episodes, %d operations: linearizable", episodes, total)
}

// describeLinFailure prints the longest linearizable prefix porcupine
// found and the operations left over, for a failing history.
func describeLinFailure(info porcupine.LinearizationInfo, history []porcupine.Operation) string {
	var b strings.Builder
	partial := info.PartialLinearizationsOperations()
	if len(partial) > 0 && len(partial[0]) > 0 {
		longest := partial[0][0]
		for _, p := range partial[0] {
			if len(p) > len(longest) {
				longest = p
			}
		}
		state := linModel.Init()
		b.WriteString("longest linearizable prefix:\n")
		for _, op := range longest {
			_, state = linModel.Step(state, op.Input, op.Output)
			fmt.Fprintf(&b, "  c%d %s\n    => %s\n", op.ClientId, linModel.DescribeOperation(op.Input, op.Output), state)
		}
	}
	fmt.Fprintf(&b, "(%d operations in the history)", len(history))
	return b.String()
}

// readOffsetsOneByOne is Read as it must not be written: it loads each
// offset on its own, as Read once did, so a truncation that runs between
// the loads (between stands for that moment) makes it report the high
// watermark from before the truncation with the log end offset after it.
// The checker must reject the histories it produces.
func readOffsetsOneByOne(l *UnifiedLog, between func(), offset int64, maxBytes int, iso Isolation) (FetchDataInfo, error) {
	v, err := l.acquireView()
	if err != nil {
		return FetchDataInfo{}, err
	}
	defer v.unref()
	var o Offsets
	o.HighWatermark = l.HighWatermark()
	o.LastStableOffset = l.LastStableOffset()
	between()
	o.LogStartOffset = l.LogStartOffset()
	o.LocalLogStartOffset = l.LocalLogStartOffset()
	o.LogEndOffset = l.LogEndOffset()
	o.FirstUnstableOffset = -1
	return l.readPinned(v, o, nil, offset, maxBytes, iso, true)
}

// TestLinearizabilityCatchesOffsetsLoadedOneByOne shows that the checker
// catches the broken guard: a reader that loads the offsets one by one
// while a truncation below the high watermark runs between its loads. The
// same interleaving with Read (the truncation runs inside the read's
// interval, before Read loads its one state) is accepted.
func TestLinearizabilityCatchesOffsetsLoadedOneByOne(t *testing.T) {
	for _, broken := range []bool{true, false} {
		t.Run(fmt.Sprintf("one-by-one=%t", broken), func(t *testing.T) {
			l := openTestLog(t, vfs.NewMem(), linOptions)
			defer l.Close()
			d := &linDriver{l: l}
			rec := &linRecorder{}
			const writer, reader = 0, 1
			for range 3 {
				buf, b := d.buildTaggedBatch(t, 2)
				op := linOp{kind: linAppend, batches: []linBatch{b}}
				rec.do(writer, op, func() linResult {
					info, err := l.AppendAsLeader(buf, 0, OriginClient)
					return linResult{err: linErrorKind(err), first: info.FirstOffset}
				})
			}
			rec.do(writer, linOp{kind: linUpdateHW, offset: 6}, func() linResult {
				return linResult{first: l.UpdateHighWatermark(6)}
			})
			// Offset 3 is inside the batch [2, 4): the log ends at 2.
			truncate := func() {
				rec.do(writer, linOp{kind: linTruncate, offset: 3}, func() linResult {
					changed, err := l.TruncateTo(3)
					return linResult{err: linErrorKind(err), changed: changed}
				})
			}
			read := func(offset int64, maxBytes int, iso Isolation) (FetchDataInfo, error) {
				if broken {
					return readOffsetsOneByOne(l, truncate, offset, maxBytes, iso)
				}
				truncate()
				return l.Read(nil, offset, maxBytes, iso, true)
			}
			op := linOp{kind: linRead, offset: 0, isolation: IsolationHighWatermark, maxBytes: 1 << 16}
			rec.do(reader, op, func() linResult {
				info, err := read(op.offset, op.maxBytes, op.isolation)
				return linReadResult(info, err)
			})
			got := rec.ops[len(rec.ops)-1].Output.(linResult).offsets
			res := porcupine.CheckOperations(linModel, rec.ops)
			if broken {
				require.Equal(t, int64(6), got.HighWatermark)
				require.Equal(t, int64(2), got.LogEndOffset)
				require.False(t, res, "high watermark 6 with log end 2 must not linearize")
			} else {
				require.Equal(t, Offsets{HighWatermark: 2, LastStableOffset: 2, FirstUnstableOffset: -1, LogEndOffset: 2}, got)
				require.True(t, res)
			}
		})
	}
}

// TestLinearizabilityCatchesBrokenReadUnderConcurrency runs the concurrent
// episodes of TestLinearizable with readOffsetsOneByOne as the readers'
// read, yielding between its loads (a reader descheduled there): the
// checker must find a history that does not linearize.
func TestLinearizabilityCatchesBrokenReadUnderConcurrency(t *testing.T) {
	seed := testseed.Seed(t, 20261202)
	broken := func(l *UnifiedLog) func(int64, int, Isolation) (FetchDataInfo, error) {
		return func(offset int64, maxBytes int, iso Isolation) (FetchDataInfo, error) {
			return readOffsetsOneByOne(l, runtime.Gosched, offset, maxBytes, iso)
		}
	}
	const episodes = 100
	for e := range episodes {
		history := runLinEpisode(t, seed+uint64(e), 2, 3, 40, broken)
		if res := porcupine.CheckOperationsTimeout(linModel, history, 30*time.Second); res == porcupine.Illegal {
			t.Logf("episode %d: the broken read made the history illegal", e)
			return
		}
	}
	t.Fatalf("no history of %d episodes with the broken read was found illegal", episodes)
}
