// Command diskless produces records of three partitions through the
// diskless WAL and reads them back, on the embedded defaults (a temporary
// directory, no server):
//
//  1. it opens an object store on the local file system and the embedded
//     control plane (Pebble) beside it, and creates a topic;
//  2. it produces two calls of several partitions each through a
//     wal.Writer: each call becomes one shared object, committed to the
//     control plane, which assigns every partition its offsets;
//  3. it reads every partition back through a wal.Reader (one ranged GET
//     per object, every batch CRC-checked, the assigned offsets written
//     in) and prints the records;
//  4. it deletes every partition's records and lets a wal.Cleaner delete
//     the objects nobody references any more once the grace period is
//     over.
//
// Run it with: go run ./examples/diskless
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tierlog/tierlog/internal/demo"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote/objstore/fs"
	"github.com/tierlog/tierlog/wal"
	"github.com/tierlog/tierlog/wal/pebblecp"
)

func main() {
	dir := flag.String("dir", "", "directory for the objects and the control plane (default: a new temporary directory)")
	flag.Parse()
	if err := run(context.Background(), os.Stdout, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "diskless:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer, dir string) error {
	if dir == "" {
		tmp, err := os.MkdirTemp("", "tierlog-diskless-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	// 1. The embedded defaults.
	store, err := fs.Open(filepath.Join(dir, "objects"), fs.Options{})
	if err != nil {
		return err
	}
	defer store.Close()
	cp, err := pebblecp.Open(vfs.Default, filepath.Join(dir, "control-plane"), pebblecp.Options{})
	if err != nil {
		return err
	}
	defer cp.Close()
	topic := wal.TopicID{0x0d, 0x15, 0x41}
	if err := cp.CreatePartitions(ctx, []wal.CreatePartitionsRequest{{TopicID: topic, Topic: "orders", NumPartitions: 3}}); err != nil {
		return err
	}
	demo.PrintLegend(out,
		demo.Note{Form: "orders-N", Meaning: "partition N of the topic orders"},
		demo.Note{Form: "produce call N", Meaning: "one wal.Writer.Produce call: one shared object for all its partitions"},
		demo.Note{Form: "base offset", Meaning: "the first offset the control plane assigned to the partition's batch"},
		demo.Note{Form: "O=value", Meaning: "the record at offset O and its value (callC-pP-I: call C, partition P, record I)"},
		demo.Note{Form: "high watermark", Meaning: "every record below it is committed and readable"},
		demo.Note{Form: "GETs", Meaning: "ranged object-store reads; one per object, whatever the number of partitions in it"})
	fmt.Fprintf(out, "1. topic orders (topic id %s): 3 partitions, orders-0 to orders-2, in the control plane\n", topic)
	tp := func(p int32) wal.TopicIDPartition { return wal.TopicIDPartition{TopicID: topic, Partition: p} }

	// 2. Produce.
	cache := wal.NewObjectCache(64 << 20)
	w, err := wal.NewWriter(wal.WriterOptions{Store: store, ControlPlane: cp, Cache: cache})
	if err != nil {
		return err
	}
	for call := range 2 {
		var reqs []wal.ProduceRequest
		for p := range int32(3) {
			b, err := buildBatch(fmt.Sprintf("call%d-p%d", call, p), int(p)+2)
			if err != nil {
				return err
			}
			reqs = append(reqs, wal.ProduceRequest{Partition: tp(p), Batches: b})
		}
		res, err := w.Produce(ctx, reqs)
		if err != nil {
			return err
		}
		for i, r := range res {
			if r.Err != nil {
				return r.Err
			}
			fmt.Fprintf(out, "2. produce call %d: orders-%d: %d records at base offset %d\n",
				call, reqs[i].Partition.Partition, i+2, r.Batches[0].BaseOffset)
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	wm := w.Metrics()
	fmt.Fprintf(out, "2. writer: %d objects committed, %d bytes uploaded\n", wm.ObjectsCommitted, wm.BytesUploaded)

	// 3. Read back, from the store (no cache) to show the GETs.
	r, err := wal.NewReader(wal.ReaderOptions{Store: store, ControlPlane: cp})
	if err != nil {
		return err
	}
	req := wal.FindBatchesRequest{MaxBytes: 1 << 20}
	for p := range int32(3) {
		req.Partitions = append(req.Partitions, wal.FindPartition{Partition: tp(p), MaxPartitionBytes: 1 << 20})
	}
	fetched, err := r.Fetch(ctx, req)
	if err != nil {
		return err
	}
	for p, f := range fetched {
		if f.Err != nil {
			return f.Err
		}
		recs, err := recordsOf(f.Records)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "3. orders-%d (high watermark %d): %s\n", p, f.HighWatermark, recs)
	}
	fmt.Fprintf(out, "3. reader: %d GETs for %d partitions\n", r.Metrics().Gets, len(fetched))

	// 4. Delete every partition's records (Kafka's DeleteRecords to the
	// high watermark): the objects hold no live batch any more and are
	// marked for deletion; the cleaner deletes them after the grace
	// period.
	var del []wal.DeleteRecordsRequest
	for p := range int32(3) {
		del = append(del, wal.DeleteRecordsRequest{Partition: tp(p), Offset: -1})
	}
	if _, err := cp.DeleteRecords(ctx, del); err != nil {
		return err
	}
	c, err := wal.NewCleaner(wal.CleanerOptions{Store: store, ControlPlane: cp, Cache: cache,
		Clock: laterClock{time.Hour}})
	if err != nil {
		return err
	}
	cr, err := c.Run(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "4. all records deleted; cleaner (an hour later) deleted %d objects\n", cr.Deleted)
	return nil
}

// buildBatch builds a client batch of n records.
func buildBatch(prefix string, n int) ([]byte, error) {
	b := record.NewBuilder(record.DefaultBuilderOptions())
	for i := range n {
		b.Add(time.Now().UnixMilli(), nil, fmt.Appendf(nil, "%s-%d", prefix, i))
	}
	return b.Build()
}

// recordsOf prints the records of fetched bytes as offset=value.
func recordsOf(buf []byte) (string, error) {
	s := record.NewScanner(buf, record.ScannerOptions{})
	it := record.NewIter(record.IterOptions{})
	out := ""
	for s.Next() {
		it.Reset(s.Batch())
		for it.Next() {
			r := it.Record()
			out += fmt.Sprintf("%d=%s ", s.Batch().BaseOffset()+int64(r.OffsetDelta), r.Value)
		}
		if err := it.Err(); err != nil {
			return "", err
		}
	}
	return out, s.Err()
}

// laterClock is the wall clock shifted forward, so that the example need
// not wait out the cleaner's grace period.
type laterClock struct{ by time.Duration }

func (c laterClock) Now() time.Time { return time.Now().Add(c.by) }

func (c laterClock) AfterFunc(d time.Duration, f func()) wal.Timer { return time.AfterFunc(d, f) }
