package log

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/log/record"
)

// TestOngoingTransactionsCarryWhatAnAbortNeeds: producer 7 at epoch 3
// commits a transaction (coordinator epoch 5), opens another at offset 3
// and stops (a crashed producer). After a reopen, OngoingTransactions
// names the transaction with the producer's epoch, coordinator epoch and
// last timestamp; an ABORT marker written from those values closes it,
// while one from the previous producer epoch is fenced.
func TestOngoingTransactionsCarryWhatAnAbortNeeds(t *testing.T) {
	fs := vfs.NewMem()
	l := openTestLog(t, fs, Options{})
	txn := func(seq int32, ts int64) []byte {
		o := idempotent(7, 3, seq)
		o.Transactional = true
		b := record.NewBuilder(o)
		b.Add(ts, nil, []byte("v"))
		b.Add(ts, nil, []byte("w"))
		buf, err := b.Build()
		require.NoError(t, err)
		return buf
	}
	marker := func(epoch int16, typ record.ControlType, coordinatorEpoch int32) []byte {
		buf, err := record.AppendEndTxnBatch(nil, idempotent(7, epoch, -1), 1_000_000, typ, coordinatorEpoch)
		require.NoError(t, err)
		return buf
	}
	_, err := l.AppendAsLeader(txn(0, 999_000), 0, OriginClient) // offsets 0-1
	require.NoError(t, err)
	_, err = l.AppendAsLeader(marker(3, record.ControlCommit, 5), 0, OriginCoordinator) // 2
	require.NoError(t, err)
	_, err = l.AppendAsLeader(txn(2, 999_500), 0, OriginClient) // 3-4, left open
	require.NoError(t, err)
	require.NoError(t, l.Close())

	l = openTestLog(t, fs, Options{})
	defer l.Close()
	require.Equal(t, []OngoingTransaction{{
		ProducerID: 7, ProducerEpoch: 3, CoordinatorEpoch: 5, FirstOffset: 3, LastTimestamp: 999_500,
	}}, l.OngoingTransactions())

	_, err = l.AppendAsLeader(marker(2, record.ControlAbort, 5), 0, OriginCoordinator)
	require.ErrorIs(t, err, ErrInvalidProducerEpoch)
	open := l.OngoingTransactions()[0]
	_, err = l.AppendAsLeader(marker(open.ProducerEpoch, record.ControlAbort, open.CoordinatorEpoch), 0, OriginCoordinator)
	require.NoError(t, err)
	require.Empty(t, l.OngoingTransactions())
	l.UpdateHighWatermark(l.LogEndOffset())
	require.Equal(t, int64(6), l.LastStableOffset())
}
