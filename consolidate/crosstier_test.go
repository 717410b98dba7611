package consolidate

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/tierstate"
	"github.com/tierlog/tierlog/wal"
)

func (e *walEnv) storedX() int64 {
	e.t.Helper()
	info, err := e.cp.LogInfo(e.ctx, walTP(e.tp))
	require.NoError(e.t, err)
	return info.CrossTierLogStartOffset
}

// Reports coalesce to the highest value; only strictly advancing values
// are flushed, forward only; the cache learns each stored value.
func TestReporterCoalescesAndFlushesForwardOnly(t *testing.T) {
	e := newWALEnv(t)
	state := e.switchAt(0, 100, 2)
	e.parts.set(e.tp, state, nil)
	now := time.UnixMilli(1_000_000)
	cache, err := NewCrossTierCache(CrossTierCacheOptions{ControlPlane: e.cp, Partitions: e.parts, Now: func() time.Time { return now }})
	require.NoError(t, err)
	r, err := NewReporter(ReporterOptions{ControlPlane: e.cp, Cache: cache})
	require.NoError(t, err)
	require.Equal(t, int64(0), e.storedX(), "X starts at the classic log start W")

	r.Report(e.tp, 40)
	r.Report(e.tp, 20) // lower: dropped
	r.Report(e.tp, 60)
	require.NoError(t, r.Flush(e.ctx))
	require.Equal(t, int64(60), e.storedX())
	_, x, known := cache.CrossTierLogStart(e.tp)
	require.True(t, known)
	require.Equal(t, int64(60), x)

	r.Report(e.tp, 60) // not above the flushed value
	r.Report(e.tp, 50)
	require.NoError(t, r.Flush(e.ctx))
	require.Equal(t, int64(60), e.storedX())

	// ReportingLog passes the remote-log manager's report on.
	l := e.openLog("leader")
	rl := ReportingLog{PartitionLog: l, Partition: e.tp, Reporter: r}
	_, err = rl.UpdateLogStartOffsetFromRemoteTier(0)
	require.NoError(t, err)
	r.Report(e.tp, 100)
	require.NoError(t, r.Flush(e.ctx))
	require.Equal(t, int64(100), e.storedX())
}

// flakyControlPlane fails LogInfo while down.
type flakyControlPlane struct {
	wal.ControlPlane
	down  bool
	calls int
}

func (f *flakyControlPlane) LogInfo(ctx context.Context, tp wal.TopicIDPartition) (wal.LogInfo, error) {
	f.calls++
	if f.down {
		return wal.LogInfo{}, errors.New("control plane unreachable")
	}
	return f.ControlPlane.LogInfo(ctx, tp)
}

// The cache asks the control plane at most once per TTL, serves the old
// value while the control plane is down, and knows nothing before its
// first answer; a partition that does not consolidate is reported so.
func TestCrossTierCache(t *testing.T) {
	e := newWALEnv(t)
	state := e.switchAt(0, 100, 2)
	e.parts.set(e.tp, state, nil)
	cp := &flakyControlPlane{ControlPlane: e.cp, down: true}
	now := time.UnixMilli(1_000_000)
	c, err := NewCrossTierCache(CrossTierCacheOptions{ControlPlane: cp, Partitions: e.parts, TTL: time.Second, Now: func() time.Time { return now }})
	require.NoError(t, err)

	consolidating, _, known := c.CrossTierLogStart(e.tp)
	require.True(t, consolidating)
	require.False(t, known, "no answer yet")

	cp.down = false
	_, x0, known := c.CrossTierLogStart(e.tp)
	require.True(t, known, "the control plane records X = W when it creates a switched log")
	require.Equal(t, int64(0), x0)
	_, err = e.cp.AdvanceCrossTierLogStart(e.ctx, []wal.AdvanceCrossTierLogStartRequest{{Partition: walTP(e.tp), CrossTierLogStart: 20}})
	require.NoError(t, err)
	now = now.Add(time.Second)
	_, x, known := c.CrossTierLogStart(e.tp)
	require.True(t, known)
	require.Equal(t, int64(20), x)
	_, err = e.cp.AdvanceCrossTierLogStart(e.ctx, []wal.AdvanceCrossTierLogStartRequest{{Partition: walTP(e.tp), CrossTierLogStart: 70}})
	require.NoError(t, err)
	calls := cp.calls
	_, x, _ = c.CrossTierLogStart(e.tp)
	require.Equal(t, int64(20), x, "within the TTL")
	require.Equal(t, calls, cp.calls)

	now = now.Add(time.Second)
	_, x, _ = c.CrossTierLogStart(e.tp)
	require.Equal(t, int64(70), x)

	cp.down = true
	now = now.Add(time.Second)
	_, x, known = c.CrossTierLogStart(e.tp)
	require.True(t, known)
	require.Equal(t, int64(70), x, "stale on the low side while the control plane is down")

	other := remote.TopicIDPartition{TopicID: testTopic, Topic: "orders", Partition: 3}
	e.parts.set(other, tierstate.State{}, nil)
	consolidating, _, _ = c.CrossTierLogStart(other)
	require.False(t, consolidating)
}
