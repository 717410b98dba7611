package remote

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/internal/harness/s3test"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/remote/objstore/fs"
	"github.com/tierlog/tierlog/remote/objstore/mem"
)

// TestTieringEndToEnd runs the whole tier on each store: append across
// epochs (with an aborted transaction), copy, delete locally, read every
// offset back through the remote read path, expire, and find no object
// left behind.
func TestTieringEndToEnd(t *testing.T) {
	t.Run("mem", func(t *testing.T) { runTieringEndToEnd(t, mem.New(mem.Options{})) })
	t.Run("fs", func(t *testing.T) {
		s, err := fs.Open(t.TempDir(), fs.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		runTieringEndToEnd(t, s)
	})
	t.Run("s3", func(t *testing.T) {
		srv := s3test.Start(t)
		runTieringEndToEnd(t, s3test.OpenStore(t, srv.StoreOptions(t)))
	})
}

func runTieringEndToEnd(t *testing.T, store objstore.Store) {
	e := newMgrEnv(t, store)
	ctx := context.Background()
	tp := testPartition(0)
	l := e.openLog("p0", log.Options{RetentionMs: 60_000, LocalRetentionMs: 1})
	appendSegments(t, l, 0, 3, 7)
	appendAbortedTxn(t, l, 1)
	appendSegments(t, l, 1, 2, 7)
	appendSegments(t, l, 3, 1, 7)
	leo := l.LogEndOffset()

	// Everything as the local log serves it, before anything moves.
	want := map[int64][]byte{} // batch base offset -> bytes
	var order []int64
	for off := int64(0); off < leo; {
		fd, err := l.Read(nil, off, 1, log.IsolationLogEnd, true)
		require.NoError(t, err)
		b, err := record.ReadBatch(fd.Records)
		require.NoError(t, err)
		want[b.BaseOffset()] = bytes.Clone(b.Bytes())
		order = append(order, b.BaseOffset())
		off = b.NextOffset()
	}

	require.NoError(t, e.mgr.OnLeadershipChange([]Partition{{TopicIDPartition: tp, Log: l}}, nil))
	require.NoError(t, runErr(e.mgr.RunCopy(ctx, tp)))
	active, err := l.Segments(l.LogEndOffset())
	require.NoError(t, err)
	require.EqualValues(t, active[0].BaseOffset-1, l.HighestOffsetInRemoteStorage(), "every rolled segment is copied")

	// Local retention deletes what is copied.
	e.nowMs.Add(10)
	_, err = l.DeleteOldSegments()
	require.NoError(t, err)
	localStart := l.LocalLogStartOffset()
	require.Equal(t, active[0].BaseOffset, localStart)
	_, err = l.Read(nil, 0, 1<<20, log.IsolationLogEnd, true)
	require.ErrorIs(t, err, log.ErrOffsetMovedToTieredStorage)

	// Every batch below the local log start comes back from remote
	// storage, byte for byte, for a read at any of its offsets.
	for _, base := range order {
		if base >= localStart {
			break
		}
		b, _ := record.ReadBatch(want[base])
		for off := base; off < b.NextOffset(); off++ {
			res, err := e.mgr.Read(ctx, tp, off, 1, log.IsolationLogEnd, true)
			require.NoError(t, err, "offset %d", off)
			require.Equal(t, want[base], res.Records, "offset %d", off)
			require.Equal(t, base, res.BatchBaseOffset)
		}
	}
	// A budget returns whole batches; without min-one a too-small budget
	// returns nothing.
	res, err := e.mgr.Read(ctx, tp, 0, 3*len(want[0]), log.IsolationLogEnd, false)
	require.NoError(t, err)
	require.Equal(t, append(append(bytes.Clone(want[0]), want[1]...), want[2]...), res.Records)
	res, err = e.mgr.Read(ctx, tp, 0, 10, log.IsolationLogEnd, false)
	require.NoError(t, err)
	require.Empty(t, res.Records)
	require.NotNil(t, res.Records, "an empty record set, never a null one")
	// A committed read over the aborted transaction reports it.
	res, err = e.mgr.Read(ctx, tp, 21, 1<<20, log.IsolationCommitted, false)
	require.NoError(t, err)
	require.Len(t, res.AbortedTransactions, 1, "the transaction of producer 1 at 21 was aborted")
	require.EqualValues(t, 21, res.AbortedTransactions[0].FirstOffset)

	// Expiration: past retention.ms everything remote goes, the log start
	// moves first, and no object is left.
	e.nowMs.Add(120_000)
	require.NoError(t, runErr(e.mgr.RunExpiration(ctx, tp)))
	require.Empty(t, finished(t, e.meta, tp))
	require.Equal(t, localStart, l.LogStartOffset())
	_, err = e.mgr.Read(ctx, tp, 0, 1<<20, log.IsolationLogEnd, true)
	require.ErrorIs(t, err, ErrOffsetOutOfRange)
	var left []string
	require.NoError(t, objstore.ListAll(ctx, store, "", func(o objstore.ObjectInfo) error {
		left = append(left, o.Key)
		return nil
	}))
	require.Empty(t, left, "expired segments leave no object")
	require.EqualValues(t, e.mgr.Metrics().SegmentsCopied, e.mgr.Metrics().SegmentsDeleted)
}

// appendAbortedTxn appends a transactional batch of producer 1 and its
// ABORT marker, then rolls.
func appendAbortedTxn(t *testing.T, l *log.UnifiedLog, epoch int32) {
	t.Helper()
	opts := record.DefaultBuilderOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence, opts.Transactional = 1, 0, 0, true
	b := record.NewBuilder(opts)
	b.Add(1_000_000, nil, []byte("aborted"))
	batch, err := b.Build()
	require.NoError(t, err)
	_, err = l.AppendAsLeader(batch, epoch, log.OriginClient)
	require.NoError(t, err)
	marker, err := record.AppendEndTxnBatch(nil, opts, 1_000_000, record.ControlAbort, 0)
	require.NoError(t, err)
	_, err = l.AppendAsLeader(marker, epoch, log.OriginCoordinator)
	require.NoError(t, err)
	require.NoError(t, l.Roll())
	l.UpdateHighWatermark(l.LogEndOffset())
}
