// Package base holds the vocabulary every tierlog package shares: the
// undefined offset and epoch constants and the sentinel errors that more
// than one package returns. Packages re-export the sentinels they return
// (log.ErrCorruption = base.ErrCorruption) so callers never import
// internal packages; errors.Is works across packages because the values
// are the same. The undefined constants are public as
// log/record.UndefinedOffset and so on, the names documentation uses.
//
// This package imports only the standard library.
package base

import "errors"

const (
	// UndefinedOffset marks an offset that is not known or does not
	// exist. Kafka: UNDEFINED_EPOCH_OFFSET, ListOffsets' -1.
	UndefinedOffset int64 = -1
	// UndefinedEpoch marks a leader epoch that is not known or does not
	// exist. Kafka: UNDEFINED_EPOCH, RecordBatch.NO_PARTITION_LEADER_EPOCH.
	UndefinedEpoch int32 = -1
	// NoProducerID is the producer id of a batch written without
	// idempotence. Kafka: RecordBatch.NO_PRODUCER_ID.
	NoProducerID int64 = -1
	// NoProducerEpoch is the producer epoch of a batch written without
	// idempotence. Kafka: RecordBatch.NO_PRODUCER_EPOCH.
	NoProducerEpoch int16 = -1
	// NoSequence is the base sequence of a batch written without
	// idempotence. Kafka: RecordBatch.NO_SEQUENCE.
	NoSequence int32 = -1
)

// Sentinel errors shared across packages. Test for them with errors.Is;
// never compare error strings.
var (
	// ErrCorruption marks bytes that fail a checksum or a format check:
	// a bad CRC, a wrong magic byte, an impossible length, a malformed
	// checkpoint line. It is never used for an I/O failure, which keeps
	// its own error. Kafka: CORRUPT_MESSAGE (2).
	ErrCorruption = errors.New("tierlog: corruption")

	// ErrClosed is returned by every method of a component called after
	// its Close.
	ErrClosed = errors.New("tierlog: closed")

	// ErrOffsetOutOfRange means an offset lies outside the range a
	// component holds. Kafka: OFFSET_OUT_OF_RANGE (1).
	ErrOffsetOutOfRange = errors.New("tierlog: offset out of range")

	// ErrFencedEpoch means a request carried a leader epoch older than
	// the latest one known. Kafka: FENCED_LEADER_EPOCH (74).
	ErrFencedEpoch = errors.New("tierlog: fenced leader epoch")

	// ErrInvalidArgument means a caller passed a value the API does not
	// accept (a negative epoch, an offset below -1, ...). It signals a
	// bug in the caller, reported as an error rather than a panic.
	ErrInvalidArgument = errors.New("tierlog: invalid argument")
)
