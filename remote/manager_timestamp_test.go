package remote

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
)

// stamped is one appended record: its offset and timestamp.
type stamped struct{ offset, ts int64 }

// appendStamped appends n batches to l as leader (epoch 0 for the first
// half, 1 for the rest): batch i holds 1 + i%3 records whose timestamps
// go back and forth inside the batch, every other batch compressed (lz4
// or snappy).
// It returns every record in offset order.
func appendStamped(t *testing.T, l *log.UnifiedLog, n int) []stamped {
	t.Helper()
	var out []stamped
	for i := range n {
		o := record.DefaultBuilderOptions()
		switch i % 4 {
		case 1:
			o.Compression = record.CompressionLZ4
		case 3:
			o.Compression = record.CompressionSnappy
		}
		b := record.NewBuilder(o)
		var tss []int64
		for j := range 1 + i%3 {
			ts := 2_000_000 + int64(i)*10 + [...]int64{0, -7, 3}[j]
			b.Add(ts, nil, fmt.Appendf(nil, "batch %d record %d with padding to fill segments", i, j))
			tss = append(tss, ts)
		}
		info, err := l.AppendBuilderAsLeader(b, int32(2*i/n), log.OriginClient)
		require.NoError(t, err)
		for j, ts := range tss {
			out = append(out, stamped{info.FirstOffset + int64(j), ts})
		}
	}
	l.UpdateHighWatermark(l.LogEndOffset())
	require.NoError(t, l.Roll())
	return out
}

// firstAtOrAfter is the ListOffsets answer computed from the records: the
// first with offset >= from and timestamp >= ts.
func firstAtOrAfter(recs []stamped, ts, from int64) (stamped, bool) {
	for _, r := range recs {
		if r.offset >= from && r.ts >= ts {
			return r, true
		}
	}
	return stamped{}, false
}

// TestFindOffsetByTimestamp: a log whose older segments are in remote
// storage only answers ListOffsets by timestamp from the remote tier as
// Kafka's RemoteLogManager.findOffsetByTimestamp does: for every
// timestamp and several starting offsets, the first record at or above
// the starting offset with a timestamp at or above the target, when that
// record lies below the local log start; no answer otherwise (the local
// segments give it). Batches hold records out of timestamp order and
// some are compressed; the log has two leader epochs. A committed seal
// caps the answers as it caps reads.
func TestFindOffsetByTimestamp(t *testing.T) {
	e := newMgrEnv(t, nil)
	ctx := context.Background()
	tp := testPartition(0)
	l := e.openLog("p", log.Options{SegmentBytes: 1 << 10, LocalRetentionBytes: 3 << 10})
	recs := appendStamped(t, l, 300)
	require.NoError(t, e.mgr.OnLeadershipChange([]Partition{{TopicIDPartition: tp, Log: l}}, nil))
	require.NoError(t, runErr(e.mgr.RunCopy(ctx, tp)))
	_, err := l.DeleteOldSegments()
	require.NoError(t, err)
	local := l.LocalLogStartOffset()
	require.Greater(t, local, int64(100), "most segments deleted locally")
	require.Less(t, local, l.LogEndOffset(), "some segments still local")
	require.Greater(t, len(finished(t, e.meta, tp)), 10)

	// Every 13th millisecond: batches are 10 ms apart, so the sweep
	// lands at every distance from a record's timestamp.
	const step = 13
	check := func(seal int64) {
		for _, from := range []int64{0, 57, local / 2, local - 1, local} {
			for ts := int64(1_999_990); ts <= 2_000_000+300*10+10; ts += step {
				got, found, err := e.mgr.FindOffsetByTimestamp(ctx, tp, ts, from)
				require.NoError(t, err, "ts %d from %d", ts, from)
				want, ok := firstAtOrAfter(recs, ts, from)
				bound := local
				if from < seal {
					bound = min(local, seal) // as Read, capped below the seal only
				}
				if !ok || want.offset >= bound {
					require.False(t, found, "ts %d from %d: %+v, want none below %d", ts, from, got, bound)
					continue
				}
				require.True(t, found, "ts %d from %d: want offset %d", ts, from, want.offset)
				wantEpoch := int32(0)
				if e, ok := l.EpochForOffset(want.offset); ok {
					wantEpoch = e
				}
				require.Equal(t, log.TimestampAndOffset{Timestamp: want.ts, Offset: want.offset, Epoch: wantEpoch}, got,
					"ts %d from %d", ts, from)
			}
		}
	}
	check(1 << 62)

	// A committed seal below the local log start: a search from below it
	// answers nothing at or above it.
	seal := local / 3
	require.NoError(t, e.mgr.OnLeadershipChange([]Partition{{TopicIDPartition: tp, Log: l, SealCommitted: true, Seal: seal}}, nil))
	check(seal)

	_, _, err = e.mgr.FindOffsetByTimestamp(ctx, tp, -1, 0)
	require.ErrorIs(t, err, ErrInvalidArgument)
}
