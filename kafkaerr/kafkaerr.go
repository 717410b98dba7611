// Package kafkaerr maps the typed errors of tierlog's public packages to
// the Kafka error code a broker answers with, as franz-go's kerr values.
//
// # Use
//
// A broker that serves Produce, Fetch, ListOffsets or the switch RPCs from
// tierlog passes each partition's error to Code and writes the code into
// the partition's response:
//
//	fd, err := l.Read(buf, offset, maxBytes, log.IsolationHighWatermark, true)
//	p.ErrorCode = kafkaerr.Code(err).Code // a nil *kerr.Error is NONE: see Code
//
// SealFetchCode does the same for the at-seal fetch answer's enum
// (tierstate.SealFetchDecision.Error). Code never inspects error text: it matches the library's sentinels with
// errors.Is, so every typed error (*log.AppendError, *log.OffsetRangeError,
// *wal.StorageError, *tierstate.TransitionError, ...) maps like the
// sentinel it unwraps to.
//
// # Precedence
//
// An error may match several sentinels (a *wal.StorageError unwraps to
// ErrCommitFailed and to the control plane's cause; a *log.AppendError to
// its reason and to the record package's cause). The rules are tried in
// this order, the first match wins, more specific before more general:
//
//  1. Success: wal.ErrDuplicateSequence is NONE (nil), as Kafka answers a
//     duplicate batch with the first copy's offsets.
//  2. Storage failures that carry the decision: an I/O error of a log
//     (log.ErrIO and its kinds, which the sticky write failure of an
//     offline log wraps), replica.ErrOffline, a failed WAL upload,
//     commit or object read and a control plane answer that contradicts
//     itself (the reader's and writer's failed read or commit):
//     KAFKA_STORAGE_ERROR (retriable). They come
//     before corruption: a control plane's damaged state under a failed
//     commit is the broker's storage failure, not the client's message.
//  3. Fencing and producer state: FENCED_LEADER_EPOCH,
//     OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH,
//     UNKNOWN_PRODUCER_ID, INVALID_TXN_STATE, TRANSACTION_COORDINATOR_FENCED.
//  4. The append's verdict on a batch: MESSAGE_TOO_LARGE,
//     RECORD_LIST_TOO_LARGE, INVALID_TIMESTAMP, INVALID_RECORD,
//     INVALID_REQUEST (a transactional batch to the WAL); then the
//     corruption underneath: CORRUPT_MESSAGE for ErrCorruption and the
//     record package's torn tail, MESSAGE_TOO_LARGE for a batch that
//     decompresses past the limit. Kafka answers CORRUPT_MESSAGE for
//     damage found by an append (LogValidator) and by a read alike
//     (ReplicaManager.readFromLocalLog answers Errors.forException of the
//     segment's CorruptRecordException); only I/O failures are
//     KAFKA_STORAGE_ERROR.
//  5. Offsets: OFFSET_MOVED_TO_TIERED_STORAGE, OFFSET_OUT_OF_RANGE.
//  6. Leadership and the classic-to-diskless switch: REPLICA_NOT_AVAILABLE
//     while the seal is pending, NOT_LEADER_OR_FOLLOWER once the classic
//     log is sealed or while diskless records wait for phase 2,
//     NOT_CONTROLLER, UNKNOWN_TOPIC_OR_PARTITION, and the endpoint's
//     documented UNKNOWN_SERVER_ERROR.
//  7. The remote tier and the object store: KAFKA_STORAGE_ERROR
//     (retriable: the next fetch re-evaluates the log start, so data
//     that retention removed meanwhile is then OFFSET_OUT_OF_RANGE);
//     REQUEST_TIMED_OUT for a WAL object deadline alone.
//  8. Refused switch transitions: the reasons tierstate documents
//     (INVALID_REQUEST), then the umbrella sentinels.
//  9. The general sentinels last: ErrClosed (the log or control plane
//     went away under the request: NOT_LEADER_OR_FOLLOWER, as Kafka
//     answers for a partition it no longer hosts), ErrInvalidArgument
//     (INVALID_REQUEST), wal.ErrUnsupportedTimestamp (UNSUPPORTED_VERSION).
//
// Where a sentinel's own comment names a Kafka error, the rule here is
// that error. A few sentinels are not Kafka answers at all (a follower's
// or background task's internal state, an operator tool's refusal, a
// caller bug, a store adapter's cause that reaches a broker only wrapped
// in a mapped sentinel): Code answers UNKNOWN_SERVER_ERROR for them, as
// for any error it does not know, and the package's tests list each with
// its reason (notAnswers), so a new sentinel is either mapped or listed.
// Context errors (context.Canceled, context.DeadlineExceeded) are not
// mapped: a fetch whose wait ended answers NONE with no records, and a
// cancelled request is not answered.
package kafkaerr

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tierlog/tierlog/consolidate"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/logmanager"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/replica"
	"github.com/tierlog/tierlog/tierstate"
	"github.com/tierlog/tierlog/wal"
)

// Code returns the Kafka error a broker answers for err: nil for nil and
// for an error that Kafka answers with NONE (wal.ErrDuplicateSequence),
// kerr.UnknownServerError for an error no rule matches, else the first
// matching rule's error in the order of the package comment. A nil
// *kerr.Error is Kafka's NONE (0): write code 0 for it.
func Code(err error) *kerr.Error {
	if err == nil {
		return nil
	}
	if r, ok := lookup(err); ok {
		return r.code
	}
	return kerr.UnknownServerError
}

// ErrorCode is Code's numeric value: 0 for nil (NONE).
func ErrorCode(err error) int16 {
	if c := Code(err); c != nil {
		return c.Code
	}
	return 0
}

// Retriable reports whether a client retries after Code(err), by kerr's
// flag (KAFKA_STORAGE_ERROR, NOT_LEADER_OR_FOLLOWER, REPLICA_NOT_AVAILABLE,
// CORRUPT_MESSAGE, FENCED_LEADER_EPOCH, ... are). False for nil.
func Retriable(err error) bool {
	c := Code(err)
	return c != nil && c.Retriable
}

// rule maps a sentinel, matched with errors.Is, to a Kafka error (nil:
// NONE).
type rule struct {
	err  error
	code *kerr.Error
}

// lookup returns the first rule err matches.
func lookup(err error) (rule, bool) {
	for _, r := range rules {
		if errors.Is(err, r.err) {
			return r, true
		}
	}
	return rule{}, false
}

// rules in precedence order (the package comment's numbered list).
// Sentinels shared through internal/base (log.ErrCorruption ==
// record.ErrCorruption == wal.ErrCorruption, the ErrClosed,
// ErrOffsetOutOfRange, ErrFencedEpoch and ErrInvalidArgument of every
// package) appear once.
var rules = []rule{
	// 1. Success.
	{wal.ErrDuplicateSequence, nil},

	// 2. Storage failures carrying the decision.
	{log.ErrIO, kerr.KafkaStorageError},
	{log.ErrNotFound, kerr.KafkaStorageError},
	{log.ErrPermission, kerr.KafkaStorageError},
	{log.ErrNoSpace, kerr.KafkaStorageError},
	{log.ErrIsDir, kerr.KafkaStorageError},
	{log.ErrNotDir, kerr.KafkaStorageError},
	{replica.ErrOffline, kerr.KafkaStorageError},
	{logmanager.ErrLogDirOffline, kerr.KafkaStorageError},
	{wal.ErrUploadFailed, kerr.KafkaStorageError},
	{wal.ErrCommitFailed, kerr.KafkaStorageError},
	{wal.ErrObjectRead, kerr.KafkaStorageError},
	{wal.ErrFindFailed, kerr.KafkaStorageError},
	{wal.ErrInconsistentAnswer, kerr.KafkaStorageError},

	// 3. Fencing and producer state.
	{log.ErrFencedEpoch, kerr.FencedLeaderEpoch},
	{log.ErrOutOfOrderSequence, kerr.OutOfOrderSequenceNumber},
	{wal.ErrOutOfOrderSequence, kerr.OutOfOrderSequenceNumber},
	{log.ErrInvalidProducerEpoch, kerr.InvalidProducerEpoch},
	{wal.ErrInvalidProducerEpoch, kerr.InvalidProducerEpoch},
	{log.ErrUnknownProducerID, kerr.UnknownProducerID},
	{log.ErrInvalidTxnState, kerr.InvalidTxnState},
	{log.ErrTransactionCoordinatorFenced, kerr.TransactionCoordinatorFenced},

	// 4. The append's verdict, then the corruption underneath.
	{log.ErrRecordTooLarge, kerr.MessageTooLarge},
	{wal.ErrRecordTooLarge, kerr.MessageTooLarge},
	{log.ErrBatchTooLarge, kerr.RecordListTooLarge},
	{log.ErrInvalidTimestamp, kerr.InvalidTimestamp},
	{log.ErrInvalidRecord, kerr.InvalidRecord},
	{wal.ErrInvalidRecord, kerr.InvalidRecord},
	{wal.ErrTransactionalBatch, kerr.InvalidRequest},
	{log.ErrCorruption, kerr.CorruptMessage},
	{remote.ErrCorrupt, kerr.CorruptMessage},
	{record.ErrTornTail, kerr.CorruptMessage},
	{record.ErrDecompressedTooLarge, kerr.MessageTooLarge},

	// 5. Offsets.
	{log.ErrOffsetMovedToTieredStorage, kerr.OffsetMovedToTieredStorage},
	{log.ErrOffsetOutOfRange, kerr.OffsetOutOfRange},

	// 6. Leadership and the switch.
	{consolidate.ErrSealPending, kerr.ReplicaNotAvailable},
	{consolidate.ErrAwaitingPhaseTwo, kerr.NotLeaderForPartition},
	{consolidate.ErrClassicLogSealed, kerr.NotLeaderForPartition},
	{consolidate.ErrClassicAppendRefused, kerr.NotLeaderForPartition},
	{consolidate.ErrNotLeaderOrFollower, kerr.NotLeaderForPartition},
	{tierstate.ErrNotLeader, kerr.NotLeaderForPartition},
	{replica.ErrNoLog, kerr.NotLeaderForPartition},
	{logmanager.ErrNotFound, kerr.NotLeaderForPartition},
	{logmanager.ErrInconsistentTopicID, kerr.InconsistentTopicID},
	{tierstate.ErrLeaderEpochAhead, kerr.NotController},
	{wal.ErrUnknownTopicOrPartition, kerr.UnknownTopicOrPartition},
	{consolidate.ErrUnknownTopicOrPartition, kerr.UnknownTopicOrPartition},
	{tierstate.ErrReplicaNotHosted, kerr.UnknownTopicOrPartition},
	{consolidate.ErrUnknownServerError, kerr.UnknownServerError},

	// 7. The remote tier and the object store.
	{remote.ErrPartitionNotReady, kerr.KafkaStorageError},
	{remote.ErrSegmentDataNotFound, kerr.KafkaStorageError},
	{remote.ErrReadPastSeal, kerr.KafkaStorageError},
	// A remote batch of a discarded lineage: no record is served, and
	// the consumer retries (as for a read past the seal).
	{remote.ErrNotInLineage, kerr.KafkaStorageError},
	{objstore.ErrNotExist, kerr.KafkaStorageError},
	{objstore.ErrShortRead, kerr.KafkaStorageError},
	{objstore.ErrSizeMismatch, kerr.KafkaStorageError},
	{objstore.ErrClosed, kerr.KafkaStorageError},
	{wal.ErrObjectTimeout, kerr.RequestTimedOut},

	// 8. Refused switch transitions: the reasons, then the umbrellas.
	{tierstate.ErrNotSwitching, kerr.InvalidRequest},
	{tierstate.ErrSealCommitted, kerr.InvalidRequest},
	{tierstate.ErrSealNotCommitted, kerr.InvalidRequest},
	{tierstate.ErrInvalidSeal, kerr.InvalidRequest},
	{tierstate.ErrSealIncrease, kerr.InvalidRequest},
	{tierstate.ErrSealMismatch, kerr.InvalidRequest},
	{tierstate.ErrInPhaseTwo, kerr.InvalidRequest},
	{tierstate.ErrPhaseBackwards, kerr.InvalidRequest},
	{tierstate.ErrInvalidRecordedEpoch, kerr.InvalidRequest},
	{tierstate.ErrRecordedEpochNotWithFlag, kerr.InvalidRequest},
	{tierstate.ErrInvalidEpoch, kerr.InvalidRequest},
	{tierstate.ErrDisklessEpochDecrease, kerr.InvalidRequest},
	{tierstate.ErrConflictingTags, kerr.InvalidRequest},
	{tierstate.ErrInvalidTransition, kerr.InvalidRequest},
	{tierstate.ErrInvalidTags, kerr.InvalidRequest},

	// 9. The general sentinels.
	{log.ErrClosed, kerr.NotLeaderForPartition},
	{log.ErrInvalidArgument, kerr.InvalidRequest},
	{wal.ErrUnsupportedTimestamp, kerr.UnsupportedVersion},
}

// SealFetchCode is the Kafka error of an at-seal fetch answer
// (tierstate.SealFetchDecision.Error): nil for SealErrorNone,
// kerr.UnknownServerError for a value tierstate does not define.
func SealFetchCode(e tierstate.SealFetchError) *kerr.Error {
	switch e {
	case tierstate.SealErrorNone:
		return nil
	case tierstate.SealErrorNotLeaderOrFollower:
		return kerr.NotLeaderForPartition
	case tierstate.SealErrorFencedLeaderEpoch:
		return kerr.FencedLeaderEpoch
	case tierstate.SealErrorUnknownLeaderEpoch:
		return kerr.UnknownLeaderEpoch
	case tierstate.SealErrorOffsetOutOfRange:
		return kerr.OffsetOutOfRange
	}
	return kerr.UnknownServerError
}
