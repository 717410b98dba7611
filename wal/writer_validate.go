package wal

import (
	"fmt"

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
	// data is the writer's own copy of the request's bytes, so that a
	// caller whose context ends may reuse its buffer at once.
	data    []byte
	batches []record.Batch
}

// validateRequest checks a request's batches as a leader append does
// (Kafka's LogValidator; the log package's AppendAsLeader): each batch
// frames, has magic 2 and a good CRC, is at most maxMessageBytes, starts
// at offset 0, is not a control batch, and its records' offset deltas
// increase (the record iterator checks them). Transactional batches are
// reported with ErrTransactionalBatch for the caller to refuse the call.
func validateRequest(req ProduceRequest, maxMessageBytes int, it *record.Iter) (checkedRequest, error) {
	out := checkedRequest{partition: req.Partition, data: append([]byte(nil), req.Batches...)}
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
