package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
)

// readCommitted is the consumer option of a read_committed consumer.
var readCommitted = kgo.FetchIsolationLevel(kgo.ReadCommitted())

// produceRange produces records from to from+n-1 (testRecord) and
// returns them by their acknowledged position.
func produceRange(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, from, n int) map[key]*kgo.Record {
	t.Helper()
	var mu sync.Mutex
	acked := make(map[key]*kgo.Record, n)
	done := make(chan error, n)
	for i := from; i < from+n; i++ {
		cl.Produce(ctx, testRecord(topic, i), func(r *kgo.Record, err error) {
			if err == nil {
				mu.Lock()
				acked[key{r.Partition, r.Offset}] = r
				mu.Unlock()
			}
			done <- err
		})
	}
	for range n {
		require.NoError(t, <-done)
	}
	require.Len(t, acked, n, "every record acknowledged at its own offset")
	return acked
}

// produceTxn produces records from to from+n-1 in one transaction of cl,
// then commits or aborts it.
func produceTxn(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, from, n int, commit bool) map[key]*kgo.Record {
	t.Helper()
	require.NoError(t, cl.BeginTransaction())
	acked := produceRange(ctx, t, cl, topic, from, n)
	require.NoError(t, cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)))
	return acked
}

// requireBelow checks that every partition holding a record of low also
// holds a record of high at a greater offset: a consumer that reads all of
// high has read past every record of low.
func requireBelow(t *testing.T, low, high map[key]*kgo.Record) {
	t.Helper()
	top := map[int32]int64{}
	for k := range high {
		top[k.partition] = max(top[k.partition], k.offset)
	}
	for k := range low {
		require.Less(t, k.offset, top[k.partition], "partition %d: nothing of the later records above offset %d", k.partition, k.offset)
	}
}

// TestKgoTransactions: a kgo transactional producer (acks=all) runs 30
// transactions of 100 records over 3 partitions, every third aborted; a
// read_committed consumer returns exactly the committed records
// (byte-identical), a read_uncommitted one all of them. The log's
// transaction index holds each aborted transaction of each partition,
// and nothing is left open.
func TestKgoTransactions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := startBroker(t, t.TempDir())
	prod := newClient(t, s, kgo.TransactionalID("orders-txn"), kgo.RequiredAcks(kgo.AllISRAcks()))
	createTopic(ctx, t, prod, testTopic)
	const txns, perTxn = 30, 100
	committed, all := map[key]*kgo.Record{}, map[key]*kgo.Record{}
	abortedIn := map[int32]int{} // partition: aborted transactions that wrote to it
	var last map[key]*kgo.Record
	for i := range txns {
		commit := i%3 != 1 // the last one (29) commits
		recs := produceTxn(ctx, t, prod, testTopic, i*perTxn, perTxn, commit)
		maps.Copy(all, recs)
		if commit {
			maps.Copy(committed, recs)
		} else {
			parts := map[int32]bool{}
			for k := range recs {
				parts[k.partition] = true
			}
			for p := range parts {
				abortedIn[p]++
			}
		}
		last = recs
	}
	// The consumers read past every aborted record to reach the last
	// transaction's records.
	aborted := map[key]*kgo.Record{}
	for k, r := range all {
		if _, ok := committed[k]; !ok {
			aborted[k] = r
		}
	}
	requireBelow(t, aborted, last)
	require.Len(t, committed, 20*perTxn)

	for p := range int32(testPartitions) {
		l := testLog(t, s, testTopic, p)
		require.Empty(t, l.OngoingTransactions(), "partition %d", p)
		require.Equal(t, l.HighWatermark(), l.LastStableOffset(), "partition %d", p)
		fd, err := l.Read(nil, 0, 1<<30, log.IsolationCommitted, true)
		require.NoError(t, err)
		require.Len(t, fd.AbortedTransactions, abortedIn[p], "partition %d", p)
	}
	consumeAll(ctx, t, s, testTopic, committed, readCommitted)
	consumeAll(ctx, t, s, testTopic, all)
}

// TestKgoTransactionFenced: a second producer with the same transactional
// id fences the first (Kafka: InitProducerId bumps the epoch and aborts
// the open transaction): the first's next produce fails with
// INVALID_PRODUCER_EPOCH or PRODUCER_FENCED (and kgo then refuses to
// commit), an EndTxn with
// its producer id and epoch is PRODUCER_FENCED; its acknowledged records
// are aborted, the second's committed.
func TestKgoTransactionFenced(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := startBroker(t, t.TempDir())
	opts := []kgo.Opt{kgo.TransactionalID("fenced-txn"), kgo.RequiredAcks(kgo.AllISRAcks())}
	first := newClient(t, s, opts...)
	createTopic(ctx, t, first, testTopic)
	require.NoError(t, first.BeginTransaction())
	fenced := produceRange(ctx, t, first, testTopic, 0, 30)
	pid, epoch, err := first.ProducerID(ctx)
	require.NoError(t, err)

	second := newClient(t, s, opts...)
	require.NoError(t, second.BeginTransaction())
	kept := produceRange(ctx, t, second, testTopic, 100, 30)

	err = first.ProduceSync(ctx, testRecord(testTopic, 50)).FirstErr()
	// INVALID_PRODUCER_EPOCH from Produce to a partition it added,
	// PRODUCER_FENCED from AddPartitionsToTxn for another.
	require.True(t, errors.Is(err, kerr.InvalidProducerEpoch) || errors.Is(err, kerr.ProducerFenced), "the fenced producer's produce: %v", err)
	require.Error(t, first.EndTransaction(ctx, kgo.TryCommit), "kgo refuses to commit after the failed produce")
	// The EndTxn the fenced producer would send.
	_, b := rawBroker(ctx, t, s)
	require.Equal(t, kerr.ProducerFenced.Code, endTxn(ctx, t, b, "fenced-txn", pid, epoch, true))
	require.NoError(t, second.EndTransaction(ctx, kgo.TryCommit))

	requireBelow(t, fenced, kept)
	consumeAll(ctx, t, s, testTopic, kept, readCommitted)
	all := maps.Clone(kept)
	maps.Copy(all, fenced)
	consumeAll(ctx, t, s, testTopic, all)
}

// initTxnProducerID sends InitProducerId for a transactional id and
// returns the producer id and epoch.
func initTxnProducerID(ctx context.Context, t *testing.T, cl *kgo.Client, id string, timeout time.Duration) (int64, int16) {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = &id
	req.TransactionTimeoutMillis = int32(timeout.Milliseconds())
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Zero(t, resp.ErrorCode, "%v", kerr.ErrorForCode(resp.ErrorCode))
	return resp.ProducerID, resp.ProducerEpoch
}

// TestTransactionalIDRestart: a clean restart keeps a transactional id's
// producer id and epoch (the transaction state file): the next
// InitProducerId bumps the epoch of the same producer id, and the
// committed transaction is read back read_committed.
func TestTransactionalIDRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dir := t.TempDir()
	s := startBroker(t, dir)
	cl := newClient(t, s)
	createTopic(ctx, t, cl, testTopic)
	pid, epoch := initTxnProducerID(ctx, t, cl, "restart-txn", time.Minute)
	require.Equal(t, int16(0), epoch)
	prod := newClient(t, s, kgo.TransactionalID("restart-txn"), kgo.RequiredAcks(kgo.AllISRAcks()))
	recs := produceTxn(ctx, t, prod, testTopic, 0, 100, true) // epoch 1
	prod.Close()
	cl.Close()
	require.NoError(t, s.Close())

	s = startBroker(t, dir)
	pid2, epoch2 := initTxnProducerID(ctx, t, newClient(t, s), "restart-txn", time.Minute)
	require.Equal(t, pid, pid2, "the same producer id")
	require.Equal(t, int16(2), epoch2, "the next epoch")
	consumeAll(ctx, t, s, testTopic, recs, readCommitted)
}

// TestRestartAbortsOpenTransaction: a transaction open at a clean
// shutdown is aborted at the next start, before the broker serves: the
// logs' last stable offsets reach their high watermarks. With the state
// file kept, the producer is fenced (its epoch bumped by the abort, and
// again by the next InitProducerId); with the state file lost, the open
// transactions of the producer no transactional id holds are aborted all
// the same.
func TestRestartAbortsOpenTransaction(t *testing.T) {
	for _, lost := range []bool{false, true} {
		name := "state-kept"
		if lost {
			name = "state-lost"
		}
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			dir := t.TempDir()
			s := startBroker(t, dir)
			prod := newClient(t, s, kgo.TransactionalID("open-txn"), kgo.RequiredAcks(kgo.AllISRAcks()))
			createTopic(ctx, t, prod, testTopic)
			require.NoError(t, prod.BeginTransaction())
			open := produceRange(ctx, t, prod, testTopic, 0, 60)
			opened := map[int32]bool{}
			for k := range open {
				opened[k.partition] = true
			}
			for p := range opened {
				l := testLog(t, s, testTopic, p)
				require.Len(t, l.OngoingTransactions(), 1)
				require.Less(t, l.LastStableOffset(), l.HighWatermark())
			}
			prod.Close()
			require.NoError(t, s.Close())
			if lost {
				require.NoError(t, os.Remove(filepath.Join(dir, "transaction-state")))
			}

			s = startBroker(t, dir)
			for p := range opened {
				l := testLog(t, s, testTopic, p)
				require.Empty(t, l.OngoingTransactions(), "partition %d", p)
				require.Equal(t, l.HighWatermark(), l.LastStableOffset(), "partition %d", p)
				fd, err := l.Read(nil, 0, 1<<30, log.IsolationCommitted, true)
				require.NoError(t, err)
				require.Len(t, fd.AbortedTransactions, 1, "partition %d", p)
			}
			_, epoch := initTxnProducerID(ctx, t, newClient(t, s), "open-txn", time.Minute)
			if lost {
				require.Equal(t, int16(0), epoch, "a new producer id")
			} else {
				require.Equal(t, int16(2), epoch, "fenced at the start, then bumped")
			}
		})
	}
}

// startTxnBroker starts a broker that looks for expired transactions
// every interval.
func startTxnBroker(t *testing.T, interval time.Duration) *Server {
	t.Helper()
	s, err := Start(Options{
		Addr:                     "127.0.0.1:0",
		Dir:                      t.TempDir(),
		Logger:                   slog.New(slog.NewTextHandler(io.Discard, nil)),
		TransactionAbortInterval: interval,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// txnBatch is a transactional batch of n records of producer (pid, epoch)
// from sequence 0.
func txnBatch(t *testing.T, pid int64, epoch int16, n int) []byte {
	t.Helper()
	opts := record.DefaultBuilderOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence, opts.Transactional = pid, epoch, 0, true
	bl := record.NewBuilder(opts)
	for i := range n {
		bl.Add(time.Now().UnixMilli(), nil, []byte{byte(i)})
	}
	out, err := bl.Build()
	require.NoError(t, err)
	return out
}

// addPartitions sends AddPartitionsToTxn and returns each partition's
// error code.
func addPartitions(ctx context.Context, t *testing.T, b *kgo.Broker, id string, pid int64, epoch int16, topic string, ps ...int32) map[int32]int16 {
	t.Helper()
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = id, pid, epoch
	rt := kmsg.NewAddPartitionsToTxnRequestTopic()
	rt.Topic, rt.Partitions = topic, ps
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, b)
	require.NoError(t, err)
	codes := map[int32]int16{}
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			codes[p.Partition] = p.ErrorCode
		}
	}
	return codes
}

// endTxn sends EndTxn and returns its error code.
func endTxn(ctx context.Context, t *testing.T, b *kgo.Broker, id string, pid int64, epoch int16, commit bool) int16 {
	t.Helper()
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, commit
	resp, err := req.RequestWith(ctx, b)
	require.NoError(t, err)
	return resp.ErrorCode
}

// TestTransactionProtocol: the coordinator's answers, request by request.
// A transactional batch to a partition not added to the transaction is
// INVALID_TXN_STATE (as Kafka answers with KIP-890 part 1's
// verification); an unknown partition in AddPartitionsToTxn is
// UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED;
// EndTxn from an unknown producer id is INVALID_PRODUCER_ID_MAPPING,
// from another epoch PRODUCER_FENCED; a commit moves the last stable
// offset past the marker, its retry is answered again, an abort after it
// is INVALID_TXN_STATE.
func TestTransactionProtocol(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := startTxnBroker(t, time.Hour)
	cl, b := rawBroker(ctx, t, s)
	createTopic(ctx, t, cl, testTopic)
	const id = "raw-txn"
	pid, epoch := initTxnProducerID(ctx, t, cl, id, time.Minute)

	p := produceRaw(ctx, t, b, testTopic, txnBatch(t, pid, epoch, 5))
	require.Equal(t, kerr.InvalidTxnState.Code, p.ErrorCode, "%v", kerr.ErrorForCode(p.ErrorCode))

	codes := addPartitions(ctx, t, b, id, pid, epoch, testTopic, 0, 99)
	require.Equal(t, map[int32]int16{0: kerr.OperationNotAttempted.Code, 99: kerr.UnknownTopicOrPartition.Code}, codes)
	require.Equal(t, map[int32]int16{0: kerr.ProducerFenced.Code}, addPartitions(ctx, t, b, id, pid, epoch+1, testTopic, 0))
	require.Equal(t, map[int32]int16{0: 0}, addPartitions(ctx, t, b, id, pid, epoch, testTopic, 0))
	p = produceRaw(ctx, t, b, testTopic, txnBatch(t, pid, epoch, 5))
	require.Zero(t, p.ErrorCode, "%v", kerr.ErrorForCode(p.ErrorCode))
	p = produceRaw(ctx, t, b, testTopic, txnBatch(t, pid, epoch+1, 5))
	require.Equal(t, kerr.InvalidProducerEpoch.Code, p.ErrorCode, "%v", kerr.ErrorForCode(p.ErrorCode))
	l := testLog(t, s, testTopic, 0)
	require.Equal(t, int64(0), l.LastStableOffset())
	require.Equal(t, int64(5), l.HighWatermark())

	require.Equal(t, kerr.InvalidProducerIDMapping.Code, endTxn(ctx, t, b, id, pid+1, epoch, true))
	require.Equal(t, kerr.InvalidProducerIDMapping.Code, endTxn(ctx, t, b, "no-such-id", pid, epoch, true))
	require.Equal(t, kerr.ProducerFenced.Code, endTxn(ctx, t, b, id, pid, epoch+1, true))
	require.Zero(t, endTxn(ctx, t, b, id, pid, epoch, true))
	require.Equal(t, int64(6), l.LastStableOffset(), "past the COMMIT marker")
	require.Equal(t, int64(6), l.HighWatermark())
	require.Zero(t, endTxn(ctx, t, b, id, pid, epoch, true), "a retry")
	require.Equal(t, kerr.InvalidTxnState.Code, endTxn(ctx, t, b, id, pid, epoch, false))
	require.Equal(t, int64(6), l.LogEndOffset(), "one marker")
}

// TestTransactionTimeout: a transaction open longer than its
// TransactionTimeoutMillis is aborted by the background check, which
// fences its producer (Kafka: the timeout abort bumps the epoch): the
// last stable offset passes the transaction, the read_committed read
// lists it as aborted, and the producer's EndTxn is PRODUCER_FENCED.
func TestTransactionTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := startTxnBroker(t, 10*time.Millisecond)
	cl, b := rawBroker(ctx, t, s)
	createTopic(ctx, t, cl, testTopic)
	const id = "timeout-txn"
	pid, epoch := initTxnProducerID(ctx, t, cl, id, 50*time.Millisecond)
	require.Equal(t, map[int32]int16{0: 0}, addPartitions(ctx, t, b, id, pid, epoch, testTopic, 0))
	p := produceRaw(ctx, t, b, testTopic, txnBatch(t, pid, epoch, 5))
	require.Zero(t, p.ErrorCode)

	l := testLog(t, s, testTopic, 0)
	_, err := l.WaitFor(ctx, 5, log.IsolationCommitted) // until the abort
	require.NoError(t, err)
	fd, err := l.Read(nil, 0, 1<<20, log.IsolationCommitted, true)
	require.NoError(t, err)
	require.Len(t, fd.AbortedTransactions, 1)
	require.Equal(t, pid, fd.AbortedTransactions[0].ProducerID)
	require.Equal(t, kerr.ProducerFenced.Code, endTxn(ctx, t, b, id, pid, epoch, true))
}

// markerAt reads the batch at offset of a partition (read_uncommitted)
// and returns the type and producer id of the control record there.
func markerAt(ctx context.Context, t *testing.T, b *kgo.Broker, partition int32, offset int64) (record.ControlType, int64) {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.MaxBytes = 1 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = testTopic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = partition, offset, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, b)
	require.NoError(t, err)
	fp := resp.Topics[0].Partitions[0]
	require.Zero(t, fp.ErrorCode)
	batch, err := record.ReadBatch(fp.RecordBatches)
	require.NoError(t, err)
	require.Equal(t, offset, batch.BaseOffset(), "partition %d", partition)
	require.True(t, batch.IsControl(), "partition %d offset %d is not a marker", partition, offset)
	it := record.NewIter(record.IterOptions{})
	it.Reset(batch)
	require.True(t, it.Next(), "%v", it.Err())
	k, err := record.ParseControlKey(it.Record().Key)
	require.NoError(t, err)
	return k.Type, batch.ProducerID()
}

// TestKillDuringTransaction: a kgo transactional producer commits a
// transaction, begins another and has its records acknowledged, and the
// broker process is killed with SIGKILL before the EndTxn. The restarted
// broker aborts the open transaction before it serves
// (recoverTransactions): a read_committed consumer reads past it to a
// transaction committed after the restart (it is not held at the last
// stable offset) and sees none of its records; a read_uncommitted one
// sees them, each partition's followed by the ABORT marker of the
// producer at the next offset.
func TestKillDuringTransaction(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dir, addr := t.TempDir(), freeLoopbackAddr(t)
	child := startChild(ctx, t, addr, dir)
	prod := newClientAt(t, addr, kgo.TransactionalID("kill-txn"), kgo.RequiredAcks(kgo.AllISRAcks()))
	createTopic(ctx, t, prod, testTopic)
	before := produceTxn(ctx, t, prod, testTopic, 0, 100, true)
	require.NoError(t, prod.BeginTransaction())
	open := produceRange(ctx, t, prod, testTopic, 100, 100)
	pid, _, err := prod.ProducerID(ctx)
	require.NoError(t, err)
	child.kill(t, false)

	startChild(ctx, t, addr, dir)
	after := produceTxn(ctx, t, newClientAt(t, addr, kgo.TransactionalID("after-kill-txn"), kgo.RequiredAcks(kgo.AllISRAcks())),
		testTopic, 200, 100, true)
	requireBelow(t, open, after)
	committed := maps.Clone(before)
	maps.Copy(committed, after)
	// Bounded: a consumer held at the last stable offset waits until then.
	cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
	defer ccancel()
	consumeAllAt(cctx, t, addr, testTopic, committed, readCommitted)
	all := maps.Clone(committed)
	maps.Copy(all, open)
	consumeAllAt(ctx, t, addr, testTopic, all)

	last := map[int32]int64{}
	for k := range open {
		last[k.partition] = max(last[k.partition], k.offset)
	}
	cl := newClientAt(t, addr)
	require.NoError(t, cl.Ping(ctx))
	for p, o := range last {
		typ, markerPID := markerAt(ctx, t, cl.Broker(nodeID), p, o+1)
		require.Equal(t, record.ControlAbort, typ, "partition %d", p)
		require.Equal(t, pid, markerPID, "partition %d", p)
	}
}

// TestPlanTxnRecovery: the decision of a start, from the state file's
// records and the transactions the logs hold open.
func TestPlanTxnRecovery(t *testing.T) {
	tp := func(p int32) topicPartition { return topicPartition{"t", p} }
	ot := func(p int32, pid int64, epoch int16) openTxn {
		return openTxn{tp(p), log.OngoingTransaction{ProducerID: pid, ProducerEpoch: epoch}}
	}
	recs := []txnRecord{
		{TransactionalID: "ongoing", ProducerID: 1, ProducerEpoch: 3, TimeoutMs: 1000, State: txnOngoing},
		{TransactionalID: "ongoing-idle", ProducerID: 2, ProducerEpoch: 0, TimeoutMs: 1000, State: txnOngoing},
		{TransactionalID: "commit", ProducerID: 3, ProducerEpoch: 5, TimeoutMs: 1000, State: txnPrepareCommit},
		{TransactionalID: "abort", ProducerID: 4, ProducerEpoch: 5, TimeoutMs: 1000, State: txnPrepareAbort},
		{TransactionalID: "stale", ProducerID: 5, ProducerEpoch: 1, TimeoutMs: 1000, State: txnCompleteCommit},
		{TransactionalID: "exhausted", ProducerID: 6, ProducerEpoch: maxEpochBeforeExhausted, TimeoutMs: 1000, State: txnOngoing},
		{TransactionalID: "done", ProducerID: 7, ProducerEpoch: 9, TimeoutMs: 1000, State: txnCompleteCommit},
	}
	open := []openTxn{ot(0, 1, 3), ot(1, 1, 3), ot(0, 3, 5), ot(2, 4, 5), ot(1, 5, 2), ot(2, 6, maxEpochBeforeExhausted), ot(0, 99, 7)}
	plan := planTxnRecovery(recs, open)

	rec := func(r txnRecord, epoch int16, s txnState) txnRecord {
		r.ProducerEpoch, r.State = epoch, s
		return r
	}
	require.Equal(t, map[string]txnRecord{
		"ongoing":      rec(recs[0], 4, txnPrepareAbort), // fenced
		"ongoing-idle": rec(recs[1], 1, txnPrepareAbort),
		"stale":        rec(recs[4], 2, txnPrepareAbort), // open in a log, raised to its epoch
		"exhausted":    rec(recs[5], maxEpochBeforeExhausted, txnPrepareAbort),
	}, plan.records)
	require.Equal(t, map[string][]topicPartition{
		"ongoing":   {tp(0), tp(1)},
		"commit":    {tp(0)},
		"abort":     {tp(2)},
		"stale":     {tp(1)},
		"exhausted": {tp(2)},
	}, plan.mark)
	require.Equal(t, []openTxn{ot(0, 99, 7)}, plan.unknown)
}
