package sim

import (
	"context"
	"slices"
	"testing"
	"testing/cryptotest"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/remote/objstore"
)

// TestRecreateTopic: RecreateTopic deletes the topic's logs on the
// running brokers and its remote log (segments and objects), a broker
// down during the deletion deletes its log of the deleted topic id at its
// restart, and the new topic (same name, new id) starts empty in leader
// epoch 0 with the running replicas in the ISR.
func TestRecreateTopic(t *testing.T) {
	c := newCaughtUpCluster(t, 5)
	require.NoError(t, c.Roll(1))
	require.NoError(t, c.Copy(1))
	old := c.Partition()
	segs, err := c.meta.ListSegments(old)
	require.NoError(t, err)
	require.NotEmpty(t, segs)
	require.NotZero(t, segmentObjects(t, c))
	require.NoError(t, c.CrashKeeping(3, 100))

	require.NoError(t, c.RecreateTopic())
	tp := c.Partition()
	require.NotEqual(t, old.TopicID, tp.TopicID)
	require.Equal(t, old.Topic, tp.Topic)
	require.Equal(t, old.Partition, tp.Partition)
	require.Equal(t, int32(1), c.Leader())
	require.Zero(t, c.LeaderEpoch())
	require.Equal(t, []int32{1, 2}, c.ISR())
	require.Zero(t, c.Committed())
	segs, err = c.meta.ListSegments(old)
	require.NoError(t, err)
	require.Empty(t, segs, "the deleted topic's remote segments")
	require.Zero(t, segmentObjects(t, c), "the deleted topic's remote objects")
	for _, id := range []int32{1, 2} {
		requireOnlyLog(t, c.Broker(id), tp)
	}

	// Broker 3's disk holds the deleted topic's log until it restarts.
	require.NoError(t, c.Restart(3))
	requireOnlyLog(t, c.Broker(3), tp)

	require.NoError(t, c.Produce(2))
	require.NoError(t, c.CatchUp(2))
	require.NoError(t, c.CatchUp(3))
	require.EqualValues(t, 2, c.Committed())
	require.NoError(t, c.Consume(0))
}

// TestRecreateTopicClassicOnly: the action applies only in the classic
// phase (the switch state of a deleted topic is not modelled).
func TestRecreateTopicClassicOnly(t *testing.T) {
	c, err := New(Options{Seed: 1})
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()
	require.NoError(t, c.ArmSwitch())
	require.ErrorIs(t, c.RecreateTopic(), ErrNotApplicable)
	require.Equal(t, Partition, c.Partition())
}

// TestRecreateTopicRunsReplay: a random run of the recreate menu gives
// the same trace twice and replays step for step (the new topic ids, the
// strays' deletions and the model's reset depend on the seed alone).
func TestRecreateTopicRunsReplay(t *testing.T) {
	const seed = 5
	opts := RunOptions{Steps: 300, Weights: recreateMenu}
	var runs [2]*Result
	for i := range runs {
		cryptotest.SetGlobalRandom(t, seed)
		res, err := Run(seed, opts)
		require.NoError(t, err)
		require.False(t, res.Failed(), "%v\n%s", res.Violation, res.TraceTail(40))
		runs[i] = res
	}
	require.Equal(t, runs[0].Trace, runs[1].Trace)
	require.True(t, slices.ContainsFunc(runs[0].Actions, func(a Action) bool { return a.Cmd == "recreate-topic" }))
	cryptotest.SetGlobalRandom(t, seed)
	r, err := Replay(Options{Seed: seed}, runs[0].Actions)
	require.NoError(t, err)
	require.Nil(t, r.Violation)
	require.Equal(t, runs[0].Actions, r.Applied)
}

// requireOnlyLog: b's log manager holds one log, the current log of tp,
// empty (a new topic's).
func requireOnlyLog(t *testing.T, b *Broker, tp remote.TopicIDPartition) {
	t.Helper()
	parts := b.logs.Partitions()
	require.Len(t, parts, 1, "broker %d", b.ID)
	require.Equal(t, tp, parts[0].Partition, "broker %d", b.ID)
	require.False(t, parts[0].Future)
	require.Zero(t, b.Log().LogEndOffset(), "broker %d", b.ID)
}

// segmentObjects counts the remote segment objects in the store.
func segmentObjects(t *testing.T, c *Cluster) int {
	t.Helper()
	n := 0
	require.NoError(t, objstore.ListAll(context.Background(), c.store.m, "", func(o objstore.ObjectInfo) error {
		if segmentOf(c.storage, o.Key) != "" {
			n++
		}
		return nil
	}))
	return n
}
