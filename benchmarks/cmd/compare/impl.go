package main

import (
	"github.com/tierlog/tierlog/log/record"
)

// impl is one log implementation under test. Each adapter drives its
// library through that library's public API only.
//
// An impl is used by one goroutine. Open and Close may be called several
// times on the same value (append run, reopen, crash image); state that must
// survive a reopen (like the raw baseline's batch layout) lives in the value.
type impl interface {
	// Name is the row label in the table.
	Name() string
	// Durability states what a successful Append guarantees, with or
	// without an fsync per batch.
	Durability(sync bool) string
	// Open opens the log in dir, creating it if needed. Opening an existing
	// log includes whatever the library needs before it can append again
	// (recovery, replay), because that is what the open-time workload
	// measures. sync asks for an fsync before each Append returns.
	Open(dir string, sync bool) error
	// Append writes one batch of records.
	Append(b *batch) error
	// Close releases the log; whatever the library does on a clean close
	// (flush, markers) happens here.
	Close() error
	// Unsupported returns why the impl cannot run workload w, or "".
	Unsupported(w workloadKind) string
}

// finisher is implemented by logs that write asynchronously: Finish returns
// once every appended byte has reached the file (not necessarily the
// disk), so the append timing includes the writes.
type finisher interface{ Finish() error }

// seqReader reads the whole log from its start and returns the payload
// bytes and records seen.
type seqReader interface {
	ReadAll() (bytes, records int64, err error)
}

// pointReader reads the record with index i (0-based, in append order)
// and returns the bytes it had to read to return it.
type pointReader interface {
	ReadRecord(i int64) (int, error)
}

// batch is one append's worth of records in two shapes: a Kafka record
// batch v2 for tierlog and the raw file (the bytes a producer sends), and
// the same records' values for the peers, which store opaque entries.
type batch struct {
	// kafka is a client batch: base offset 0, records each encoding to
	// about recordBytes. tierlog rewrites its base offset in place, so the
	// tierlog adapter resets it after every append.
	kafka []byte
	// values are the records as opaque entries of recordBytes each.
	values [][]byte
}

// recordBytes is the nominal record size: each peer entry is exactly this
// long and each Kafka record encodes to about this many bytes.
const recordBytes = 1024

// kafkaValueBytes is the value size that makes one Kafka record (length,
// attributes, deltas, null key, value, header count) about recordBytes.
const kafkaValueBytes = recordBytes - 21

// newBatch builds a batch of n records.
func newBatch(n int) (*batch, error) {
	value := make([]byte, recordBytes)
	for i := range value {
		value[i] = byte(i * 7)
	}
	bl := record.NewBuilder(record.DefaultBuilderOptions())
	b := &batch{values: make([][]byte, n)}
	for i := 0; i < n; i++ {
		bl.Add(1_700_000_000_000, nil, value[:kafkaValueBytes])
		b.values[i] = value
	}
	var err error
	b.kafka, err = bl.Build()
	return b, err
}

// records is the number of records in b.
func (b *batch) records() int { return len(b.values) }
