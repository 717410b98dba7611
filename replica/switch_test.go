package replica

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tierlog/tierlog/consolidate"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/tierstate"
	"github.com/tierlog/tierlog/wal"
	"github.com/tierlog/tierlog/wal/pebblecp"
)

func mustState(t *testing.T, tags tierstate.Tags, consolidating bool) tierstate.State {
	s, err := tierstate.FromPartitionRecord(tags)
	require.NoError(t, err)
	return s.WithConsolidating(consolidating)
}

// The driver on tierlog's own pruner and a Pebble control plane: the row
// InitDisklessLog creates is the one the pruner prunes; the floor is S-1
// while this broker leads and gone once it follows.
func TestSwitchOnRealPrunerAndControlPlane(t *testing.T) {
	e := newEnvWith(t, true, true, false)
	cp, err := pebblecp.Open(e.fs, "cp", pebblecp.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cp.Close() })
	pruner, err := consolidate.NewPruner(consolidate.PrunerOptions{ControlPlane: cp})
	require.NoError(t, err)
	e.r.opts.ControlPlane, e.r.opts.Pruner = cp, pruner
	l := e.r.Log().(*log.UnifiedLog)
	_, err = l.AppendAsLeader(batch(t, 100), 0, log.OriginClient)
	require.NoError(t, err)
	l.UpdateHighWatermark(100)
	ctx := context.Background()
	s := mustState(t, tierstate.Tags{ClassicToDisklessStartOffset: tierstate.Some[int64](100),
		DisklessLeaderEpoch: tierstate.Some[int32](2)}, true)
	_, err = e.r.Apply(ctx, Delta{Leader: true, LeaderEpoch: 2, InIsr: true, State: s})
	require.NoError(t, err)
	info, err := cp.LogInfo(ctx, wal.TopicIDPartition{TopicID: wal.TopicID(testTP.TopicID), Partition: testTP.Partition})
	require.NoError(t, err)
	require.Equal(t, int64(0), info.LogStartOffset)
	require.Equal(t, int64(100), info.DisklessStartOffset)
	require.Equal(t, int64(99), pruner.Floor(testTP))

	// Remote storage holds the prefix: the first prune at S-1 moves W to
	// the seal.
	require.True(t, l.UpdateHighestOffsetInRemoteStorage(99, l.TruncationCount()))
	p, ok := e.r.PrunePartition()
	require.True(t, ok)
	out, err := pruner.Run(ctx, []consolidate.PrunePartition{p})
	require.NoError(t, err)
	require.True(t, out[0].Decision.Prune(), out[0].Decision.Reason.String())
	require.Equal(t, int64(100), out[0].LogStartOffset)

	_, err = e.r.Apply(ctx, Delta{LeaderID: 2, LeaderEpoch: 3, InIsr: true, State: s})
	require.NoError(t, err)
	require.Equal(t, consolidate.NoFloor, pruner.Floor(testTP))
	_, ok = e.r.PrunePartition()
	require.False(t, ok)
}

// The gate follows the delta: classic appends pass, a pending seal
// refuses client appends but lets the coordinator's markers through, a
// committed seal refuses both; nothing is written when refused.
func TestAppendAsLeaderFollowsTheSwitch(t *testing.T) {
	e := newEnv(t, true)
	ctx := context.Background()
	_, err := e.r.Apply(ctx, Delta{Leader: true, LeaderEpoch: 1, InIsr: true})
	require.NoError(t, err)
	_, err = e.r.AppendAsLeader(batch(t, 3), 1, log.OriginClient)
	require.NoError(t, err)
	pending, err := tierstate.State{}.WithConsolidating(true).ArmSwitch()
	require.NoError(t, err)
	_, err = e.r.Apply(ctx, Delta{Leader: true, LeaderEpoch: 2, InIsr: true, State: pending})
	require.NoError(t, err)
	_, err = e.r.AppendAsLeader(batch(t, 1), 2, log.OriginClient)
	require.ErrorIs(t, err, consolidate.ErrSealPending)
	require.Equal(t, int64(3), e.r.Log().LogEndOffset())
	sealed, err := pending.CommitSeal(3, nil)
	require.NoError(t, err)
	_, err = e.r.Apply(ctx, Delta{Leader: true, LeaderEpoch: 2, PartitionEpoch: 1, InIsr: true, State: sealed})
	require.NoError(t, err)
	_, err = e.r.AppendAsLeader(batch(t, 1), 2, log.OriginCoordinator)
	require.ErrorIs(t, err, consolidate.ErrClassicLogSealed)
	require.Equal(t, int64(3), e.r.Log().LogEndOffset())
	// Phase 1: no diskless produce either, until the phase-2 flag.
	require.ErrorIs(t, e.r.DisklessProduceAllowed(), consolidate.ErrAwaitingPhaseTwo)
	phase2, err := sealed.SetClassicPrefixInRemoteStorage(tierstate.ClassicPrefixRequest{BrokerID: 1, LeaderEpoch: 2,
		Seal: 3, LastClassicLeaderEpoch: 1}, tierstate.Leadership{Leader: 1, LeaderEpoch: 2})
	require.NoError(t, err)
	_, err = e.r.Apply(ctx, Delta{Leader: true, LeaderEpoch: 3, PartitionEpoch: 2, InIsr: true, State: phase2})
	require.NoError(t, err)
	require.NoError(t, e.r.DisklessProduceAllowed())
	_, err = e.r.AppendAsLeader(batch(t, 1), 3, log.OriginClient)
	require.ErrorIs(t, err, consolidate.ErrClassicLogSealed)

	// Offline: no append path.
	require.NoError(t, e.r.LogDirFailure(ctx))
	_, err = e.r.AppendAsLeader(batch(t, 1), 2, log.OriginClient)
	require.ErrorIs(t, err, ErrNoLog)
	require.ErrorIs(t, e.r.DisklessProduceAllowed(), ErrNoLog)
}

// A controller without a control plane is refused at New.
func TestNewNeedsControlPlaneWithController(t *testing.T) {
	e := newEnv(t, false)
	opts := e.r.opts
	opts.Controller = fakeController{e.rec}
	_, err := New(opts)
	require.ErrorIs(t, err, ErrInvalidArgument)
}

// holdingLogs checks, while it swaps the logs, that no leader append can
// start, then starts one; it must land on the promoted log.
type holdingLogs struct {
	*brokerLogs
	t    *testing.T
	r    *Replica
	done chan error
}

func (h *holdingLogs) ReplaceCurrentWithFutureLog(ctx context.Context, tp remote.TopicIDPartition, current, future Log) error {
	if h.r.app.TryRLock() {
		h.r.app.RUnlock()
		h.t.Error("a leader append could run during the swap")
	}
	go func() {
		_, err := h.r.AppendAsLeader(batch(h.t, 1), 1, log.OriginClient)
		h.done <- err
	}()
	return h.brokerLogs.ReplaceCurrentWithFutureLog(ctx, tp, current, future)
}

// The promotion holds leader appends: one that arrives during the swap
// waits and lands on the promoted log, never on the deleted one.
func TestPromotionHoldsLeaderAppends(t *testing.T) {
	e := newEnvWith(t, true, false, true)
	hl := &holdingLogs{brokerLogs: e.logs, t: t, r: e.r, done: make(chan error, 1)}
	e.r.opts.FutureLogs = hl
	ctx := context.Background()
	_, err := e.r.Apply(ctx, Delta{Leader: true, LeaderEpoch: 1, InIsr: true})
	require.NoError(t, err)
	_, err = e.r.AppendAsLeader(batch(t, 5), 1, log.OriginClient)
	require.NoError(t, err)
	future := e.logs.createFuture(t)
	require.NoError(t, e.r.StartMove(ctx, future))
	cur := e.r.Log().(*log.UnifiedLog)
	fd, err := cur.Read(nil, 0, 1<<20, log.IsolationLogEnd, true)
	require.NoError(t, err)
	_, err = future.AppendAsFollower(fd.Records, 1)
	require.NoError(t, err)
	promoted, err := e.r.MaybePromoteFutureLog(ctx)
	require.NoError(t, err)
	require.True(t, promoted)
	require.NoError(t, <-hl.done)
	require.Same(t, future, e.r.Log().(*log.UnifiedLog))
	require.Equal(t, int64(6), future.LogEndOffset())
	require.Nil(t, e.r.FutureLog())
	require.Equal(t, int64(1), e.r.Metrics().Promotions)
}

// A removal of the leader of a deleted topic against a real remote log
// manager: the partition is forgotten there, not kept registered.
func TestRemovalForgetsThePartitionRemotely(t *testing.T) {
	e, mgr := newRemoteEnv(t, true)
	ctx := context.Background()
	_, err := e.r.Apply(ctx, Delta{Leader: true, LeaderEpoch: 1, InIsr: true})
	require.NoError(t, err)
	require.True(t, mgr.IsPartitionReady(testTP))
	_, err = e.r.Apply(ctx, Delta{Leader: true, LeaderEpoch: 1, Removal: TopicDeleted})
	require.NoError(t, err)
	require.False(t, mgr.IsPartitionReady(testTP))
	require.Nil(t, e.r.Log())
	// Removing what the remote log manager never knew is not an error.
	_, err = e.r.Apply(ctx, Delta{LeaderID: 2, LeaderEpoch: 2, Removal: ReassignedAway})
	require.NoError(t, err)
}

// Deltas, switch steps, prune lookups and leader appends from several
// goroutines (run under -race): the appends never take the delta lock,
// the rest apply one at a time.
func TestConcurrentSwitchHooks(t *testing.T) {
	e := newEnvWith(t, true, true, false)
	var mu sync.Mutex
	e.r.opts.OnEvent = func(Event) { mu.Lock(); mu.Unlock() }
	pending := mustState(t, tierstate.Tags{ClassicToDisklessStartOffset: tierstate.Some[int64](tierstate.SealPending)}, true)
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 20 {
				switch i {
				case 0:
					_, _ = e.r.Apply(ctx, Delta{Leader: j%3 != 0, LeaderID: 2, LeaderEpoch: int32(j), InIsr: true, State: pending})
				case 1:
					_, _ = e.r.StepSwitch(ctx)
				case 2:
					_, _ = e.r.AppendAsLeader(batch(t, 1), int32(j), log.OriginClient)
				default:
					_, _ = e.r.PrunePartition()
					e.r.RetrySealProposal()
				}
			}
		}()
	}
	wg.Wait()
	require.False(t, e.r.Prior().Offline)
}

// Misused move calls are typed errors, not panics.
func TestMoveMisuse(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, true)
	require.ErrorIs(t, e.r.StartMove(ctx, e.logs.createFuture(t)), ErrInvalidArgument)
	e.r.SetFutureLog(fakeFuture{leo: 0})
	_, err := e.r.MaybePromoteFutureLog(ctx)
	require.ErrorIs(t, err, ErrNoMove)
	require.NoError(t, e.r.FutureLogDirFailure(ctx))
	require.Nil(t, e.r.FutureLog())
	require.NoError(t, e.r.CancelMove(ctx))

	m := newEnvWith(t, false, false, true)
	// Any log will do: the driver refuses before it looks at it.
	other, err := m.logs.m.GetOrCreate(remote.TopicIDPartition{Topic: "other", Partition: 0}, "")
	require.NoError(t, err)
	require.ErrorIs(t, m.r.StartMove(ctx, other), ErrNoLog)
	require.ErrorIs(t, m.r.StartMove(ctx, nil), ErrInvalidArgument)
}

// A log found at startup takes no append before the first delta says
// the switch state: a restarted seal-pending leader never appends past
// the log end its seal will read.
func TestNoAppendBeforeTheFirstDelta(t *testing.T) {
	e := newEnv(t, true)
	_, err := e.r.AppendAsLeader(batch(t, 1), 0, log.OriginClient)
	require.ErrorIs(t, err, ErrNoLog)
	pending := mustState(t, tierstate.Tags{ClassicToDisklessStartOffset: tierstate.Some[int64](tierstate.SealPending)}, true)
	_, err = e.r.Apply(context.Background(), Delta{Leader: true, LeaderEpoch: 1, InIsr: true, State: pending})
	require.NoError(t, err)
	_, err = e.r.AppendAsLeader(batch(t, 1), 1, log.OriginClient)
	require.ErrorIs(t, err, consolidate.ErrSealPending)
	require.Equal(t, int64(0), e.r.Log().LogEndOffset())
}

// StartMove with the future log already being copied into (a broker's
// alter-log-dirs request repeated for the same directory, where
// logmanager.Manager.CreateFuture returns the existing future log) keeps
// the move as it is: the future log is not deleted under the fetcher,
// and its copy goes on to a promotion.
func TestStartMoveSameFutureLogTwice(t *testing.T) {
	e := newEnvWith(t, true, false, true)
	ctx := context.Background()
	_, err := e.r.Apply(ctx, Delta{Leader: true, LeaderEpoch: 1, InIsr: true})
	require.NoError(t, err)
	_, err = e.r.AppendAsLeader(batch(t, 5), 1, log.OriginClient)
	require.NoError(t, err)
	future := e.logs.createFuture(t)
	require.NoError(t, e.r.StartMove(ctx, future))
	again, err := e.logs.m.CreateFuture(testTP, filepath.Dir(future.Dir()))
	require.NoError(t, err)
	require.Same(t, future, again, "the same directory: the same future log")
	require.NoError(t, e.r.StartMove(ctx, again))
	require.Same(t, future, e.r.FutureLog())

	cur := e.r.Log().(*log.UnifiedLog)
	fd, err := cur.Read(nil, 0, 1<<20, log.IsolationLogEnd, true)
	require.NoError(t, err)
	_, err = future.AppendAsFollower(fd.Records, 1)
	require.NoError(t, err, "the future log is still open")
	promoted, err := e.r.MaybePromoteFutureLog(ctx)
	require.NoError(t, err)
	require.True(t, promoted)
	require.Same(t, future, e.r.Log().(*log.UnifiedLog))
	require.Equal(t, int64(5), e.r.Log().LogEndOffset())
}
