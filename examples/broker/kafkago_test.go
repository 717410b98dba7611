package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKafkaGoReadsKgo: a second client, segmentio/kafka-go's Reader (its
// own protocol code: ApiVersions, Metadata, ListOffsets, Fetch), reads
// back what kgo wrote (snappy, kgo's default), partition by partition.
// The topic is auto-created by kgo's metadata request, with the broker's
// -partitions.
func TestKafkaGoReadsKgo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := startBrokerWith(t, t.TempDir(), testPartitions)
	prod := newClient(t, s, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.AllowAutoTopicCreation())
	acked := produceAll(ctx, t, prod, testTopic, 1000)
	want := map[int32]int{}
	for k := range acked {
		want[k.partition]++
	}

	got := 0
	for p := range int32(testPartitions) {
		r := kafkago.NewReader(kafkago.ReaderConfig{
			Brokers:   []string{s.Addr().String()},
			Topic:     testTopic,
			Partition: int(p),
			MaxWait:   200 * time.Millisecond,
		})
		next := int64(0)
		for range want[p] {
			m, err := r.ReadMessage(ctx)
			require.NoError(t, err, "partition %d at %d", p, next)
			require.Equal(t, next, m.Offset, "partition %d: in order, no gap, no duplicate", p)
			next++
			w, ok := acked[key{p, m.Offset}]
			require.True(t, ok, "partition %d offset %d was never acknowledged", p, m.Offset)
			require.Equal(t, w.Key, m.Key)
			require.Equal(t, w.Value, m.Value)
			require.Equal(t, len(w.Headers), len(m.Headers))
			for i, h := range w.Headers {
				require.Equal(t, h.Key, m.Headers[i].Key)
				require.True(t, bytes.Equal(h.Value, m.Headers[i].Value), "header %q", h.Key)
			}
			got++
		}
		require.NoError(t, r.Close())
	}
	require.Equal(t, len(acked), got)
}
