package wal_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/internal/harness/crashtest"
	"github.com/tierlog/tierlog/internal/harness/testseed"
	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/remote/objstore/mem"
	"github.com/tierlog/tierlog/wal"
	"github.com/tierlog/tierlog/wal/pebblecp"
)

// deletePointStore adds crash points around every Delete: before it (the
// control plane lists the object, the store still holds it) and after it
// (the object is gone, the control plane not yet told).
type deletePointStore struct {
	objstore.Store
	rec *crashtest.Recorder
}

func (s deletePointStore) Delete(ctx context.Context, key string) error {
	s.rec.Point("delete " + key)
	err := s.Store.Delete(ctx, key)
	s.rec.Point("after delete " + key)
	return err
}

// copyStore returns a new mem store holding what s holds now: the object
// store's side of a crash image (its operations are durable one by one).
func copyStore(ctx context.Context, s *mem.Mem) (*mem.Mem, error) {
	out := mem.New(mem.Options{})
	for _, k := range s.Keys() {
		data, err := objstore.ReadAll(ctx, s, k)
		if errors.Is(err, objstore.ErrNotExist) {
			continue // deleted between the listing and the read
		}
		if err != nil {
			return nil, err
		}
		if err := out.Put(ctx, k, bytes.NewReader(data), int64(len(data)), objstore.PutOptions{}); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// cleanupWorld is the state a cleanup crash test starts from and the
// records that must survive it.
type cleanupWorld struct {
	topic      wal.TopicID
	partitions int32
	// want is, per partition, the records at or above W ("offset:value"),
	// which no cleanup may take away.
	want map[int32][]string
}

// checkCleanupInvariants restarts on (cp, store) and checks what a cleanup
// must never break: every record at or above W reads back (no object a
// batch references was deleted); then one Run of a fresh Cleaner, with the
// clock past the grace period, leaves no unregistered object in the store
// (no orphan survives), and the records still read back.
func checkCleanupInvariants(ctx context.Context, cp wal.ControlPlane, store objstore.Store, clock wal.Clock, w cleanupWorld) error {
	readBack := func(when string) error {
		r, err := wal.NewReader(wal.ReaderOptions{Store: store, ControlPlane: cp})
		if err != nil {
			return err
		}
		req := wal.FindBatchesRequest{MaxBytes: 1 << 30}
		for p := range w.partitions {
			tp := wal.TopicIDPartition{TopicID: w.topic, Partition: p}
			info, err := cp.LogInfo(ctx, tp)
			if err != nil {
				return err
			}
			req.Partitions = append(req.Partitions, wal.FindPartition{Partition: tp, Offset: info.LogStartOffset, MaxPartitionBytes: 1 << 30})
		}
		res, err := r.Fetch(ctx, req)
		if err != nil {
			return err
		}
		for p, fr := range res {
			if fr.Err != nil {
				return fmt.Errorf("%s: partition %d: %w", when, p, fr.Err)
			}
			got := values(nopTB{}, fr.Records)
			if want := w.want[int32(p)]; !slices.Equal(got, want) {
				return fmt.Errorf("%s: partition %d reads %v, want %v", when, p, got, want)
			}
		}
		return nil
	}
	if err := readBack("after the restart"); err != nil {
		return err
	}
	c, err := wal.NewCleaner(wal.CleanerOptions{Store: store, ControlPlane: cp, Clock: clock,
		GracePeriod: cleanupGrace, ReservationTimeout: cleanupReservationTimeout})
	if err != nil {
		return err
	}
	res, err := c.Run(ctx)
	if err != nil {
		return fmt.Errorf("the cleaner's run after the restart: %w", err)
	}
	if res.DeleteErrors != 0 || res.Saturated {
		return fmt.Errorf("the cleaner's run after the restart: %+v", res)
	}
	keys, _, err := store.List(ctx, "", "", 10_000)
	if err != nil {
		return err
	}
	for _, k := range keys {
		safe, err := cp.IsSafeToDeleteObject(ctx, k.Key)
		if err != nil {
			return err
		}
		if safe {
			return fmt.Errorf("object %s survived the reaper after the restart but is not registered", k.Key)
		}
	}
	return readBack("after the next cleaner run")
}

const (
	cleanupGrace              = time.Minute
	cleanupReservationTimeout = 5 * time.Minute
)

// laterClock is a Clock fixed at a time (its timers never fire).
type laterClock struct{ now time.Time }

func (c laterClock) Now() time.Time                            { return c.now }
func (c laterClock) AfterFunc(time.Duration, func()) wal.Timer { return stoppedTimer{} }

type stoppedTimer struct{}

func (stoppedTimer) Stop() bool { return false }

// TestCleanerCrash crashes the control plane (a crashable FS under
// Pebble) at every step of two Cleaner runs: before every file operation
// of ExpireReservations and DeleteFiles, and before and after every store
// Delete of an orphan or of an object past its grace period. The world
// holds committed objects still referenced, objects whose batches are all
// gone (some past the grace period, one not), objects shared by a live and
// a deleted partition, and orphans (reserved and uploaded but never
// committed, or reserved only). After a restart on each crash image: no
// object a batch references is gone, no record at or above W is lost, and
// the next reaper run (past the grace period) leaves no orphan.
func TestCleanerCrash(t *testing.T) {
	seed := testseed.Seed(t, 53)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 2))
	memFS := vfs.NewCrashableMem()
	store := mem.New(mem.Options{})
	clock := newFakeClock()
	world := cleanupWorld{topic: wal.TopicID{0xC1}, partitions: 3, want: map[int32][]string{}}

	var rec *crashtest.Recorder
	rec = crashtest.New(1, func(point int, what string) error {
		stored, err := copyStore(ctx, store)
		if err != nil {
			return err
		}
		clone := memFS.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(100), RNG: rng})
		// The restarted broker's next run comes after the grace period:
		// an orphan reaped just before the crash is marked but may still
		// be in the store, and waits for its grace period as a failed
		// delete does.
		later := laterClock{now: clock.Now().Add(cleanupGrace + time.Second)}
		cp, err := pebblecp.Open(clone, "cp", pebblecp.Options{Now: later.Now})
		if err != nil {
			return err
		}
		defer cp.Close()
		if err := checkCleanupInvariants(ctx, cp, stored, later, world); err != nil {
			return fmt.Errorf("crash at %s: %w", what, err)
		}
		return nil
	})
	cp, err := pebblecp.Open(rec.Wrap(memFS), "cp", pebblecp.Options{Now: clock.Now})
	require.NoError(t, err)
	defer cp.Close()
	require.NoError(t, cp.CreatePartitions(ctx, []wal.CreatePartitionsRequest{{TopicID: world.topic, Topic: "t", NumPartitions: world.partitions}}))

	// Committed objects: one call per object, each to one or two
	// partitions.
	w, err := wal.NewWriter(wal.WriterOptions{Store: store, ControlPlane: cp, Clock: clock, MaxBytes: 1})
	require.NoError(t, err)
	acked := map[int32][]string{}
	produce := func(name string, parts ...int32) {
		var reqs []wal.ProduceRequest
		for _, p := range parts {
			reqs = append(reqs, wal.ProduceRequest{Partition: wal.TopicIDPartition{TopicID: world.topic, Partition: p},
				Batches: batch(t, 2, fmt.Sprintf("%s-p%d", name, p))})
		}
		res, err := w.Produce(ctx, reqs)
		require.NoError(t, err)
		for i, r := range res {
			require.NoError(t, r.Err)
			for _, v := range values(t, reqs[i].Batches) {
				var d int64
				var val string
				_, err := fmt.Sscanf(v, "%d:%s", &d, &val)
				require.NoError(t, err)
				acked[parts[i]] = append(acked[parts[i]], fmt.Sprintf("%d:%s", r.Batches[0].BaseOffset+d, val))
			}
		}
	}
	produce("a", 0)    // p0 [0, 1]
	produce("b", 0, 1) // p0 [2, 3], p1 [0, 1]
	produce("c", 1)    // p1 [2, 3]
	produce("d", 2)    // p2 [0, 1]
	produce("e", 2)    // p2 [2, 3]
	produce("f", 1, 2) // p1 [4, 5], p2 [4, 5]
	require.NoError(t, w.Close())

	deleteTo := func(p int32, offset int64) {
		res, err := cp.DeleteRecords(ctx, []wal.DeleteRecordsRequest{{Partition: wal.TopicIDPartition{TopicID: world.topic, Partition: p}, Offset: offset}})
		require.NoError(t, err)
		require.NoError(t, res[0].Err)
	}
	deleteTo(0, -1) // object a unreferenced, b still p1's
	deleteTo(1, 2)  // b's p1 batch: b unreferenced too; c and f stay
	// Orphans of crashed writers.
	for i := range 3 {
		key := wal.NewObjectKey("wal")
		require.NoError(t, cp.ReserveObject(ctx, key))
		data := []byte(fmt.Sprintf("orphan %d", i))
		require.NoError(t, store.Put(ctx, key, bytes.NewReader(data), int64(len(data)), objstore.PutOptions{}))
	}
	require.NoError(t, cp.ReserveObject(ctx, wal.NewObjectKey("wal"))) // reserved, never uploaded
	clock.Advance(cleanupReservationTimeout + time.Second)
	deleteTo(2, 2) // object d: marked now, within the grace period at the first run

	for p := range world.partitions {
		info, err := cp.LogInfo(ctx, wal.TopicIDPartition{TopicID: world.topic, Partition: p})
		require.NoError(t, err)
		world.want[p] = []string{}
		for _, v := range acked[p] {
			var off int64
			_, _ = fmt.Sscanf(v, "%d:", &off)
			if off >= info.LogStartOffset {
				world.want[p] = append(world.want[p], v)
			}
		}
	}

	// The cleaner under test: at most two objects a run, so the second
	// run finishes what the first left.
	c, err := wal.NewCleaner(wal.CleanerOptions{Store: deletePointStore{store, rec}, ControlPlane: cp, Clock: clock,
		GracePeriod: cleanupGrace, ReservationTimeout: cleanupReservationTimeout, MaxFilesPerRun: 2})
	require.NoError(t, err)
	rec.Arm(true)
	first, err := c.Run(ctx)
	require.NoError(t, err)
	clock.Advance(cleanupGrace + time.Second)
	second, err := c.Run(ctx)
	require.NoError(t, err)
	rec.Arm(false)
	require.NoError(t, rec.Err())
	t.Logf("%d crash points checked; runs %+v, %+v", rec.Checked(), first, second)
	require.Equal(t, 2, first.OrphansReaped)
	require.Equal(t, 2, first.Deleted)
	require.Positive(t, rec.Checked())
	require.NoError(t, checkCleanupInvariants(ctx, cp, store, laterClock{now: clock.Now().Add(cleanupGrace + time.Second)}, world), "after the runs")
}
