package consolidate

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/harness/crashtest"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/wal"
	"github.com/tierlog/tierlog/wal/pebblecp"
)

// durableRoot makes the root directory of a crashable FS durable, so that
// a directory created in it survives a crash once its own contents are
// synced (log.Open does not sync the parent of the directory it creates).
func durableRoot(t *testing.T, mem *vfs.MemFS, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		require.NoError(t, mem.MkdirAll(d, 0o755))
	}
	root, err := mem.OpenDir("")
	require.NoError(t, err)
	require.NoError(t, root.Sync())
	require.NoError(t, root.Close())
}

// walCoverage checks the WAL of tp on cp: W <= h + 1 (the WAL never
// drops what remote storage does not hold) and the batches run without a
// gap from max(W, S) to HW, so every offset of [S, HW) is in remote
// storage (at or below h) or in the WAL.
func walCoverage(ctx context.Context, cp *pebblecp.ControlPlane, tp wal.TopicIDPartition, seal, h int64) error {
	info, err := cp.LogInfo(ctx, tp)
	if err != nil {
		return err
	}
	w := info.LogStartOffset
	if w > h+1 {
		return fmt.Errorf("W = %d above h + 1 = %d", w, h+1)
	}
	next := max(w, seal)
	res, err := cp.FindBatches(ctx, wal.FindBatchesRequest{MaxBytes: 1 << 30,
		Partitions: []wal.FindPartition{{Partition: tp, Offset: next, MaxPartitionBytes: 1 << 30}}})
	if err != nil {
		return err
	}
	if res[0].Err != nil {
		return res[0].Err
	}
	for _, b := range res[0].Batches {
		if b.BaseOffset > next {
			return fmt.Errorf("W = %d, h = %d: offsets [%d, %d) are nowhere", w, h, next, b.BaseOffset)
		}
		next = max(next, b.LastOffset+1)
	}
	if next != info.HighWatermark {
		return fmt.Errorf("W = %d: the WAL ends at %d, HW %d", w, next, info.HighWatermark)
	}
	return nil
}

// remoteCoverage returns h, the end of the highest finished segment of tp
// in meta, and checks that the finished segments from the seal on cover
// [seal, h] without a gap (what the WAL may drop must be there).
func remoteCoverage(meta *remote.MetadataManager, tp remote.TopicIDPartition, seal int64) (int64, error) {
	segs, err := meta.ListSegments(tp)
	if err != nil {
		return 0, err
	}
	var fin []remote.SegmentMetadata
	h := int64(-1)
	for _, s := range segs {
		if s.State == remote.CopySegmentFinished {
			fin = append(fin, s)
			h = max(h, s.EndOffset)
		}
	}
	slices.SortFunc(fin, func(a, b remote.SegmentMetadata) int { return cmp.Compare(a.StartOffset, b.StartOffset) })
	next := seal
	for _, s := range fin {
		if s.EndOffset < seal {
			continue
		}
		if s.StartOffset > next {
			return h, fmt.Errorf("remote storage lacks [%d, %d)", next, s.StartOffset)
		}
		next = max(next, s.EndOffset+1)
	}
	return h, nil
}

// TestPruneCrash crashes the leader's disk (its local log, the Pebble
// control plane and the Pebble remote metadata, 0 % of unsynced data
// kept) before every file operation of the first prune and of two rounds
// of consolidation, remote copy (remote.Manager.RunCopy) and prune, and
// restarts the broker on each image: the control plane, the remote
// metadata and the log all come from the same image, its remote progress
// h from that metadata, its prune floor armed again at S - 1, and it
// prunes again. On every image, before and after that prune, W <= h + 1,
// the finished segments cover [S, h] without a gap, and every offset of
// [S, HW) is in remote storage or in the WAL. The classic prefix [0, 99]
// is in remote storage from the start, so the first prune (at S - 1,
// moving W from 0 to S) is among the crashed operations.
func TestPruneCrash(t *testing.T) {
	mem := vfs.NewCrashableMem()
	durableRoot(t, mem, "leader")
	var rec *crashtest.Recorder
	var check func() error
	rec = crashtest.New(1, func(int, string) error { return check() })
	fs := rec.Wrap(mem)
	e := newWALEnvOnFS(t, fs, fs)
	state := e.switchAt(0, 100, 2)
	for i := range 4 {
		e.produce(10, fmt.Sprintf("p%d", i)) // [100, 140)
	}
	e.addSegment(0, 99, epochcache.Entry{Epoch: 0, StartOffset: 0}, epochcache.Entry{Epoch: 2, StartOffset: 80})
	opts := log.Options{FS: fs, RemoteStorageEnabled: true, RetentionMs: log.RetentionInfinite}
	l, err := log.Open("leader", opts)
	require.NoError(t, err)
	defer l.Close()
	require.NoError(t, l.TruncateFullyAndStartAt(100, 100))
	require.NoError(t, l.Flush())
	l.UpdateHighestOffsetInRemoteStorage(99, l.TruncationCount())
	e.parts.set(e.tp, state, l)
	ep := e.endpoint(EndpointOptions{SegmentBytes: 4096, MaxMessageBytes: 1 << 20}) // one batch per fetch
	storage, err := remote.NewStorageManager(e.store, remote.StorageOptions{})
	require.NoError(t, err)
	mgr, err := remote.NewManager(e.meta, storage, remote.ManagerOptions{TaskInterval: -1})
	require.NoError(t, err)
	defer mgr.Close()
	require.NoError(t, mgr.OnLeadershipChange([]remote.Partition{{TopicIDPartition: e.tp, Log: l}}, nil))

	images, pruned, stale := 0, 0, 0
	ends := map[string]int{}
	check = func() error {
		images++
		clone := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
		cp, err := pebblecp.Open(clone, "cp", pebblecp.Options{})
		if err != nil {
			return err
		}
		defer cp.Close()
		meta, err := remote.Open(clone, "meta", remote.MetadataOptions{})
		if err != nil {
			return err
		}
		defer meta.Close()
		h, err := remoteCoverage(meta, e.tp, 100)
		if err != nil {
			return fmt.Errorf("image: %w", err)
		}
		if err := walCoverage(e.ctx, cp, walTP(e.tp), 100, h); err != nil {
			return fmt.Errorf("image: %w", err)
		}
		copts := opts
		copts.FS = clone
		cl, err := log.Open("leader", copts)
		if err != nil {
			return err
		}
		defer cl.Close()
		cl.UpdateHighestOffsetInRemoteStorage(h, cl.TruncationCount())
		ends[fmt.Sprintf("%d/h=%d", cl.LogEndOffset(), h)]++
		p, err := NewPruner(PrunerOptions{ControlPlane: cp})
		if err != nil {
			return err
		}
		p.Arm(e.tp, 100)
		out, err := p.Run(e.ctx, []PrunePartition{{Partition: e.tp, State: state, Log: cl}})
		if err != nil {
			return err
		}
		switch {
		case out[0].Err != nil:
			return out[0].Err
		case out[0].Decision.Prune():
			pruned++
		case out[0].Decision.Reason == SkipStaleRemoteProgress:
			stale++
		}
		if err := walCoverage(e.ctx, cp, walTP(e.tp), 100, h); err != nil {
			return fmt.Errorf("after the restarted prune (log end %d, h %d): %w", cl.LogEndOffset(), h, err)
		}
		return nil
	}

	f, err := NewFetcher(FetcherOptions{Endpoint: ep, Machine: e.machine(ep, checkpointData{}), Clock: &manualClock{}})
	require.NoError(t, err)
	require.NoError(t, f.Add(FetcherPartition{Partition: e.tp, Log: l, State: state, CurrentLeaderEpoch: 4}))
	p, err := NewPruner(PrunerOptions{ControlPlane: e.cp})
	require.NoError(t, err)
	p.Arm(e.tp, 100)
	prune := func(at int64) {
		t.Helper()
		out, err := p.Run(e.ctx, []PrunePartition{{Partition: e.tp, State: state, Log: l}})
		require.NoError(t, err)
		require.NoError(t, out[0].Err)
		rec.Point(fmt.Sprintf("after the prune at %d", at)) // acknowledged: durable
		require.NoError(t, rec.Err())
		require.Equal(t, at+1, out[0].LogStartOffset)
	}
	rec.Arm(true)
	prune(99) // the first prune: W from the classic log start to S
	for _, end := range []int64{119, 139} {
		for i := 0; l.LogEndOffset() <= end; i++ {
			require.Less(t, i, 20, "consolidation stuck at %d", l.LogEndOffset())
			_, err := f.Step(e.ctx)
			require.NoError(t, err)
		}
		require.NoError(t, l.Roll())
		res, err := mgr.RunCopy(e.ctx, e.tp)
		require.NoError(t, err)
		require.Len(t, res.Copied, 1)
		require.Equal(t, end, l.HighestOffsetInRemoteStorage())
		prune(end)
	}
	rec.Arm(false)
	require.NoError(t, rec.Err())
	info, err := e.cp.LogInfo(e.ctx, walTP(e.tp))
	require.NoError(t, err)
	require.Equal(t, int64(140), info.LogStartOffset)
	t.Logf("%d images, %d pruned again after the restart, %d skipped as stale; log end/h: %v", images, pruned, stale, ends)
	require.Positive(t, pruned)
	// A roll makes the rolled segment durable before the copy can read
	// it, so no image here has h >= its log end; testdata/prune_eligibility
	// has that rule.
}

// TestCrossTierFlushCrash crashes the control plane's disk before every
// file operation of a Reporter flush that advances X from 20 to 40: every
// image holds X = 20 or 40, never more (a higher X would hide records
// retention has not deleted), and the acknowledged flush survives. A
// restarted reporter that reports 40 again brings a 20 image to 40.
func TestCrossTierFlushCrash(t *testing.T) {
	mem := vfs.NewCrashableMem()
	durableRoot(t, mem)
	var rec *crashtest.Recorder
	var check func() error
	rec = crashtest.New(1, func(int, string) error { return check() })
	e := newWALEnvOn(t, rec.Wrap(mem))
	e.switchAt(0, 100, 2)
	r, err := NewReporter(ReporterOptions{ControlPlane: e.cp})
	require.NoError(t, err)
	r.Report(e.tp, 20)
	require.NoError(t, r.Flush(e.ctx))

	flushed := false
	seen := map[int64]int{}
	check = func() error {
		cp, err := pebblecp.Open(mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0}), "cp", pebblecp.Options{})
		if err != nil {
			return err
		}
		defer cp.Close()
		info, err := cp.LogInfo(e.ctx, walTP(e.tp))
		if err != nil {
			return err
		}
		x := info.CrossTierLogStartOffset
		seen[x]++
		if x != 20 && x != 40 || flushed && x != 40 {
			return fmt.Errorf("X = %d (flushed: %v)", x, flushed)
		}
		again, err := NewReporter(ReporterOptions{ControlPlane: cp})
		if err != nil {
			return err
		}
		again.Report(e.tp, 40)
		if err := again.Flush(e.ctx); err != nil {
			return err
		}
		if info, err = cp.LogInfo(e.ctx, walTP(e.tp)); err != nil || info.CrossTierLogStartOffset != 40 {
			return fmt.Errorf("after the restarted flush: X = %d, %v", info.CrossTierLogStartOffset, err)
		}
		return nil
	}
	r.Report(e.tp, 40)
	rec.Arm(true)
	require.NoError(t, r.Flush(e.ctx))
	flushed = true
	rec.Point("after the flush")
	rec.Arm(false)
	require.NoError(t, rec.Err())
	t.Logf("%d images: X seen %v", rec.Checked(), seen)
	require.Positive(t, seen[20])
	require.Positive(t, seen[40])
}
