package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/logmanager"
	"github.com/tierlog/tierlog/remote"
)

// tieredSegmentBytes is the tests' segment.bytes: small, so a few
// thousand records roll many segments.
const tieredSegmentBytes = 8 << 10

// tieredOptions are the options of a broker whose copy task runs every
// 10 ms, with small segments and local retention that keeps
// localRetentionBytes once copied (log.RetentionNone: nothing but the
// active segment). retentionCheck < 0 leaves local retention to the test
// (logmanager.Manager.RunTask).
func tieredOptions(dir string, localRetentionBytes int64, retentionCheck time.Duration) Options {
	return Options{
		Addr:                   "127.0.0.1:0",
		Dir:                    dir,
		Logger:                 slog.New(slog.NewTextHandler(io.Discard, nil)),
		SegmentBytes:           tieredSegmentBytes,
		RemoteTaskInterval:     10 * time.Millisecond,
		LocalRetentionBytes:    localRetentionBytes,
		RetentionCheckInterval: retentionCheck,
	}
}

func startTiered(t *testing.T, opts Options) *Server {
	t.Helper()
	s, err := Start(opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// tieredProducer is a kgo producer of small uncompressed batches, so
// segments of tieredSegmentBytes hold several batches.
func tieredProducer(t *testing.T, s *Server, opts ...kgo.Opt) *kgo.Client {
	return newClient(t, s, append([]kgo.Opt{kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(2 << 10)}, opts...)...)
}

// readLocal returns the batches of partition l's log in [0, high
// watermark) as stored, read before local retention deletes anything.
func readLocal(t *testing.T, l *log.UnifiedLog) []byte {
	t.Helper()
	var out []byte
	for off := int64(0); off < l.HighWatermark(); {
		fd, err := l.Read(nil, off, 1<<20, log.IsolationHighWatermark, true)
		require.NoError(t, err)
		require.NotEmpty(t, fd.Records, "local read at %d", off)
		out = append(out, fd.Records...)
		off = nextOffsetAfter(t, fd.Records)
	}
	return out
}

// nextOffsetAfter returns the offset after the last batch of records.
func nextOffsetAfter(t *testing.T, records []byte) int64 {
	t.Helper()
	next := int64(-1)
	for len(records) > 0 {
		b, err := record.ReadBatch(records)
		require.NoError(t, err)
		next = b.NextOffset()
		records = records[b.Size():]
	}
	return next
}

// remoteTierID is a partition's name in the remote tier.
func remoteTierID(t *testing.T, s *Server, topic string, partition int32) remote.TopicIDPartition {
	t.Helper()
	tp, ok := s.topics.get(topic)
	require.True(t, ok)
	return remote.TopicIDPartition{TopicID: tp.id, Topic: topic, Partition: partition}
}

// waitAllTiered polls until every rolled segment of each partition is in
// remote storage and deleted locally: the local log start is the log end
// (only an empty active segment is left), the highest offset in remote
// storage is just below it, and the log start stayed at 0. With
// runRetention it runs local retention itself at each poll. The remote
// metadata must then hold finished segments covering [0, log end)
// without a gap.
func waitAllTiered(ctx context.Context, t *testing.T, s *Server, topic string, partitions int32, runRetention bool) {
	t.Helper()
	for p := range partitions {
		l := testLog(t, s, topic, p)
		for {
			if runRetention {
				require.NoError(t, s.mgr.RunTask(logmanager.TaskRetention))
			}
			leo := l.LogEndOffset()
			if leo > 0 && l.LocalLogStartOffset() == leo && l.HighestOffsetInRemoteStorage() == leo-1 {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("partition %d not tiered: log start %d, local log start %d, highest remote %d, log end %d",
					p, l.LogStartOffset(), l.LocalLogStartOffset(), l.HighestOffsetInRemoteStorage(), leo)
			case <-time.After(5 * time.Millisecond):
			}
		}
		require.Zero(t, l.LogStartOffset(), "partition %d: the log start stays at the remote tier's start", p)
		checkRemoteCovers(t, s, remoteTierID(t, s, topic, p), l.LocalLogStartOffset())
	}
}

// checkRemoteCovers checks that the remote metadata holds finished
// segments covering [0, end) without a gap, several of them (a copy in
// flight, COPY_SEGMENT_STARTED, may follow them).
func checkRemoteCovers(t *testing.T, s *Server, tp remote.TopicIDPartition, end int64) {
	t.Helper()
	segs, err := s.tier.meta.ListSegments(tp)
	require.NoError(t, err)
	next, finished := int64(0), 0
	for _, seg := range segs {
		if seg.State == remote.CopySegmentStarted && seg.StartOffset == next {
			continue // being copied now
		}
		require.Equal(t, remote.CopySegmentFinished, seg.State, "%s [%d, %d]", tp, seg.StartOffset, seg.EndOffset)
		require.Equal(t, next, seg.StartOffset, "%s: remote segments contiguous", tp)
		next = seg.EndOffset + 1
		finished++
	}
	require.GreaterOrEqual(t, next, end, "%s: remote segments reach the local log start", tp)
	require.Greater(t, finished, 2, "%s: several rolled segments copied", tp)
}

// finishedSegments counts tp's segments in state COPY_SEGMENT_FINISHED.
func finishedSegments(t *testing.T, s *Server, tp remote.TopicIDPartition) int {
	t.Helper()
	segs, err := s.tier.meta.ListSegments(tp)
	require.NoError(t, err)
	n := 0
	for _, seg := range segs {
		if seg.State == remote.CopySegmentFinished {
			n++
		}
	}
	return n
}

// fetchRaw fetches partition p of topic from offset on b, as the
// consumer's isolation level says, and returns the partition's answer.
func fetchRaw(ctx context.Context, t *testing.T, b *kgo.Broker, topic string, p int32, offset int64, isolation int8) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxBytes, req.IsolationLevel = -1, 1<<30, isolation
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, offset, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, b)
	require.NoError(t, err)
	require.Len(t, resp.Topics, 1)
	require.Len(t, resp.Topics[0].Partitions, 1)
	return resp.Topics[0].Partitions[0]
}

// fetchAllRaw fetches partition p from 0 to end and returns the batches
// concatenated, and the aborted transactions the answers listed.
func fetchAllRaw(ctx context.Context, t *testing.T, b *kgo.Broker, topic string, p int32, end int64, isolation int8) ([]byte, []kmsg.FetchResponseTopicPartitionAbortedTransaction) {
	t.Helper()
	var out []byte
	var aborted []kmsg.FetchResponseTopicPartitionAbortedTransaction
	for off := int64(0); off < end; {
		r := fetchRaw(ctx, t, b, topic, p, off, isolation)
		require.Zero(t, r.ErrorCode, "fetch %s-%d at %d", topic, p, off)
		require.Zero(t, r.LogStartOffset, "fetch %s-%d at %d: log start", topic, p, off)
		require.NotEmpty(t, r.RecordBatches, "fetch %s-%d at %d", topic, p, off)
		out = append(out, r.RecordBatches...)
		aborted = append(aborted, r.AbortedTransactions...)
		off = nextOffsetAfter(t, r.RecordBatches)
	}
	return out, aborted
}

// listOffsetsRaw answers ListOffsets for each timestamp at partition p.
func listOffsetsRaw(ctx context.Context, t *testing.T, b *kgo.Broker, topic string, p int32, version int16, ts ...int64) []int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version, req.ReplicaID = version, -1
	var out []int64
	for _, x := range ts {
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = p, x
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = []kmsg.ListOffsetsRequestTopic{rt}
		resp, err := req.RequestWith(ctx, b)
		require.NoError(t, err)
		require.Zero(t, resp.Topics[0].Partitions[0].ErrorCode, "ListOffsets(%d)", x)
		out = append(out, resp.Topics[0].Partitions[0].Offset)
	}
	return out
}

// TestTieredFetchBelowLocalLogStart: kgo produces past many segment rolls;
// the remote-log manager copies the rolled segments and local retention
// deletes them once copied, until every record is in remote storage only,
// the log start staying at 0. A fetch from 0 then returns, from remote
// storage, the very batches the local log held; ListOffsets answers
// earliest 0, earliest-local and latest-tiered from the tiers; kgo
// consumes every record from 0 byte for byte (read_uncommitted and
// read_committed); and after a clean restart the remote tier is still
// there and serves the same records.
func TestTieredFetchBelowLocalLogStart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	opts := tieredOptions(dir, log.RetentionNone, -1)
	s := startTiered(t, opts)
	prod := tieredProducer(t, s)
	createTopic(ctx, t, prod, testTopic)
	acked := produceAll(ctx, t, prod, testTopic, 2000)
	prod.Close()
	local := map[int32][]byte{}
	for p := range int32(testPartitions) {
		local[p] = readLocal(t, testLog(t, s, testTopic, p))
	}

	waitAllTiered(ctx, t, s, testTopic, testPartitions, true)
	_, b := rawBroker(ctx, t, s)
	for p := range int32(testPartitions) {
		l := testLog(t, s, testTopic, p)
		_, err := l.Read(nil, 0, 1<<20, log.IsolationHighWatermark, true)
		require.ErrorIs(t, err, log.ErrOffsetMovedToTieredStorage, "partition %d: offset 0 is not local", p)
		for _, iso := range []int8{0, 1} {
			got, aborted := fetchAllRaw(ctx, t, b, testTopic, p, l.HighWatermark(), iso)
			require.True(t, bytes.Equal(local[p], got), "partition %d isolation %d: remote batches differ from the local ones", p, iso)
			require.Empty(t, aborted)
		}
		require.Equal(t, []int64{0, l.LocalLogStartOffset(), l.LogEndOffset() - 1},
			listOffsetsRaw(ctx, t, b, testTopic, p, 9, log.ListEarliest, log.ListEarliestLocal, log.ListLatestTiered))
	}
	reads := s.tier.mgr.Metrics().RemoteReads
	consumeAll(ctx, t, s, testTopic, acked)
	require.Greater(t, s.tier.mgr.Metrics().RemoteReads, reads, "kgo was served from remote storage")
	consumeAll(ctx, t, s, testTopic, acked, kgo.FetchIsolationLevel(kgo.ReadCommitted()))

	require.NoError(t, s.Close())
	s = startTiered(t, opts)
	for p := range int32(testPartitions) {
		l := testLog(t, s, testTopic, p)
		require.Zero(t, l.LogStartOffset(), "partition %d", p)
		require.Equal(t, l.LogEndOffset(), l.LocalLogStartOffset(), "partition %d", p)
		checkRemoteCovers(t, s, remoteTierID(t, s, testTopic, p), l.LocalLogStartOffset())
	}
	reads = s.tier.mgr.Metrics().RemoteReads
	consumeAll(ctx, t, s, testTopic, acked)
	require.Greater(t, s.tier.mgr.Metrics().RemoteReads, reads, "kgo was served from remote storage after the restart")
}

// TestTieredKcat: with local retention and the copy task both running in
// the background (local.retention.bytes one segment), kcat (librdkafka)
// consumes from the beginning a topic whose oldest segments are in remote
// storage only: every message, in order, with its key and value.
func TestTieredKcat(t *testing.T) {
	bin := kcatPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := startTiered(t, tieredOptions(t.TempDir(), tieredSegmentBytes, 10*time.Millisecond))
	const topic, n = "kcat-tiered", 2000
	prod := tieredProducer(t, s, kgo.AllowAutoTopicCreation())
	var want strings.Builder
	done := make(chan error, n)
	for i := range n {
		k, v := fmt.Sprintf("k%d", i), fmt.Sprintf("v%05d-%s", i, strings.Repeat("x", i%80))
		fmt.Fprintf(&want, "%d:%s:%s\n", i, k, v)
		prod.Produce(ctx, &kgo.Record{Topic: topic, Partition: 0, Key: []byte(k), Value: []byte(v)},
			func(_ *kgo.Record, err error) { done <- err })
	}
	for range n {
		require.NoError(t, <-done)
	}
	l := testLog(t, s, topic, 0)
	tp := remoteTierID(t, s, topic, 0)
	// Wait for several segments to be copied, not just the first one:
	// the copier and retention run on their own clock, so the first
	// local deletion can come before the third copy finishes.
	for l.LocalLogStartOffset() == 0 || finishedSegments(t, s, tp) <= 2 {
		select {
		case <-ctx.Done():
			t.Fatalf("no segment tiered and deleted locally: highest remote %d, log end %d", l.HighestOffsetInRemoteStorage(), l.LogEndOffset())
		case <-time.After(5 * time.Millisecond):
		}
	}
	require.Zero(t, l.LogStartOffset())
	checkRemoteCovers(t, s, tp, l.LocalLogStartOffset())
	reads := s.tier.mgr.Metrics().RemoteReads
	out := kcat(t, bin, s, nil, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q", "-f", "%o:%k:%s\n")
	require.Equal(t, want.String(), string(out))
	require.Greater(t, s.tier.mgr.Metrics().RemoteReads, reads, "kcat was served from remote storage")
}

// appendTxnLog writes to l, as its leader, n plain batches of one padded
// record each; after every tenth a transaction of producer pid (two
// batches, then its marker: abort for odd transactions, commit for even
// ones). It returns the values a read_committed consumer must read, in
// order, and the first offsets of the aborted transactions.
func appendTxnLog(t *testing.T, l *log.UnifiedLog, n int, pid int64) (committed []string, aborted []int64) {
	t.Helper()
	now := time.Now().UnixMilli()
	pad := strings.Repeat("p", 300)
	seq, txn := int32(0), 0
	for i := range n {
		b := record.NewBuilder(record.DefaultBuilderOptions())
		v := fmt.Sprintf("plain-%04d-%s", i, pad)
		b.Add(now, nil, []byte(v))
		_, err := l.AppendBuilderAsLeader(b, leaderEpoch, log.OriginClient)
		require.NoError(t, err)
		committed = append(committed, v)
		if i%10 != 9 {
			continue
		}
		abort := txn%2 == 1
		var vals []string
		first := int64(-1)
		for range 2 {
			o := record.DefaultBuilderOptions()
			o.ProducerID, o.ProducerEpoch, o.BaseSequence, o.Transactional = pid, 0, seq, true
			b := record.NewBuilder(o)
			v := fmt.Sprintf("txn-%d-seq-%d-%s", txn, seq, pad)
			b.Add(now, nil, []byte(v))
			info, err := l.AppendBuilderAsLeader(b, leaderEpoch, log.OriginClient)
			require.NoError(t, err)
			if first < 0 {
				first = info.FirstOffset
			}
			vals = append(vals, v)
			seq++
		}
		ctl := record.ControlCommit
		if abort {
			ctl = record.ControlAbort
			aborted = append(aborted, first)
		} else {
			committed = append(committed, vals...)
		}
		o := record.DefaultBuilderOptions()
		o.ProducerID, o.ProducerEpoch = pid, 0
		marker, err := record.AppendEndTxnBatch(nil, o, now, ctl, 0)
		require.NoError(t, err)
		_, err = l.AppendAsLeader(marker, leaderEpoch, log.OriginCoordinator)
		require.NoError(t, err)
		txn++
	}
	_, err := l.MaybeIncrementHighWatermark(l.LogEndOffset())
	require.NoError(t, err)
	return committed, aborted
}

// TestTieredReadCommitted: a partition with committed and aborted
// transactions is tiered until it is in remote storage only. A
// read_committed fetch from 0 returns the local log's batches from remote
// storage with the aborted transactions of the remote transaction indexes
// (each aborted transaction, and no other), and kgo reading committed
// consumes the plain and committed records only, in order.
func TestTieredReadCommitted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := startTiered(t, tieredOptions(t.TempDir(), log.RetentionNone, -1))
	const topic, pid = "txn-tiered", 4242
	_, _, err := s.topics.create(topic, 1)
	require.NoError(t, err)
	l := testLog(t, s, topic, 0)
	s.maybeRegisterTiered(topic, mustTopic(t, s, topic), 0, l)
	committed, aborted := appendTxnLog(t, l, 120, pid)
	require.NotEmpty(t, aborted)
	local := readLocal(t, l)

	waitAllTiered(ctx, t, s, topic, 1, true)
	_, b := rawBroker(ctx, t, s)
	got, abortedGot := fetchAllRaw(ctx, t, b, topic, 0, l.HighWatermark(), 1)
	require.True(t, bytes.Equal(local, got), "remote batches differ from the local ones")
	firsts := map[int64]bool{}
	for _, a := range abortedGot {
		require.Equal(t, int64(pid), a.ProducerID)
		firsts[a.FirstOffset] = true
	}
	want := map[int64]bool{}
	for _, f := range aborted {
		want[f] = true
	}
	require.Equal(t, want, firsts, "aborted transactions listed by the remote reads")
	_, abortedUncommitted := fetchAllRaw(ctx, t, b, topic, 0, l.HighWatermark(), 0)
	require.Empty(t, abortedUncommitted, "read_uncommitted lists no aborted transaction")

	cl := newClient(t, s, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(200*time.Millisecond))
	var values []string
	for len(values) < len(committed) {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "consumed %d of %d", len(values), len(committed))
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s-%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) { values = append(values, string(r.Value)) })
	}
	require.Equal(t, committed, values)
}

func mustTopic(t *testing.T, s *Server, name string) topic {
	t.Helper()
	tp, ok := s.topics.get(name)
	require.True(t, ok)
	return tp
}

// TestRemoteDisabled: with -remote=false the logs are local only and no
// remote store or metadata is created.
func TestRemoteDisabled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dir := t.TempDir()
	opts := tieredOptions(dir, log.RetentionNone, -1)
	opts.RemoteDisabled = true
	s := startTiered(t, opts)
	require.Nil(t, s.tier)
	prod := tieredProducer(t, s)
	createTopic(ctx, t, prod, testTopic)
	acked := produceAll(ctx, t, prod, testTopic, 200)
	require.False(t, testLog(t, s, testTopic, 0).RemoteStorageEnabled())
	consumeAll(ctx, t, s, testTopic, acked)
	require.NoError(t, s.Close())
	for _, name := range []string{"remote", "remote-metadata"} {
		_, err := os.Stat(filepath.Join(dir, name))
		require.ErrorIs(t, err, os.ErrNotExist, name)
	}
}

// TestTieredListOffsetsByTimestamp: once a partition is in remote storage
// only, ListOffsets by timestamp (v1 and v9) finds the first record at or
// after the timestamp in the remote tier; kgo starting at a timestamp
// consumes from there.
func TestTieredListOffsetsByTimestamp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := startTiered(t, tieredOptions(t.TempDir(), log.RetentionNone, -1))
	const topic, n = "time-tiered", 600
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	prod := tieredProducer(t, s, kgo.AllowAutoTopicCreation())
	for i := range n {
		r := &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "v%04d-%s", i, strings.Repeat("t", 100)),
			Timestamp: base.Add(time.Duration(i) * 10 * time.Millisecond)}
		require.NoError(t, prod.ProduceSync(ctx, r).FirstErr())
	}
	waitAllTiered(ctx, t, s, topic, 1, true)
	_, b := rawBroker(ctx, t, s)
	for _, i := range []int{0, 1, 17, 300, n - 1} {
		ts := base.Add(time.Duration(i)*10*time.Millisecond - 5*time.Millisecond).UnixMilli()
		for _, v := range []int16{1, 9} {
			require.Equal(t, []int64{int64(i)}, listOffsetsRaw(ctx, t, b, topic, 0, v, ts), "ListOffsets v%d (record %d)", v, i)
		}
	}
	past := base.Add(n * 10 * time.Millisecond).UnixMilli()
	require.Equal(t, []int64{-1}, listOffsetsRaw(ctx, t, b, topic, 0, 9, past), "no record at or after the last")

	cl := newClient(t, s, kgo.ConsumeTopics(topic), kgo.FetchMaxWait(200*time.Millisecond),
		kgo.ConsumeResetOffset(kgo.NewOffset().AfterMilli(base.Add(2995*time.Millisecond).UnixMilli())))
	fs := cl.PollFetches(ctx)
	require.NoError(t, fs.Err())
	first := fs.Records()[0]
	require.Equal(t, int64(300), first.Offset)
	require.Equal(t, fmt.Sprintf("v%04d-%s", 300, strings.Repeat("t", 100)), string(first.Value))
}

// TestTieredFetchErrors: remote read failures are answered with the
// Kafka error of the library's typed error (kafkaerr) and leave the log
// directory online: a flipped byte in a remote data object is
// CORRUPT_MESSAGE, a remote store that lost the objects
// KAFKA_STORAGE_ERROR; reads at or above the local log start still work.
func TestTieredFetchErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	s := startTiered(t, tieredOptions(dir, log.RetentionNone, -1))
	prod := tieredProducer(t, s, kgo.AllowAutoTopicCreation())
	const topic = "broken-tier"
	for i := range 300 {
		require.NoError(t, prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "%04d-%s", i, strings.Repeat("b", 200))}).FirstErr())
	}
	waitAllTiered(ctx, t, s, topic, 1, true)
	l := testLog(t, s, topic, 0)
	_, b := rawBroker(ctx, t, s)

	// The largest objects are segment data.
	var largest string
	var size int64
	require.NoError(t, filepath.Walk(filepath.Join(dir, "remote"), func(p string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() && info.Size() > size {
			largest, size = p, info.Size()
		}
		return err
	}))
	require.NotEmpty(t, largest)
	data, err := os.ReadFile(largest)
	require.NoError(t, err)
	data[len(data)/2] ^= 0x40
	require.NoError(t, os.WriteFile(largest, data, 0o644))
	corrupt := false
	for off := int64(0); off < l.LocalLogStartOffset() && !corrupt; off += 10 {
		r := fetchRaw(ctx, t, b, topic, 0, off, 0)
		corrupt = r.ErrorCode == kerr.CorruptMessage.Code
		if !corrupt {
			require.Zero(t, r.ErrorCode, "fetch at %d", off)
		} else {
			require.Empty(t, r.RecordBatches, "no record of a corrupt read")
		}
	}
	require.True(t, corrupt, "a fetch over the damaged object answered CORRUPT_MESSAGE")
	require.Positive(t, s.tier.mgr.Metrics().RemoteReadCorruptions)

	require.NoError(t, os.RemoveAll(filepath.Join(dir, "remote")))
	require.Equal(t, kerr.KafkaStorageError.Code, fetchRaw(ctx, t, b, topic, 0, 0, 0).ErrorCode)
	require.Empty(t, s.mgr.OfflineDirs(), "remote failures leave the log directory online")
	require.NoError(t, prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("after")}).FirstErr())
	r := fetchRaw(ctx, t, b, topic, 0, l.LocalLogStartOffset(), 0)
	require.Zero(t, r.ErrorCode)
	require.NotEmpty(t, r.RecordBatches)
}
