package remote

import (
	"errors"
	"fmt"

	"github.com/tierlog/tierlog/internal/base"
)

// Errors of the Manager. Test for them with errors.Is.
var (
	// ErrOffsetOutOfRange means a remote read found no remote segment
	// holding the offset in the epoch the leader's cache gives it. Kafka:
	// OFFSET_OUT_OF_RANGE (1). Returned as a *ReadRangeError.
	ErrOffsetOutOfRange = base.ErrOffsetOutOfRange

	// ErrPartitionNotReady means the partition is not registered with the
	// Manager (no leadership change named it, or it was stopped without
	// keeping its metadata). Kafka: a retriable RemoteStorageException
	// ("RLM not ready").
	ErrPartitionNotReady = errors.New("remote: partition not ready")

	// ErrTaskCancelled means a task run stopped because its partition's
	// tasks were cancelled (leadership change, StopPartitions, Close).
	ErrTaskCancelled = errors.New("remote: task cancelled")

	// ErrCustomMetadataTooLarge means the storage manager returned custom
	// metadata above MaxCustomMetadataBytes: the copy is deleted and the
	// partition's copy task is cancelled, as Kafka does.
	ErrCustomMetadataTooLarge = errors.New("remote: custom metadata too large")

	// ErrNoLeaderEpoch means a segment to copy has no leader epoch in the
	// log's cache; the metadata needs at least one (Kafka's
	// RemoteLogSegmentMetadata requires a non-empty segmentLeaderEpochs).
	ErrNoLeaderEpoch = errors.New("remote: segment has no leader epoch")
)

// ReadRangeError reports a remote read at an offset no remote segment
// holds in the epoch the leader's cache gives it. It matches
// ErrOffsetOutOfRange.
type ReadRangeError struct {
	TopicIDPartition TopicIDPartition
	Offset           int64
	// Epoch is the leader epoch looked up, record.UndefinedEpoch when the
	// cache has none for the offset.
	Epoch int32
}

func (e *ReadRangeError) Error() string {
	return fmt.Sprintf("remote: offset %d of %s in leader epoch %d is not in remote storage",
		e.Offset, e.TopicIDPartition, e.Epoch)
}

func (e *ReadRangeError) Unwrap() error { return ErrOffsetOutOfRange }

// ReadCorruptionError reports a remote read that met corrupt data: a
// manifest, index or chunk failing its check (*CorruptionError), or a
// batch failing its framing, CRC or offset order (*BatchCorruptionError).
// No record of the read is returned. errors.Is matches ErrCorruption;
// errors.As reaches the cause in Err.
type ReadCorruptionError struct {
	TopicIDPartition TopicIDPartition
	// Offset is the fetch offset.
	Offset int64
	// Segment, StartOffset and EndOffset name the remote segment read.
	Segment                SegmentID
	StartOffset, EndOffset int64
	Err                    error
}

func (e *ReadCorruptionError) Error() string {
	return fmt.Sprintf("remote: read of %s at offset %d: segment %s [%d, %d]: %v",
		e.TopicIDPartition, e.Offset, e.Segment, e.StartOffset, e.EndOffset, e.Err)
}

// Unwrap returns the cause, which matches ErrCorruption.
func (e *ReadCorruptionError) Unwrap() error { return e.Err }
