package main

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkProduce produces 1 KiB records through kgo (idempotent,
// acks=all, round-robin over 8 partitions) to an in-process broker on
// the library and, as the baseline in the same run, to the same broker
// writing to plain files. The compare command has the same rows with the
// broker as a process of its own.
func BenchmarkProduce(b *testing.B) {
	for _, c := range []struct {
		name  string
		plain bool
	}{{"impl=tierlog", false}, {"impl=plain-file", true}} {
		b.Run(c.name, func(b *testing.B) {
			s, err := Start(Options{Addr: "127.0.0.1:0", Dir: b.TempDir(), Partitions: 8, BaselinePlainFile: c.plain,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			require.NoError(b, err)
			defer s.Close()
			cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr().String()), kgo.DefaultProduceTopic("bench"),
				kgo.AllowAutoTopicCreation(), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerBatchMaxBytes(1<<20))
			require.NoError(b, err)
			defer cl.Close()
			ctx := context.Background()
			require.NoError(b, cl.ProduceSync(ctx, &kgo.Record{Value: []byte("warm-up")}).FirstErr())
			value := make([]byte, 1<<10)
			b.SetBytes(int64(len(value)))
			var wg sync.WaitGroup
			b.ResetTimer()
			for range b.N {
				wg.Add(1)
				cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
					if err != nil {
						b.Error(err)
					}
					wg.Done()
				})
			}
			wg.Wait()
		})
	}
}
