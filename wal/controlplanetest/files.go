package controlplanetest

import (
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/wal"
)

func testFilesToDelete(e *env) {
	a, _ := e.commit(batch(t1p0, 5))
	b, _ := e.commit(batch(t1p1, 5))
	markA := e.clock.Now()
	e.deleteRecords(t1p0, -1, 5)
	e.clock.Advance(10 * time.Second)
	markB := e.clock.Now()
	e.deleteRecords(t1p1, -1, 5)
	e.clock.Advance(time.Minute)

	list := func(before time.Time, limit int) []string {
		files, err := e.cp.FilesToDelete(e.ctx, before, limit)
		require.NoError(e.t, err)
		keys := []string{}
		for _, f := range files {
			keys = append(keys, f.ObjectKey)
		}
		return keys
	}
	// Strictly before: the grace period is the caller's markedBefore.
	require.Equal(e.t, []string{}, list(markA, 0))
	require.Equal(e.t, []string{a.ObjectKey}, list(markA.Add(time.Millisecond), 0))
	require.Equal(e.t, []string{a.ObjectKey}, list(markB, 0))
	require.Equal(e.t, []string{a.ObjectKey, b.ObjectKey}, list(markB.Add(time.Millisecond), 0), "oldest mark first")
	require.Equal(e.t, []string{a.ObjectKey}, list(markB.Add(time.Millisecond), 1))
	files, err := e.cp.FilesToDelete(e.ctx, e.clock.Now(), 0)
	require.NoError(e.t, err)
	require.Equal(e.t, []wal.FileToDelete{{ObjectKey: a.ObjectKey, Size: 5, MarkedAt: time.UnixMilli(markA.UnixMilli())},
		{ObjectKey: b.ObjectKey, Size: 5, MarkedAt: time.UnixMilli(markB.UnixMilli())}}, files)

	// Only keys the store confirmed are forgotten; live objects and
	// unknown keys are ignored.
	live, _ := e.commit(batch(t2p0, 1))
	require.NoError(e.t, e.cp.DeleteFiles(e.ctx, []string{a.ObjectKey, live.ObjectKey, "nope"}))
	require.Equal(e.t, []string{b.ObjectKey}, e.marked())
	require.Equal(e.t, "[0,0]", ranges(e.find1(t2p0, 0).Batches))
	require.NoError(e.t, e.cp.DeleteFiles(e.ctx, []string{b.ObjectKey}))
	require.Empty(e.t, e.marked())
}

func testIsSafe(e *env) {
	safe, err := e.cp.IsSafeToDeleteObject(e.ctx, "never")
	require.NoError(e.t, err)
	require.True(e.t, safe)
	r, _ := e.commit(batch(t1p0, 1))
	safe, err = e.cp.IsSafeToDeleteObject(e.ctx, r.ObjectKey)
	require.NoError(e.t, err)
	require.False(e.t, safe)
	// Marked for deletion is still registered: the cleaner owns it.
	e.deleteRecords(t1p0, -1, 1)
	safe, err = e.cp.IsSafeToDeleteObject(e.ctx, r.ObjectKey)
	require.NoError(e.t, err)
	require.False(e.t, safe)
}

// A writer reserves each key before its upload. A crash between upload
// and commit leaves a reservation that expires into an object marked for
// deletion; a late commit of it is refused, so the cleaner never deletes
// a committed object.
func testReservations(e *env) {
	require.NoError(e.t, e.cp.ReserveObject(e.ctx, "r/committed"))
	require.ErrorIs(e.t, e.cp.ReserveObject(e.ctx, "r/committed"), wal.ErrObjectKeyReused)
	require.NoError(e.t, e.cp.ReserveObject(e.ctx, "r/orphan"))
	e.clock.Advance(time.Minute)
	require.NoError(e.t, e.cp.ReserveObject(e.ctx, "r/young"))

	req := e.request(batch(t1p0, 3))
	req.ObjectKey = "r/committed"
	res := e.commitReq(req)
	e.requireAccepted(res.Batches[0], 0)
	require.ErrorIs(e.t, e.cp.ReserveObject(e.ctx, "r/committed"), wal.ErrObjectKeyReused)

	keys, err := e.cp.ExpireReservations(e.ctx, e.clock.Now().Add(-30*time.Second), 0)
	require.NoError(e.t, err)
	require.Equal(e.t, []string{"r/orphan"}, keys, "the committed key is confirmed, the young one not yet old")
	require.Equal(e.t, []string{"r/orphan"}, e.marked())
	safe, err := e.cp.IsSafeToDeleteObject(e.ctx, "r/orphan")
	require.NoError(e.t, err)
	require.True(e.t, safe)

	late := e.request(batch(t1p0, 3))
	late.ObjectKey = "r/orphan"
	_, err = e.cp.CommitFile(e.ctx, late)
	require.ErrorIs(e.t, err, wal.ErrObjectKeyReused)
	e.requireLog(t1p0, 0, 3, 0, 3)
	require.ErrorIs(e.t, e.cp.ReserveObject(e.ctx, "r/orphan"), wal.ErrObjectKeyReused)

	e.clock.Advance(time.Minute)
	keys, err = e.cp.ExpireReservations(e.ctx, e.clock.Now().Add(-30*time.Second), 0)
	require.NoError(e.t, err)
	require.Equal(e.t, []string{"r/young"}, keys)
	keys, err = e.cp.ExpireReservations(e.ctx, e.clock.Now(), 0)
	require.NoError(e.t, err)
	require.Empty(e.t, keys)
	require.NoError(e.t, e.cp.DeleteFiles(e.ctx, []string{"r/orphan", "r/young"}))
	require.Empty(e.t, e.marked())
}

// A writer can be slower than the reaper: its reservation expires while
// its upload or commit is still in flight, the cleaner deletes the key as
// an orphan and, after the grace period, forgets its row (DeleteFiles).
// The late CommitFile must fail at every one of those points, with
// ErrObjectReaped (and ErrObjectKeyReused), and leave no trace: were it
// to succeed after DeleteFiles, its batches would point into an object
// the cleaner deleted, and readers would find offsets nobody can read.
// The control plane must therefore remember reaped keys after it forgets
// their rows (a tombstone); the key may not be reserved again either.
func testLateCommitAfterReaped(e *env) {
	const key = "slow/writer"
	require.NoError(e.t, e.cp.ReserveObject(e.ctx, key))
	e.commit(batch(t1p0, 2)) // another writer's object: HW 2
	e.clock.Advance(time.Hour)

	late := e.request(batch(t1p0, 3))
	late.ObjectKey = key
	requireReaped := func(when string) {
		e.t.Helper()
		_, err := e.cp.CommitFile(e.ctx, late)
		require.ErrorIs(e.t, err, wal.ErrObjectReaped, when)
		require.ErrorIs(e.t, err, wal.ErrObjectKeyReused, when)
		e.requireLog(t1p0, 0, 2, 0, 2)
		require.Equal(e.t, "[0,1]", ranges(e.find1(t1p0, 0).Batches), when)
		safe, err := e.cp.IsSafeToDeleteObject(e.ctx, key)
		require.NoError(e.t, err)
		require.True(e.t, safe, "%s: a reaped key holds no committed object", when)
		require.ErrorIs(e.t, e.cp.ReserveObject(e.ctx, key), wal.ErrObjectKeyReused, when)
	}

	keys, err := e.cp.ExpireReservations(e.ctx, e.clock.Now(), 0)
	require.NoError(e.t, err)
	require.Equal(e.t, []string{key}, keys)
	requireReaped("after the reservation expired")

	// The cleaner deleted the object; after the grace period it lists
	// the row again, deletes once more and forgets it.
	e.clock.Advance(time.Minute)
	files, err := e.cp.FilesToDelete(e.ctx, e.clock.Now(), 0)
	require.NoError(e.t, err)
	require.Len(e.t, files, 1)
	require.Equal(e.t, key, files[0].ObjectKey)
	require.NoError(e.t, e.cp.DeleteFiles(e.ctx, []string{key}))
	require.Empty(e.t, e.marked())
	requireReaped("after DeleteFiles forgot the row")

	// The tombstone is no reservation and no file: nothing more for the
	// cleaner to find, ever.
	e.clock.Advance(24 * time.Hour)
	keys, err = e.cp.ExpireReservations(e.ctx, e.clock.Now(), 0)
	require.NoError(e.t, err)
	require.Empty(e.t, keys)
	require.Empty(e.t, e.marked())
	requireReaped("a day later")
}

func testClosed(e *env) {
	require.NoError(e.t, e.cp.Close())
	_, err := e.cp.CommitFile(e.ctx, e.request(batch(t1p0, 1)))
	require.ErrorIs(e.t, err, wal.ErrClosed)
	_, err = e.cp.LogInfo(e.ctx, t1p0)
	require.ErrorIs(e.t, err, wal.ErrClosed)
	_, err = e.cp.FindBatches(e.ctx, wal.FindBatchesRequest{})
	require.ErrorIs(e.t, err, wal.ErrClosed)
	require.ErrorIs(e.t, e.cp.ReserveObject(e.ctx, "k"), wal.ErrClosed)
}
