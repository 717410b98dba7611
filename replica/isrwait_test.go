package replica_test

import (
	"context"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/replica"
	"github.com/tierlog/tierlog/tierstate"
)

// TestIsrWaitAtSealWarns: a follower at the seal outside the ISR waits on
// the classic fetcher; the wait shows in Metrics.IsrWaitMs, and a warning
// with the time waited, the seal and the log end is logged after one
// minute and then once a minute (https://github.com/aiven/inkless/pull/760).
// Admission ends the wait; a later stay outside the ISR starts a new one
// and does not inherit the old start.
func TestIsrWaitAtSealWarns(t *testing.T) {
	ctx := context.Background()
	core, logs := observer.New(zap.WarnLevel)
	var now int64
	tp := remote.TopicIDPartition{TopicID: remote.UUID{7}, Topic: "orders", Partition: 0}
	lm, err := openLogs(vfs.NewMem())
	require.NoError(t, err)
	defer func() { require.NoError(t, lm.Close()) }()
	b := broker{}
	r, err := replica.New(replica.Options{Partition: tp, Logs: replica.ManagedLogs(lm), Classic: classic{}, Consolidation: consolidation{},
		Remote: b, Logger: zap.New(core), NowMs: func() int64 { return now }})
	require.NoError(t, err)
	apply := func(d replica.Delta) {
		t.Helper()
		_, err := r.Apply(ctx, d)
		require.NoError(t, err)
	}
	apply(replica.Delta{LeaderID: 1, InIsr: true})
	bb := record.NewBuilder(record.DefaultBuilderOptions())
	for range 100 {
		bb.Add(0, nil, []byte("v"))
	}
	batch, err := bb.Build()
	require.NoError(t, err)
	_, err = r.Log().(*log.UnifiedLog).AppendAsLeader(batch, 0, log.OriginClient)
	require.NoError(t, err)
	sealed, err := tierstate.FromPartitionRecord(tierstate.Tags{
		ClassicToDisklessStartOffset: tierstate.Some[int64](100), DisklessLeaderEpoch: tierstate.Some[int32](1)})
	require.NoError(t, err)
	sealed = sealed.WithConsolidating(true)
	outOfIsr := replica.Delta{LeaderID: 1, LeaderEpoch: 1, State: sealed}

	// handOff runs the hook at time ms and returns the warnings so far.
	handOff := func(ms int64) int {
		t.Helper()
		now = ms
		h, err := r.HandOff(ctx)
		require.NoError(t, err)
		require.Equal(t, tierstate.HandOffWaitForIsr, h.Action)
		return logs.Len()
	}
	apply(outOfIsr)
	require.Equal(t, 0, handOff(1_000))
	require.Equal(t, 0, handOff(60_999))
	require.Equal(t, int64(59_999), r.Metrics().IsrWaitMs)
	require.Equal(t, 1, handOff(61_000), "first warning after one minute")
	w := logs.All()[0].ContextMap()
	require.Equal(t, int64(60_000), w["waited_ms"])
	require.Equal(t, int64(100), w["seal"])
	require.Equal(t, int64(100), w["log_end_offset"])
	require.Equal(t, 1, handOff(120_999))
	require.Equal(t, 2, handOff(121_000), "then once a minute")
	require.Equal(t, int64(2), r.Metrics().IsrWaitWarnings)

	// Admitted: the wait ends.
	apply(replica.Delta{LeaderID: 1, LeaderEpoch: 1, PartitionEpoch: 2, InIsr: true, State: sealed})
	require.Zero(t, r.Metrics().IsrWaitMs)
	// Out of the ISR again (a restart, a fence): a new wait, from now.
	outOfIsr.PartitionEpoch = 3
	apply(outOfIsr)
	require.Equal(t, 2, handOff(500_000))
	require.Equal(t, 2, handOff(559_999), "the earlier wait's start is not inherited")
	require.Equal(t, int64(59_999), r.Metrics().IsrWaitMs)
	require.Equal(t, 3, handOff(560_000))
}
