package wal

import (
	"errors"
	"fmt"

	"github.com/tierlog/tierlog/internal/base"
)

// Errors returned by control planes. Test for them with errors.Is.
var (
	// ErrClosed is returned by every method called after Close.
	ErrClosed = base.ErrClosed
	// ErrCorruption marks stored control-plane state that fails its
	// checksum or format check.
	ErrCorruption = base.ErrCorruption
	// ErrInvalidArgument marks a request the API does not accept (a batch
	// of size 0, byte ranges outside the object, a negative offset).
	ErrInvalidArgument = base.ErrInvalidArgument
	// ErrOffsetOutOfRange: the offset is below the WAL start or above the
	// high watermark. Kafka: OFFSET_OUT_OF_RANGE (1).
	ErrOffsetOutOfRange = base.ErrOffsetOutOfRange

	// ErrUnknownTopicOrPartition: the control plane has no row for the
	// partition. Kafka: UNKNOWN_TOPIC_OR_PARTITION (3).
	ErrUnknownTopicOrPartition = errors.New("wal: unknown topic or partition")
	// ErrDuplicateSequence: the batch repeats one of the producer's last
	// five batches. Not a failure for the producer: the result carries
	// the offset the first copy was assigned. Kafka answers NONE with
	// that offset (ProducerStateManager's duplicate check).
	ErrDuplicateSequence = errors.New("wal: duplicate sequence")
	// ErrOutOfOrderSequence: the batch's base sequence does not follow
	// the producer's last one. Kafka: OUT_OF_ORDER_SEQUENCE_NUMBER (45).
	ErrOutOfOrderSequence = errors.New("wal: out of order sequence")
	// ErrInvalidProducerEpoch: the batch's producer epoch is older than
	// the producer's latest. Kafka: INVALID_PRODUCER_EPOCH (47).
	ErrInvalidProducerEpoch = errors.New("wal: invalid producer epoch")
	// ErrObjectKeyReused: the object key was committed (or reserved, or
	// reaped as an orphan: then ErrObjectReaped too) with a different content. A retry of the same
	// commit is not this error: it returns the first commit's result.
	ErrObjectKeyReused = errors.New("wal: object key reused")
	// ErrObjectReaped: the key's reservation expired and the cleaner
	// reaped it as an orphan (its object is deleted, or about to be), so
	// it may never be registered: a slow writer's CommitFile of it fails,
	// for ever, and the writer deletes its upload. Control planes return
	// it together with ErrObjectKeyReused (errors.Is matches both).
	ErrObjectReaped = errors.New("wal: object reaped as an orphan")
	// ErrUnsupportedTimestamp: ListOffsets got a negative timestamp that
	// is none of the special values. Kafka: UNSUPPORTED_VERSION.
	ErrUnsupportedTimestamp = errors.New("wal: unsupported special timestamp")
)

// PartitionError is the per-partition error of a call that takes a list:
// one bad partition never fails the others.
type PartitionError struct {
	Partition TopicIDPartition
	Err       error // one of the sentinels above
	Detail    string
}

func (e *PartitionError) Error() string {
	if e.Detail == "" {
		return fmt.Sprintf("%v: partition %s", e.Err, e.Partition)
	}
	return fmt.Sprintf("%v: partition %s: %s", e.Err, e.Partition, e.Detail)
}

func (e *PartitionError) Unwrap() error { return e.Err }

// BatchRejectedError says why CommitFile gave a batch no offsets. The
// batch's bytes stay in the object as dead bytes.
type BatchRejectedError struct {
	Partition TopicIDPartition
	Index     int   // position of the batch in the commit request
	Reason    error // ErrUnknownTopicOrPartition, ErrDuplicateSequence, ErrOutOfOrderSequence, ErrInvalidProducerEpoch
	Detail    string
}

func (e *BatchRejectedError) Error() string {
	return fmt.Sprintf("%v: batch %d of partition %s: %s", e.Reason, e.Index, e.Partition, e.Detail)
}

func (e *BatchRejectedError) Unwrap() error { return e.Reason }

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: wal: %s", ErrInvalidArgument, fmt.Sprintf(format, args...))
}
