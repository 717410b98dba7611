package pebblecp_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/internal/harness/crashtest"
	"github.com/tierlog/tierlog/internal/harness/testseed"
	"github.com/tierlog/tierlog/wal"
	"github.com/tierlog/tierlog/wal/controlplanetest"
	"github.com/tierlog/tierlog/wal/pebblecp"
)

// TestCrash runs a seeded series of commits (with prunes, record deletions,
// reservations and expiries among them) on a crashable in-memory FS.
//
//   - At every mutating file operation inside a call (a crash point) it
//     takes a CrashClone, reopens a control plane on it and requires the
//     state before the call or the state after it: a call is atomic.
//   - After every acknowledged call it takes a CrashClone (keeping none or
//     half of the unsynced data) and requires exactly the state after it:
//     every acknowledged commit survived.
func TestCrash(t *testing.T) {
	seed := testseed.Seed(t, 1)
	steps := 80
	if testing.Short() {
		steps = 30
	}
	for _, s := range []uint64{seed, seed + 1} {
		t.Run(fmt.Sprintf("seed=%d", s), func(t *testing.T) { runCrash(t, s, steps) })
	}
}

var crashParts = []wal.TopicIDPartition{
	{TopicID: wal.TopicID{1}, Partition: 0}, {TopicID: wal.TopicID{1}, Partition: 1}, {TopicID: wal.TopicID{2}, Partition: 0},
}

func runCrash(t *testing.T, seed uint64, steps int) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, seed^0xc4a5))
	cloneRNG := rand.New(rand.NewPCG(seed, 7))
	clock := controlplanetest.NewClock(time.UnixMilli(1_767_225_600_000))
	mem := vfs.NewCrashableMem()

	dumpOf := func(fs vfs.FS) (string, error) {
		cp, err := pebblecp.Open(fs, "cp", pebblecp.Options{Now: clock.Now})
		if err != nil {
			return "", fmt.Errorf("reopen: %w", err)
		}
		defer cp.Close()
		return controlplanetest.Dump(ctx, cp, crashParts, clock.Now())
	}
	var images []string // dumps taken at the crash points of the current call
	rec := crashtest.New(1, func(_ int, _ string) error {
		d, err := dumpOf(mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0}))
		images = append(images, d)
		return err
	})
	cp, err := pebblecp.Open(rec.Wrap(mem), "cp", pebblecp.Options{Now: clock.Now})
	require.NoError(t, err)
	defer cp.Close()
	require.NoError(t, cp.CreatePartitions(ctx, []wal.CreatePartitionsRequest{
		{TopicID: wal.TopicID{1}, Topic: "a", NumPartitions: 2}, {TopicID: wal.TopicID{2}, Topic: "b", NumPartitions: 1}}))

	before, err := controlplanetest.Dump(ctx, cp, crashParts, clock.Now())
	require.NoError(t, err)
	var reqs []wal.CommitFileRequest
	checked := 0
	for step := 0; step < steps; step++ {
		images = images[:0]
		rec.Arm(true)
		what := crashStep(ctx, t, cp, rng, step, &reqs, clock)
		rec.Arm(false)
		require.NoError(t, rec.Err(), "step %d (%s)", step, what)
		after, err := controlplanetest.Dump(ctx, cp, crashParts, clock.Now())
		require.NoError(t, err)
		if after != before && len(images) == 0 {
			t.Fatalf("step %d (%s) changed the state without a crash point", step, what)
		}
		for i, img := range images {
			if img != before && img != after {
				t.Fatalf("step %d (%s), crash point %d: neither the state before nor after:\n%s\nbefore:\n%s\nafter:\n%s",
					step, what, i, img, before, after)
			}
		}
		checked += len(images)
		pct := []int{0, 50}[step%2]
		got, err := dumpOf(mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: cloneRNG}))
		require.NoError(t, err)
		require.Equal(t, after, got, "step %d (%s): crash after the acknowledgement (unsynced kept %d%%)", step, what, pct)
		before = after
		clock.Advance(time.Second)
	}
	t.Logf("%d steps, %d crash points checked", steps, checked)
}

// crashStep runs one random acknowledged call and says what it was.
func crashStep(ctx context.Context, t *testing.T, cp wal.ControlPlane, rng *rand.Rand, step int,
	reqs *[]wal.CommitFileRequest, clock *controlplanetest.Clock) string {
	switch op := rng.IntN(12); {
	case op < 5 || len(*reqs) == 0:
		req := wal.CommitFileRequest{ObjectKey: fmt.Sprintf("wal/%03d", step), BrokerID: 1}
		for i := 0; i < 1+rng.IntN(4); i++ {
			n := 1 + rng.Int64N(9)
			b := wal.CommitBatch{Partition: crashParts[rng.IntN(len(crashParts))], ByteOffset: req.ObjectSize, Size: n,
				LastOffset: n - 1, RecordCount: int32(n), MaxTimestamp: int64(step), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
			req.ObjectSize += n
			req.Batches = append(req.Batches, b)
		}
		_, err := cp.CommitFile(ctx, req)
		require.NoError(t, err)
		*reqs = append(*reqs, req)
		return "commit " + req.ObjectKey
	case op < 6:
		req := (*reqs)[rng.IntN(len(*reqs))]
		_, err := cp.CommitFile(ctx, req)
		require.NoError(t, err)
		return "retry " + req.ObjectKey
	case op < 7:
		tp := crashParts[rng.IntN(len(crashParts))]
		info, err := cp.LogInfo(ctx, tp)
		require.NoError(t, err)
		h := info.LogStartOffset - 1 + rng.Int64N(info.HighWatermark-info.LogStartOffset+2)
		_, err = cp.PruneDisklessLogs(ctx, []wal.PruneRequest{{Partition: tp, HighestOffsetInRemoteStorage: h}})
		require.NoError(t, err)
		return fmt.Sprintf("prune %s at %d", tp, h)
	case op < 8:
		tp := crashParts[rng.IntN(len(crashParts))]
		_, err := cp.DeleteRecords(ctx, []wal.DeleteRecordsRequest{{Partition: tp, Offset: -1}})
		require.NoError(t, err)
		return fmt.Sprintf("delete records of %s", tp)
	case op < 9:
		files, err := cp.FilesToDelete(ctx, clock.Now().Add(time.Second), 0)
		require.NoError(t, err)
		var keys []string
		for _, f := range files {
			keys = append(keys, f.ObjectKey)
		}
		slices.Sort(keys)
		keys = keys[:(len(keys)+1)/2]
		require.NoError(t, cp.DeleteFiles(ctx, keys))
		return fmt.Sprintf("delete files %v", keys)
	case op < 10:
		tp := crashParts[rng.IntN(len(crashParts))]
		limit := rng.Int64N(40)
		_, err := cp.EnforceRetention(ctx, []wal.RetentionRequest{{Partition: tp, RetentionBytes: limit, RetentionMs: -1}}, 2)
		require.NoError(t, err)
		return fmt.Sprintf("retention of %s to %d bytes", tp, limit)
	case op < 11 && step%2 == 0:
		key := fmt.Sprintf("res/%03d", step)
		require.NoError(t, cp.ReserveObject(ctx, key))
		return "reserve " + key
	default:
		keys, err := cp.ExpireReservations(ctx, clock.Now().Add(-3*time.Second), 0)
		require.NoError(t, err)
		return fmt.Sprintf("expire reservations %v", keys)
	}
}
