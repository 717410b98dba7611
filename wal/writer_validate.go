package wal

import (
	"fmt"
	"slices"

	"github.com/tierlog/tierlog/internal/invariants"
	"github.com/tierlog/tierlog/log/record"
)

// ProduceRequest is one partition's part of a produce call: the raw v2
// batches a client sent (Kafka: MemoryRecords of a PartitionProduceData).
type ProduceRequest struct {
	Partition TopicIDPartition
	Batches   []byte
}

// ProduceResult answers one ProduceRequest.
type ProduceResult struct {
	// Err is a *ProduceError when the request was refused before it was
	// buffered, an *StorageError when its object failed to upload or
	// commit (IsRetriable), else nil.
	Err error
	// Batches holds the control plane's answer per batch, in request
	// order, when Err is nil: the assigned BaseOffset, or a
	// *BatchRejectedError (a duplicate carries the first copy's offset).
	Batches []BatchResult
}

// checkedRequest is a request that passed validation: its batches are
// framed once here and carried to the object builder.
type checkedRequest struct {
	partition TopicIDPartition
	// data is the caller's bytes (the batches, back to back), not a copy:
	// the object's build copies them once, into the object. A caller that
	// leaves before that (its context ended) takes a private copy first
	// (walObject.detach), so that it may reuse its buffer at once.
	data    []byte
	batches []record.Batch
}

// validateRequest checks a request's batches as a leader append does
// (Kafka's LogValidator; the log package's AppendAsLeader): each batch
// frames, has magic 2 and a good CRC, is at most maxMessageBytes, starts
// at offset 0, is not a control batch, and its records' offset deltas
// increase (the record iterator checks them). Transactional batches are
// reported with ErrTransactionalBatch for the caller to refuse the call.
//
// The batches are appended to batches (which may be nil), so that a
// caller may frame them into storage it has.
func validateRequest(req ProduceRequest, maxMessageBytes int, it *record.Iter, batches []record.Batch) (checkedRequest, error) {
	out := checkedRequest{partition: req.Partition, data: req.Batches, batches: batches}
	s := record.NewScanner(out.data, record.ScannerOptions{MaxBatchBytes: record.MaxBatchSize})
	fail := func(i int, err, cause error, format string, args ...any) (checkedRequest, error) {
		return checkedRequest{}, &ProduceError{Partition: req.Partition, BatchIndex: i, Err: err, Cause: cause,
			Detail: fmt.Sprintf(format, args...)}
	}
	i := 0
	for ; s.Next(); i++ {
		b := s.Batch()
		switch {
		case b.IsTransactional():
			return fail(i, ErrTransactionalBatch, nil, "producer id %d", b.ProducerID())
		case b.BaseOffset() != 0:
			return fail(i, ErrInvalidRecord, nil, "base offset %d, a client batch must start at 0", b.BaseOffset())
		case b.IsControl():
			return fail(i, ErrInvalidRecord, nil, "a client may not send control batches")
		case b.Size() > maxMessageBytes:
			return fail(i, ErrRecordTooLarge, nil, "%d bytes, max.message.bytes %d", b.Size(), maxMessageBytes)
		case b.RecordsCount() == 0:
			return fail(i, ErrInvalidRecord, nil, "a batch without records")
		}
		it.Reset(b)
		for it.Next() {
		}
		if err := it.Err(); err != nil {
			return fail(i, ErrCorruption, err, "records")
		}
		out.batches = append(out.batches, b)
	}
	if err := s.Err(); err != nil {
		// A torn batch in a request is a corrupt request. Kafka:
		// CORRUPT_MESSAGE.
		return fail(i, ErrCorruption, err, "at byte %d", s.ValidBytes())
	}
	return out, nil
}

// size is the request's bytes, what it adds to the object.
func (r checkedRequest) size() int64 { return int64(len(r.data)) }

// clone returns the request over a private copy of its bytes, its batches
// framed again at the same positions.
func (r checkedRequest) clone() checkedRequest {
	out := checkedRequest{partition: r.partition, data: slices.Clone(r.data), batches: make([]record.Batch, len(r.batches))}
	pos := 0
	for i, b := range r.batches {
		// The bytes framed before; the copy frames the same.
		nb, err := record.ReadBatch(out.data[pos : pos+b.Size()])
		invariants.Assertf(err == nil, "wal: reframing a validated batch: %v", err)
		out.batches[i] = nb
		pos += b.Size()
	}
	return out
}
