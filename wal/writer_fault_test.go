package wal_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/internal/harness/s3test"
	"github.com/tierlog/tierlog/internal/harness/testseed"
	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/remote/objstore/mem"
	"github.com/tierlog/tierlog/remote/objstore/s3"
	"github.com/tierlog/tierlog/wal"
	"github.com/tierlog/tierlog/wal/pebblecp"
)

// faultRun is what one produce-under-faults scenario saw.
type faultRun struct {
	acked, failed int   // requests acknowledged / answered with a retriable error
	uploadRetries int64 // Puts retried after a backoff
}

// produceUnderFaults produces from several goroutines through faulty, a
// store whose Puts fail, stall or lose their answers, into a Pebble
// control plane, then reads everything back through clean (the same
// objects without faults). It requires:
//   - every request answered: acknowledged, or a *StorageError that
//     IsRetriable; Produce itself never fails;
//   - nothing lost: every acknowledged record reads back at the offset
//     the writer assigned it;
//   - nothing duplicated: no offset acknowledged twice, no value at two
//     offsets, offsets from 0 without a gap.
//   - no orphan survives: after a Cleaner run past the reservation
//     timeout, every object left in the store is registered.
func produceUnderFaults(t *testing.T, faulty, clean objstore.Store, seed uint64, uploadAttempts int) faultRun {
	t.Helper()
	ctx := context.Background()
	const partitions, producers, calls = 3, 4, 8
	clock := newFakeClock()
	clock.fireAtOnceBelow = 5 * time.Second // upload backoffs, not the 30 s deadline
	topic := wal.TopicID{0xF1}
	cp, err := pebblecp.Open(vfs.NewMem(), "cp", pebblecp.Options{Now: clock.Now})
	require.NoError(t, err)
	defer cp.Close()
	require.NoError(t, cp.CreatePartitions(ctx, []wal.CreatePartitionsRequest{{TopicID: topic, Topic: "t", NumPartitions: partitions}}))
	// MaxBytes 1: every call seals its own object at once, so the fake
	// clock never has to fire.
	w, err := wal.NewWriter(wal.WriterOptions{Store: faulty, ControlPlane: cp, Clock: clock, MaxBytes: 1, UploadConcurrency: 3, UploadAttempts: uploadAttempts})
	require.NoError(t, err)

	model := &ackModel{acked: map[int32]map[int64]string{}}
	var (
		mu  sync.Mutex
		run faultRun
		bad []string
	)
	answer := func(req wal.ProduceRequest, r wal.ProduceResult) {
		mu.Lock()
		defer mu.Unlock()
		var se *wal.StorageError
		switch {
		case r.Err == nil && len(r.Batches) == 1 && r.Batches[0].Err == nil:
			run.acked++
		case r.Err != nil && wal.IsRetriable(r.Err) && errors.As(r.Err, &se):
			run.failed++
			return
		default:
			bad = append(bad, fmt.Sprintf("partition %d: %+v", req.Partition.Partition, r))
			return
		}
		var recs []string
		for _, v := range values(nopTB{}, req.Batches) {
			off, val, _ := strings.Cut(v, ":")
			var d int64
			_, _ = fmt.Sscan(off, &d)
			recs = append(recs, fmt.Sprintf("%d:%s", r.Batches[0].BaseOffset+d, val))
		}
		model.record(req.Partition.Partition, recs)
	}
	var wg sync.WaitGroup
	for g := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range calls {
				var reqs []wal.ProduceRequest
				for p := range int32(partitions) {
					if (uint64(g+c)+uint64(p)+seed)%3 != 0 {
						reqs = append(reqs, wal.ProduceRequest{Partition: wal.TopicIDPartition{TopicID: topic, Partition: p},
							Batches: batch(t, 1+(c%3), fmt.Sprintf("g%d-c%d-p%d", g, c, p))})
					}
				}
				res, err := w.Produce(ctx, reqs)
				if err != nil {
					mu.Lock()
					bad = append(bad, fmt.Sprintf("Produce: %v", err))
					mu.Unlock()
					continue
				}
				for i, r := range res {
					answer(reqs[i], r)
				}
			}
		}()
	}
	wg.Wait()
	require.NoError(t, w.Close())
	require.Empty(t, bad, "requests answered neither with success nor with a retriable storage error")
	require.NoError(t, model.dup)
	require.NoError(t, checkReadBack(ctx, clean, cp, topic, partitions, model.snapshot()))
	requireNoOrphans(t, clean, cp, clock)
	m := w.Metrics()
	run.uploadRetries = m.UploadRetries
	t.Logf("acked %d, failed %d; objects committed %d, commit errors %d, deleted uncommitted %d, kept unknown %d",
		run.acked, run.failed, m.ObjectsCommitted, m.CommitErrors, m.ObjectsDeletedUncommitted, m.ObjectsKeptUnknown)
	return run
}

// requireNoOrphans runs a Cleaner past the reservation timeout and checks
// that every object left in store is registered with cp.
//
// The store may inject faults into the cleaner's own deletes (the mem
// store's Delete faults do). A reaped orphan whose delete failed stays
// marked for deletion, and a later Run deletes it through FilesToDelete
// once the grace period has passed: so the check is made after the first
// Run whose deletes the store all confirmed, each Run past the previous
// one's grace period. A single Run cannot promise more under delete faults,
// and asking it to made this test fail whenever a fault hit an orphan that
// existed (a lost PUT answer whose cleanup delete failed too).
func requireNoOrphans(t *testing.T, store objstore.Store, cp wal.ControlPlane, clock *fakeClock) {
	t.Helper()
	ctx := context.Background()
	const grace = time.Minute
	c, err := wal.NewCleaner(wal.CleanerOptions{Store: store, ControlPlane: cp, Clock: clock, GracePeriod: grace})
	require.NoError(t, err)
	clock.Advance(time.Hour) // past the reservation timeout
	runs, reaped, retried := 0, 0, 0
	for {
		res, err := c.Run(ctx)
		require.NoError(t, err)
		runs++
		reaped += res.OrphansReaped
		if runs > 1 {
			retried += res.Deleted
		}
		if res.DeleteErrors == 0 {
			break
		}
		// Each failed delete has a 20% chance at most: 60 failures in a
		// row of one object are a bug, not bad luck.
		require.Less(t, runs, 60, "the cleaner's deletes keep failing")
		clock.Advance(grace + time.Second)
	}
	t.Logf("cleaner: %d runs, %d orphans reaped, %d deleted on a later run", runs, reaped, retried)
	keys, _, err := store.List(ctx, "", "", 10_000)
	require.NoError(t, err)
	for _, k := range keys {
		safe, err := cp.IsSafeToDeleteObject(ctx, k.Key)
		require.NoError(t, err)
		require.False(t, safe, "object %s survived the cleaner but is not registered", k.Key)
	}
}

// faultyMem is a mem store whose Puts and Deletes fail (before taking
// effect) or lose their answer (after), and whose reads are clean.
func faultyMem(seed uint64) *mem.Mem {
	return mem.New(mem.Options{Seed: seed, Faults: mem.FaultConfig{
		Put:    mem.Faults{ErrorRate: 0.25, LostResponseRate: 0.25},
		Delete: mem.Faults{ErrorRate: 0.2, LostResponseRate: 0.2},
	}})
}

// TestWriterUnderMemFaults runs the scenario on the mem store's fault
// injection: Puts that fail before taking effect and Puts that take
// effect but lose their answer (the writer retries the same key, or gives
// up on an object that exists).
func TestWriterUnderMemFaults(t *testing.T) {
	seed := testseed.Seed(t, 41)
	store := faultyMem(seed)
	// One attempt per object, so that about half the objects fail for
	// good and the lost answers of the others reach the writer's handling.
	run := produceUnderFaults(t, store, store, seed, 1)
	require.Positive(t, run.acked)
	require.Positive(t, run.failed)
	require.Positive(t, store.Counts().Put.LostResponses, "the seed must exercise lost answers")
}

// TestWriterUnderMemFaultsWithRetries runs the scenario with three
// attempts per object, so that lost answers and failures meet the backed
// off retries of the same key.
func TestWriterUnderMemFaultsWithRetries(t *testing.T) {
	seed := testseed.Seed(t, 47)
	store := faultyMem(seed)
	run := produceUnderFaults(t, store, store, seed, 3)
	require.Positive(t, run.acked)
	require.Positive(t, run.uploadRetries)
}

// s3PutFaults is the fault mix of the writer's S3 requests: throttling
// (503 SlowDown, 429), 500s, resets before forwarding, lost responses
// after the server stored the object, and stalls past the request
// deadline of a request the server applied. Faults are drawn for PUTs
// only (the writer's uploads) and DELETEs (its cleanup of uncommitted
// objects); the read-back goes around the proxy.
var s3PutFaults = []s3test.FaultRate{
	{Fault: s3test.Status503, Rate: 0.12, Method: http.MethodPut},
	{Fault: s3test.Status429, Rate: 0.05, Method: http.MethodPut},
	{Fault: s3test.Status500, Rate: 0.05, Method: http.MethodPut},
	{Fault: s3test.Reset, Rate: 0.04, Method: http.MethodPut},
	{Fault: s3test.LostResponse, Rate: 0.18, Method: http.MethodPut},
	// Each costs a whole request deadline: rare, for the run time.
	{Fault: s3test.SlowBody, Rate: 0.03, Method: http.MethodPut},
	{Fault: s3test.LostResponse, Rate: 0.1, Method: http.MethodDelete},
	{Fault: s3test.Status503, Rate: 0.1, Method: http.MethodDelete},
}

// TestWriterUnderS3Faults runs the scenario against the real S3 server
// through a FaultProxy.
func TestWriterUnderS3Faults(t *testing.T) {
	seed := testseed.Seed(t, 43)
	srv := s3test.Start(t)
	o := srv.StoreOptions(t)
	direct := s3test.OpenStore(t, o) // creates the bucket
	proxy := s3test.NewFaultProxy(t, srv)
	o.Endpoint, o.RootCAs, o.CreateBucket = proxy.URL(), proxy.RootCAs(), false
	o.RequestTimeout = 250 * time.Millisecond
	o.Retry = s3.RetryPolicy{MaxAttempts: 2, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}
	faulty := s3test.OpenStore(t, o)
	proxy.SetRule(s3test.RandomFaults(seed, s3PutFaults...))

	// One attempt per object on top of the adapter's two, so that some
	// uploads fail for good.
	run := produceUnderFaults(t, faulty, direct, seed, 1)
	counts := proxy.Counts()
	t.Logf("proxy: %d requests, faults %v", proxy.Requests(), counts)
	require.Positive(t, run.acked)
	require.Positive(t, run.failed, "the seed must fail some uploads for good")
	require.Positive(t, counts[s3test.LostResponse], "the seed must lose PUT answers")
}
