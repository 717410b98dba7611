// Command quickstart shows tierlog's two foundation pieces working
// together, on the embedded defaults (a temporary directory, no server):
//
//  1. it builds Kafka record batches (v2) as three leader epochs would
//     have written them, with different codecs, and stamps each with its
//     offsets and leader epoch the way a leader's append path does;
//  2. it scans the concatenated bytes as log recovery would, validating
//     every CRC, and assigns each batch's epoch in a leader-epoch cache
//     persisted to a leader-epoch-checkpoint file;
//  3. it reopens the checkpoint, truncates the cache's tail as a follower
//     does after a leader change, flushes it, and answers
//     OffsetsForLeaderEpoch questions from the reloaded cache.
//
// Run it with: go run ./examples/quickstart
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/harness/demo"
	"github.com/tierlog/tierlog/log/record"
)

func main() {
	dir := flag.String("dir", "", "directory for the checkpoint (default: a new temporary directory)")
	flag.Parse()
	if err := run(os.Stdout, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

// step is one leader's term: which epoch, how many records, which codec.
type step struct {
	epoch   int32
	records int
	codec   record.Compression
}

func run(out io.Writer, dir string) error {
	if dir == "" {
		tmp, err := os.MkdirTemp("", "tierlog-quickstart-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	fs := vfs.Default
	checkpoint := filepath.Join(dir, epochcache.CheckpointFileName)
	demo.PrintLegend(out,
		demo.Note{Form: "batch [a, b) epoch=E", Meaning: "a record batch holding offsets a to b-1 (b not included), " +
			"written by the leader of epoch E; codec and bytes: its compression and size"},
		demo.NoteEpochAt,
		demo.Note{Form: "checkpoint file", Meaning: "the leader-epoch-checkpoint text: version (0), entry count, " +
			"then one \"epoch start-offset\" line per entry"},
		demo.Note{Form: "OffsetsForLeaderEpoch(e)", Meaning: "Kafka's request, answered from the cache: the largest epoch " +
			"<= e and the offset where it ends (the next epoch's start, or the log end); epoch -1, end offset -1: " +
			"e is above every epoch the log knows"})

	// 1. Build batches as three leaders wrote them.
	steps := []step{
		{epoch: 0, records: 5, codec: record.CompressionNone},
		{epoch: 0, records: 3, codec: record.CompressionZstd},
		{epoch: 3, records: 4, codec: record.CompressionLZ4},
		{epoch: 4, records: 6, codec: record.CompressionSnappy},
	}
	var segment []byte // what a segment file would hold
	var leo int64      // log end offset: the next offset to assign
	for i, s := range steps {
		opts := record.DefaultBuilderOptions()
		opts.Compression = s.codec
		b := record.NewBuilder(opts)
		for r := 0; r < s.records; r++ {
			key := []byte(fmt.Sprintf("key-%d-%d", i, r))
			b.Add(int64(1_700_000_000_000+r), key, []byte("value"),
				record.Header{Key: "step", Value: []byte{byte(i)}})
		}
		raw, err := b.Build()
		if err != nil {
			return err
		}
		// The leader's append path: offsets and epoch are outside the CRC,
		// so they are stamped in place without recomputing it.
		batch, err := record.ReadBatch(raw)
		if err != nil {
			return err
		}
		batch.SetBaseOffset(leo)
		batch.SetPartitionLeaderEpoch(s.epoch)
		leo = batch.NextOffset()
		segment = append(segment, raw...)
		fmt.Fprintf(out, "built   batch [%d, %d) epoch=%d codec=%s bytes=%d\n",
			batch.BaseOffset(), batch.NextOffset(), s.epoch, s.codec, batch.Size())
	}

	// 2. Recovery's view: scan, validate, count records, assign epochs.
	cache, err := epochcache.Open(fs, checkpoint)
	if err != nil {
		return err
	}
	it := record.NewIter(record.IterOptions{})
	scan := record.NewScanner(segment, record.ScannerOptions{})
	records := 0
	for scan.Next() {
		b := scan.Batch()
		if _, err := cache.Assign(b.PartitionLeaderEpoch(), b.BaseOffset()); err != nil {
			return err
		}
		for it.Reset(b); it.Next(); {
			records++
		}
		if err := it.Err(); err != nil {
			return err
		}
	}
	if err := scan.Err(); err != nil {
		return err
	}
	fmt.Fprintf(out, "scanned %d valid bytes, %d records, log end offset %d\n", scan.ValidBytes(), records, leo)
	fmt.Fprintf(out, "epochs  %s (persisted to %s)\n", cache, epochcache.CheckpointFileName)

	// 3. Reopen from the checkpoint, as after a restart, then truncate as
	// a follower does when the new leader says epoch 3 ended at offset 10:
	// this replica's epoch-4 records [12, 18) and [10, 12) are gone.
	reloaded, err := epochcache.Open(fs, checkpoint)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "reload  %s\n", reloaded)
	const truncateTo = 10
	reloaded.TruncateFromEnd(truncateTo)
	if err := reloaded.Flush(); err != nil {
		return err
	}
	leo = truncateTo
	file, err := os.ReadFile(checkpoint)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "truncated to %d: epochs %s, checkpoint file %q\n", truncateTo, reloaded, file)
	for _, epoch := range []int32{0, 2, 3, 4, 5} {
		ans := reloaded.EndOffsetFor(epoch, leo)
		e, end := ans.Epoch, ans.EndOffset
		fmt.Fprintf(out, "OffsetsForLeaderEpoch(%d) = epoch %d, end offset %d\n", epoch, e, end)
	}
	if got, want := records, 18; got != want {
		return fmt.Errorf("read %d records, built %d", got, want)
	}
	return nil
}
