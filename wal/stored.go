package wal

import (
	"errors"
	"fmt"
)

// BatchStatus is the outcome of one batch of a commit as a control plane
// stores it with the object, so that a retried commit answers exactly as
// the first one did. Both control planes store these numbers: never
// renumber them.
type BatchStatus uint8

// The batch outcomes.
const (
	BatchAccepted         BatchStatus = iota
	BatchUnknownPartition             // no such partition
	BatchDuplicate                    // an idempotent retry: answered with the first offsets
	BatchOutOfOrder                   // a sequence gap
	BatchInvalidEpoch                 // a stale producer epoch
	numBatchStatuses
)

var batchReasons = [numBatchStatuses]error{
	nil, ErrUnknownTopicOrPartition, ErrDuplicateSequence, ErrOutOfOrderSequence, ErrInvalidProducerEpoch,
}

// Valid reports whether s is one of the outcomes (a stored value read
// back is checked with it).
func (s BatchStatus) Valid() bool { return s < numBatchStatuses }

// StoredBatchResult is one batch's answer as a control plane keeps it.
type StoredBatchResult struct {
	Status         BatchStatus
	BaseOffset     int64
	LogAppendTime  int64
	LogStartOffset int64
	Detail         string
}

// UnknownPartitionResult is the stored answer of a batch for a partition
// the control plane does not have.
func UnknownPartitionResult() StoredBatchResult {
	return StoredBatchResult{Status: BatchUnknownPartition, BaseOffset: -1, LogAppendTime: -1, LogStartOffset: -1}
}

// RejectedResult is the stored answer of a batch the producer check c
// refused, on a partition whose log starts at logStart: a duplicate
// carries the offset and timestamp its first commit got.
func RejectedResult(c SequenceCheck, logStart int64) StoredBatchResult {
	r := StoredBatchResult{BaseOffset: -1, LogAppendTime: -1, LogStartOffset: logStart, Detail: c.Detail}
	switch {
	case errors.Is(c.Err, ErrDuplicateSequence):
		r.Status, r.BaseOffset, r.LogAppendTime = BatchDuplicate, c.Duplicate.AssignedOffset, c.Duplicate.Timestamp
	case errors.Is(c.Err, ErrInvalidProducerEpoch):
		r.Status = BatchInvalidEpoch
	default:
		r.Status = BatchOutOfOrder
	}
	return r
}

// CommitAnswer turns the stored results of req's batches into the call's
// answer. The object is reported marked for deletion iff no batch was
// accepted: that was decided at the commit, whatever its state now.
func CommitAnswer(req *CommitFileRequest, rs []StoredBatchResult) CommitFileResult {
	res := CommitFileResult{MarkedForDeletion: true, Batches: make([]BatchResult, len(rs))}
	for i, s := range rs {
		r := BatchResult{BaseOffset: s.BaseOffset, LogAppendTime: s.LogAppendTime, LogStartOffset: s.LogStartOffset}
		if s.Status == BatchAccepted {
			res.MarkedForDeletion = false
		} else {
			detail := s.Detail
			if s.Status == BatchUnknownPartition {
				detail = "no such partition"
			}
			r.Err = &BatchRejectedError{Partition: req.Batches[i].Partition, Index: i,
				Reason: batchReasons[s.Status], Detail: detail}
		}
		res.Batches[i] = r
	}
	return res
}

// Validate checks an InitDisklessLog request; a bad one gets this
// PartitionError (ErrInvalidArgument) as its answer and changes nothing.
func (q *InitDisklessLogRequest) Validate() error {
	var problem string
	switch {
	case q.Partition.TopicID.IsZero() || q.Partition.Partition < 0:
		problem = "no topic id or a negative partition"
	case q.LogStartOffset < 0 || q.DisklessStartOffset < q.LogStartOffset:
		problem = fmt.Sprintf("diskless start offset (%d) must be >= log start offset (%d) >= 0", q.DisklessStartOffset, q.LogStartOffset)
	case len(q.Topic) > 0xffff:
		problem = "topic name too long"
	}
	for _, st := range q.ProducerStates {
		if problem == "" && (st.ProducerID < 0 || st.ProducerEpoch < 0 || len(st.Batches) > MaxProducerBatches) {
			problem = fmt.Sprintf("producer %d epoch %d with %d batches", st.ProducerID, st.ProducerEpoch, len(st.Batches))
		}
	}
	if problem == "" {
		return nil
	}
	return &PartitionError{Partition: q.Partition, Err: ErrInvalidArgument, Detail: problem}
}

// InitialCrossTierLogStart is the cross-tier log start X the control
// plane records when it creates the log: a switched partition's (S > 0)
// is its classic log start W, which the leader's log start is, so that X
// is known from the first moment. Otherwise the first prune, which moves
// W to S, would leave ListOffsets EARLIEST answering S (it falls back to
// W while no X was reported) above a classic prefix remote storage
// holds. A born-diskless partition's is -1: nothing reported yet.
func (q *InitDisklessLogRequest) InitialCrossTierLogStart() int64 {
	if q.DisklessStartOffset > 0 {
		return q.LogStartOffset
	}
	return -1
}

// FixedListOffset answers the ListOffsets queries whose answer the log's
// row alone decides (earliest, earliest local, latest, latest tiered, and
// an unsupported negative timestamp); ok is false for MaxTimestamp and a
// timestamp search, which read the batches.
func FixedListOffset(q ListOffsetsRequest, info LogInfo) (res ListOffsetsResult, ok bool) {
	switch q.Timestamp {
	case EarliestTimestamp:
		x := info.CrossTierLogStartOffset
		if x < 0 {
			x = info.LogStartOffset
		}
		return ListOffsetsResult{Offset: x, Timestamp: -1}, true
	case EarliestLocalTimestamp:
		return ListOffsetsResult{Offset: info.LogStartOffset, Timestamp: -1}, true
	case LatestTimestamp:
		return ListOffsetsResult{Offset: info.HighWatermark, Timestamp: -1}, true
	case LatestTieredTimestamp:
		return ListOffsetsResult{Offset: -1, Timestamp: -1}, true
	case MaxTimestamp:
		return ListOffsetsResult{}, false
	}
	if q.Timestamp < 0 {
		return ListOffsetsResult{Offset: -1, Timestamp: -1, Err: &PartitionError{Partition: q.Partition,
			Err: ErrUnsupportedTimestamp, Detail: fmt.Sprintf("timestamp %d", q.Timestamp)}}, true
	}
	return ListOffsetsResult{}, false
}
