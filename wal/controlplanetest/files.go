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
