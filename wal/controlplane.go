package wal

import (
	"context"
	"time"
)

// ControlPlane registers WAL objects, assigns offsets and answers where a
// partition's batches are. It is KIP-1164's batch coordinator; the method
// set follows Inkless's ControlPlane.
//
// Every method that takes a list answers one result per item in the same
// order; an item's own failure is in its result (a *PartitionError or
// *BatchRejectedError), and the returned error is kept for failures of the
// whole call (closed, I/O, invalid request, context). Every mutating call
// is atomic (all or nothing) and durable when it returns nil.
//
// Implementations must be safe for concurrent use.
type ControlPlane interface {
	// CreatePartitions creates empty rows (W = HW = S = 0) for the
	// partitions [0, NumPartitions) of each topic that do not exist yet;
	// existing rows are never touched, so a repeat is a no-op.
	CreatePartitions(ctx context.Context, topics []CreatePartitionsRequest) error
	// DeleteTopics drops the rows, batches and producer states of the
	// topics; objects left with no live batch are marked for deletion.
	// Unknown ids are ignored, so a repeat is a no-op.
	DeleteTopics(ctx context.Context, topicIDs []TopicID) error

	// ReserveObject records key before its upload, so that an object
	// uploaded but never committed is found by ExpireReservations. A
	// key already reserved, committed or reaped (ever, also after
	// DeleteFiles forgot it) is ErrObjectKeyReused.
	ReserveObject(ctx context.Context, key string) error
	// ExpireReservations turns the reservations made before
	// reservedBefore (at most limit, 0 = all) into objects marked for
	// deletion (reaped orphans) and returns their keys. From then on,
	// for ever, a CommitFile of such a key fails with ErrObjectReaped
	// (wrapped with ErrObjectKeyReused) and registers nothing: also
	// after DeleteFiles forgets the row, so the implementation keeps a
	// tombstone of every reaped key. Without it a writer slower than the
	// reaper would register batches in an object the cleaner deleted.
	ExpireReservations(ctx context.Context, reservedBefore time.Time, limit int) ([]string, error)

	// CommitFile registers an uploaded object and assigns offsets to its
	// accepted batches (see CommitFileRequest). Committing a key again
	// with the same request returns the first commit's result; with a
	// different request it fails with ErrObjectKeyReused; a key reaped
	// as an orphan (see ExpireReservations) fails with ErrObjectReaped
	// and ErrObjectKeyReused.
	CommitFile(ctx context.Context, req CommitFileRequest) (CommitFileResult, error)
	// CommitFiles commits reqs in list order, each exactly as a
	// CommitFile of it returning before the next is made would: each
	// request is its own atomic step, decided on the rows as the earlier
	// ones left them, so an accepted batch of a later request always
	// gets higher offsets than every accepted batch of an earlier
	// request of the same partition. results[i] answers reqs[i]; an
	// item's own failure (an invalid request, a reused or reaped key, an
	// offset overflow, the failed durable write of its step) is in its
	// Err and leaves nothing of it, and the later items are still
	// decided. The returned error is for a call that decided nothing
	// (closed, context ended before it began). A writer hands the
	// commits of several uploaded objects over in one call, so that the
	// plane's group commit writes them in one durable step while their
	// order stays the order of the list. A wrapper that replaces
	// CommitFile must replace CommitFiles too (CommitEach is a
	// sequential one through its CommitFile).
	CommitFiles(ctx context.Context, reqs []CommitFileRequest) ([]CommitFilesResult, error)
	// IsSafeToDeleteObject reports whether no committed object has key
	// (true for unknown and reaped keys): a writer whose commit outcome
	// is unknown deletes its upload only then.
	IsSafeToDeleteObject(ctx context.Context, key string) (bool, error)

	// FindBatches answers where the batches from each requested offset
	// are (see FindBatchesRequest for the byte budgets).
	FindBatches(ctx context.Context, req FindBatchesRequest) ([]FindBatchesResult, error)
	// ListOffsets answers Kafka's ListOffsets for each partition.
	ListOffsets(ctx context.Context, reqs []ListOffsetsRequest) ([]ListOffsetsResult, error)
	// DeleteRecords moves W forward to each request's offset (-1 = HW)
	// and drops the batches wholly below it. An offset below W changes
	// nothing; one below -1 or above HW is ErrOffsetOutOfRange.
	DeleteRecords(ctx context.Context, reqs []DeleteRecordsRequest) ([]DeleteRecordsResult, error)

	// InitDisklessLog creates the row of a partition switched from the
	// classic log: W = the classic log start, HW = S = the seal, with
	// the producer states carried over. A row that exists already is
	// left alone and reported as AlreadyInitialised (a success), except
	// an empty placeholder (HW = S = 0, no bytes), which a seal > 0
	// overwrites.
	InitDisklessLog(ctx context.Context, reqs []InitDisklessLogRequest) ([]InitDisklessLogResult, error)
	// RepairDisklessLog overwrites S of existing rows only.
	RepairDisklessLog(ctx context.Context, reqs []RepairDisklessLogRequest) ([]RepairDisklessLogResult, error)
	// AdvanceCrossTierLogStart raises X (forward only; a lower value is
	// ignored) and returns the stored value.
	AdvanceCrossTierLogStart(ctx context.Context, reqs []AdvanceCrossTierLogStartRequest) ([]AdvanceCrossTierLogStartResult, error)
	// PruneDisklessLogs drops the batches whose last offset is at or
	// below each request's HighestOffsetInRemoteStorage and moves W as
	// PrunedLogStart says. Requests apply in order.
	PruneDisklessLogs(ctx context.Context, reqs []PruneRequest) ([]PruneResult, error)

	// EnforceRetention deletes, per partition, the oldest whole batches
	// that breach its size or time retention (see RetentionScan), at most
	// maxBatches per partition (0 = no cap), and moves W forward to the
	// first remaining batch (never back), or to HW when none remains.
	// For partitions that are not consolidated; consolidated ones are
	// pruned instead.
	EnforceRetention(ctx context.Context, reqs []RetentionRequest, maxBatches int) ([]RetentionResult, error)

	// FilesToDelete lists objects marked for deletion strictly before
	// markedBefore (at most limit, 0 = all), oldest mark first.
	FilesToDelete(ctx context.Context, markedBefore time.Time, limit int) ([]FileToDelete, error)
	// DeleteFiles forgets the given objects, which the caller deleted
	// from the store; keys not marked for deletion are ignored. A
	// reaped orphan's key stays refused by CommitFile and ReserveObject
	// (its tombstone).
	DeleteFiles(ctx context.Context, keys []string) error

	// LogInfo returns a partition's row (ErrUnknownTopicOrPartition if
	// none).
	LogInfo(ctx context.Context, tp TopicIDPartition) (LogInfo, error)
	// ProducerStates returns the producers of a partition by id.
	ProducerStates(ctx context.Context, tp TopicIDPartition) ([]ProducerState, error)

	// Close releases the control plane. Calls after Close fail with
	// ErrClosed.
	Close() error
}

// CreatePartitionsRequest names a topic and its partition count.
type CreatePartitionsRequest struct {
	TopicID       TopicID
	Topic         string
	NumPartitions int32
}

// CommitFileRequest registers one uploaded object.
type CommitFileRequest struct {
	// ObjectKey is the object's key in the store.
	ObjectKey string
	// ObjectSize is the object's length in bytes.
	ObjectSize int64
	// BrokerID and BrokerEpoch name the uploader (recorded, not checked).
	BrokerID    int32
	BrokerEpoch int64
	// Batches are the object's batches. Offsets are assigned in this
	// order, per partition from its high watermark. Byte ranges must be
	// in increasing order and must not overlap.
	Batches []CommitBatch
}

// CommitBatch is one Kafka v2 batch inside the object.
type CommitBatch struct {
	Partition TopicIDPartition
	// ByteOffset and Size locate the batch in the object. Size > 0.
	ByteOffset int64
	Size       int64
	// BaseOffset and LastOffset are the batch's own (request-relative)
	// offsets, inclusive: it covers LastOffset-BaseOffset+1 offsets.
	BaseOffset int64
	LastOffset int64
	// RecordCount is the number of records, 1 to the offsets covered
	// (fewer after compaction).
	RecordCount int32
	// MaxTimestamp is the batch's max timestamp (CREATE_TIME).
	MaxTimestamp  int64
	TimestampType TimestampType
	// ProducerID < 0 marks a non-idempotent batch.
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
	// CRC is the batch's own CRC-32C field and PartitionLeaderEpoch its
	// partition leader epoch field (which that CRC does not cover), as
	// uploaded. The control plane stores them with the producer fields
	// as the batch's BatchBinding, so a reader can tell that the bytes
	// it reads at the coordinates are the batch that was committed there.
	CRC                  uint32
	PartitionLeaderEpoch int32
}

// Binding is what the control plane stores to tie b's row to its bytes.
func (b CommitBatch) Binding() BatchBinding {
	return BatchBinding{Known: true, CRC: b.CRC, PartitionLeaderEpoch: b.PartitionLeaderEpoch,
		ProducerID: b.ProducerID, ProducerEpoch: b.ProducerEpoch, BaseSequence: b.BaseSequence}
}

// BatchBinding ties a committed batch's row to the bytes uploaded for
// it: header fields that the coordinates (object, byte range, offsets)
// do not determine. A reader compares them with the batch it reads and
// refuses a mismatch as corruption, so bytes replaced under a key, runs
// of two partitions swapped, or coordinates pointing at another batch
// are never served as the partition's records. The CRC covers the
// records, so equal CRCs mean (up to CRC collisions) the same records;
// the producer fields and the leader epoch are compared because the CRC
// covers the former only with the rest of the batch and the latter not at
// all.
type BatchBinding struct {
	// Known is false for a row committed before the control plane stored
	// bindings: such a batch is checked for framing, CRC, size and offset
	// count only.
	Known                bool
	CRC                  uint32
	PartitionLeaderEpoch int32
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
}

// OffsetCount is the number of offsets the batch covers.
func (b CommitBatch) OffsetCount() int64 { return b.LastOffset - b.BaseOffset + 1 }

// Idempotent reports whether the batch goes through the producer check.
func (b CommitBatch) Idempotent() bool { return b.ProducerID >= 0 && b.ProducerEpoch >= 0 }

// LastSequence is the sequence of the batch's last record, wrapping from
// MaxInt32 to 0 as Kafka's DefaultRecordBatch.incrementSequence does.
func (b CommitBatch) LastSequence() int32 {
	return IncrementSequence(b.BaseSequence, int32(b.LastOffset-b.BaseOffset))
}

// CommitFileResult answers a CommitFile, one BatchResult per batch.
type CommitFileResult struct {
	Batches []BatchResult
	// MarkedForDeletion is true when no batch was accepted: the object
	// holds only dead bytes and goes to the cleaner at once.
	MarkedForDeletion bool
}

// CommitFilesResult answers one request of a CommitFiles: its
// CommitFileResult when Err is nil.
type CommitFilesResult struct {
	CommitFileResult
	// Err is the request's own failure, as CommitFile would have
	// returned it; nothing of the request is registered then (or, for
	// an outcome unknown, ErrOutcomeUnknown of a plane, what a retry
	// of it answers).
	Err error
}

// CommitEach implements CommitFiles by calling cp.CommitFile with each
// request in turn, each after the previous one returned: a plane (or a
// wrapper of one) without a group commit of its own keeps the order of
// the list this way. It never returns an error of its own; a context
// that ends fails the remaining items with its error.
func CommitEach(ctx context.Context, cp ControlPlane, reqs []CommitFileRequest) ([]CommitFilesResult, error) {
	out := make([]CommitFilesResult, len(reqs))
	for i := range reqs {
		if err := ctx.Err(); err != nil {
			out[i].Err = err
			continue
		}
		out[i].CommitFileResult, out[i].Err = cp.CommitFile(ctx, reqs[i])
	}
	return out, nil
}

// BatchResult is the answer for one batch of a commit.
type BatchResult struct {
	// Err is nil for an accepted batch, else a *BatchRejectedError. A
	// duplicate (ErrDuplicateSequence) carries the first copy's
	// BaseOffset and LogAppendTime; other rejections carry -1.
	Err error
	// BaseOffset is the offset assigned to the batch's first record.
	BaseOffset int64
	// LogAppendTime is the commit time in ms, or for a duplicate the
	// first copy's effective timestamp.
	LogAppendTime int64
	// LogStartOffset is W at commit (-1 for an unknown partition).
	LogStartOffset int64
}

// FindBatchesRequest asks for the batches from an offset of several
// partitions. Budgets are Kafka's fetch rules as Inkless applies them: the
// first batch of the whole request is always granted; after it, a batch
// is added while the partition's bytes so far are below its
// MaxPartitionBytes and the request's bytes so far are below MaxBytes (so
// the batch that crosses a budget is included). A partition reached with
// the request budget spent gets an empty, successful answer. Partitions
// are served in the caller's order: the caller rotates them for fairness.
type FindBatchesRequest struct {
	Partitions []FindPartition
	// MaxBytes is Kafka's fetch.max.bytes.
	MaxBytes int64
	// MaxBatchesPerPartition caps the batches per partition (0 = none).
	MaxBatchesPerPartition int
}

// FindPartition is one partition of a FindBatchesRequest.
type FindPartition struct {
	Partition TopicIDPartition
	Offset    int64
	// MaxPartitionBytes is Kafka's max.partition.fetch.bytes.
	MaxPartitionBytes int64
}

// FindBatchesResult answers one FindPartition.
type FindBatchesResult struct {
	// Err: *PartitionError wrapping ErrUnknownTopicOrPartition or
	// ErrOffsetOutOfRange (offset < W or > HW), else nil.
	Err error
	// Batches in offset order; the first holds the requested offset
	// (or, where the WAL holds nothing at it, as between a capped
	// prune's W and the first batch, starts after it). Empty at HW.
	Batches []BatchInfo
	// LogStartOffset and HighWatermark are W and HW (-1 if unknown).
	LogStartOffset int64
	HighWatermark  int64
}

// BatchInfo locates one committed batch.
type BatchInfo struct {
	ObjectKey  string
	ByteOffset int64
	Size       int64
	// BaseOffset and LastOffset are the assigned offsets, inclusive.
	BaseOffset    int64
	LastOffset    int64
	MaxTimestamp  int64
	TimestampType TimestampType
	// LogAppendTime is the commit time in ms.
	LogAppendTime int64
	// Binding is what was committed of the batch's header.
	Binding BatchBinding
}

// EffectiveTimestamp is the timestamp ListOffsets and retention use: the
// commit time for LOG_APPEND_TIME, else the batch's max timestamp.
func (b BatchInfo) EffectiveTimestamp() int64 {
	if b.TimestampType == LogAppendTime {
		return b.LogAppendTime
	}
	return b.MaxTimestamp
}

// ListOffsetsRequest asks for the offset of a timestamp (or a special
// timestamp: LatestTimestamp, EarliestTimestamp, ...).
type ListOffsetsRequest struct {
	Partition TopicIDPartition
	Timestamp int64
}

// ListOffsetsResult answers one ListOffsetsRequest; (-1, -1) when no
// batch matches.
type ListOffsetsResult struct {
	Err       error
	Offset    int64
	Timestamp int64
}

// DeleteRecordsRequest moves W to Offset (-1 = HW).
type DeleteRecordsRequest struct {
	Partition TopicIDPartition
	Offset    int64
}

// DeleteRecordsResult carries the new W (Kafka: low watermark).
type DeleteRecordsResult struct {
	Err            error
	LogStartOffset int64
}

// InitDisklessLogRequest initialises a switched partition.
type InitDisklessLogRequest struct {
	Partition TopicIDPartition
	Topic     string
	// LogStartOffset is the classic log start; it becomes W.
	LogStartOffset int64
	// DisklessStartOffset is the seal S; it becomes HW. Must be >=
	// LogStartOffset.
	DisklessStartOffset int64
	// ProducerStates are carried over from the classic log.
	ProducerStates []ProducerState
}

// InitDisklessLogResult answers one InitDisklessLogRequest.
type InitDisklessLogResult struct {
	Err error
	// AlreadyInitialised: the row existed and was left alone (a success
	// for the caller).
	AlreadyInitialised bool
}

// RepairDisklessLogRequest sets S of an existing row.
type RepairDisklessLogRequest struct {
	Partition           TopicIDPartition
	DisklessStartOffset int64
}

// RepairDisklessLogResult reports whether the row existed.
type RepairDisklessLogResult struct {
	Found bool
}

// AdvanceCrossTierLogStartRequest reports X.
type AdvanceCrossTierLogStartRequest struct {
	Partition         TopicIDPartition
	CrossTierLogStart int64
}

// AdvanceCrossTierLogStartResult carries the stored X.
type AdvanceCrossTierLogStartResult struct {
	Err               error
	CrossTierLogStart int64
}

// PruneRequest drops the WAL batches remote storage holds: those with
// last offset <= HighestOffsetInRemoteStorage (inclusive, -1 = none).
type PruneRequest struct {
	Partition                    TopicIDPartition
	HighestOffsetInRemoteStorage int64
}

// PruneResult carries the new W (-1 with an error).
type PruneResult struct {
	Err            error
	LogStartOffset int64
}

// RetentionRequest carries a partition's retention limits (-1 = none).
type RetentionRequest struct {
	Partition TopicIDPartition
	// RetentionBytes is Kafka's retention.bytes.
	RetentionBytes int64
	// RetentionMs is Kafka's retention.ms.
	RetentionMs int64
}

// RetentionResult says what EnforceRetention deleted.
type RetentionResult struct {
	Err            error
	DeletedBatches int
	DeletedBytes   int64
	// LogStartOffset is the new W (-1 with an error).
	LogStartOffset int64
}

// FileToDelete is an object the cleaner may delete.
type FileToDelete struct {
	ObjectKey string
	Size      int64
	MarkedAt  time.Time
}
