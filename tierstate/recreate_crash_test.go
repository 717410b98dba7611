package tierstate_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/atomicfile"
	"github.com/tierlog/tierlog/internal/harness/crashtest"
	"github.com/tierlog/tierlog/internal/harness/demo"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/remote/objstore/mem"
	"github.com/tierlog/tierlog/tierstate"
)

// TestRecreateCrash crashes the recreate of replica B in the first example of
// https://github.com/aiven/inkless/pull/857 (check,
// delete, empty log, phase-2 rebuild, catch-up) before every file
// operation on B's disk and restarts B from each crash image as a broker
// does: remove the leftovers of deletions, open the log, run the replica
// check (the partition is new to the restarted broker), recreate if it
// fails, and fetch. Each image must be B's old log, an empty log, or a
// log rebuilt at the seal (never a mix), and after the restart B must
// hold exactly the partition's history: the committed prefix (read from
// remote storage) in epochs 0 and 2, and the diskless records from the
// seal in the diskless epoch.
func TestRecreateCrash(t *testing.T) {
	ctx := context.Background()
	const seal, recorded = 100, 2

	// The partition's committed history: A's log and the remote tier, on
	// a file system that does not crash.
	src, err := demo.NewClusterOn(vfs.NewMem(), "cluster", mem.New(mem.Options{}), nil)
	require.NoError(t, err)
	defer src.Close()
	a, err := src.OpenLog("broker-A")
	require.NoError(t, err)
	defer a.Close()
	committed := map[int64][]byte{}
	produce := func(l *log.UnifiedLog, epoch int32, n int, prefix string, keep bool) {
		values, err := demo.Produce(l, epoch, n, prefix, src.NowMs)
		require.NoError(t, err)
		if keep {
			for k, v := range values {
				committed[k] = v
			}
		}
	}
	produce(a, 0, 80, "A", true)
	produce(a, recorded, 20, "A", true)
	a.UpdateHighWatermark(a.LogEndOffset())
	require.NoError(t, a.Roll())
	st, err := tierstate.State{}.WithConsolidating(true).ArmSwitch()
	require.NoError(t, err)
	st, err = st.CommitSeal(seal, nil)
	require.NoError(t, err)
	st, err = st.SetClassicPrefixInRemoteStorage(tierstate.ClassicPrefixRequest{BrokerID: 1, LeaderEpoch: recorded,
		Seal: seal, LastClassicLeaderEpoch: recorded}, tierstate.Leadership{Leader: 1, LeaderEpoch: recorded})
	require.NoError(t, err)
	aMgr, err := src.NewManager(1)
	require.NoError(t, err)
	defer aMgr.Close()
	require.NoError(t, aMgr.OnLeadershipChange([]remote.Partition{{TopicIDPartition: demo.Partition, Log: a}}, nil))
	_, err = aMgr.RunCopy(ctx, demo.Partition)
	require.NoError(t, err)
	produce(a, st.DisklessLeaderEpoch(), 20, "diskless", true)
	a.UpdateHighWatermark(a.LogEndOffset())
	src.NowMs += 10
	_, err = a.DeleteOldSegments()
	require.NoError(t, err)
	require.EqualValues(t, seal, a.LocalLogStartOffset())
	source := demo.Endpoint{Log: a, Epoch: st.DisklessLeaderEpoch()}

	// B's disk: it led epoch 1 and wrote [80, 100) that nobody has.
	bfs := vfs.NewCrashableMem()
	b0 := &demo.Cluster{FS: bfs, Dir: "b", Store: src.Store, Meta: src.Meta, Storage: src.Storage, NowMs: src.NowMs}
	dir := b0.LogDir("broker-B")
	require.NoError(t, bfs.MkdirAll(dir, 0o755))
	for d := dir; ; d = bfs.PathDir(d) {
		require.NoError(t, atomicfile.SyncDir(bfs, d))
		if d == "" || d == "." || d == "/" {
			break
		}
	}
	bl, err := b0.OpenLog("broker-B")
	require.NoError(t, err)
	produce(bl, 0, 80, "A", false)
	produce(bl, 1, 20, "B", false)
	require.NoError(t, bl.Flush())
	require.NoError(t, bl.Close())

	rec := crashtest.New(1, func(int, string) error {
		clone := bfs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
		c := &demo.Cluster{FS: clone, Dir: "b", Store: src.Store, Meta: src.Meta, Storage: src.Storage, NowMs: src.NowMs}
		return restartB(ctx, c, st, source, committed)
	})
	b := &demo.Cluster{FS: rec.Wrap(bfs), Dir: "b", Store: src.Store, Meta: src.Meta, Storage: src.Storage, NowMs: src.NowMs}
	rec.Arm(true)
	require.NoError(t, restartB(ctx, b, st, source, committed), "the recreate itself")
	rec.Arm(false)
	require.NoError(t, rec.Err())
	t.Logf("%d crash points", rec.Checked())
	require.Greater(t, rec.Checked(), 10)
}

// restartB opens B's log on c as a restarted broker does, classifies the
// image, runs the replica check and recreate, catches up from source and
// checks B's history.
func restartB(ctx context.Context, c *demo.Cluster, st tierstate.State, source demo.Endpoint, committed map[int64][]byte) error {
	if err := log.RemoveDeletedDirs(c.FS, c.FS.PathDir(c.LogDir("broker-B"))); err != nil {
		return err
	}
	l, err := c.OpenLog("broker-B")
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer func() { _ = l.Close() }()
	image := fmt.Sprintf("log [%d, %d) local from %d, epochs %s", l.LogStartOffset(), l.LogEndOffset(),
		l.LocalLogStartOffset(), epochcache.FormatEntries(l.EpochEntries()))
	switch epochs := epochcache.FormatEntries(l.EpochEntries()); {
	case l.LogEndOffset() == 100 && l.LocalLogStartOffset() == 0 && epochs == "0@0 1@80": // old
	case l.LogEndOffset() == 0 && l.EpochEntries() == nil: // empty
	case l.LocalLogStartOffset() == 100 && l.LogStartOffset() == 0 &&
		(epochs == "0@0 2@80" || epochs == "0@0 2@80 3@100"): // rebuilt
	default:
		return fmt.Errorf("a mix: %s", image)
	}
	if run, why := tierstate.ShouldCheckReplica(st, tierstate.ReplicaDelta{NewToBroker: true, LeaderEpoch: 5}); !run {
		return fmt.Errorf("no check for a replica new to the broker: %s", why)
	}
	decision, res := tierstate.CheckAndRecreate(ctx, st, l, nil, tierstate.RecreateDeps{
		Partition: demo.Partition, Fetchers: noFetchers{}, RemoteTasks: noTasks{}, DeleteCurrentLog: l.Delete,
	})
	if decision.Recreate {
		if res.Outcome != tierstate.Recreated {
			return fmt.Errorf("recreate of %s: %s", image, res)
		}
		if l, err = c.OpenLog("broker-B"); err != nil {
			return fmt.Errorf("open after recreate: %w", err)
		}
		defer func() { _ = l.Close() }()
	} else if image != "" && l.LogEndOffset() == 100 && l.LocalLogStartOffset() == 0 {
		return fmt.Errorf("kept B's divergent log: %s", decision)
	}
	m, err := c.NewMachine(source)
	if err != nil {
		return err
	}
	f := demo.Fetcher{Cluster: c, Leader: source, Follower: l, Machine: m, State: st}
	if err := f.CatchUp(ctx); err != nil {
		return fmt.Errorf("catch up from %s: %w", image, err)
	}
	if err := l.Flush(); err != nil {
		return err
	}
	if got := epochcache.FormatEntries(l.EpochEntries()); got != "0@0 2@80 3@100" || l.LogEndOffset() != 120 {
		return fmt.Errorf("after the restart from %s: log end %d, epochs %s", image, l.LogEndOffset(), got)
	}
	mgr, err := c.NewManager(2)
	if err != nil {
		return err
	}
	defer mgr.Close()
	if err := mgr.OnLeadershipChange([]remote.Partition{{TopicIDPartition: demo.Partition, Log: l}}, nil); err != nil {
		return err
	}
	got, _, err := demo.ReadAll(ctx, l, mgr)
	if err != nil {
		return fmt.Errorf("read back after the restart from %s: %w", image, err)
	}
	for k, v := range committed {
		if !bytes.Equal(got[k], v) {
			return fmt.Errorf("after the restart from %s: %q at %d, committed %q", image, got[k], k, v)
		}
	}
	return nil
}

type noFetchers struct{}

func (noFetchers) StopFetchers(context.Context, remote.TopicIDPartition) error { return nil }

type noTasks struct{}

func (noTasks) StopPartitions(context.Context, []remote.StopPartition) error { return nil }
