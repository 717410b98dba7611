package kafkaerr

import (
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/consolidate"
	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/logmanager"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/tierstate"
	"github.com/tierlog/tierlog/wal"
	"github.com/tierlog/tierlog/wal/pebblecp"
	"github.com/tierlog/tierlog/wal/pgcp"
)

// sample is one value of an exported error type and the sentinel it
// wraps: Code must answer for the value what it answers for the
// sentinel.
type sample struct {
	err      error
	sentinel error
}

// errorTypeSamples has a row per exported error type of the module
// (TestEveryErrorTypeHasASample holds it to the sources).
func errorTypeSamples(t *testing.T) map[string]sample {
	t.Helper()
	return map[string]sample{
		"log.IndexError":                {&log.IndexError{Name: "0.index"}, log.ErrCorruption},
		"log.RecordError":               {&log.RecordError{Record: 1, Kind: log.ErrInvalidTimestamp}, log.ErrInvalidTimestamp},
		"log.CheckpointError":           {&log.CheckpointError{Path: "p0/offsets-checkpoint", Line: 2}, log.ErrCorruption},
		"log.OffsetRangeError":          {readOutOfRange(t), log.ErrOffsetOutOfRange},
		"log.AppendError":               {&log.AppendError{Err: &log.RecordError{Record: -1, Kind: log.ErrInvalidRecord}}, log.ErrInvalidRecord},
		"log.CorruptionError":           {&log.CorruptionError{Err: &record.CorruptBatchError{Reason: "crc"}}, log.ErrCorruption},
		"log.IOError":                   {&log.IOError{Kind: log.ErrNoSpace, Err: errors.New("no space left on device")}, log.ErrIO},
		"log.OutOfOrderSequenceError":   {&log.OutOfOrderSequenceError{ProducerID: 7}, log.ErrOutOfOrderSequence},
		"log.InvalidProducerEpochError": {&log.InvalidProducerEpochError{ProducerID: 7}, log.ErrInvalidProducerEpoch},
		"log.UnknownProducerIDError":    {&log.UnknownProducerIDError{ProducerID: 7}, log.ErrUnknownProducerID},
		"log.InvalidTxnStateError":      {&log.InvalidTxnStateError{ProducerID: 7}, log.ErrInvalidTxnState},
		"log.CoordinatorEpochError":     {&log.CoordinatorEpochError{ProducerID: 7}, log.ErrTransactionCoordinatorFenced},

		"log/record.ControlRecordError":    {&record.ControlRecordError{Part: "key"}, record.ErrCorruption},
		"log/record.CorruptBatchError":     {&record.CorruptBatchError{Reason: "crc"}, record.ErrCorruption},
		"log/record.TornTailError":         {&record.TornTailError{Pos: 10}, record.ErrTornTail},
		"log/record.DecompressedSizeError": {&record.DecompressedSizeError{}, record.ErrDecompressedTooLarge},

		"epochcache.CheckpointError": {&epochcache.CheckpointError{Line: 1}, epochcache.ErrCorruption},

		"wal.ObjectError":        {&wal.ObjectError{Reason: "bad magic"}, wal.ErrCorruption},
		"wal.ProduceError":       {&wal.ProduceError{Err: wal.ErrInvalidRecord, Cause: &record.CorruptBatchError{Reason: "offsets"}}, wal.ErrInvalidRecord},
		"wal.StorageError":       {&wal.StorageError{Err: wal.ErrCommitFailed, Cause: &pebblecp.CorruptionError{Reason: "crc"}}, wal.ErrCommitFailed},
		"wal.BatchReadError":     {&wal.BatchReadError{Err: wal.ErrInconsistentAnswer, Cause: &record.CorruptBatchError{Reason: "crc"}}, wal.ErrInconsistentAnswer},
		"wal.PartitionError":     {&wal.PartitionError{Err: wal.ErrUnknownTopicOrPartition}, wal.ErrUnknownTopicOrPartition},
		"wal.BatchRejectedError": {&wal.BatchRejectedError{Reason: wal.ErrDuplicateSequence}, wal.ErrDuplicateSequence},
		"wal.RunCorruptionError": {&wal.RunCorruptionError{ObjectKey: "k", BaseOffset: 0, LastOffset: 9, Detail: "sizes"}, wal.ErrCorruption},

		"wal/pebblecp.CorruptionError":   {&pebblecp.CorruptionError{Reason: "crc"}, wal.ErrCorruption},
		"wal/pgcp.SchemaVersionError":    {&pgcp.SchemaVersionError{Found: 9, Supported: 2}, pgcp.ErrSchemaTooNew},
		"consolidate.ClassicAppendError": {&consolidate.ClassicAppendError{Phase: tierstate.PhaseSealPending}, consolidate.ErrSealPending},
		"consolidate.DisklessHeldError":  {&consolidate.DisklessHeldError{Phase: tierstate.PhaseOne}, consolidate.ErrAwaitingPhaseTwo},
		"consolidate.NotAtLogEndError":   {&consolidate.NotAtLogEndError{Want: 5, BaseOffset: 7}, consolidate.ErrNotAtLogEnd},

		"logmanager.CheckpointError":          {&logmanager.CheckpointError{}, logmanager.ErrCorruption},
		"logmanager.DirOfflineError":          {&logmanager.DirOfflineError{Cause: log.ErrIO}, logmanager.ErrLogDirOffline},
		"logmanager.DuplicateLogError":        {&logmanager.DuplicateLogError{}, logmanager.ErrDuplicateLog},
		"logmanager.InconsistentTopicIDError": {&logmanager.InconsistentTopicIDError{}, logmanager.ErrInconsistentTopicID},

		"tierstate.RecoveryError":         {&tierstate.RecoveryError{Reason: tierstate.ErrSealMismatch}, tierstate.ErrSealMismatch},
		"tierstate.SealRangeError":        {&tierstate.SealRangeError{Seal: 18, LeaderLogEndOffset: 15}, tierstate.ErrSealOutOfRange},
		"tierstate.SealBatchError":        {&tierstate.SealBatchError{Seal: 12, BaseOffset: 10, LastOffset: 14}, tierstate.ErrSealInsideBatch},
		"tierstate.ForcedSealError":       {&tierstate.ForcedSealError{Seal: 12, Leader: 1, LeaderLogEndOffset: 15}, tierstate.ErrForcedSealBelowLogEnd},
		"tierstate.UnreplicatedSealError": {&tierstate.UnreplicatedSealError{Seal: 15, Leader: 1, HighWatermark: 12}, tierstate.ErrForcedSealAboveHighWatermark},
		"tierstate.RebuildError":          {&tierstate.RebuildError{Err: &tierstate.SegmentNotFoundError{}}, tierstate.ErrRemoteSegmentNotFound},
		"tierstate.SegmentNotFoundError":  {&tierstate.SegmentNotFoundError{}, tierstate.ErrRemoteSegmentNotFound},
		"tierstate.TransitionError":       {&tierstate.TransitionError{Op: "arm", Reason: tierstate.ErrFencedEpoch}, tierstate.ErrFencedEpoch},
		"tierstate.TagError":              {&tierstate.TagError{Tag: 100, Reason: tierstate.ErrInvalidSeal}, tierstate.ErrInvalidSeal},

		"remote.ReadRangeError":       {&remote.ReadRangeError{Offset: 5}, remote.ErrOffsetOutOfRange},
		"remote.SealCapError":         {&remote.SealCapError{Offset: 50, Seal: 100}, remote.ErrReadPastSeal},
		"remote.LineageError":         {&remote.LineageError{Offset: 50, BatchEpoch: 1, LineageEpoch: 2}, remote.ErrNotInLineage},
		"remote.ReadCorruptionError":  {&remote.ReadCorruptionError{Err: &remote.BatchCorruptionError{Remote: true}}, remote.ErrCorruption},
		"remote.BatchCorruptionError": {&remote.BatchCorruptionError{Remote: true}, remote.ErrCorrupt},
		"remote.SegmentMetadataError": {&remote.SegmentMetadataError{Reason: "end < start"}, remote.ErrInvalidArgument},
		"remote.TransitionError":      {&remote.TransitionError{What: "segment"}, remote.ErrInvalidTransition},
		"remote.CorruptionError":      {&remote.CorruptionError{Reason: "crc"}, remote.ErrCorrupt},

		"remote/objstore.OpError": {&objstore.OpError{Op: "get", Err: objstore.ErrShortRead}, objstore.ErrShortRead},
	}
}

// readOutOfRange returns the *log.OffsetRangeError of a read above the
// log end (the type's reason field is set by package log only).
func readOutOfRange(t *testing.T) error {
	mem := vfs.NewMem()
	require.NoError(t, mem.MkdirAll("p0", 0o755))
	l, err := log.Open("p0", log.Options{FS: mem})
	require.NoError(t, err)
	defer l.Close()
	_, err = l.Read(nil, 9, 1<<20, log.IsolationLogEnd, true)
	var re *log.OffsetRangeError
	require.ErrorAs(t, err, &re)
	return err
}

// TestErrorTypesMapLikeTheirSentinels: each typed error answers what its
// sentinel answers.
func TestErrorTypesMapLikeTheirSentinels(t *testing.T) {
	for name, s := range errorTypeSamples(t) {
		require.ErrorIs(t, s.err, s.sentinel, name)
		require.Equal(t, Code(s.sentinel), Code(s.err), "%s: %v", name, s.err)
	}
}
