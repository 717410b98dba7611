package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/logmanager"
	"github.com/tierlog/tierlog/remote"
)

const (
	testTopic      = "orders"
	testPartitions = 3
)

func startBroker(t *testing.T, dir string) *Server {
	t.Helper()
	return startBrokerWith(t, dir, 0)
}

// startBrokerWith starts a broker whose auto-created topics have
// partitions partitions (0: the default, 1).
func startBrokerWith(t *testing.T, dir string, partitions int32) *Server {
	t.Helper()
	s, err := Start(Options{
		Addr:       "127.0.0.1:0",
		Dir:        dir,
		Partitions: partitions,
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func newClient(t *testing.T, s *Server, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return newClientAt(t, s.Addr().String(), opts...)
}

// newClientAt is newClient for a broker at addr (host:port).
func newClientAt(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

// createTopic creates the test topic with CreateTopics (the broker's
// default is one partition).
func createTopic(ctx context.Context, t *testing.T, cl *kgo.Client, topic string) {
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, testPartitions, 1
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Len(t, resp.Topics, 1)
	require.Zero(t, resp.Topics[0].ErrorCode)
	require.Equal(t, int32(testPartitions), resp.Topics[0].NumPartitions)
}

// key identifies a record in the log.
type key struct {
	partition int32
	offset    int64
}

// testRecord builds record i: a key, a value of varying size, and
// headers (one with a nil value).
func testRecord(topic string, i int) *kgo.Record {
	v := bytes.Repeat([]byte{byte(i)}, i%300)
	v = append(v, fmt.Sprintf("value-%d", i)...)
	return &kgo.Record{
		Topic: topic,
		Key:   fmt.Appendf(nil, "key-%d", i%97),
		Value: v,
		Headers: []kgo.RecordHeader{
			{Key: "seq", Value: fmt.Appendf(nil, "%d", i)},
			{Key: "empty", Value: nil},
		},
	}
}

// produceAll produces n records with idempotence (kgo's default) and
// acks=all, and returns them by their acknowledged position.
func produceAll(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, n int) map[key]*kgo.Record {
	t.Helper()
	acked := make(map[key]*kgo.Record, n)
	done := make(chan error, n)
	for i := range n {
		cl.Produce(ctx, testRecord(topic, i), func(r *kgo.Record, err error) {
			if err == nil {
				// Callbacks run one at a time per partition, and in
				// order across the client's single callback goroutine.
				acked[key{r.Partition, r.Offset}] = r
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

// consumeAll reads the topic from the start until it has want records or
// ctx ends, and checks what it read against acked: the same set,
// byte-identical, no duplicate, each partition in offset order.
func consumeAll(ctx context.Context, t *testing.T, s *Server, topic string, acked map[key]*kgo.Record, opts ...kgo.Opt) {
	t.Helper()
	consumeAllAt(ctx, t, s.Addr().String(), topic, acked, opts...)
}

// consumeAllAt is consumeAll for a broker at addr (host:port).
func consumeAllAt(ctx context.Context, t *testing.T, addr string, topic string, acked map[key]*kgo.Record, opts ...kgo.Opt) {
	t.Helper()
	cl := newClientAt(t, addr, append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.FetchMaxWait(200 * time.Millisecond)}, opts...)...)
	seen := make(map[key]bool, len(acked))
	last := map[int32]int64{}
	for len(seen) < len(acked) {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "consumed %d of %d records", len(seen), len(acked))
		fs.EachError(func(topic string, p int32, err error) {
			t.Fatalf("fetch %s-%d: %v", topic, p, err)
		})
		fs.EachRecord(func(r *kgo.Record) {
			k := key{r.Partition, r.Offset}
			want, ok := acked[k]
			require.True(t, ok, "consumed %v was never acknowledged", k)
			require.False(t, seen[k], "consumed %v twice", k)
			seen[k] = true
			if prev, ok := last[r.Partition]; ok {
				require.Greater(t, r.Offset, prev, "partition %d out of order", r.Partition)
			}
			last[r.Partition] = r.Offset
			require.Equal(t, want.Key, r.Key)
			require.Equal(t, want.Value, r.Value)
			require.Equal(t, len(want.Headers), len(r.Headers))
			for i, h := range want.Headers {
				require.Equal(t, h.Key, r.Headers[i].Key)
				require.True(t, bytes.Equal(h.Value, r.Headers[i].Value), "header %q", h.Key)
			}
			require.Equal(t, want.Timestamp.UnixMilli(), r.Timestamp.UnixMilli())
		})
	}
	require.Len(t, seen, len(acked))
}

// checkHighWatermarks checks that each partition's high watermark and
// log end, read from the log manager, are the end of the acknowledged
// records.
func checkHighWatermarks(t *testing.T, s *Server, topic string, acked map[key]*kgo.Record) {
	t.Helper()
	end := map[int32]int64{}
	for k := range acked {
		end[k.partition] = max(end[k.partition], k.offset+1)
	}
	for p := range int32(testPartitions) {
		l := testLog(t, s, topic, p)
		require.Equal(t, end[p], l.HighWatermark(), "partition %d", p)
		require.Equal(t, end[p], l.LogEndOffset(), "partition %d", p)
	}
}

// TestKgoProduceConsume: kgo produces 10,000 records (keys, values,
// headers; idempotent, acks=all, kgo's default snappy compression) to a
// topic of 3 partitions and consumes them back.
func TestKgoProduceConsume(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := startBroker(t, t.TempDir())
	prod := newClient(t, s, kgo.RequiredAcks(kgo.AllISRAcks()))
	createTopic(ctx, t, prod, testTopic)
	acked := produceAll(ctx, t, prod, testTopic, 10_000)
	checkHighWatermarks(t, s, testTopic, acked)
	consumeAll(ctx, t, s, testTopic, acked)
}

// TestKgoRestart: the same with a clean restart of the broker between
// produce and consume: every record is there, the high watermark and the
// topic id survive, and producer ids do not repeat. The consumer reads
// committed records only.
func TestKgoRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	s := startBroker(t, dir)
	prod := newClient(t, s, kgo.RequiredAcks(kgo.AllISRAcks()))
	createTopic(ctx, t, prod, testTopic)
	acked := produceAll(ctx, t, prod, testTopic, 10_000)
	before, _ := s.topics.get(testTopic)
	pid1 := initProducerID(ctx, t, prod)
	prod.Close()
	require.NoError(t, s.Close())

	s = startBroker(t, dir)
	after, ok := s.topics.get(testTopic)
	require.True(t, ok)
	require.Equal(t, before, after, "topic id and partition count survive")
	checkHighWatermarks(t, s, testTopic, acked)
	pid2 := initProducerID(ctx, t, newClient(t, s))
	require.Greater(t, pid2, pid1, "producer ids never repeat across restarts")
	// read_committed: the last stable offset (the high watermark, with no
	// transactions) bounds the reads.
	consumeAll(ctx, t, s, testTopic, acked, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
}

func initProducerID(ctx context.Context, t *testing.T, cl *kgo.Client) int64 {
	t.Helper()
	resp, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Zero(t, resp.ErrorCode)
	return resp.ProducerID
}

// testLog returns a partition's log from the broker's log manager.
func testLog(t *testing.T, s *Server, topic string, partition int32) *log.UnifiedLog {
	t.Helper()
	tp, ok := s.topics.get(topic)
	require.True(t, ok)
	l, err := s.mgr.Get(remote.TopicIDPartition{TopicID: tp.id, Topic: topic, Partition: partition})
	require.NoError(t, err)
	return l
}

// TestRunStopsOnSignal: run serves until a signal, then closes the log
// manager cleanly (its clean-shutdown marker is in the log directory).
func TestRunStopsOnSignal(t *testing.T) {
	dir := t.TempDir()
	stop := make(chan os.Signal, 1)
	stop <- syscall.SIGTERM
	require.NoError(t, run(Options{Addr: "127.0.0.1:0", Dir: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, stop))
	_, err := os.Stat(filepath.Join(dir, "logs", logmanager.CleanShutdownFile))
	require.NoError(t, err)
}
