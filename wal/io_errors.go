package wal

import (
	"context"
	"errors"
	"fmt"
)

// Errors of the Writer, Reader and Cleaner. Test for them with errors.Is.
var (
	// ErrInvalidRecord: a batch a client may not send (a base offset
	// other than 0, a control batch, records whose offsets do not
	// increase). Kafka: INVALID_RECORD (87), as LogValidator answers.
	ErrInvalidRecord = errors.New("wal: invalid record")
	// ErrRecordTooLarge: a batch larger than MaxMessageBytes. Kafka:
	// MESSAGE_TOO_LARGE (10).
	ErrRecordTooLarge = errors.New("wal: record batch too large")
	// ErrTransactionalBatch: diskless partitions have no transactions, so
	// a produce call holding a transactional batch is refused whole, as
	// Inkless refuses it. Kafka: INVALID_REQUEST (42).
	ErrTransactionalBatch = errors.New("wal: transactional batches are not supported")
	// ErrUploadFailed: the object holding the request could not be
	// stored; nothing was committed. Retriable. Kafka:
	// KAFKA_STORAGE_ERROR (56).
	ErrUploadFailed = errors.New("wal: object upload failed")
	// ErrCommitFailed: the object was stored but its commit failed or
	// its outcome is unknown; the records may or may not have offsets.
	// Retriable (an idempotent producer's retry is deduplicated).
	// Kafka: KAFKA_STORAGE_ERROR (56).
	ErrCommitFailed = errors.New("wal: object commit failed")
	// ErrObjectTimeout: the object holding the request was not answered
	// within WriterOptions.ObjectTimeout (a store or control plane that
	// stalls). It comes with ErrUploadFailed (no commit was attempted)
	// or ErrCommitFailed (the outcome is unknown). Retriable.
	ErrObjectTimeout = errors.New("wal: object deadline exceeded")
	// ErrObjectRead: a fetch could not read an object (the store failed,
	// or the object is gone). Retriable.
	ErrObjectRead = errors.New("wal: object read failed")
	// ErrFindFailed: a fetch's FindBatches call failed (the control plane
	// is unreachable, or answered with an error of its own); nothing was
	// read. It wraps the control plane's error. Retriable. Kafka:
	// KAFKA_STORAGE_ERROR (56).
	ErrFindFailed = errors.New("wal: finding the batches failed")
	// ErrInconsistentAnswer: a control plane answered something that
	// contradicts the request (a wrong number of results, an accepted
	// batch without an offset, a batch outside its object). The writer
	// treats it as a failed commit, the reader as a failed read.
	ErrInconsistentAnswer = errors.New("wal: control plane answer contradicts itself")
)

// IsRetriable reports whether err is a failure a producer or consumer
// should retry: an upload, commit or object read that failed.
func IsRetriable(err error) bool {
	return errors.Is(err, ErrUploadFailed) || errors.Is(err, ErrCommitFailed) || errors.Is(err, ErrObjectRead) ||
		errors.Is(err, ErrFindFailed)
}

// findFailed wraps a FindBatches failure in ErrFindFailed, except the
// errors that already say what happened to the call: a canceled or
// expired context, a closed plane, an invalid request.
func findFailed(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, ErrClosed) || errors.Is(err, ErrInvalidArgument) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrFindFailed, err)
}

// ProduceError says why one request of a Produce call was refused before
// it was buffered. It unwraps to Err (ErrCorruption, ErrInvalidRecord,
// ErrRecordTooLarge or ErrTransactionalBatch) and to Cause, if any (the
// record package's *CorruptBatchError).
type ProduceError struct {
	Partition TopicIDPartition
	// BatchIndex is the position of the bad batch in the request.
	BatchIndex int
	Err        error
	Cause      error
	Detail     string
}

func (e *ProduceError) Error() string {
	msg := fmt.Sprintf("%v: partition %s, batch %d", e.Err, e.Partition, e.BatchIndex)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	if e.Cause != nil {
		msg += ": " + e.Cause.Error()
	}
	return msg
}

func (e *ProduceError) Unwrap() []error {
	if e.Cause != nil {
		return []error{e.Err, e.Cause}
	}
	return []error{e.Err}
}

// StorageError reports a failed upload, commit or read of one object
// (Kafka: KAFKA_STORAGE_ERROR, retriable). It unwraps to Err
// (ErrUploadFailed, ErrCommitFailed, ErrObjectRead) and to the cause (the
// store's or the control plane's error). A damaged object's format is an
// *ObjectError instead.
type StorageError struct {
	ObjectKey string
	Err       error
	Cause     error
}

func (e *StorageError) Error() string {
	return fmt.Sprintf("%v: object %q: %v", e.Err, e.ObjectKey, e.Cause)
}

func (e *StorageError) Unwrap() []error { return []error{e.Err, e.Cause} }
