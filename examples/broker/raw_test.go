package main

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
)

// rawBroker returns a handle that sends requests to the broker as they
// are (kgo's Client.Request would route and split them).
func rawBroker(ctx context.Context, t *testing.T, s *Server) (*kgo.Client, *kgo.Broker) {
	t.Helper()
	cl := newClient(t, s)
	require.NoError(t, cl.Ping(ctx))
	return cl, cl.Broker(nodeID)
}

// v1Message is a magic v1 message set of one record (Kafka's
// LegacyRecord layout: offset, size, crc, magic, attributes, timestamp,
// key, value).
func v1Message() []byte {
	body := []byte{1, 0} // magic 1, attributes
	body = binary.BigEndian.AppendUint64(body, uint64(time.Now().UnixMilli()))
	body = binary.BigEndian.AppendUint32(body, 0xffffffff) // null key
	body = binary.BigEndian.AppendUint32(body, 1)
	body = append(body, 'v')
	msg := binary.BigEndian.AppendUint32(nil, crc32.ChecksumIEEE(body))
	msg = append(msg, body...)
	out := binary.BigEndian.AppendUint64(nil, 0)
	out = binary.BigEndian.AppendUint32(out, uint32(len(msg)))
	return append(out, msg...)
}

// TestProduceRefusesOldMagic: a magic v1 message set is refused with
// UNSUPPORTED_VERSION before it reaches the log.
func TestProduceRefusesOldMagic(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := startBroker(t, t.TempDir())
	cl, b := rawBroker(ctx, t, s)
	createTopic(ctx, t, cl, testTopic)

	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = testTopic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = v1Message()
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, b)
	require.NoError(t, err)
	p := resp.Topics[0].Partitions[0]
	require.Equal(t, kerr.UnsupportedVersion.Code, p.ErrorCode)
	require.Equal(t, int64(-1), p.BaseOffset)
	require.Equal(t, int64(0), testLog(t, s, testTopic, 0).LogEndOffset())
}

// TestMetadataInvalidTopic: a topic name the log manager refuses is
// answered INVALID_TOPIC_EXCEPTION and does not exist afterwards.
func TestMetadataInvalidTopic(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := startBroker(t, t.TempDir())
	_, b := rawBroker(ctx, t, s)

	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("bad/name")
	req.Topics = append(req.Topics, rt)
	req.AllowAutoTopicCreation = true
	resp, err := req.RequestWith(ctx, b)
	require.NoError(t, err)
	require.Equal(t, kerr.InvalidTopicException.Code, resp.Topics[0].ErrorCode)

	all := kmsg.NewPtrMetadataRequest() // null topics: every topic
	resp, err = all.RequestWith(ctx, b)
	require.NoError(t, err)
	require.Empty(t, resp.Topics)
}

// produceAt produces one record per timestamp to partition 0 of the test
// topic, synchronously.
func produceAt(ctx context.Context, t *testing.T, cl *kgo.Client, ms ...int64) {
	t.Helper()
	for _, m := range ms {
		r := &kgo.Record{Topic: testTopic, Partition: 0, Value: []byte("x"), Timestamp: time.UnixMilli(m)}
		require.NoError(t, cl.ProduceSync(ctx, r).FirstErr())
	}
}

// TestListOffsets: earliest, latest, MAX_TIMESTAMP and a timestamp.
func TestListOffsets(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := startBroker(t, t.TempDir())
	cl := newClient(t, s, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	createTopic(ctx, t, cl, testTopic)
	produceAt(ctx, t, cl, 1000, 3000, 2000, 3000)
	_, b := rawBroker(ctx, t, s)

	for _, c := range []struct {
		name       string
		ts         int64
		wantOffset int64
		wantTS     int64
	}{
		{"earliest", log.ListEarliest, 0, -1},
		{"latest", log.ListLatest, 4, -1},
		{"max timestamp", log.ListMaxTimestamp, 1, 3000},
		{"timestamp 1500", 1500, 1, 3000},
		{"timestamp 2000", 2000, 1, 3000},
		{"timestamp 3001", 3001, -1, -1},
	} {
		req := kmsg.NewPtrListOffsetsRequest()
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = testTopic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = c.ts
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, b)
		require.NoError(t, err, c.name)
		p := resp.Topics[0].Partitions[0]
		require.Zero(t, p.ErrorCode, c.name)
		require.Equal(t, c.wantOffset, p.Offset, c.name)
		require.Equal(t, c.wantTS, p.Timestamp, c.name)
	}
}

// fetchRequest is a read_uncommitted fetch of partition 0 at offset.
func fetchRequest(offset int64, maxWait time.Duration) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = int32(maxWait/time.Millisecond), 1, 1<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = testTopic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes = offset, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// TestFetchLongPoll: a fetch at the log end waits (WaitFor) and returns
// as soon as a record is committed; one with nothing to read returns
// after MaxWaitMillis with an empty, non-null record set; the broker's
// shutdown answers a waiting fetch at once.
func TestFetchLongPoll(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := startBroker(t, t.TempDir())
	cl := newClient(t, s, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	createTopic(ctx, t, cl, testTopic)
	_, b := rawBroker(ctx, t, s)

	start := time.Now()
	resp, err := fetchRequest(0, 300*time.Millisecond).RequestWith(ctx, b)
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond, "waited MaxWaitMillis")
	p := resp.Topics[0].Partitions[0]
	require.Zero(t, p.ErrorCode)
	require.NotNil(t, p.RecordBatches, "never a null record set")
	require.Empty(t, p.RecordBatches)

	done := make(chan *kmsg.FetchResponse, 1)
	go func() {
		resp, err := fetchRequest(0, 10*time.Second).RequestWith(ctx, b)
		if err != nil {
			resp = nil
		}
		done <- resp
	}()
	time.Sleep(100 * time.Millisecond) // the fetch is waiting
	start = time.Now()
	produceAt(ctx, t, cl, 1000)
	select {
	case resp := <-done:
		require.NotNil(t, resp)
		p := resp.Topics[0].Partitions[0]
		require.Zero(t, p.ErrorCode)
		require.NotEmpty(t, p.RecordBatches)
		require.Equal(t, int64(1), p.HighWatermark)
		require.Less(t, time.Since(start), 5*time.Second, "woken by the append, not by MaxWaitMillis")
	case <-ctx.Done():
		t.Fatal("the waiting fetch never returned")
	}

	go func() {
		resp, err := fetchRequest(1, 10*time.Second).RequestWith(ctx, b)
		if err != nil {
			resp = nil
		}
		done <- resp
	}()
	time.Sleep(100 * time.Millisecond)
	start = time.Now()
	require.NoError(t, s.Close())
	require.Less(t, time.Since(start), 5*time.Second, "Close ends the long poll")
	select {
	case resp := <-done:
		require.NotNil(t, resp, "the fetch in flight is answered before the connection closes")
		require.Zero(t, resp.Topics[0].Partitions[0].ErrorCode)
	case <-ctx.Done():
		t.Fatal("the waiting fetch never returned")
	}
}

// produceRaw sends one partition's records with acks=-1 and returns the
// partition's answer.
func produceRaw(ctx context.Context, t *testing.T, b *kgo.Broker, topic string, records []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, b)
	require.NoError(t, err)
	return resp.Topics[0].Partitions[0]
}

// TestProduceIdempotentRetry: a batch of an idempotent producer sent
// twice (a retry after a lost answer) is answered twice with the same
// base offset and stored once (the log's producer state); a sequence gap
// is OUT_OF_ORDER_SEQUENCE_NUMBER; an unknown topic is
// UNKNOWN_TOPIC_OR_PARTITION.
func TestProduceIdempotentRetry(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := startBroker(t, t.TempDir())
	cl, b := rawBroker(ctx, t, s)
	createTopic(ctx, t, cl, testTopic)
	pid := initProducerID(ctx, t, cl)

	batch := func(seq int32, n int) []byte {
		opts := record.DefaultBuilderOptions()
		opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = pid, 0, seq
		bl := record.NewBuilder(opts)
		for range n {
			bl.Add(time.Now().UnixMilli(), nil, []byte("v"))
		}
		out, err := bl.Build()
		require.NoError(t, err)
		return out
	}
	require.Equal(t, int64(0), produceRaw(ctx, t, b, testTopic, batch(0, 3)).BaseOffset)
	second := batch(3, 2)
	for range 2 {
		p := produceRaw(ctx, t, b, testTopic, second)
		require.Zero(t, p.ErrorCode)
		require.Equal(t, int64(3), p.BaseOffset, "the retry gets the first copy's offset")
	}
	l := testLog(t, s, testTopic, 0)
	require.Equal(t, int64(5), l.LogEndOffset(), "stored once")
	require.Equal(t, int64(5), l.HighWatermark())

	p := produceRaw(ctx, t, b, testTopic, batch(9, 1))
	require.Equal(t, kerr.OutOfOrderSequenceNumber.Code, p.ErrorCode)
	require.Equal(t, int64(5), l.LogEndOffset())

	p = produceRaw(ctx, t, b, "no-such-topic", batch(5, 1))
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, p.ErrorCode)
}

// TestProduceAcksZero: acks=0 gets no answer (kgo would time out waiting
// for one otherwise), and the records are appended and committed.
func TestProduceAcksZero(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := startBroker(t, t.TempDir())
	cl := newClient(t, s, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(ctx, t, cl, testTopic)
	for i := range 100 {
		require.NoError(t, cl.ProduceSync(ctx, testRecord(testTopic, i)).FirstErr())
	}
	l := testLog(t, s, testTopic, 0)
	for l.HighWatermark() < 100 {
		require.NoError(t, ctx.Err(), "high watermark %d", l.HighWatermark())
		time.Sleep(10 * time.Millisecond)
	}
	require.Equal(t, int64(100), l.LogEndOffset())
}

// oneBatch is a batch of one record with no producer id.
func oneBatch(t *testing.T) []byte {
	t.Helper()
	bl := record.NewBuilder(record.DefaultBuilderOptions())
	bl.Add(time.Now().UnixMilli(), nil, []byte("v"))
	out, err := bl.Build()
	require.NoError(t, err)
	return out
}

// TestFetchMaxBytes: the first partition returns at least one whole batch
// even above PartitionMaxBytes (so a large batch never stalls a
// consumer), whole batches only, no more than fit; an offset past the
// log end is OFFSET_OUT_OF_RANGE.
func TestFetchMaxBytes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := startBroker(t, t.TempDir())
	cl, b := rawBroker(ctx, t, s)
	createTopic(ctx, t, cl, testTopic)
	one := oneBatch(t)
	for range 3 {
		require.Zero(t, produceRaw(ctx, t, b, testTopic, one).ErrorCode)
	}
	for _, c := range []struct {
		maxBytes    int32
		wantBatches int
	}{
		{1, 1},                            // below one batch: one whole batch
		{int32(len(one)), 1},              // exactly one
		{int32(2*len(one) + 1), 2},        // two and a bit: two
		{int32(10 * len(one)), 3},         // all
		{int32(len(one) + len(one)/2), 1}, // never a partial batch
	} {
		req := fetchRequest(0, 0)
		req.Topics[0].Partitions[0].PartitionMaxBytes = c.maxBytes
		resp, err := req.RequestWith(ctx, b)
		require.NoError(t, err)
		p := resp.Topics[0].Partitions[0]
		require.Zero(t, p.ErrorCode)
		require.Equal(t, c.wantBatches*len(one), len(p.RecordBatches), "PartitionMaxBytes %d", c.maxBytes)
		require.Equal(t, int64(3), p.HighWatermark)
	}

	resp, err := fetchRequest(4, 0).RequestWith(ctx, b)
	require.NoError(t, err)
	require.Equal(t, kerr.OffsetOutOfRange.Code, resp.Topics[0].Partitions[0].ErrorCode)
}

// TestFlushMessages: with FlushMessages 1 (-flush-messages 1) every
// append is fsynced before it is acknowledged: the log's recovery point
// is its log end; without it, nothing is fsynced by count.
func TestFlushMessages(t *testing.T) {
	for _, c := range []struct {
		flush        int64
		wantRecovery int64
	}{{0, 0}, {1, 3}} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := Start(Options{Addr: "127.0.0.1:0", Dir: t.TempDir(), FlushMessages: c.flush,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		cl, b := rawBroker(ctx, t, s)
		createTopic(ctx, t, cl, testTopic)
		for range 3 {
			require.Zero(t, produceRaw(ctx, t, b, testTopic, oneBatch(t)).ErrorCode)
		}
		require.Equal(t, c.wantRecovery, testLog(t, s, testTopic, 0).Metrics().RecoveryPoint, "FlushMessages %d", c.flush)
	}
}
