package wal_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/wal"
)

// listCP wraps a control plane and records the keys of each CommitFiles
// call. If hold is set, the first call waits for it to close (started is
// closed when that call arrives); answer, if set, replaces the calls.
type listCP struct {
	wal.ControlPlane
	hold    chan struct{}
	started chan struct{}
	answer  func(ctx context.Context, call int, reqs []wal.CommitFileRequest) ([]wal.CommitFilesResult, error)

	mu    sync.Mutex
	calls [][]string
}

func (c *listCP) CommitFiles(ctx context.Context, reqs []wal.CommitFileRequest) ([]wal.CommitFilesResult, error) {
	keys := make([]string, len(reqs))
	for i, r := range reqs {
		keys[i] = r.ObjectKey
	}
	c.mu.Lock()
	n := len(c.calls)
	c.calls = append(c.calls, keys)
	c.mu.Unlock()
	if n == 0 && c.started != nil {
		close(c.started)
	}
	if n == 0 && c.hold != nil {
		<-c.hold
	}
	if c.answer != nil {
		return c.answer(ctx, n, reqs)
	}
	return c.ControlPlane.CommitFiles(ctx, reqs)
}

func (c *listCP) callKeys() [][]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([][]string(nil), c.calls...)
}

// TestWriterCommitsUploadedObjectsTogether: while the first object's
// commit is held in the control plane, three more objects are sealed and
// uploaded. The writer sends none of their commits before the first one
// answers, then all three in one CommitFiles call, in sealing order, so
// that the plane's group commit writes them in one step and each gets
// offsets after the objects sealed before it.
func TestWriterCommitsUploadedObjectsTogether(t *testing.T) {
	e := newEnv(t, 2)
	cp := &listCP{ControlPlane: e.cp, hold: make(chan struct{}), started: make(chan struct{})}
	b := batch(t, 2, "g")
	var mu sync.Mutex
	var answered []string
	w := e.writer(wal.WriterOptions{ControlPlane: cp, MaxBytes: int64(len(b)),
		Listener: wal.WriterListener{ObjectCommitted: func(o wal.ObjectInfo) {
			mu.Lock()
			answered = append(answered, o.Key)
			mu.Unlock()
		}}})
	var uploaded atomic.Int32
	w.SetAfterUploadForTesting(func(string) { uploaded.Add(1) })
	var release sync.Once
	open := func() { release.Do(func() { close(cp.hold) }) }
	t.Cleanup(open) // before the writer's Close, should the test fail

	first := produceAsync(e.ctx, w, wal.ProduceRequest{Partition: e.tp(0), Batches: b})
	<-cp.started
	parts := []int32{0, 1, 0}
	var later []<-chan produced
	for i, p := range parts {
		later = append(later, produceAsync(e.ctx, w, wal.ProduceRequest{Partition: e.tp(p), Batches: b}))
		// Sealed and stored before the next one is produced.
		waitUntil(func() bool { return uploaded.Load() == int32(i+2) })
	}
	require.Len(t, cp.callKeys(), 1, "no commit is sent while an earlier one is in flight")
	open()

	r := <-first
	require.NoError(t, r.err)
	require.NoError(t, r.res[0].Err)
	require.Equal(t, int64(0), r.res[0].Batches[0].BaseOffset)
	want := []int64{2, 0, 4} // tp0 after the first object, tp1, tp0 again
	for i, ch := range later {
		r := <-ch
		require.NoError(t, r.err)
		require.NoError(t, r.res[0].Err)
		require.Equal(t, want[i], r.res[0].Batches[0].BaseOffset, "object %d", i+1)
	}
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, answered, 4)
	require.Equal(t, [][]string{answered[:1], answered[1:]}, cp.callKeys(), "one call for the three uploaded during the first")
	require.Equal(t, int64(4), w.Metrics().ObjectsCommitted)
}

// TestWriterCommitRetryKeepsOrder: two objects committed in one call.
// When the call fails as a whole, both are sent again, in order. When
// only the first fails and the second commits, the first is not sent
// again: its retry would be decided after the second, an earlier object
// above a later one, so it fails (retriably) and is deleted.
func TestWriterCommitRetryKeepsOrder(t *testing.T) {
	errDown := errors.New("control plane down")
	for _, tc := range []struct {
		name   string
		answer func(cp wal.ControlPlane) func(context.Context, int, []wal.CommitFileRequest) ([]wal.CommitFilesResult, error)
		// firstFails: the first object's requests fail and only the
		// second object is stored; else both commit, the first at 0.
		firstFails bool
		calls      int
	}{
		{name: "whole-call-fails-once", calls: 2,
			answer: func(cp wal.ControlPlane) func(context.Context, int, []wal.CommitFileRequest) ([]wal.CommitFilesResult, error) {
				return func(ctx context.Context, call int, reqs []wal.CommitFileRequest) ([]wal.CommitFilesResult, error) {
					if call == 0 {
						return nil, errDown
					}
					return cp.CommitFiles(ctx, reqs)
				}
			}},
		{name: "first-fails-second-commits", calls: 1, firstFails: true,
			answer: func(cp wal.ControlPlane) func(context.Context, int, []wal.CommitFileRequest) ([]wal.CommitFilesResult, error) {
				return func(ctx context.Context, call int, reqs []wal.CommitFileRequest) ([]wal.CommitFilesResult, error) {
					if call > 0 || len(reqs) != 2 {
						return cp.CommitFiles(ctx, reqs)
					}
					rest, err := cp.CommitFiles(ctx, reqs[1:])
					if err != nil {
						return nil, err
					}
					return append([]wal.CommitFilesResult{{Err: errDown}}, rest...), nil
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 1)
			gs := newGatedStore(e.store, 1)
			cp := &listCP{ControlPlane: e.cp}
			cp.answer = tc.answer(e.cp)
			b := batch(t, 2, "r")
			w := e.writer(wal.WriterOptions{Store: gs, ControlPlane: cp, MaxBytes: int64(len(b))})
			var uploaded atomic.Int32
			w.SetAfterUploadForTesting(func(string) { uploaded.Add(1) })

			first := produceAsync(e.ctx, w, wal.ProduceRequest{Partition: e.tp(0), Batches: b})
			waitUntil(func() bool { return gs.putsStarted() == 1 })
			second := produceAsync(e.ctx, w, wal.ProduceRequest{Partition: e.tp(0), Batches: b})
			waitUntil(func() bool { return uploaded.Load() == 1 }) // the second is stored
			gs.open(1)
			r1, r2 := <-first, <-second
			require.NoError(t, r1.err)
			require.NoError(t, r2.err)

			calls := cp.callKeys()
			require.Len(t, calls, tc.calls)
			require.Len(t, calls[0], 2, "both objects in the first call")
			for _, c := range calls[1:] {
				require.Equal(t, calls[0], c, "the retry sends the same list")
			}
			require.NoError(t, r2.res[0].Err)
			info, err := e.cp.LogInfo(e.ctx, e.tp(0))
			require.NoError(t, err)
			if tc.firstFails {
				require.ErrorIs(t, r1.res[0].Err, wal.ErrCommitFailed)
				require.ErrorIs(t, r1.res[0].Err, errDown)
				require.True(t, wal.IsRetriable(r1.res[0].Err))
				require.Equal(t, int64(0), r2.res[0].Batches[0].BaseOffset)
				require.Equal(t, int64(2), info.HighWatermark, "the first object never committed")
				require.Equal(t, []string{calls[0][1]}, e.store.Keys(), "the first object is deleted")
				return
			}
			require.NoError(t, r1.res[0].Err)
			require.Equal(t, int64(0), r1.res[0].Batches[0].BaseOffset)
			require.Equal(t, int64(2), r2.res[0].Batches[0].BaseOffset)
			require.Equal(t, int64(4), info.HighWatermark)
		})
	}
}
