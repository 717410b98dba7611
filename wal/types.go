package wal

import (
	"encoding/base64"
	"strconv"
)

// TopicID is a topic's 16-byte Kafka UUID.
type TopicID [16]byte

// String formats id as Kafka does (URL-safe base64 without padding).
func (id TopicID) String() string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// IsZero reports whether id is Kafka's ZERO_UUID, which names no topic.
func (id TopicID) IsZero() bool { return id == TopicID{} }

// TopicIDPartition names one partition of one topic incarnation. Kafka:
// TopicIdPartition; the topic name is not part of the identity here (the
// control plane stores it from CreatePartitions for diagnostics only).
type TopicIDPartition struct {
	TopicID   TopicID
	Partition int32
}

func (tp TopicIDPartition) String() string {
	return tp.TopicID.String() + "-" + strconv.FormatInt(int64(tp.Partition), 10)
}

// TimestampType says which timestamp a batch's records carry. Kafka:
// TimestampType (bit 3 of the v2 batch attributes).
type TimestampType int8

const (
	CreateTime    TimestampType = 0
	LogAppendTime TimestampType = 1
)

// Special timestamps of ListOffsets (Kafka: ListOffsetsRequest).
const (
	LatestTimestamp        int64 = -1 // the high watermark
	EarliestTimestamp      int64 = -2 // the cross-tier log start X
	MaxTimestamp           int64 = -3 // the batch with the largest timestamp
	EarliestLocalTimestamp int64 = -4 // the WAL start W
	LatestTieredTimestamp  int64 = -5 // not known to the WAL: (-1, -1)
)

// MaxProducerBatches is how many batches per producer the control plane
// remembers for duplicate detection. Kafka:
// ProducerStateEntry.NUM_BATCHES_TO_RETAIN.
const MaxProducerBatches = 5

// ProducerBatch is one remembered batch of an idempotent producer.
type ProducerBatch struct {
	BaseSequence int32
	LastSequence int32
	// AssignedOffset is the base offset the batch was given.
	AssignedOffset int64
	// Timestamp is the batch's effective timestamp (the commit time for
	// LOG_APPEND_TIME); a duplicate answers with it.
	Timestamp int64
}

// ProducerState is what the control plane keeps of one producer of one
// partition: its latest epoch and that epoch's last batches, oldest
// first, at most MaxProducerBatches.
type ProducerState struct {
	ProducerID    int64
	ProducerEpoch int16
	Batches       []ProducerBatch
}

// LogInfo is a partition's row.
type LogInfo struct {
	Topic string
	// LogStartOffset is W, inclusive.
	LogStartOffset int64
	// HighWatermark is HW, exclusive (the log end offset).
	HighWatermark int64
	// DisklessStartOffset is S.
	DisklessStartOffset int64
	// CrossTierLogStartOffset is X as last reported; a switched log
	// starts with its classic log start W (InitialCrossTierLogStart), a
	// born-diskless one with -1 (never reported).
	CrossTierLogStartOffset int64
	// ByteSize is the sum of the sizes of the live batches.
	ByteSize int64
}
