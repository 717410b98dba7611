package kafkaerr

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tierlog/tierlog/consolidate"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/tierstate"
	"github.com/tierlog/tierlog/wal"
)

// TestCode: representative errors as a broker meets them, wrapped as the
// library wraps them, and the precedence between the sentinels they
// match.
func TestCode(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want *kerr.Error
	}{
		{"nil", nil, nil},
		{"unknown", errors.New("boom"), kerr.UnknownServerError},
		{"a read past the log end", readOutOfRange(t), kerr.OffsetOutOfRange},
		{"a read in the remote-only range", fmt.Errorf("read: %w", log.ErrOffsetMovedToTieredStorage), kerr.OffsetMovedToTieredStorage},
		{"a remote read of an offset no segment holds", &remote.ReadRangeError{Offset: 3}, kerr.OffsetOutOfRange},
		{"an append with a bad CRC", &log.AppendError{Err: &log.RecordError{Record: -1, Kind: log.ErrCorruption,
			Err: &record.CorruptBatchError{Reason: "crc"}}}, kerr.CorruptMessage},
		{"an append with a bad timestamp", &log.AppendError{Err: &log.RecordError{Record: 0, Kind: log.ErrInvalidTimestamp}}, kerr.InvalidTimestamp},
		{"an append too large", &log.AppendError{Err: fmt.Errorf("%w: 2 MiB", log.ErrRecordTooLarge)}, kerr.MessageTooLarge},
		{"an append larger than a segment", log.ErrBatchTooLarge, kerr.RecordListTooLarge},
		{"a read at damage", &log.CorruptionError{Err: &record.CorruptBatchError{Reason: "magic"}}, kerr.CorruptMessage},
		{"a disk full", &log.IOError{Kind: log.ErrNoSpace, Err: errors.New("ENOSPC")}, kerr.KafkaStorageError},
		{"a fenced leader epoch", fmt.Errorf("append: %w", log.ErrFencedEpoch), kerr.FencedLeaderEpoch},
		{"an out-of-order sequence", &log.OutOfOrderSequenceError{ProducerID: 1}, kerr.OutOfOrderSequenceNumber},
		{"an old producer epoch", &log.InvalidProducerEpochError{ProducerID: 1}, kerr.InvalidProducerEpoch},
		{"a fenced coordinator", &log.CoordinatorEpochError{ProducerID: 1}, kerr.TransactionCoordinatorFenced},
		{"a closed log", log.ErrClosed, kerr.NotLeaderForPartition},
		{"a WAL duplicate is NONE", &wal.BatchRejectedError{Reason: wal.ErrDuplicateSequence}, nil},
		{"a WAL out-of-order batch", &wal.BatchRejectedError{Reason: wal.ErrOutOfOrderSequence}, kerr.OutOfOrderSequenceNumber},
		{"a WAL unknown partition", &wal.PartitionError{Err: wal.ErrUnknownTopicOrPartition}, kerr.UnknownTopicOrPartition},
		{"a WAL read past the high watermark", &wal.PartitionError{Err: wal.ErrOffsetOutOfRange}, kerr.OffsetOutOfRange},
		{"a failed WAL object read", &wal.StorageError{Err: wal.ErrObjectRead, Cause: errors.New("503")}, kerr.KafkaStorageError},
		{"a failed commit over corrupt control plane state", &wal.StorageError{Err: wal.ErrCommitFailed,
			Cause: fmt.Errorf("%w: value crc", wal.ErrCorruption)}, kerr.KafkaStorageError},
		{"an upload past its deadline", &wal.StorageError{Err: errors.Join(wal.ErrUploadFailed, wal.ErrObjectTimeout)}, kerr.KafkaStorageError},
		{"a bare object deadline", wal.ErrObjectTimeout, kerr.RequestTimedOut},
		{"a WAL batch whose bytes contradict the answer", &wal.BatchReadError{Err: wal.ErrInconsistentAnswer,
			Cause: &record.CorruptBatchError{Reason: "base offset"}}, kerr.KafkaStorageError},
		{"a WAL batch failing its CRC", &wal.BatchReadError{Err: wal.ErrCorruption}, kerr.CorruptMessage},
		{"a transactional batch to the WAL", &wal.ProduceError{Err: wal.ErrTransactionalBatch}, kerr.InvalidRequest},
		{"a WAL batch refused with its record cause", &wal.ProduceError{Err: wal.ErrInvalidRecord,
			Cause: &record.CorruptBatchError{Reason: "offsets"}}, kerr.InvalidRecord},
		{"an unsupported ListOffsets timestamp", wal.ErrUnsupportedTimestamp, kerr.UnsupportedVersion},
		{"a classic append while the seal is pending", &consolidate.ClassicAppendError{Phase: tierstate.PhaseSealPending}, kerr.ReplicaNotAvailable},
		{"a classic append after the seal", &consolidate.ClassicAppendError{Phase: tierstate.PhaseOne, Seal: 100}, kerr.NotLeaderForPartition},
		{"a diskless produce in phase 1", &consolidate.DisklessHeldError{Phase: tierstate.PhaseOne}, kerr.NotLeaderForPartition},
		{"a diskless produce while the seal is pending", &consolidate.DisklessHeldError{Phase: tierstate.PhaseSealPending}, kerr.ReplicaNotAvailable},
		{"the endpoint without the classic prefix", consolidate.ErrNotLeaderOrFollower, kerr.NotLeaderForPartition},
		{"the endpoint's unknown server error", consolidate.ErrUnknownServerError, kerr.UnknownServerError},
		{"a remote read below the seal reaching it", &remote.SealCapError{Offset: 50, Seal: 100}, kerr.KafkaStorageError},
		{"a corrupt remote batch", &remote.ReadCorruptionError{Err: &remote.BatchCorruptionError{Remote: true}}, kerr.CorruptMessage},
		{"a transition fenced", &tierstate.TransitionError{Op: "commit-seal", Reason: tierstate.ErrFencedEpoch}, kerr.FencedLeaderEpoch},
		{"a transition ahead of the controller", &tierstate.TransitionError{Op: "arm", Reason: tierstate.ErrLeaderEpochAhead}, kerr.NotController},
		{"a transition from a non-leader", &tierstate.TransitionError{Op: "arm", Reason: tierstate.ErrNotLeader}, kerr.NotLeaderForPartition},
		{"a seal increase", &tierstate.TransitionError{Op: "reseal", Reason: tierstate.ErrSealIncrease}, kerr.InvalidRequest},
		{"an operator refusal with a mapped reason", &tierstate.RecoveryError{Reason: tierstate.ErrNotSwitching}, kerr.InvalidRequest},
		{"an operator refusal of its own", &tierstate.RecoveryError{Reason: tierstate.ErrClassicPrefixGap}, kerr.UnknownServerError},
		{"a rebuild whose leader log start is past it", tierstate.ErrLeaderLogStartBeyondNextOffset, kerr.OffsetOutOfRange},
		{"a context error is not mapped", context.DeadlineExceeded, kerr.UnknownServerError},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, Code(c.err), "%v", c.err)
			var code int16
			if c.want != nil {
				code = c.want.Code
			}
			require.Equal(t, code, ErrorCode(c.err))
			require.Equal(t, c.want != nil && c.want.Retriable, Retriable(c.err))
		})
	}
}

// TestCodeOfAnOfflineLog: a log whose write failed refuses writes with
// an error that is KAFKA_STORAGE_ERROR (retriable), and so does a wait
// on it (log.UnifiedLog.WaitFor).
func TestCodeOfAnOfflineLog(t *testing.T) {
	var fail atomic.Bool
	mem := vfs.NewMem()
	require.NoError(t, mem.MkdirAll("p0", 0o755))
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if fail.Load() && op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
			return errorfs.ErrInjected
		}
		return nil
	}))
	l, err := log.Open("p0", log.Options{FS: fs})
	require.NoError(t, err)
	defer l.Close()
	batch := func() []byte {
		b := record.NewBuilder(record.DefaultBuilderOptions())
		b.Add(1_000_000, nil, []byte("v"))
		buf, err := b.Build()
		require.NoError(t, err)
		return buf
	}
	_, err = l.AppendAsLeader(batch(), 0, log.OriginClient)
	require.NoError(t, err)
	fail.Store(true)
	_, err = l.AppendAsLeader(batch(), 0, log.OriginClient)
	require.Equal(t, kerr.KafkaStorageError, Code(err), "%v", err)
	fail.Store(false)
	_, err = l.AppendAsLeader(batch(), 0, log.OriginClient)
	require.Equal(t, kerr.KafkaStorageError, Code(err), "sticky: %v", err)
	require.True(t, Retriable(err))
	_, err = l.WaitFor(context.Background(), 1, log.IsolationLogEnd)
	require.Equal(t, kerr.KafkaStorageError, Code(err), "%v", err)
}

// TestSealFetchCode: each at-seal fetch error is the Kafka error its
// String names; values beyond the defined ones are UNKNOWN_SERVER_ERROR.
func TestSealFetchCode(t *testing.T) {
	require.Nil(t, SealFetchCode(tierstate.SealErrorNone))
	for e := tierstate.SealErrorNotLeaderOrFollower; e <= tierstate.SealErrorOffsetOutOfRange; e++ {
		want := e.String()
		if k, ok := kerrNames[want]; ok {
			want = k
		}
		require.Equal(t, want, SealFetchCode(e).Message, "%v", e)
	}
	require.Equal(t, kerr.UnknownServerError, SealFetchCode(tierstate.SealErrorOffsetOutOfRange+1))
}
