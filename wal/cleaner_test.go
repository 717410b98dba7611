package wal_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/remote/objstore/mem"
	"github.com/tierlog/tierlog/wal"
)

func (e *env) cleaner(opts wal.CleanerOptions) *wal.Cleaner {
	e.t.Helper()
	if opts.Store == nil {
		opts.Store = e.store
	}
	opts.ControlPlane, opts.Clock = e.cp, e.clock
	c, err := wal.NewCleaner(opts)
	require.NoError(e.t, err)
	return c
}

// TestCleanerGracePeriod: an object whose batches are gone is deleted
// only after the grace period, and forgotten only once the store
// confirmed the delete.
func TestCleanerGracePeriod(t *testing.T) {
	e := newEnv(t, 1)
	w := e.writer(wal.WriterOptions{MaxBytes: 1})
	_, err := w.Produce(e.ctx, []wal.ProduceRequest{{Partition: e.tp(0), Batches: batch(t, 2, "g")}})
	require.NoError(t, err)
	key := e.store.Keys()[0]
	_, err = e.cp.DeleteRecords(e.ctx, []wal.DeleteRecordsRequest{{Partition: e.tp(0), Offset: -1}})
	require.NoError(t, err)

	c := e.cleaner(wal.CleanerOptions{GracePeriod: time.Minute})
	res, err := c.Run(e.ctx)
	require.NoError(t, err)
	require.Equal(t, wal.CleanResult{}, res, "within the grace period")
	require.Equal(t, []string{key}, e.store.Keys())

	e.clock.Advance(time.Minute + time.Millisecond)
	e.store.SetFaults(mem.FaultConfig{Delete: mem.Faults{ErrorRate: 1}})
	res, err = c.Run(e.ctx)
	require.NoError(t, err)
	require.Equal(t, wal.CleanResult{DeleteErrors: 1}, res)
	files, err := e.cp.FilesToDelete(e.ctx, e.clock.Now(), 0)
	require.NoError(t, err)
	require.Len(t, files, 1, "a failed delete stays listed")

	e.store.SetFaults(mem.FaultConfig{})
	res, err = c.Run(e.ctx)
	require.NoError(t, err)
	require.Equal(t, wal.CleanResult{Deleted: 1}, res)
	require.Empty(t, e.store.Keys())
	files, err = e.cp.FilesToDelete(e.ctx, e.clock.Now(), 0)
	require.NoError(t, err)
	require.Empty(t, files)
	require.Equal(t, int64(1), c.Metrics().ObjectsDeleted)
}

// TestCleanerKeepsLiveObjects: an object with a live batch is never
// deleted, however old.
func TestCleanerKeepsLiveObjects(t *testing.T) {
	e := newEnv(t, 2)
	w := e.writer(wal.WriterOptions{MaxBytes: 1})
	_, err := w.Produce(e.ctx, []wal.ProduceRequest{{Partition: e.tp(0), Batches: batch(t, 2, "a")},
		{Partition: e.tp(1), Batches: batch(t, 2, "b")}})
	require.NoError(t, err)
	_, err = e.cp.DeleteRecords(e.ctx, []wal.DeleteRecordsRequest{{Partition: e.tp(0), Offset: -1}})
	require.NoError(t, err)
	e.clock.Advance(24 * time.Hour)
	res, err := e.cleaner(wal.CleanerOptions{}).Run(e.ctx)
	require.NoError(t, err)
	require.Equal(t, wal.CleanResult{}, res)
	require.Len(t, e.store.Keys(), 1)
}

// TestCleanerOrphans: an object reserved and uploaded but never
// committed (its writer crashed) is reaped after the reservation timeout,
// and a late commit of its key fails.
func TestCleanerOrphans(t *testing.T) {
	e := newEnv(t, 1)
	key := wal.NewObjectKey("wal")
	require.NoError(t, e.cp.ReserveObject(e.ctx, key))
	data := []byte("uploaded, never committed")
	require.NoError(t, e.store.Put(e.ctx, key, bytes.NewReader(data), int64(len(data)), objstore.PutOptions{}))

	c := e.cleaner(wal.CleanerOptions{ReservationTimeout: 5 * time.Minute, GracePeriod: time.Minute})
	res, err := c.Run(e.ctx)
	require.NoError(t, err)
	require.Equal(t, wal.CleanResult{}, res, "a young reservation may still commit")

	e.clock.Advance(5*time.Minute + time.Millisecond)
	res, err = c.Run(e.ctx)
	require.NoError(t, err)
	require.Equal(t, wal.CleanResult{OrphansReaped: 1}, res)
	require.Empty(t, e.store.Keys())
	_, err = e.cp.CommitFile(e.ctx, wal.CommitFileRequest{ObjectKey: key, ObjectSize: int64(len(data)),
		Batches: []wal.CommitBatch{{Partition: e.tp(0), Size: int64(len(data)), RecordCount: 1, ProducerID: -1}}})
	require.ErrorIs(t, err, wal.ErrObjectKeyReused)

	// After the grace period the orphan's row is forgotten too.
	e.clock.Advance(time.Minute + time.Millisecond)
	res, err = c.Run(e.ctx)
	require.NoError(t, err)
	require.Equal(t, wal.CleanResult{Deleted: 1}, res)
	require.Equal(t, int64(1), c.Metrics().OrphansReaped)
}

// TestCleanerOrphanDeleteFails: an orphan whose delete the store fails
// is not forgotten: it stays marked for deletion and the first Run after
// the grace period deletes it. (A cleaner that dropped it would leave an
// object in the store that nothing lists.)
func TestCleanerOrphanDeleteFails(t *testing.T) {
	e := newEnv(t, 1)
	key := wal.NewObjectKey("wal")
	require.NoError(t, e.cp.ReserveObject(e.ctx, key))
	data := []byte("uploaded, never committed")
	require.NoError(t, e.store.Put(e.ctx, key, bytes.NewReader(data), int64(len(data)), objstore.PutOptions{}))

	c := e.cleaner(wal.CleanerOptions{ReservationTimeout: 5 * time.Minute, GracePeriod: time.Minute})
	e.clock.Advance(5*time.Minute + time.Millisecond)
	e.store.SetFaults(mem.FaultConfig{Delete: mem.Faults{ErrorRate: 1}})
	res, err := c.Run(e.ctx)
	require.NoError(t, err)
	require.Equal(t, wal.CleanResult{DeleteErrors: 1}, res)
	require.Equal(t, []string{key}, e.store.Keys())

	e.store.SetFaults(mem.FaultConfig{})
	res, err = c.Run(e.ctx)
	require.NoError(t, err)
	require.Equal(t, wal.CleanResult{}, res, "within the grace period of the reaping")
	e.clock.Advance(time.Minute + time.Millisecond)
	res, err = c.Run(e.ctx)
	require.NoError(t, err)
	require.Equal(t, wal.CleanResult{Deleted: 1}, res)
	require.Empty(t, e.store.Keys())
}

// TestCleanerSaturated: a run deletes at most MaxFilesPerRun objects and
// says when more were due.
func TestCleanerSaturated(t *testing.T) {
	e := newEnv(t, 1)
	w := e.writer(wal.WriterOptions{MaxBytes: 1})
	for range 3 {
		_, err := w.Produce(e.ctx, []wal.ProduceRequest{{Partition: e.tp(0), Batches: batch(t, 1, "s")}})
		require.NoError(t, err)
	}
	_, err := e.cp.DeleteRecords(e.ctx, []wal.DeleteRecordsRequest{{Partition: e.tp(0), Offset: -1}})
	require.NoError(t, err)
	e.clock.Advance(time.Hour)
	c := e.cleaner(wal.CleanerOptions{MaxFilesPerRun: 2})
	res, err := c.Run(e.ctx)
	require.NoError(t, err)
	require.Equal(t, wal.CleanResult{Deleted: 2, Saturated: true}, res)
	res, err = c.Run(e.ctx)
	require.NoError(t, err)
	require.Equal(t, wal.CleanResult{Deleted: 1}, res)
	require.Empty(t, e.store.Keys())
}
