package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// This file runs three Kafka clients, each with its own protocol code,
// against the broker: franz-go's kgo, IBM's sarama and segmentio's
// kafka-go. Each has one producer and one consumer function below, on a
// client-neutral record (testRec), so that every (writer, reader) pair is
// one subtest of TestClientsCrossRead.

// testRec is a record as every client can write and read it.
type testRec struct {
	partition int32
	offset    int64
	key       []byte // nil: a null key
	value     []byte // nil: a null value (a tombstone)
	headers   []testHeader
	timestamp int64 // CreateTime, Unix milliseconds
}

type testHeader struct {
	key   string
	value []byte // nil: a null header value
}

// The compression codecs, numbered as a batch's attributes number them
// (and as sarama's CompressionCodec and kafka-go's Compression do).
const (
	codecNone int16 = iota
	codecGzip
	codecSnappy
	codecLz4
	codecZstd

	// codecDefault is the client's default: its producer is left as
	// configured out of the box.
	codecDefault int16 = -1
)

var codecNames = []string{"none", "gzip", "snappy", "lz4", "zstd"}

// genRecords builds n records tagged tag (the unique id header is
// tag-i): keys (every 11th null), values of 0 to ~9 KiB (every 13th
// null, every 17th empty), headers (an id, a null value, sometimes
// none besides the id), and CreateTime timestamps in the past, one
// millisecond apart. The value bytes are slices of a pseudo-random text
// seeded by tag, so compression has work to do.
func genRecords(tag string, n int) []testRec {
	seed := uint64(n)
	for _, c := range tag {
		seed = seed*31 + uint64(c)
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	text := make([]byte, 64<<10)
	for j := range text {
		text[j] = byte('a' + rng.IntN(8)) // compressible, not trivially
	}
	base := time.Now().Add(-time.Duration(n) * time.Millisecond).UnixMilli()
	recs := make([]testRec, n)
	for i := range recs {
		r := &recs[i]
		if i%11 != 0 {
			r.key = fmt.Appendf(nil, "key-%d", i%97)
		}
		switch {
		case i%13 == 0:
		case i%17 == 0:
			r.value = []byte{}
		default:
			size := i % 300
			if i%1000 == 1 {
				size = 9000 // a few larger values
			}
			from := rng.IntN(len(text) - size)
			r.value = fmt.Appendf(text[from:from+size:from+size], "|%d", i) // a copy: the capacity ends at size
		}
		r.headers = append(make([]testHeader, 0, 3), testHeader{"id", fmt.Appendf(nil, "%s-%d", tag, i)})
		if i%3 != 0 {
			r.headers = append(r.headers, testHeader{"null", nil}, testHeader{"n", []byte{byte('0' + i%7)}})
		}
		r.timestamp = base + int64(i)
	}
	return recs
}

// withAck is a produced record as its producer's acknowledgement placed it.
func withAck(r testRec, partition int32, offset int64) testRec {
	r.partition, r.offset = partition, offset
	return r
}

// producer produces recs to topic with codec (codecDefault: the client's
// default) and returns them as acknowledged, with their partitions and
// offsets. It fails the test on any error.
type producer func(ctx context.Context, t *testing.T, addr, topic string, codec int16, recs []testRec) []testRec

// consumer reads counts[p] records from each partition p of topic, from
// offset 0, and returns them in the order read.
type consumer func(ctx context.Context, t *testing.T, addr, topic string, counts map[int32]int) []testRec

// kgoCodecs are kgo's compression options by codec number.
var kgoCodecs = []kgo.CompressionCodec{
	kgo.NoCompression(), kgo.GzipCompression(), kgo.SnappyCompression(), kgo.Lz4Compression(), kgo.ZstdCompression(),
}

// produceKgo produces with kgo: idempotent (its default), acks=all,
// asynchronously with a linger, and collects the acknowledgements from
// the produce promises.
func produceKgo(ctx context.Context, t *testing.T, addr, topic string, codec int16, recs []testRec) []testRec {
	t.Helper()
	opts := []kgo.Opt{
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(5 * time.Millisecond),
		kgo.ProducerBatchMaxBytes(1 << 20),
		kgo.MaxBufferedRecords(len(recs) + 1),
	}
	if codec != codecDefault {
		opts = append(opts, kgo.ProducerBatchCompression(kgoCodecs[codec]))
	}
	cl := newClientAt(t, addr, opts...)
	defer cl.Close()
	out := make([]testRec, len(recs))
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	wg.Add(len(recs))
	for i, r := range recs {
		kr := &kgo.Record{Topic: topic, Key: r.key, Value: r.value, Timestamp: time.UnixMilli(r.timestamp)}
		for _, h := range r.headers {
			kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: h.key, Value: h.value})
		}
		cl.Produce(ctx, kr, func(kr *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				firstErr = cmpOr(firstErr, fmt.Errorf("record %d: %w", i, err))
				mu.Unlock()
				return
			}
			out[i] = withAck(r, kr.Partition, kr.Offset) // one promise per index
		})
	}
	wg.Wait()
	require.NoError(t, firstErr)
	return out
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// consumeKgo reads with a kgo consumer assigned the partitions directly,
// from offset 0.
func consumeKgo(ctx context.Context, t *testing.T, addr, topic string, counts map[int32]int) []testRec {
	t.Helper()
	starts := map[int32]kgo.Offset{}
	total := 0
	for p, n := range counts {
		starts[p] = kgo.NewOffset().AtStart()
		total += n
	}
	cl := newClientAt(t, addr,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: starts}),
		kgo.FetchMaxWait(200*time.Millisecond))
	defer cl.Close()
	out := make([]testRec, 0, total)
	for len(out) < total {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "kgo consumed %d of %d records", len(out), total)
		fs.EachError(func(topic string, p int32, err error) {
			t.Fatalf("kgo fetch %s-%d: %v", topic, p, err)
		})
		fs.EachRecord(func(kr *kgo.Record) {
			r := testRec{partition: kr.Partition, offset: kr.Offset, key: kr.Key, value: kr.Value, timestamp: kr.Timestamp.UnixMilli()}
			for _, h := range kr.Headers {
				r.headers = append(r.headers, testHeader{h.Key, h.Value})
			}
			out = append(out, r)
		})
	}
	return out
}

// saramaVersion is the Kafka version sarama is told it talks to, from
// which it picks its request versions (capped by the broker's
// ApiVersions answer): 3.8 is the newest whose picks the broker serves
// as they are: ApiVersions v3, Metadata v11, Produce v10, Fetch v12,
// ListOffsets v6, InitProducerId v4 (versions.go). From 3.9 sarama opens
// with ApiVersions v4 and falls back on the broker's UNSUPPORTED_VERSION
// answer (KIP-511).
var saramaVersion = sarama.V3_8_0_0

func saramaConfig() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = saramaVersion
	cfg.ClientID = "tierlog-test"
	return cfg
}

// saramaBytes keeps a null key or value null: a ByteEncoder of a nil
// slice is not a nil Encoder.
func saramaBytes(b []byte) sarama.Encoder {
	if b == nil {
		return nil
	}
	return sarama.ByteEncoder(b)
}

// produceSarama produces with sarama's AsyncProducer: idempotent
// (which needs one request in flight), acks=all, successes returned with
// their partitions and offsets.
func produceSarama(ctx context.Context, t *testing.T, addr, topic string, codec int16, recs []testRec) []testRec {
	t.Helper()
	cfg := saramaConfig()
	cfg.Producer.Idempotent = true
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Flush.Frequency = 5 * time.Millisecond
	cfg.Producer.Flush.Bytes = 512 << 10
	if codec != codecDefault {
		cfg.Producer.Compression = sarama.CompressionCodec(codec)
	}
	p, err := sarama.NewAsyncProducer([]string{addr}, cfg)
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Close()) }()
	go func() {
		for i, r := range recs {
			m := &sarama.ProducerMessage{Topic: topic, Key: saramaBytes(r.key), Value: saramaBytes(r.value),
				Timestamp: time.UnixMilli(r.timestamp), Metadata: i}
			for _, h := range r.headers {
				m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(h.key), Value: h.value})
			}
			select {
			case p.Input() <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	out := make([]testRec, len(recs))
	for range recs {
		select {
		case m := <-p.Successes():
			i := m.Metadata.(int)
			out[i] = withAck(recs[i], m.Partition, m.Offset)
		case pe := <-p.Errors():
			t.Fatalf("sarama produce record %v: %v", pe.Msg.Metadata, pe.Err)
		case <-ctx.Done():
			t.Fatalf("sarama produce: %v", ctx.Err())
		}
	}
	return out
}

// consumeSarama reads with sarama's Consumer, one PartitionConsumer per
// partition from the oldest offset, all opened first (so they fetch
// together) and closed together (each close waits out its long poll).
func consumeSarama(ctx context.Context, t *testing.T, addr, topic string, counts map[int32]int) []testRec {
	t.Helper()
	cfg := saramaConfig()
	cfg.Consumer.Return.Errors = true
	cfg.Consumer.MaxWaitTime = 100 * time.Millisecond
	c, err := sarama.NewConsumer([]string{addr}, cfg)
	require.NoError(t, err)
	pcs := map[int32]sarama.PartitionConsumer{}
	for p := range counts {
		pc, err := c.ConsumePartition(topic, p, sarama.OffsetOldest)
		require.NoError(t, err)
		pcs[p] = pc
	}
	var out []testRec
	for p, pc := range pcs {
		for range counts[p] {
			select {
			case m := <-pc.Messages():
				r := testRec{partition: m.Partition, offset: m.Offset, key: m.Key, value: m.Value, timestamp: m.Timestamp.UnixMilli()}
				for _, h := range m.Headers {
					r.headers = append(r.headers, testHeader{string(h.Key), h.Value})
				}
				out = append(out, r)
			case err := <-pc.Errors():
				t.Fatalf("sarama consume %s-%d: %v", topic, p, err)
			case <-ctx.Done():
				t.Fatalf("sarama consume %s-%d: %v", topic, p, ctx.Err())
			}
		}
	}
	for _, pc := range pcs {
		pc.AsyncClose()
	}
	for _, pc := range pcs {
		require.NoError(t, pc.Close())
	}
	require.NoError(t, c.Close())
	return out
}

// produceKafkaGo produces with kafka-go's Writer (not idempotent: it has
// no idempotent producer), acks=all, keys hashed to partitions; its
// Completion callback reports each batch's partition and offsets. The
// Writer gets a Transport of its own: the shared default one caches the
// cluster's metadata for up to 6 s, and would not know a topic created
// since by another client (it answers UNKNOWN_TOPIC_OR_PARTITION from
// its cache).
func produceKafkaGo(ctx context.Context, t *testing.T, addr, topic string, codec int16, recs []testRec) []testRec {
	t.Helper()
	out := make([]testRec, len(recs))
	var mu sync.Mutex
	w := &kafkago.Writer{
		Addr:         kafkago.TCP(addr),
		Transport:    &kafkago.Transport{},
		Topic:        topic,
		Balancer:     &kafkago.Hash{},
		RequiredAcks: kafkago.RequireAll,
		BatchSize:    1000,
		BatchBytes:   1 << 20,
		BatchTimeout: 5 * time.Millisecond,
		Completion: func(msgs []kafkago.Message, err error) {
			if err != nil {
				return // WriteMessages returns it
			}
			mu.Lock()
			defer mu.Unlock()
			for _, m := range msgs {
				i := m.WriterData.(int)
				out[i] = withAck(recs[i], int32(m.Partition), m.Offset)
			}
		},
	}
	if codec != codecDefault {
		w.Compression = kafkago.Compression(codec)
	}
	msgs := make([]kafkago.Message, len(recs))
	for i, r := range recs {
		msgs[i] = kafkago.Message{Key: r.key, Value: r.value, Time: time.UnixMilli(r.timestamp), WriterData: i}
		for _, h := range r.headers {
			msgs[i].Headers = append(msgs[i].Headers, kafkago.Header{Key: h.key, Value: h.value})
		}
	}
	require.NoError(t, w.WriteMessages(ctx, msgs...))
	require.NoError(t, w.Close())
	return out
}

// consumeKafkaGo reads with kafka-go's Reader, one per partition (no
// consumer group), from the first offset; all are opened first (so they
// fetch together) and closed together. The Reader exposes an empty key,
// value or header value as nil, as it does a null one (readNewBytes), so
// its reads are compared with nullsKept false.
func consumeKafkaGo(ctx context.Context, t *testing.T, addr, topic string, counts map[int32]int) []testRec {
	t.Helper()
	rds := map[int32]*kafkago.Reader{}
	for p := range counts {
		rds[p] = kafkago.NewReader(kafkago.ReaderConfig{
			Brokers:   []string{addr},
			Topic:     topic,
			Partition: int(p),
			MaxWait:   100 * time.Millisecond,
			MaxBytes:  4 << 20,
		})
	}
	defer func() {
		var wg sync.WaitGroup
		for _, rd := range rds {
			wg.Go(func() { _ = rd.Close() }) // it returns nil
		}
		wg.Wait()
	}()
	var out []testRec
	for p, rd := range rds {
		for range counts[p] {
			m, err := rd.ReadMessage(ctx)
			require.NoError(t, err, "kafka-go consume %s-%d", topic, p)
			r := testRec{partition: int32(m.Partition), offset: m.Offset, key: m.Key, value: m.Value, timestamp: m.Time.UnixMilli()}
			for _, h := range m.Headers {
				r.headers = append(r.headers, testHeader{h.Key, h.Value})
			}
			out = append(out, r)
		}
	}
	return out
}

// partitionCounts is how many acknowledged records each partition holds.
func partitionCounts(acked []testRec) map[int32]int {
	counts := map[int32]int{}
	for _, r := range acked {
		counts[r.partition]++
	}
	return counts
}

// checkConsumed checks that the consumed records are the acknowledged
// ones: the same set of (partition, offset), no duplicate, each
// partition in offset order, and each record byte-identical (key,
// value, headers in order, timestamp), and with nullsKept null keys and
// values still null, empty ones still empty (for a reader that tells
// them apart). The acknowledged ids must be unique (each record
// acknowledged once).
func checkConsumed(t *testing.T, acks, consumed []testRec, nullsKept bool) {
	t.Helper()
	// Plain comparisons, not testify's, in the loops: 100,000 records.
	want := make(map[key]*testRec, len(acks))
	ids := make(map[string]bool, len(acks))
	for i := range acks {
		a := &acks[i]
		if len(a.headers) == 0 {
			t.Fatalf("record %d of %d has no acknowledgement", i, len(acks)) // left zero by its producer
		}
		k := key{a.partition, a.offset}
		if want[k] != nil {
			t.Fatalf("records %s and %s acknowledged at %v", want[k].headers[0].value, a.headers[0].value, k)
		}
		want[k] = a
		if id := string(a.headers[0].value); ids[id] {
			t.Fatalf("record %s acknowledged twice", id)
		} else {
			ids[id] = true
		}
	}
	seen := make(map[key]bool, len(consumed))
	last := map[int32]int64{}
	for i := range consumed {
		g := &consumed[i]
		k := key{g.partition, g.offset}
		w, ok := want[k]
		switch {
		case !ok:
			t.Fatalf("consumed %v was never acknowledged", k)
		case seen[k]:
			t.Fatalf("consumed %v twice", k)
		}
		seen[k] = true
		if prev, ok := last[g.partition]; ok && g.offset <= prev {
			t.Fatalf("partition %d out of order: %d after %d", g.partition, g.offset, prev)
		}
		last[g.partition] = g.offset
		if d := recDiff(w, g, nullsKept); d != "" {
			t.Fatalf("record at %v (%s): %s", k, w.headers[0].value, d)
		}
	}
	require.Len(t, seen, len(want), "consumed every acknowledged record")
}

// recDiff says how got differs from want, "" when it does not.
func recDiff(want, got *testRec, nullsKept bool) string {
	sameBytes := bytes.Equal
	if nullsKept {
		sameBytes = sameBytesOrNull
	}
	switch {
	case !sameBytes(want.key, got.key):
		return fmt.Sprintf("key %q, want %q", got.key, want.key)
	case !sameBytes(want.value, got.value):
		return fmt.Sprintf("value of %d bytes (nil %t), want %d (nil %t)", len(got.value), got.value == nil, len(want.value), want.value == nil)
	case want.timestamp != got.timestamp:
		return fmt.Sprintf("timestamp %d, want %d", got.timestamp, want.timestamp)
	case len(want.headers) != len(got.headers):
		return fmt.Sprintf("%d headers, want %d", len(got.headers), len(want.headers))
	}
	for i, h := range want.headers {
		if g := got.headers[i]; g.key != h.key || !sameBytes(h.value, g.value) {
			return fmt.Sprintf("header %d %q=%q, want %q=%q", i, g.key, g.value, h.key, h.value)
		}
	}
	return ""
}

// sameBytesOrNull is bytes.Equal that also tells null from empty.
func sameBytesOrNull(a, b []byte) bool {
	return (a == nil) == (b == nil) && bytes.Equal(a, b)
}

// checkStored checks what the broker's log holds for topic: each
// partition's high watermark and log end are its acknowledged record
// count (nothing unacknowledged or duplicated on the log), and every
// batch carries codec in its attributes (the log keeps batches as the
// producer compressed them).
func checkStored(t *testing.T, s *Server, topic string, acks []testRec, codec int16) {
	t.Helper()
	counts := partitionCounts(acks)
	for p := range int32(testPartitions) {
		l := testLog(t, s, topic, p)
		require.Equal(t, int64(counts[p]), l.LogEndOffset(), "partition %d", p)
		require.Equal(t, int64(counts[p]), l.HighWatermark(), "partition %d", p)
	}
	checkCodec(t, s, topic, testPartitions, codec, true)
}

// clientCase is one client under test: its producer, its consumer,
// whether its consumer tells null from empty bytes, its default codec
// (what its batches carry when left unconfigured) and the compressed
// codec it is also run with.
type clientCase struct {
	name          string
	produce       producer
	consume       consumer
	nullsKept     bool
	defaultCodec  int16
	compressCodec int16
}

var clientCases = []clientCase{
	{"kgo", produceKgo, consumeKgo, true, codecSnappy, codecGzip},
	{"sarama", produceSarama, consumeSarama, true, codecNone, codecLz4},
	{"kafka-go", produceKafkaGo, consumeKafkaGo, false, codecNone, codecZstd},
}

// TestClientsCrossRead: each client produces 10,000 records (keys,
// null keys and values, headers, timestamps) to a topic of 3 partitions,
// once with its default codec and once with a compressed one, and every
// client (itself included) reads them back: the acknowledged records,
// each once, byte-identical, as each client exposes them. The pairs are
// writer x reader: kgo, sarama and kafka-go each have their own protocol
// code, so each pair checks the broker against two independent encoders
// and decoders. sarama runs with Config.Version 3.8 (saramaVersion).
func TestClientsCrossRead(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := startBroker(t, t.TempDir())
	addr := s.Addr().String()
	admin := newClient(t, s)
	for _, w := range clientCases {
		for _, codec := range []int16{codecDefault, w.compressCodec} {
			stored, name := codec, codecNames[max(codec, 0)]
			if codec == codecDefault {
				stored, name = w.defaultCodec, "default"
			}
			t.Run(w.name+"-"+name, func(t *testing.T) {
				topic := "cross-" + w.name + "-" + name
				createTopic(ctx, t, admin, topic)
				acks := w.produce(ctx, t, addr, topic, codec, genRecords(topic, crossRecords))
				checkStored(t, s, topic, acks, stored)
				for _, r := range clientCases {
					t.Run("read-"+r.name, func(t *testing.T) {
						checkConsumed(t, acks, r.consume(ctx, t, addr, topic, partitionCounts(acks)), r.nullsKept)
					})
				}
			})
		}
	}
}

// TestKgoIdempotentCodecs: kgo produces kgoRecordsPerCodec records with
// each codec, idempotent, acks=all, to a topic of 3 partitions
// (asynchronously: promises, a 5 ms linger, batches up to 1 MiB), and
// consumes them back: the acknowledged set is the consumed set, no
// duplicate, byte for byte, and the log holds exactly those records in
// batches of that codec. The wall times are logged (go test -v).
func TestKgoIdempotentCodecs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s := startBroker(t, t.TempDir())
	addr := s.Addr().String()
	admin := newClient(t, s)
	for codec := codecNone; codec <= codecZstd; codec++ {
		t.Run(codecNames[codec], func(t *testing.T) {
			topic := "kgo-" + codecNames[codec]
			createTopic(ctx, t, admin, topic)
			recs := genRecords(topic, kgoRecordsPerCodec)
			start := time.Now()
			acks := produceKgo(ctx, t, addr, topic, codec, recs)
			produced := time.Since(start)
			consumed := consumeKgo(ctx, t, addr, topic, partitionCounts(acks))
			t.Logf("%d records, %s: produce %v, consume %v", len(recs), codecNames[codec], produced, time.Since(start)-produced)
			checkConsumed(t, acks, consumed, true)
			checkStored(t, s, topic, acks, codec)
		})
	}
}
