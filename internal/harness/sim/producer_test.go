package sim

import (
	"testing"
	"testing/cryptotest"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
)

// producerPrefix: brokers 1 and 2 in sync (3 down); producer 1 sent
// seq [0, 2] and its answer was lost.
func producerPrefix(t *testing.T) *Cluster {
	cryptotest.SetGlobalRandom(t, 1)
	c, err := New(Options{Seed: 1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.Crash(3))
	require.NoError(t, c.ProduceIdempotent(1, 3, true))
	require.NoError(t, c.CatchUp(2))
	require.Equal(t, int64(3), c.Committed())
	return c
}

// TestIdempotentRetryIsDuplicate: a retried batch whose answer was lost
// is answered with its original offsets, also by a new leader that
// replicated it, and writes nothing.
func TestIdempotentRetryIsDuplicate(t *testing.T) {
	c := producerPrefix(t)
	require.NoError(t, c.RetryProduce(1, true))
	require.Contains(t, c.trace.lines[len(c.trace.lines)-1], "[0, 3) epoch 0 DUPLICATE")
	require.NoError(t, c.ElectLeader(2))
	require.NoError(t, c.RetryProduce(1, false))
	require.Contains(t, c.trace.lines[len(c.trace.lines)-1], "[0, 3) epoch 1 DUPLICATE")
	require.Equal(t, int64(3), c.Broker(2).Log().LogEndOffset())
	// Acknowledged: nothing is left to retry, and the next batch follows.
	require.ErrorIs(t, c.RetryProduce(1, false), ErrNotApplicable)
	require.NoError(t, c.ProduceIdempotent(1, 2, false))
	require.Contains(t, c.trace.lines[len(c.trace.lines)-1], "seq [3, 4] [3, 5)")
	require.Nil(t, c.Check())
}

// appendForged appends a batch of values as a plain (not idempotent)
// client batch on the leader and commits it on broker 2.
func appendForged(t *testing.T, c *Cluster, values ...string) {
	t.Helper()
	b := record.NewBuilder(record.DefaultBuilderOptions())
	for _, v := range values {
		b.Add(startMs, nil, []byte(v))
	}
	buf, err := b.Build()
	require.NoError(t, err)
	_, err = c.leaderBroker().Log().AppendAsLeader(buf, c.LeaderEpoch(), log.OriginClient)
	require.NoError(t, err)
	require.NoError(t, c.CatchUp(2))
}

// TestCheckerCatchesProducerViolations: a producer's record committed
// twice is a Duplicate, a skipped sequence a SequenceGap.
func TestCheckerCatchesProducerViolations(t *testing.T) {
	t.Run("duplicate", func(t *testing.T) {
		c := producerPrefix(t)
		appendForgedExpectViolation(t, c, Duplicate, "p1-2", "p1-3")
	})
	t.Run("sequence-gap", func(t *testing.T) {
		c := producerPrefix(t)
		appendForgedExpectViolation(t, c, SequenceGap, "p1-5")
	})
	t.Run("in-order", func(t *testing.T) {
		c := producerPrefix(t)
		appendForged(t, c, "p1-3", "p1-4")
		require.Nil(t, c.Check())
	})
}

func appendForgedExpectViolation(t *testing.T, c *Cluster, k Kind, values ...string) {
	t.Helper()
	b := record.NewBuilder(record.DefaultBuilderOptions())
	for _, v := range values {
		b.Add(startMs, nil, []byte(v))
	}
	buf, err := b.Build()
	require.NoError(t, err)
	_, err = c.leaderBroker().Log().AppendAsLeader(buf, c.LeaderEpoch(), log.OriginClient)
	require.NoError(t, err)
	err = c.CatchUp(2)
	v, ok := err.(*Violation)
	require.True(t, ok, "CatchUp: %v", err)
	requireKind(t, v, k)
}
