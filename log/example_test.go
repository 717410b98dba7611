package log_test

import (
	"context"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
)

// A leader's life in four calls: open a partition log, append batches in
// its leader epoch, advance the high watermark once followers have the
// records, and read them back the way a consumer's fetch does.
func Example() {
	fs := vfs.NewMem()
	_ = fs.MkdirAll("orders-0", 0o755)
	l, err := log.Open("orders-0", log.Options{FS: fs})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()

	// Two batches of three records each, written in leader epoch 5. The
	// log assigns the offsets; the builder leaves them at zero.
	for batchNo := range 2 {
		b := record.NewBuilder(record.DefaultBuilderOptions())
		for i := range 3 {
			b.Add(1_700_000_000_000, []byte("key"), fmt.Appendf(nil, "value-%d-%d", batchNo, i))
		}
		batch, _ := b.Build()
		info, err := l.AppendAsLeader(batch, 5, log.OriginClient)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("appended [%d, %d]\n", info.FirstOffset, info.LastOffset)
	}

	// Nothing is committed until the high watermark moves: a consumer
	// (IsolationHighWatermark) reads nothing yet.
	fd, _ := l.Read(nil, 0, 1<<20, log.IsolationHighWatermark, true)
	fmt.Printf("before: high watermark %d, %d bytes readable\n", fd.HighWatermark, len(fd.Records))

	// Followers confirmed offset 4 (exclusive): the first batch and one
	// record of the second are committed. Reads return whole batches,
	// so the consumer sees the first batch only.
	l.UpdateHighWatermark(4)
	fd, _ = l.Read(nil, 0, 1<<20, log.IsolationHighWatermark, true)
	for scan := record.NewScanner(fd.Records, record.ScannerOptions{}); scan.Next(); {
		b := scan.Batch()
		fmt.Printf("read batch [%d, %d) in epoch %d\n", b.BaseOffset(), b.NextOffset(), b.PartitionLeaderEpoch())
	}
	fmt.Printf("log end offset %d, high watermark %d\n", l.LogEndOffset(), l.HighWatermark())
	// Output:
	// appended [0, 2]
	// appended [3, 5]
	// before: high watermark 0, 0 bytes readable
	// read batch [0, 3) in epoch 5
	// log end offset 6, high watermark 4
}

// A long-polling fetch: a consumer at the end of the committed records
// waits, without polling, until the high watermark passes its fetch
// offset, then reads.
func ExampleUnifiedLog_WaitFor() {
	fs := vfs.NewMem()
	_ = fs.MkdirAll("orders-0", 0o755)
	l, err := log.Open("orders-0", log.Options{FS: fs})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()

	// The consumer fetches at offset 0 with a 500 ms max wait (Kafka's
	// fetch.max.wait.ms).
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	fetched := make(chan string)
	go func() {
		o, err := l.WaitFor(ctx, 0, log.IsolationHighWatermark)
		if err != nil { // ctx.Err() at the timeout: answer with no records
			fetched <- err.Error()
			return
		}
		fd, _ := l.Read(nil, 0, 1<<20, log.IsolationHighWatermark, true)
		fetched <- fmt.Sprintf("woken at high watermark %d, read %d bytes", o.HighWatermark, len(fd.Records))
	}()

	// The leader appends and its followers confirm the batch.
	b := record.NewBuilder(record.DefaultBuilderOptions())
	b.Add(1_700_000_000_000, nil, []byte("hello"))
	batch, _ := b.Build()
	_, _ = l.AppendAsLeader(batch, 0, log.OriginClient)
	l.UpdateHighWatermark(1)
	fmt.Println(<-fetched)

	// A read with nothing to return gives an empty record set, never nil.
	fd, _ := l.Read(nil, 1, 1<<20, log.IsolationHighWatermark, true)
	fmt.Println(fd.Records != nil, len(fd.Records))
	// Output:
	// woken at high watermark 1, read 73 bytes
	// true 0
}
