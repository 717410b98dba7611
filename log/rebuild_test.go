package log

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"
	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/log/record"
)

// restoreSnapshot returns the bytes of a producer snapshot holding
// producer 7 (one idempotent batch at offset 0), taken by a roll at 1.
func restoreSnapshot(t *testing.T) []byte {
	t.Helper()
	src := openTestLog(t, vfs.NewMem(), Options{})
	defer src.Close()
	opts := record.DefaultBuilderOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = 7, 0, 0
	b := record.NewBuilder(opts)
	b.Add(1_000_000, nil, []byte("v"))
	batch, err := b.Build()
	require.NoError(t, err)
	_, err = src.AppendAsLeader(batch, 0, OriginClient)
	require.NoError(t, err)
	require.NoError(t, src.Roll())
	snap, err := src.ProducerSnapshot(1)
	require.NoError(t, err)
	return snap
}

func restoreState(l *UnifiedLog) string {
	var pids []int64
	for _, p := range l.ActiveProducers() {
		pids = append(pids, p.ProducerID)
	}
	return fmt.Sprintf("log-start=%d local-log-start=%d leo=%d epochs=%s producers=%v",
		l.LogStartOffset(), l.LocalLogStartOffset(), l.LogEndOffset(),
		epochcache.FormatEntries(l.EpochEntries()), pids)
}

// TestTruncateFullyAndRestore: the whole old log is replaced by an empty
// log at the next offset with the restored epochs and producers; the
// state survives a reopen unchanged, and the log appends from there.
func TestTruncateFullyAndRestore(t *testing.T) {
	fs := vfs.NewMem()
	l := openTestLog(t, fs, Options{RemoteStorageEnabled: true, SegmentBytes: 200})
	appendRecords(t, l, 0, 3, 1_000)
	appendRecords(t, l, 4, 3, 1_000)
	require.Greater(t, l.Metrics().Segments, 1)
	require.True(t, l.UpdateHighestOffsetInRemoteStorage(2, l.TruncationCount()))
	count := l.TruncationCount()

	err := l.TruncateFullyAndRestore(RemoteRestore{NextOffset: 10, LogStartOffset: 0,
		Epochs: []epochcache.Entry{{Epoch: 0, StartOffset: 0}, {Epoch: 2, StartOffset: 5}}, ProducerSnapshot: restoreSnapshot(t)})
	require.NoError(t, err)
	want := "log-start=0 local-log-start=10 leo=10 epochs=0@0 2@5 producers=[7]"
	require.Equal(t, want, restoreState(l))
	require.EqualValues(t, 10, l.HighWatermark())
	require.Equal(t, count+1, l.TruncationCount())
	require.EqualValues(t, 2, l.HighestOffsetInRemoteStorage(), "kept, as TruncateFullyAndStartAt keeps it")
	require.Equal(t, 1, l.Metrics().Segments)
	require.NoError(t, l.Close())

	l = openTestLog(t, fs, Options{RemoteStorageEnabled: true, SegmentBytes: 200})
	require.Equal(t, want, restoreState(l))
	_, err = l.AppendAsFollower(buildBatches(t, 1, 1, 10, 1_000, 10, 5), 5)
	require.NoError(t, err)
	require.Equal(t, "log-start=0 local-log-start=10 leo=11 epochs=0@0 2@5 5@10 producers=[7]", restoreState(l))
	require.NoError(t, l.Close())
}

// TestTruncateFullyAndRestoreMovesEpochsToLogStart: entries below the log
// start are moved up to it, as Open's repair would, so the live log and
// a reopened one agree. Without a snapshot the producer state is empty,
// and an empty epoch list clears the old checkpoint.
func TestTruncateFullyAndRestoreMovesEpochsToLogStart(t *testing.T) {
	fs := vfs.NewMem()
	opts := Options{RemoteStorageEnabled: true}
	l := openTestLog(t, fs, opts)
	appendRecords(t, l, 3, 4, 1_000)
	require.NoError(t, l.TruncateFullyAndRestore(RemoteRestore{NextOffset: 20, LogStartOffset: 8,
		Epochs: []epochcache.Entry{{Epoch: 0, StartOffset: 0}, {Epoch: 1, StartOffset: 5}, {Epoch: 2, StartOffset: 9}}}))
	want := "log-start=8 local-log-start=20 leo=20 epochs=1@8 2@9 producers=[]"
	require.Equal(t, want, restoreState(l))
	require.NoError(t, l.Close())
	l = openTestLog(t, fs, opts)
	require.Equal(t, want, restoreState(l))

	require.NoError(t, l.TruncateFullyAndRestore(RemoteRestore{NextOffset: 30, LogStartOffset: -1}))
	require.Equal(t, "log-start=30 local-log-start=30 leo=30 epochs=(empty) producers=[]", restoreState(l))
	require.NoError(t, l.Close())
	l = openTestLog(t, fs, opts)
	require.Equal(t, "log-start=30 local-log-start=30 leo=30 epochs=(empty) producers=[]", restoreState(l))
	require.NoError(t, l.Close())
}

// TestTruncateFullyAndRestoreRefusesBadInput: every refusal leaves the log
// as it was and writable.
func TestTruncateFullyAndRestoreRefusesBadInput(t *testing.T) {
	e := func(epoch int32, start int64) epochcache.Entry {
		return epochcache.Entry{Epoch: epoch, StartOffset: start}
	}
	for _, tc := range []struct {
		name string
		r    RemoteRestore
		is   error
	}{
		{"negative offset", RemoteRestore{NextOffset: -1}, ErrInvalidArgument},
		{"log start above", RemoteRestore{NextOffset: 10, LogStartOffset: 11}, ErrInvalidArgument},
		{"entry at next offset", RemoteRestore{NextOffset: 10, Epochs: []epochcache.Entry{e(0, 0), e(1, 10)}}, ErrInvalidArgument},
		{"epochs not increasing", RemoteRestore{NextOffset: 10, Epochs: []epochcache.Entry{e(1, 0), e(1, 5)}}, ErrInvalidArgument},
		{"offsets not increasing", RemoteRestore{NextOffset: 10, Epochs: []epochcache.Entry{e(1, 5), e(2, 5)}}, ErrInvalidArgument},
		{"negative epoch", RemoteRestore{NextOffset: 10, Epochs: []epochcache.Entry{e(-1, 0)}}, ErrInvalidArgument},
		{"bad snapshot", RemoteRestore{NextOffset: 10, ProducerSnapshot: []byte("not a snapshot")}, ErrCorruption},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := openTestLog(t, vfs.NewMem(), Options{RemoteStorageEnabled: true})
			defer l.Close()
			appendRecords(t, l, 1, 3, 1_000)
			before, count := restoreState(l), l.TruncationCount()
			require.ErrorIs(t, l.TruncateFullyAndRestore(tc.r), tc.is)
			require.Equal(t, before, restoreState(l))
			require.Equal(t, count, l.TruncationCount())
			appendRecords(t, l, 1, 1, 1_000)
		})
	}
	l := openTestLog(t, vfs.NewMem(), Options{})
	defer l.Close()
	require.ErrorIs(t, l.TruncateFullyAndRestore(RemoteRestore{NextOffset: 10}), ErrInvalidArgument,
		"a log without remote storage cannot keep its log start below its local log start")
}

// TestTruncateFullyAndRestoreIOFailure: a failed file operation makes the
// log refuse writes until reopened; the reopened log is the old one or an
// empty one below the next offset (a fetch there rebuilds again).
func TestTruncateFullyAndRestoreIOFailure(t *testing.T) {
	for _, tc := range []struct {
		name string
		pred errorfs.Predicate
		want string
	}{
		{"remove", errorfs.And(opKinds{"remove", []errorfs.OpKind{errorfs.OpRemove}}, errorfs.PathMatch("p0/*.log")),
			"log-start=0 local-log-start=0 leo=3 epochs=1@0 producers=[]"},
		{"create", errorfs.And(opKinds{"create", []errorfs.OpKind{errorfs.OpCreate}}, errorfs.PathMatch("p0/00000000000000000010.log")),
			"log-start=0 local-log-start=0 leo=0 epochs=(empty) producers=[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			var armed bool
			inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
				if armed && tc.pred.Evaluate(op) {
					return errorfs.ErrInjected
				}
				return nil
			})
			opts := Options{RemoteStorageEnabled: true}
			l := openTestLog(t, errorfs.Wrap(mem, inj), opts)
			appendRecords(t, l, 1, 3, 1_000)
			require.NoError(t, l.Flush())
			armed = true
			err := l.TruncateFullyAndRestore(RemoteRestore{NextOffset: 10, LogStartOffset: 0,
				Epochs: []epochcache.Entry{{Epoch: 0, StartOffset: 0}}})
			require.Error(t, err)
			require.Error(t, l.AssignEpochStartOffset(9, l.LogEndOffset()), "writes refused after the failure")
			armed = false
			_ = l.Close()
			l = openTestLog(t, mem, opts)
			defer l.Close()
			require.Equal(t, tc.want, restoreState(l))
		})
	}
}

// TestTruncateFullyAndRestoreProducerWindow: a rebuild from remote storage
// given the producer batches file uploaded beside the snapshot
// (ProducerSnapshotWithBatches) restores every producer's whole dedup
// window: a retry of any of the last five batches is a duplicate with its
// original offsets, also after a restart, and the batch before them is out
// of order, as on the log the snapshot came from. Without the file each
// producer holds Kafka's window, its last batch only; a file that names
// another snapshot is ignored the same way; damaged bytes are refused with
// ErrCorruption and change nothing.
func TestTruncateFullyAndRestoreProducerWindow(t *testing.T) {
	const pid = 7
	src := openTestLog(t, vfs.NewMem(), Options{RemoteStorageEnabled: true})
	var sent [][]byte
	var infos []AppendInfo
	for i := range 6 {
		b := idempotentBatch(t, pid, 0, int32(2*i), 2, restartNowMs-100+int64(i))
		sent = append(sent, b)
		info, err := src.AppendAsLeader(slices.Clone(b), 0, OriginClient)
		require.NoError(t, err)
		infos = append(infos, info)
		_, err = src.AppendAsLeader(buildBatches(t, 1, 1, 10, restartNowMs, 0, -1), 0, OriginClient)
		require.NoError(t, err)
	}
	next := src.LogEndOffset()
	require.NoError(t, src.Roll())
	snap, batches, err := src.ProducerSnapshotWithBatches(next)
	require.NoError(t, err)
	require.NotNil(t, batches, "the log's own snapshot has its batches file")
	// The first batch of another state: a snapshot with another crc.
	other := openTestLog(t, vfs.NewMem(), Options{})
	_, err = other.AppendAsLeader(idempotentBatch(t, pid, 0, 0, 1, restartNowMs), 0, OriginClient)
	require.NoError(t, err)
	require.NoError(t, other.Roll())
	_, staleBatches, err := other.ProducerSnapshotWithBatches(other.LogEndOffset())
	require.NoError(t, err)
	require.NoError(t, other.Close())
	require.NoError(t, src.Close())

	// retry appends sent[i] again and says what the log answered.
	retry := func(l *UnifiedLog, i int) string {
		t.Helper()
		leo := l.LogEndOffset()
		got, err := l.AppendAsLeader(slices.Clone(sent[i]), 0, OriginClient)
		require.Equal(t, leo, l.LogEndOffset(), "a retry appends nothing")
		switch {
		case errors.Is(err, ErrOutOfOrderSequence):
			return "out-of-order"
		case err != nil:
			return err.Error()
		case !got.Duplicate:
			return fmt.Sprintf("appended at %d", got.FirstOffset)
		}
		require.Equal(t, [3]int64{infos[i].FirstOffset, infos[i].LastOffset, infos[i].MaxTimestamp},
			[3]int64{got.FirstOffset, got.LastOffset, got.MaxTimestamp}, "retry of batch %d", i)
		return "duplicate"
	}
	retries := func(l *UnifiedLog) []string {
		var out []string
		for i := range sent {
			out = append(out, retry(l, i))
		}
		return out
	}
	window := []string{"out-of-order", "duplicate", "duplicate", "duplicate", "duplicate", "duplicate"}
	kafka := []string{"out-of-order", "out-of-order", "out-of-order", "out-of-order", "out-of-order", "duplicate"}
	epochs := []epochcache.Entry{{Epoch: 0, StartOffset: 0}}
	for _, tc := range []struct {
		name    string
		batches []byte
		want    []string
	}{
		{"window", batches, window},
		{"no batches file", nil, kafka},
		{"another snapshot's batches file", staleBatches, kafka},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			opts := Options{RemoteStorageEnabled: true}
			l := openTestLog(t, fs, opts)
			appendRecords(t, l, 0, 3, 1_000)
			require.NoError(t, l.TruncateFullyAndRestore(RemoteRestore{NextOffset: next, LogStartOffset: 0,
				Epochs: epochs, ProducerSnapshot: snap, ProducerBatches: tc.batches}))
			require.Equal(t, tc.want, retries(l))
			require.NoError(t, l.Close())
			l = openTestLog(t, fs, opts)
			defer l.Close()
			require.Equal(t, tc.want, retries(l), "after a restart")
		})
	}

	t.Run("damaged", func(t *testing.T) {
		l := openTestLog(t, vfs.NewMem(), Options{RemoteStorageEnabled: true})
		defer l.Close()
		appendRecords(t, l, 0, 3, 1_000)
		before, count := restoreState(l), l.TruncationCount()
		for _, bad := range [][]byte{
			append(slices.Clone(batches[:len(batches)-1]), batches[len(batches)-1]^1), // a flipped bit: the crc
			batches[:len(batches)-1], // cut short
			{},                       // empty
		} {
			err := l.TruncateFullyAndRestore(RemoteRestore{NextOffset: next, Epochs: epochs,
				ProducerSnapshot: snap, ProducerBatches: bad})
			require.ErrorIs(t, err, ErrCorruption)
			require.Equal(t, before, restoreState(l))
			require.Equal(t, count, l.TruncationCount())
		}
		err := l.TruncateFullyAndRestore(RemoteRestore{NextOffset: next, Epochs: epochs, ProducerBatches: batches})
		require.ErrorIs(t, err, ErrInvalidArgument, "batches without a snapshot")
		appendRecords(t, l, 0, 1, 1_000)
	})
}
