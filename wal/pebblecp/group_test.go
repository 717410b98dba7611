package pebblecp_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/internal/harness/crashtest"
	"github.com/tierlog/tierlog/wal"
	"github.com/tierlog/tierlog/wal/controlplanetest"
	"github.com/tierlog/tierlog/wal/pebblecp"
)

// TestConcurrentCommits: many goroutines commit to shared partitions
// through the commit queue (see controlplanetest.ConcurrentCommits).
func TestConcurrentCommits(t *testing.T) {
	cp, err := pebblecp.Open(vfs.NewMem(), "cp", pebblecp.Options{})
	require.NoError(t, err)
	defer cp.Close()
	controlplanetest.ConcurrentCommits(t, cp, controlplanetest.ConcurrentOptions{})
}

func groupBatch(tp wal.TopicIDPartition, at, n int64) wal.CommitBatch {
	return wal.CommitBatch{Partition: tp, ByteOffset: at, Size: n, LastOffset: n - 1, RecordCount: int32(n),
		MaxTimestamp: 1, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
}

func groupRequest(key string, batches ...wal.CommitBatch) wal.CommitFileRequest {
	req := wal.CommitFileRequest{ObjectKey: key, BrokerID: 1}
	for _, b := range batches {
		b.ByteOffset = req.ObjectSize
		req.ObjectSize += b.Size
		req.Batches = append(req.Batches, b)
	}
	return req
}

// TestGroupCommitFailingStep: see controlplanetest.GroupCommitFailingStep.
func TestGroupCommitFailingStep(t *testing.T) {
	cp, err := pebblecp.Open(vfs.NewMem(), "cp", pebblecp.Options{})
	require.NoError(t, err)
	defer cp.Close()
	controlplanetest.GroupCommitFailingStep(t, cp, cp.CommitGroup)
}

// TestGroupCommitStepFault: Options.StepFault fails one commit of a
// group after its batches were accepted; the group's other commits go
// through, the one after it starts where the failed one would have, and
// the partition has no hole (group-commit-step-undo: without the step's
// own copy of the row the group keeps the failed step's offsets).
func TestGroupCommitStepFault(t *testing.T) {
	ctx := context.Background()
	injected := errors.New("injected")
	cp, err := pebblecp.Open(vfs.NewMem(), "cp", pebblecp.Options{StepFault: func(key string) error {
		if key == "s/1" {
			return injected
		}
		return nil
	}})
	require.NoError(t, err)
	defer cp.Close()
	tp := wal.TopicIDPartition{TopicID: wal.TopicID{1}, Partition: 0}
	require.NoError(t, cp.CreatePartitions(ctx, []wal.CreatePartitionsRequest{{TopicID: tp.TopicID, Topic: "a", NumPartitions: 1}}))
	res, errs := cp.CommitGroup(ctx, []wal.CommitFileRequest{
		groupRequest("s/0", groupBatch(tp, 0, 3)),
		groupRequest("s/1", groupBatch(tp, 0, 4)),
		groupRequest("s/2", groupBatch(tp, 0, 2)),
	})
	require.NoError(t, errs[0])
	require.ErrorIs(t, errs[1], injected)
	require.NoError(t, errs[2])
	require.Equal(t, int64(3), res[2].Batches[0].BaseOffset, "the commit after the failed one")
	info, err := cp.LogInfo(ctx, tp)
	require.NoError(t, err)
	require.Equal(t, int64(5), info.HighWatermark)
}

// TestCrashGroupCommit cuts group commits at every mutating file
// operation. Each group holds new objects, a retry of an object committed
// before, the same new object twice, and a key reused with other content
// (which fails alone). At every cut, after reopening, the group is wholly
// there or wholly absent (the state before or after the group, never
// between), and committing the group again answers every request exactly
// as the uncut group did and reaches the state after it: a request
// committed before the cut keeps the offsets it was answered with, one
// absent is committed by its retry.
func TestCrashGroupCommit(t *testing.T) {
	ctx := context.Background()
	clock := controlplanetest.NewClock(time.UnixMilli(1_767_225_600_000))
	mem := vfs.NewCrashableMem()
	var clones []vfs.FS
	rec := crashtest.New(1, func(_ int, _ string) error {
		clones = append(clones, mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0}))
		return nil
	})
	cp, err := pebblecp.Open(rec.Wrap(mem), "cp", pebblecp.Options{Now: clock.Now})
	require.NoError(t, err)
	defer cp.Close()
	require.NoError(t, cp.CreatePartitions(ctx, []wal.CreatePartitionsRequest{
		{TopicID: wal.TopicID{1}, Topic: "a", NumPartitions: 2}, {TopicID: wal.TopicID{2}, Topic: "b", NumPartitions: 1}}))
	first := groupRequest("wal/first", groupBatch(crashParts[0], 0, 2), groupBatch(crashParts[2], 0, 1))
	_, err = cp.CommitFile(ctx, first)
	require.NoError(t, err)

	const groups = 4
	checked := 0
	for g := 0; g < groups; g++ {
		var reqs []wal.CommitFileRequest
		for i := 0; i < 3; i++ {
			reqs = append(reqs, groupRequest(fmt.Sprintf("wal/%d/%d", g, i),
				groupBatch(crashParts[(g+i)%3], 0, int64(1+i)), groupBatch(crashParts[(g+i+1)%3], 0, int64(2+g))))
		}
		reused := first
		reused.ObjectSize++
		reqs = append(reqs, first, reqs[1], reused)
		wantErr := []bool{false, false, false, false, false, true}

		before, err := controlplanetest.Dump(ctx, cp, crashParts, clock.Now())
		require.NoError(t, err)
		clones = clones[:0]
		rec.Arm(true)
		res, errs := cp.CommitGroup(ctx, reqs)
		rec.Arm(false)
		require.NoError(t, rec.Err())
		for i := range reqs {
			if wantErr[i] {
				require.ErrorIs(t, errs[i], wal.ErrObjectKeyReused, "group %d request %d", g, i)
			} else {
				require.NoError(t, errs[i], "group %d request %d", g, i)
			}
		}
		require.Equal(t, res[1], res[4], "the same object twice in one group")
		after, err := controlplanetest.Dump(ctx, cp, crashParts, clock.Now())
		require.NoError(t, err)
		require.NotEqual(t, before, after)
		require.NotEmpty(t, clones, "group %d: no crash point", g)
		for i, fs := range clones {
			checkGroupCut(t, fs, clock, reqs, res, errs, before, after, fmt.Sprintf("group %d, cut %d", g, i))
		}
		checked += len(clones)
		clock.Advance(time.Second)
	}
	t.Logf("%d groups, %d cuts checked", groups, checked)
}

// checkGroupCut reopens a crash image of a group commit and checks it as
// TestCrashGroupCommit says.
func checkGroupCut(t *testing.T, fs vfs.FS, clock *controlplanetest.Clock, reqs []wal.CommitFileRequest,
	res []wal.CommitFileResult, errs []error, before, after, what string) {
	ctx := context.Background()
	cp, err := pebblecp.Open(fs, "cp", pebblecp.Options{Now: clock.Now})
	require.NoError(t, err, what)
	defer cp.Close()
	img, err := controlplanetest.Dump(ctx, cp, crashParts, clock.Now())
	require.NoError(t, err, what)
	if img != before && img != after {
		t.Fatalf("%s: a partial group:\n%s\nbefore:\n%s\nafter:\n%s", what, img, before, after)
	}
	again, againErrs := cp.CommitGroup(ctx, reqs)
	for i := range reqs {
		require.Equal(t, errs[i] == nil, againErrs[i] == nil, "%s: request %d: %v", what, i, againErrs[i])
		if errs[i] == nil {
			require.Equal(t, res[i], again[i], "%s: request %d answered otherwise after the cut", what, i)
		}
	}
	img, err = controlplanetest.Dump(ctx, cp, crashParts, clock.Now())
	require.NoError(t, err, what)
	require.Equal(t, after, img, "%s: the retried group", what)
}
