package logmanager_test

import (
	"context"
	"fmt"
	"io"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/logmanager"
	"github.com/tierlog/tierlog/remote"
)

// A broker's log directories: a partition is created, written and
// committed, the broker restarts, and the log comes back with its high
// watermark from the directory's replication-offset-checkpoint.
func Example() {
	ctx := context.Background()
	fs := vfs.NewMem()
	opts := logmanager.Options{Dirs: []string{"/data/a", "/data/b"}, FS: fs}
	tp := remote.TopicIDPartition{TopicID: remote.UUID{42}, Topic: "orders", Partition: 0}

	m, err := logmanager.Open(ctx, opts)
	if err != nil {
		panic(err)
	}
	l, err := m.GetOrCreate(tp, "") // the directory with the fewest logs
	if err != nil {
		panic(err)
	}
	b := record.NewBuilder(record.DefaultBuilderOptions())
	for range 3 {
		b.Add(0, nil, []byte("order"))
	}
	batch, err := b.Build()
	if err != nil {
		panic(err)
	}
	if _, err := l.AppendAsLeader(batch, 0, log.OriginClient); err != nil {
		panic(err)
	}
	l.UpdateHighWatermark(3) // every replica has the records
	if err := m.Close(); err != nil {
		panic(err)
	}

	f, _ := fs.Open("/data/a/" + logmanager.HighWatermarkCheckpointFile)
	text, _ := io.ReadAll(f)
	_ = f.Close()
	fmt.Printf("%s", text)

	m, err = logmanager.Open(ctx, opts)
	if err != nil {
		panic(err)
	}
	defer m.Close()
	for _, p := range m.Partitions() {
		l, _ := m.Get(p.Partition)
		fmt.Printf("%s: log end %d, high watermark %d\n", p.Path, l.LogEndOffset(), l.HighWatermark())
	}
	// Output:
	// 0
	// 1
	// orders 0 3
	// /data/a/orders-0: log end 3, high watermark 3
}
