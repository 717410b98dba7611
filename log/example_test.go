package log_test

import (
	"fmt"

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
