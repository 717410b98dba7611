package record

import "github.com/tierlog/tierlog/internal/base"

// The "undefined" values of Kafka's protocol and batch format, public here
// so a broker embedding tierlog can name them; every tierlog package uses
// these same values (they are defined once, in the internal vocabulary
// package every layer may import, and re-exported here because Kafka's
// RecordBatch is where the protocol defines them).
const (
	// UndefinedOffset marks an offset that is not known or does not
	// exist. Kafka: UNDEFINED_EPOCH_OFFSET, ListOffsets' -1.
	UndefinedOffset = base.UndefinedOffset
	// UndefinedEpoch marks a leader epoch that is not known or does not
	// exist. Kafka: UNDEFINED_EPOCH, RecordBatch.NO_PARTITION_LEADER_EPOCH.
	UndefinedEpoch = base.UndefinedEpoch
	// NoProducerID is the producer id of a batch written without
	// idempotence. Kafka: RecordBatch.NO_PRODUCER_ID.
	NoProducerID = base.NoProducerID
	// NoProducerEpoch is the producer epoch of a batch written without
	// idempotence. Kafka: RecordBatch.NO_PRODUCER_EPOCH.
	NoProducerEpoch = base.NoProducerEpoch
	// NoSequence is the base sequence of a batch written without
	// idempotence. Kafka: RecordBatch.NO_SEQUENCE.
	NoSequence = base.NoSequence
)
