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
	// log's cache; the metadata needs at least one (SPEC 4.2).
	ErrNoLeaderEpoch = errors.New("remote: segment has no leader epoch")
)

// ReadRangeError reports a remote read at an offset no remote segment
// holds in the epoch the leader's cache gives it. It matches
// ErrOffsetOutOfRange.
type ReadRangeError struct {
	TopicIDPartition TopicIDPartition
	Offset           int64
	// Epoch is the leader epoch looked up, base.UndefinedEpoch when the
	// cache has none for the offset.
	Epoch int32
}

func (e *ReadRangeError) Error() string {
	return fmt.Sprintf("remote: offset %d of %s in leader epoch %d is not in remote storage",
		e.Offset, e.TopicIDPartition, e.Epoch)
}

func (e *ReadRangeError) Unwrap() error { return ErrOffsetOutOfRange }
