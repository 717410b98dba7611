package producer

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/tierlog/tierlog/log/record"
)

// TestDataDriven runs the scenarios in testdata. Commands:
//
//	new [strict]                     a fresh Manager (log end 0, hw 0)
//	append [origin=client|coordinator|replication]
//	                                 one PrepareAppend + Apply; input: one batch per line:
//	                                   plain count=N [ts=T]
//	                                   data pid=P epoch=E seq=S count=N [txn] [ts=T]
//	                                   commit|abort pid=P epoch=E coord=C [ts=T]
//	                                 leader origins get offsets from the log end; a
//	                                 replication line may set offset=O
//	hw offset=N                      set the high watermark (OnHighWatermarkUpdated)
//	status                           offsets, producers, transactions
//	read-committed fetch=N           the aborted transactions a committed read at N returns
//	expire now=MS expiration=MS      RemoveExpired
//	truncate-head log-start=N        TruncateHead
//	log-start-incremented log-start=N OnLogStartOffsetIncremented
//	truncate-fully start=N           TruncateFullyAndStartAt (log end, hw := N)
//	snapshot                         Snapshot: size and decoded entries; kept for load-snapshot
//	load-snapshot                    a fresh Manager loaded from the kept snapshot
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		if strings.Contains(path, "fuzz") {
			t.Skip("fuzz corpus")
		}
		e := &ddEnv{m: NewManager(Options{}), idx: &TxnIndex{}}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return e.handle(t, d)
		})
	})
}

type ddEnv struct {
	m       *Manager
	leo, hw int64
	idx     *TxnIndex
	snap    []byte
	snapAt  int64
	buf     []byte
}

func (e *ddEnv) handle(t *testing.T, d *datadriven.TestData) string {
	var out strings.Builder
	switch d.Cmd {
	case "new":
		e.m = NewManager(Options{StrictUnknownProducer: d.HasArg("strict")})
		e.leo, e.hw, e.idx = 0, 0, &TxnIndex{}
		return "ok"
	case "append":
		e.append(t, d, &out)
	case "hw":
		d.ScanArgs(t, "offset", &e.hw)
		e.m.OnHighWatermarkUpdated(e.hw)
		e.offsets(&out)
	case "status":
		e.status(&out)
	case "read-committed":
		var fetch int64
		d.ScanArgs(t, "fetch", &fetch)
		upper := e.m.LastStableOffset(e.hw)
		aborted, complete := e.idx.CollectAborted(nil, fetch, upper)
		fmt.Fprintf(&out, "read [%d, %d) complete=%t\n", fetch, upper, complete)
		for _, a := range aborted {
			fmt.Fprintf(&out, "aborted pid=%d [%d, %d] lso=%d\n", a.ProducerID, a.FirstOffset, a.LastOffset, a.LastStableOffset)
		}
		if len(aborted) == 0 {
			out.WriteString("no aborted transactions\n")
		}
	case "expire":
		var now, exp int64
		d.ScanArgs(t, "now", &now)
		d.ScanArgs(t, "expiration", &exp)
		fmt.Fprintf(&out, "expired %d\n", e.m.RemoveExpired(now, exp))
		e.status(&out)
	case "truncate-head":
		var ls int64
		d.ScanArgs(t, "log-start", &ls)
		e.m.TruncateHead(ls)
		e.status(&out)
	case "log-start-incremented":
		var ls int64
		d.ScanArgs(t, "log-start", &ls)
		e.m.OnLogStartOffsetIncremented(ls)
		e.status(&out)
	case "truncate-fully":
		var n int64
		d.ScanArgs(t, "start", &n)
		e.m.TruncateFullyAndStartAt(n)
		e.leo, e.hw = n, n
		e.idx.TruncateTo(n)
		e.status(&out)
	case "snapshot":
		e.snap = e.m.Snapshot(nil)
		e.snapAt = e.m.MapEndOffset()
		entries, err := DecodeSnapshot(e.snap)
		if err != nil {
			return "error: " + err.Error()
		}
		fmt.Fprintf(&out, "%s: %d bytes, %d entries\n", SnapshotFileName(e.snapAt), len(e.snap), len(entries))
		for _, se := range entries {
			fmt.Fprintf(&out, "pid=%d epoch=%d last-seq=%d last-offset=%d delta=%d ts=%d coord=%d txn=%d\n",
				se.ProducerID, se.ProducerEpoch, se.LastSequence, se.LastOffset, se.OffsetDelta,
				se.Timestamp, se.CoordinatorEpoch, se.CurrentTxnFirstOffset)
		}
	case "load-snapshot":
		m := NewManager(e.m.opts)
		if err := m.LoadSnapshot(e.snap, e.snapAt); err != nil {
			return "error: " + err.Error()
		}
		e.m = m
		e.status(&out)
	default:
		t.Fatalf("unknown command %q", d.Cmd)
	}
	return out.String()
}

func (e *ddEnv) append(t *testing.T, d *datadriven.TestData, out *strings.Builder) {
	origin := OriginClient
	if d.HasArg("origin") {
		var o string
		d.ScanArgs(t, "origin", &o)
		switch o {
		case "client":
		case "coordinator":
			origin = OriginCoordinator
		case "replication":
			origin = OriginReplication
		default:
			t.Fatalf("unknown origin %q", o)
		}
	}
	e.buf = e.buf[:0]
	next := e.leo
	for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
		start := len(e.buf)
		e.buf = buildBatch(t, e.buf, line, next)
		b, err := record.ReadBatch(e.buf[start:])
		if err != nil {
			t.Fatal(err)
		}
		next = b.NextOffset()
	}
	first, _ := record.ReadBatch(e.buf)
	a, err := e.m.PrepareAppend(e.buf, origin)
	if err != nil {
		fmt.Fprintf(out, "error: %s\n", err)
		fmt.Fprintf(out, "is: %s\n", sentinelName(err))
		e.offsets(out)
		return
	}
	if dup, ok := a.Duplicate(); ok {
		fmt.Fprintf(out, "duplicate of [%d, %d] ts=%d: nothing written\n", dup.FirstOffset(), dup.LastOffset, dup.Timestamp)
		if _, err := e.m.Apply(a); err != nil {
			t.Fatal(err)
		}
		e.offsets(out)
		return
	}
	completed, err := e.m.Apply(a)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Apply(a); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("second Apply: %v", err)
	}
	fmt.Fprintf(out, "appended [%d, %d]\n", first.BaseOffset(), next-1)
	e.leo = next
	for _, c := range completed {
		kind := "commit"
		if c.IsAborted {
			kind = "abort"
			if err := e.idx.Append(c.AbortedTxn()); err != nil {
				t.Fatal(err)
			}
		}
		fmt.Fprintf(out, "completed %s pid=%d [%d, %d] lso=%d\n", kind, c.ProducerID, c.FirstOffset, c.LastOffset, c.LastStableOffset)
	}
	e.offsets(out)
}

// buildBatch appends the batch a line describes, at offset next unless
// the line sets offset=.
func buildBatch(t testing.TB, dst []byte, line string, next int64) []byte {
	fields := strings.Fields(line)
	args := map[string]int64{}
	flags := map[string]bool{}
	for _, f := range fields[1:] {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			flags[k] = true
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		args[k] = n
	}
	get := func(k string, def int64) int64 {
		if v, ok := args[k]; ok {
			return v
		}
		return def
	}
	opts := record.DefaultBuilderOptions()
	opts.BaseOffset = get("offset", next)
	opts.PartitionLeaderEpoch = 0
	ts := get("ts", 0)
	var err error
	switch fields[0] {
	case "plain":
		b := record.NewBuilder(opts)
		for i := int64(0); i < get("count", 1); i++ {
			b.Add(ts, nil, []byte("v"))
		}
		dst, err = b.AppendTo(dst)
	case "data":
		opts.ProducerID = get("pid", 1)
		opts.ProducerEpoch = int16(get("epoch", 0))
		opts.BaseSequence = int32(get("seq", 0))
		opts.Transactional = flags["txn"]
		b := record.NewBuilder(opts)
		for i := int64(0); i < get("count", 1); i++ {
			b.Add(ts, nil, []byte("v"))
		}
		dst, err = b.AppendTo(dst)
	case "commit", "abort":
		opts.ProducerID = get("pid", 1)
		opts.ProducerEpoch = int16(get("epoch", 0))
		typ := record.ControlCommit
		if fields[0] == "abort" {
			typ = record.ControlAbort
		}
		dst, err = record.AppendEndTxnBatch(dst, opts, ts, typ, int32(get("coord", 0)))
	default:
		t.Fatalf("unknown batch kind in %q", line)
	}
	if err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	return dst
}

func sentinelName(err error) string {
	for _, s := range []struct {
		err  error
		name string
	}{
		{ErrOutOfOrderSequence, "OUT_OF_ORDER_SEQUENCE_NUMBER"},
		{ErrInvalidProducerEpoch, "INVALID_PRODUCER_EPOCH"},
		{ErrUnknownProducerID, "UNKNOWN_PRODUCER_ID"},
		{ErrInvalidTxnState, "INVALID_TXN_STATE"},
		{ErrTransactionCoordinatorFenced, "TRANSACTION_COORDINATOR_FENCED"},
		{ErrCorruption, "CORRUPTION"},
	} {
		if errors.Is(err, s.err) {
			return s.name
		}
	}
	return "unknown"
}

func (e *ddEnv) offsets(out *strings.Builder) {
	fuo := "none"
	if f, ok := e.m.FirstUnstableOffset(); ok {
		fuo = strconv.FormatInt(f, 10)
	}
	fmt.Fprintf(out, "leo=%d hw=%d fuo=%s lso=%d map-end=%d\n", e.leo, e.hw, fuo, e.m.LastStableOffset(e.hw), e.m.MapEndOffset())
}

func (e *ddEnv) status(out *strings.Builder) {
	e.offsets(out)
	for _, p := range e.m.ActiveProducers() {
		txn := "none"
		if p.CurrentTxnFirstOffset >= 0 {
			txn = strconv.FormatInt(p.CurrentTxnFirstOffset, 10)
		}
		fmt.Fprintf(out, "producer %d: epoch=%d coord=%d txn=%s last-ts=%d batches:", p.ProducerID, p.ProducerEpoch,
			p.CoordinatorEpoch, txn, p.LastTimestamp)
		for _, b := range p.Batches {
			fmt.Fprintf(out, " seq[%d..%d]@[%d, %d]", b.FirstSeq(), b.LastSeq, b.FirstOffset(), b.LastOffset)
		}
		if len(p.Batches) == 0 {
			out.WriteString(" none")
		}
		out.WriteString("\n")
	}
	for _, tx := range e.m.OngoingTxns() {
		fmt.Fprintf(out, "ongoing pid=%d from %d\n", tx.ProducerID, tx.FirstOffset)
	}
	for _, tx := range e.m.UnreplicatedTxns() {
		fmt.Fprintf(out, "unreplicated pid=%d [%d, %d]\n", tx.ProducerID, tx.FirstOffset, tx.LastOffset)
	}
}
