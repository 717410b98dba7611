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

	// ErrReadPastSeal means a remote read below a committed seal met a
	// first batch at or past the seal (a discarded tail). Returned as a
	// *SealCapError.
	ErrReadPastSeal = errors.New("remote: remote read reaches the seal")

	// ErrNotInLineage means a remote read met a first batch whose leader
	// epoch is not the one the leader's epoch cache gives its offset (a
	// tail an unclean election discarded). Returned as a *LineageError.
	ErrNotInLineage = errors.New("remote: remote batch is not in the leader's lineage")
)

// LineageError reports a remote read whose first batch carries another
// leader epoch than the leader's epoch cache gives its base offset: the
// remote segment was copied before an unclean election and crosses the
// end of its epoch in the leader's lineage with records the partition
// discarded. No record is returned. It matches ErrNotInLineage.
type LineageError struct {
	TopicIDPartition TopicIDPartition
	// Offset is the fetch offset; Segment the remote segment read.
	Offset  int64
	Segment SegmentID
	// BatchBaseOffset, BatchLastOffset and BatchEpoch describe the batch
	// refused, LineageEpoch the epoch the cache gives its base offset
	// (record.UndefinedEpoch when none).
	BatchBaseOffset, BatchLastOffset int64
	BatchEpoch, LineageEpoch         int32
}

func (e *LineageError) Error() string {
	return fmt.Sprintf("remote: read at %d of %s: remote segment %s holds batch [%d, %d] of epoch %d, the leader's lineage has epoch %d there",
		e.Offset, e.TopicIDPartition, e.Segment, e.BatchBaseOffset, e.BatchLastOffset, e.BatchEpoch, e.LineageEpoch)
}

func (e *LineageError) Unwrap() error { return ErrNotInLineage }

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

// SealCapError reports a remote read below a committed seal whose first
// batch reaches the seal (Partition.Seal): a sealed classic log ends
// with a batch at S-1, the seal being a roll point, so a batch holding S
// or crossing it is from a tail the partition discarded (an unclean
// election, github.com/aiven/inkless/pull/857) and is never served; no
// record is returned. Records from S on come from the WAL or the
// consolidated log, not from a read that starts below the seal. It
// matches ErrReadPastSeal.
type SealCapError struct {
	TopicIDPartition TopicIDPartition
	// Offset is the fetch offset, Seal the cap.
	Offset, Seal int64
	// Segment is the remote segment read; BatchBaseOffset and
	// BatchLastOffset the batch refused.
	Segment                          SegmentID
	BatchBaseOffset, BatchLastOffset int64
}

func (e *SealCapError) Error() string {
	return fmt.Sprintf("remote: read at %d of %s: remote segment %s holds batch [%d, %d], at or past seal %d",
		e.Offset, e.TopicIDPartition, e.Segment, e.BatchBaseOffset, e.BatchLastOffset, e.Seal)
}

func (e *SealCapError) Unwrap() error { return ErrReadPastSeal }

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
