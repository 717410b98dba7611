package producer

import (
	"errors"
	"fmt"

	"github.com/tierlog/tierlog/internal/base"
)

// Errors returned by this package. Test for them with errors.Is. The
// validation errors of PrepareAppend are the typed errors below, each
// unwrapping to one of these sentinels; a broker maps the sentinel to the
// Kafka error code named in its comment.
var (
	// ErrOutOfOrderSequence means a client batch's first sequence does
	// not follow the producer's last sequence (or a new producer epoch
	// does not start at sequence 0). Returned as an *OutOfOrderSequenceError.
	// Kafka: OUT_OF_ORDER_SEQUENCE_NUMBER (45).
	ErrOutOfOrderSequence = errors.New("producer: out of order sequence number")

	// ErrInvalidProducerEpoch means a batch or a transaction marker
	// carried a producer epoch older than the producer's current one.
	// Returned as an *InvalidProducerEpochError. Kafka:
	// INVALID_PRODUCER_EPOCH (47); since Kafka 2.7 the produce path
	// returns this code where it used to return PRODUCER_FENCED (90), for
	// transactional producers too, so the client can abort and retry.
	ErrInvalidProducerEpoch = errors.New("producer: invalid producer epoch")

	// ErrUnknownProducerID means a client batch from a producer this
	// partition holds no state for did not start at sequence 0. Returned
	// (as an *UnknownProducerIDError) only with
	// Options.StrictUnknownProducer; by default such a batch is accepted,
	// as Kafka has done since 2.5 (KIP-360). Kafka: UNKNOWN_PRODUCER_ID
	// (59).
	ErrUnknownProducerID = errors.New("producer: unknown producer id")

	// ErrInvalidTxnState means a producer with an open transaction wrote
	// a non-transactional batch. Returned as an *InvalidTxnStateError.
	// Kafka: INVALID_TXN_STATE (48).
	ErrInvalidTxnState = errors.New("producer: invalid transaction state")

	// ErrTransactionCoordinatorFenced means a transaction marker carried
	// a coordinator epoch older than the last one seen for its producer
	// (a zombie coordinator). Returned as a *CoordinatorEpochError.
	// Kafka: TRANSACTION_COORDINATOR_FENCED (52).
	ErrTransactionCoordinatorFenced = errors.New("producer: transaction coordinator fenced")

	// ErrCorruption marks snapshot or transaction index bytes that fail a
	// checksum or format check, and malformed transaction markers. Kafka:
	// CorruptSnapshotException, CorruptIndexException, CORRUPT_MESSAGE.
	ErrCorruption = base.ErrCorruption

	// ErrInvalidArgument marks a caller bug: an AppendInfo applied twice
	// or after another PrepareAppend, an aborted transaction appended out
	// of order to a TxnIndex.
	ErrInvalidArgument = base.ErrInvalidArgument
)

// OutOfOrderSequenceError reports a client batch whose first sequence does
// not continue the producer's sequence. errors.Is(err,
// ErrOutOfOrderSequence) reports true for it.
type OutOfOrderSequenceError struct {
	ProducerID int64
	// Offset is the batch's base offset.
	Offset int64
	// Epoch is the batch's producer epoch; CurrentEpoch the producer's.
	Epoch        int16
	CurrentEpoch int16
	// FirstSeq is the batch's base sequence. LastSeq is the producer's
	// last sequence in CurrentEpoch (record.NoSequence for a new epoch,
	// where FirstSeq must be 0).
	FirstSeq int32
	LastSeq  int32
}

func (e *OutOfOrderSequenceError) Error() string {
	if e.Epoch != e.CurrentEpoch {
		return fmt.Sprintf("producer: out of order sequence number: producer %d at offset %d starts new epoch %d (current %d) at sequence %d, want 0",
			e.ProducerID, e.Offset, e.Epoch, e.CurrentEpoch, e.FirstSeq)
	}
	return fmt.Sprintf("producer: out of order sequence number: producer %d epoch %d at offset %d: sequence %d after last sequence %d",
		e.ProducerID, e.Epoch, e.Offset, e.FirstSeq, e.LastSeq)
}

// Unwrap returns ErrOutOfOrderSequence.
func (e *OutOfOrderSequenceError) Unwrap() error { return ErrOutOfOrderSequence }

// InvalidProducerEpochError reports a batch or marker from an older
// producer epoch. errors.Is(err, ErrInvalidProducerEpoch) reports true.
type InvalidProducerEpochError struct {
	ProducerID int64
	// Offset is the batch's base offset.
	Offset       int64
	Epoch        int16
	CurrentEpoch int16
	// Marker is true for a transaction marker (control batch).
	Marker bool
}

func (e *InvalidProducerEpochError) Error() string {
	what := "batch"
	if e.Marker {
		what = "marker"
	}
	return fmt.Sprintf("producer: invalid producer epoch: producer %d %s at offset %d has epoch %d, current epoch %d",
		e.ProducerID, what, e.Offset, e.Epoch, e.CurrentEpoch)
}

// Unwrap returns ErrInvalidProducerEpoch.
func (e *InvalidProducerEpochError) Unwrap() error { return ErrInvalidProducerEpoch }

// UnknownProducerIDError reports a batch from a producer without state
// that does not start at sequence 0 (Options.StrictUnknownProducer only).
// errors.Is(err, ErrUnknownProducerID) reports true for it.
type UnknownProducerIDError struct {
	ProducerID int64
	Offset     int64
	Epoch      int16
	FirstSeq   int32
}

func (e *UnknownProducerIDError) Error() string {
	return fmt.Sprintf("producer: unknown producer id: producer %d epoch %d at offset %d starts at sequence %d, want 0",
		e.ProducerID, e.Epoch, e.Offset, e.FirstSeq)
}

// Unwrap returns ErrUnknownProducerID.
func (e *UnknownProducerIDError) Unwrap() error { return ErrUnknownProducerID }

// InvalidTxnStateError reports a non-transactional batch from a producer
// whose transaction is open. errors.Is(err, ErrInvalidTxnState) reports
// true for it.
type InvalidTxnStateError struct {
	ProducerID int64
	Offset     int64
	Epoch      int16
	// TxnFirstOffset is the first offset of the open transaction.
	TxnFirstOffset int64
}

func (e *InvalidTxnStateError) Error() string {
	return fmt.Sprintf("producer: invalid transaction state: producer %d epoch %d wrote a non-transactional batch at offset %d inside its transaction open since %d",
		e.ProducerID, e.Epoch, e.Offset, e.TxnFirstOffset)
}

// Unwrap returns ErrInvalidTxnState.
func (e *InvalidTxnStateError) Unwrap() error { return ErrInvalidTxnState }

// CoordinatorEpochError reports a transaction marker from a coordinator
// epoch older than the producer's last one. errors.Is(err,
// ErrTransactionCoordinatorFenced) reports true for it.
type CoordinatorEpochError struct {
	ProducerID int64
	// Offset is the marker's offset.
	Offset                  int64
	CoordinatorEpoch        int32
	CurrentCoordinatorEpoch int32
}

func (e *CoordinatorEpochError) Error() string {
	return fmt.Sprintf("producer: transaction coordinator fenced: producer %d marker at offset %d has coordinator epoch %d, current %d",
		e.ProducerID, e.Offset, e.CoordinatorEpoch, e.CurrentCoordinatorEpoch)
}

// Unwrap returns ErrTransactionCoordinatorFenced.
func (e *CoordinatorEpochError) Unwrap() error { return ErrTransactionCoordinatorFenced }

// corruptionf returns an error wrapping ErrCorruption. what names the
// bytes ("snapshot", "txn index", a file path).
func corruptionf(what string, format string, args ...any) error {
	return fmt.Errorf("producer: %s: %w: %s", what, ErrCorruption, fmt.Sprintf(format, args...))
}
