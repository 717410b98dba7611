package log

import (
	"errors"
	"fmt"

	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/log/internal/producer"
	"github.com/tierlog/tierlog/log/record"
)

// Errors returned by this package. Test for them with errors.Is. Any error
// leaving the package is one of these, wraps one of these, or is an I/O
// error from the vfs.FS wrapped with the file path.
var (
	// ErrClosed is returned by every method called after Close or Delete.
	ErrClosed = base.ErrClosed

	// ErrCorruption marks data that fails a checksum or format check,
	// never an I/O failure. Kafka: CORRUPT_MESSAGE (2).
	ErrCorruption = base.ErrCorruption

	// ErrInvalidArgument means the caller passed a value the API refuses
	// (a negative offset or epoch).
	ErrInvalidArgument = base.ErrInvalidArgument

	// ErrOffsetOutOfRange means an offset lies below LogStartOffset or
	// above LogEndOffset. Kafka: OFFSET_OUT_OF_RANGE (1). Returned as an
	// *OffsetRangeError.
	ErrOffsetOutOfRange = base.ErrOffsetOutOfRange

	// ErrOffsetMovedToTieredStorage means the offset is readable, but only
	// from the remote tier: LogStartOffset <= offset < LocalLogStartOffset.
	// Kafka: OFFSET_MOVED_TO_TIERED_STORAGE (109). Returned as an
	// *OffsetRangeError.
	ErrOffsetMovedToTieredStorage = errors.New("log: offset moved to tiered storage")

	// ErrSegmentNotFound means OpenSegment found no rolled segment at the
	// base offset asked for: retention or a truncation removed it, or it
	// is the active segment.
	ErrSegmentNotFound = errors.New("log: segment not found")

	// ErrInvalidRecord means an append carried a batch it may not: a
	// base offset other than 0, an epoch-less batch where one is
	// required, a control batch from a client, or records that fail
	// validation (a *RecordError). Kafka: INVALID_RECORD (87).
	ErrInvalidRecord = errors.New("log: invalid record")

	// ErrRecordTooLarge means a batch is larger than MaxMessageBytes.
	// Kafka: MESSAGE_TOO_LARGE (10).
	ErrRecordTooLarge = errors.New("log: record batch too large")

	// ErrBatchTooLarge means one append is larger than a whole segment.
	// Kafka: RECORD_LIST_TOO_LARGE (18).
	ErrBatchTooLarge = errors.New("log: append larger than a segment")

	// ErrUnexpectedAppendOffset means a follower append starts below the
	// log end offset. Kafka: UnexpectedAppendOffsetException.
	ErrUnexpectedAppendOffset = errors.New("log: unexpected append offset")

	// ErrOffsetsOutOfOrder means the batches of a follower append do not
	// have strictly increasing last offsets. Kafka:
	// OffsetsOutOfOrderException.
	ErrOffsetsOutOfOrder = errors.New("log: offsets out of order")

	// ErrHighWatermarkBeyondEnd means a leader tried to move the high
	// watermark past the log end offset.
	ErrHighWatermarkBeyondEnd = errors.New("log: high watermark beyond log end offset")

	// ErrOutOfOrderSequence: a client batch's first sequence does not
	// continue its producer's sequence. Returned as an
	// *OutOfOrderSequenceError. Kafka: OUT_OF_ORDER_SEQUENCE_NUMBER (45).
	ErrOutOfOrderSequence = producer.ErrOutOfOrderSequence

	// ErrInvalidProducerEpoch: a batch or marker from a producer epoch
	// older than the current one. Returned as an
	// *InvalidProducerEpochError. Kafka: INVALID_PRODUCER_EPOCH (47).
	ErrInvalidProducerEpoch = producer.ErrInvalidProducerEpoch

	// ErrUnknownProducerID: never returned with the default options
	// (KIP-360 accepts an unknown producer at any sequence); kept so a
	// broker can map it. Kafka: UNKNOWN_PRODUCER_ID (59).
	ErrUnknownProducerID = producer.ErrUnknownProducerID

	// ErrInvalidTxnState: a producer with an open transaction wrote a
	// non-transactional batch. Returned as an *InvalidTxnStateError.
	// Kafka: INVALID_TXN_STATE (48).
	ErrInvalidTxnState = producer.ErrInvalidTxnState

	// ErrTransactionCoordinatorFenced: a transaction marker from an older
	// coordinator epoch. Returned as a *CoordinatorEpochError. Kafka:
	// TRANSACTION_COORDINATOR_FENCED (52).
	ErrTransactionCoordinatorFenced = producer.ErrTransactionCoordinatorFenced

	// ErrTornTail is what recovery found at the end of a segment a crash
	// interrupted mid-write: routine, not corruption.
	ErrTornTail = record.ErrTornTail
)

// The typed producer-state errors of an append, for errors.As. Each
// carries the producer id, the batch's offset and epochs.
type (
	OutOfOrderSequenceError   = producer.OutOfOrderSequenceError
	InvalidProducerEpochError = producer.InvalidProducerEpochError
	UnknownProducerIDError    = producer.UnknownProducerIDError
	InvalidTxnStateError      = producer.InvalidTxnStateError
	CoordinatorEpochError     = producer.CoordinatorEpochError
)

// OffsetRangeError reports where an offset fell relative to the log's
// bounds. It unwraps to ErrOffsetOutOfRange or
// ErrOffsetMovedToTieredStorage.
type OffsetRangeError struct {
	Offset              int64 // the offset requested
	LogStartOffset      int64 // first offset readable anywhere
	LocalLogStartOffset int64 // first offset readable locally
	LogEndOffset        int64 // next offset to be written
	HighWatermark       int64
	err                 error
}

func (e *OffsetRangeError) Error() string {
	return fmt.Sprintf("%v: offset %d, log start %d, local log start %d, log end %d, high watermark %d",
		e.err, e.Offset, e.LogStartOffset, e.LocalLogStartOffset, e.LogEndOffset, e.HighWatermark)
}

func (e *OffsetRangeError) Unwrap() error { return e.err }

// AppendError reports which batch of an append was refused and why. It
// unwraps to the reason (ErrRecordTooLarge, ErrCorruption, ...).
type AppendError struct {
	BatchIndex int   // index of the offending batch in the append
	BaseOffset int64 // its base offset as sent
	Err        error
}

func (e *AppendError) Error() string {
	return fmt.Sprintf("log: append batch %d (base offset %d): %v", e.BatchIndex, e.BaseOffset, e.Err)
}

func (e *AppendError) Unwrap() error { return e.Err }
