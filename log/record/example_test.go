package record_test

import (
	"fmt"

	"github.com/tierlog/tierlog/log/record"
)

// A producer builds a batch; a leader stamps its epoch and assigns the
// offset in place; a reader scans and iterates.
func Example() {
	opts := record.DefaultBuilderOptions()
	opts.Compression = record.CompressionZstd
	b := record.NewBuilder(opts)
	b.Add(1000, []byte("k1"), []byte("hello"))
	b.Add(1005, nil, []byte("world"), record.Header{Key: "trace", Value: []byte("abc")})
	buf, err := b.Build()
	if err != nil {
		panic(err)
	}

	batch, _ := record.ReadBatch(buf)
	batch.SetBaseOffset(40)
	batch.SetPartitionLeaderEpoch(7)

	s := record.NewScanner(buf, record.ScannerOptions{})
	var it record.Iter
	for s.Next() {
		batch := s.Batch()
		fmt.Printf("batch [%d, %d] epoch %d %s\n",
			batch.BaseOffset(), batch.LastOffset(), batch.PartitionLeaderEpoch(), batch.Compression())
		it.Reset(batch)
		for it.Next() {
			r := it.Record()
			fmt.Printf("  %d@%d key=%q value=%q headers=%d\n", r.Offset, r.Timestamp, r.Key, r.Value, r.NumHeaders())
		}
		if err := it.Err(); err != nil {
			panic(err)
		}
	}
	fmt.Println("valid bytes", s.ValidBytes() == len(buf), "err", s.Err())
	// Output:
	// batch [40, 41] epoch 7 zstd
	//   40@1000 key="k1" value="hello" headers=0
	//   41@1005 key="" value="world" headers=1
	// valid bytes true err <nil>
}

// Recovery keeps the valid prefix of a segment and cuts a torn tail.
func ExampleScanner() {
	var segment []byte
	for i := int64(0); i < 3; i++ {
		opts := record.DefaultBuilderOptions()
		opts.BaseOffset = i
		b := record.NewBuilder(opts)
		b.Add(i, nil, []byte("v"))
		segment, _ = b.AppendTo(segment)
	}
	torn := segment[:len(segment)-5] // a crash cut the last batch

	s := record.NewScanner(torn, record.ScannerOptions{MaxBatchBytes: 1 << 20})
	n := 0
	for s.Next() {
		n++
	}
	fmt.Println(n, "batches; keep", s.ValidBytes(), "of", len(torn), "bytes")
	fmt.Println(s.Err())
	// Output:
	// 2 batches; keep 138 of 202 bytes
	// record: torn tail at position 138: batch declares 69 bytes, 64 available
}
