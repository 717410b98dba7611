package log

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/log/record"
)

// waitResult is what one WaitFor returned.
type waitResult struct {
	o   Offsets
	err error
}

// startWait runs WaitFor in a goroutine; the channel receives its result.
func startWait(ctx context.Context, l *UnifiedLog, offset int64, iso Isolation) <-chan waitResult {
	ch := make(chan waitResult, 1)
	go func() {
		o, err := l.WaitFor(ctx, offset, iso)
		ch <- waitResult{o, err}
	}()
	return ch
}

// pending reports whether the waiter has not returned. Call after
// synctest.Wait, when every waiter that can run has run.
func pending(t *testing.T, ch <-chan waitResult) bool {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("waiter returned early: offsets %+v, error %v", r.o, r.err)
		return false
	default:
		return true
	}
}

// returned receives the waiter's result; it fails if the waiter is still
// blocked after synctest.Wait.
func returned(t *testing.T, ch <-chan waitResult) waitResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	default:
		t.Fatal("waiter still blocked")
		return waitResult{}
	}
}

// TestWaitForHighWatermark: a consumer at fetch offset 3 (the log end)
// waits for the high watermark to pass 3. Appends (log end 5) do not wake
// it, nor does a high watermark of 3; a high watermark of 4 does, with
// the offsets that satisfied it.
func TestWaitForHighWatermark(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := openTestLog(t, vfs.NewMem(), Options{})
		defer l.Close()
		appendRecords(t, l, 0, 3, 1_000_000)
		w := startWait(t.Context(), l, 3, IsolationHighWatermark)
		synctest.Wait()
		require.True(t, pending(t, w))

		appendRecords(t, l, 0, 2, 1_000_000)
		synctest.Wait()
		require.True(t, pending(t, w), "log end 5 with high watermark 0")

		l.UpdateHighWatermark(3)
		synctest.Wait()
		require.True(t, pending(t, w), "high watermark 3 is not past offset 3")

		l.UpdateHighWatermark(4)
		synctest.Wait()
		r := returned(t, w)
		require.NoError(t, r.err)
		require.Equal(t, int64(4), r.o.HighWatermark)
		require.Equal(t, int64(5), r.o.LogEndOffset)
	})
}

// TestWaitForEachBound: each isolation waits on its own bound. Producer
// 7 opens a transaction at offset 2: the high watermark passes 2 at once
// but the last stable offset only when the commit marker is written and
// the high watermark covers it. A follower (log end) waiting at 2 is
// woken by the first append past it.
func TestWaitForEachBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := openTestLog(t, vfs.NewMem(), Options{})
		defer l.Close()
		appendRecords(t, l, 0, 2, 1_000_000) // 0-1
		l.UpdateHighWatermark(2)
		ctx := t.Context()
		leo := startWait(ctx, l, 2, IsolationLogEnd)
		hw := startWait(ctx, l, 2, IsolationHighWatermark)
		lso := startWait(ctx, l, 2, IsolationCommitted)
		synctest.Wait()
		require.True(t, pending(t, leo))
		require.True(t, pending(t, hw))
		require.True(t, pending(t, lso))

		o := idempotent(7, 0, 0)
		o.Transactional = true
		b := record.NewBuilder(o)
		b.Add(1_000_000, nil, []byte("t"))
		b.Add(1_000_000, nil, []byte("u"))
		txn, err := b.Build()
		require.NoError(t, err)
		_, err = l.AppendAsLeader(txn, 0, OriginClient) // 2-3, open
		require.NoError(t, err)
		synctest.Wait()
		r := returned(t, leo)
		require.NoError(t, r.err)
		require.Equal(t, int64(4), r.o.LogEndOffset)
		require.True(t, pending(t, hw))
		require.True(t, pending(t, lso))

		l.UpdateHighWatermark(4)
		synctest.Wait()
		r = returned(t, hw)
		require.NoError(t, r.err)
		require.Equal(t, int64(4), r.o.HighWatermark)
		require.True(t, pending(t, lso), "the open transaction holds the last stable offset at 2")
		require.Equal(t, int64(2), l.LastStableOffset())

		marker, err := record.AppendEndTxnBatch(nil, idempotent(7, 0, -1), 1_000_000, record.ControlCommit, 0)
		require.NoError(t, err)
		_, err = l.AppendAsLeader(marker, 0, OriginCoordinator) // 4
		require.NoError(t, err)
		l.UpdateHighWatermark(5)
		synctest.Wait()
		r = returned(t, lso)
		require.NoError(t, r.err)
		require.Equal(t, int64(5), r.o.LastStableOffset)
	})
}

// TestWaitForReturnsAtOnceWhenPassed: no wait when the bound is already
// past the offset, even with a context that has ended.
func TestWaitForReturnsAtOnceWhenPassed(t *testing.T) {
	l := openTestLog(t, vfs.NewMem(), Options{})
	defer l.Close()
	appendRecords(t, l, 0, 3, 1_000_000)
	l.UpdateHighWatermark(3)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, iso := range []Isolation{IsolationLogEnd, IsolationHighWatermark, IsolationCommitted} {
		o, err := l.WaitFor(ctx, 2, iso)
		require.NoError(t, err, "%v", iso)
		require.Equal(t, l.Offsets(), o)
	}
	_, err := l.WaitFor(ctx, 3, IsolationHighWatermark)
	require.ErrorIs(t, err, context.Canceled)
	_, err = l.WaitFor(ctx, 3, Isolation(9))
	require.ErrorIs(t, err, ErrInvalidArgument)
}

// TestWaitForAllocations: a wait whose bound has already passed
// allocates nothing (no generation is made for it), and neither does one
// that ends with its context while a generation exists.
func TestWaitForAllocations(t *testing.T) {
	l := openTestLog(t, vfs.NewMem(), Options{})
	defer l.Close()
	appendRecords(t, l, 0, 2, 1_000_000)
	l.UpdateHighWatermark(1)
	ctx := context.Background()
	require.Zero(t, testing.AllocsPerRun(100, func() {
		if _, err := l.WaitFor(ctx, 0, IsolationHighWatermark); err != nil {
			t.Fatal(err)
		}
	}))
	require.Nil(t, l.waits[IsolationHighWatermark].Load(), "no generation made")
	done, cancel := context.WithCancel(ctx)
	cancel()
	_, _ = l.WaitFor(done, 1, IsolationHighWatermark) // makes the generation
	require.Zero(t, testing.AllocsPerRun(100, func() {
		if _, err := l.WaitFor(done, 1, IsolationHighWatermark); err != context.Canceled {
			t.Fatal(err)
		}
	}))
}

// TestWaitForContext: a cancelled context and an expired deadline end a
// wait with ctx.Err().
func TestWaitForContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := openTestLog(t, vfs.NewMem(), Options{})
		defer l.Close()
		ctx, cancel := context.WithCancel(t.Context())
		w := startWait(ctx, l, 0, IsolationHighWatermark)
		dctx, dcancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer dcancel()
		d := startWait(dctx, l, 0, IsolationLogEnd)
		synctest.Wait()
		require.True(t, pending(t, w))
		require.True(t, pending(t, d))
		cancel()
		synctest.Wait()
		require.ErrorIs(t, returned(t, w).err, context.Canceled)
		require.True(t, pending(t, d))
		time.Sleep(time.Second) // the bubble's fake clock
		synctest.Wait()
		require.ErrorIs(t, returned(t, d).err, context.DeadlineExceeded)
	})
}

// TestWaitForCloseWakesEveryone: Close wakes waiters of every bound with
// ErrClosed, and a wait on a closed log returns at once.
func TestWaitForCloseWakesEveryone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := openTestLog(t, vfs.NewMem(), Options{})
		var ws []<-chan waitResult
		for _, iso := range []Isolation{IsolationLogEnd, IsolationHighWatermark, IsolationCommitted} {
			for range 3 {
				ws = append(ws, startWait(t.Context(), l, 0, iso))
			}
		}
		synctest.Wait()
		for _, w := range ws {
			require.True(t, pending(t, w))
		}
		require.NoError(t, l.Close())
		synctest.Wait()
		for _, w := range ws {
			require.ErrorIs(t, returned(t, w).err, ErrClosed)
		}
		_, err := l.WaitFor(t.Context(), 0, IsolationHighWatermark)
		require.ErrorIs(t, err, ErrClosed)
		_, ch := l.Watch(IsolationHighWatermark)
		<-ch // closed
	})
}

// TestWaitForDeleteWakesEveryone: Delete, like Close, ends every wait.
func TestWaitForDeleteWakesEveryone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := openTestLog(t, vfs.NewMem(), Options{})
		w := startWait(t.Context(), l, 0, IsolationLogEnd)
		synctest.Wait()
		require.True(t, pending(t, w))
		require.NoError(t, l.Delete())
		synctest.Wait()
		require.ErrorIs(t, returned(t, w).err, ErrClosed)
	})
}

// TestWaitForTruncationWakes: log end 10, high watermark 5. A truncation
// to 6 puts offsets 8 (a consumer waiting for the high watermark) and 10
// (a follower waiting at the log end) beyond the log end: both wake with
// the out-of-range error a Read there returns. A consumer at 5 stays: its
// offset still exists and the high watermark has not passed it.
func TestWaitForTruncationWakes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := openTestLog(t, vfs.NewMem(), Options{})
		defer l.Close()
		appendRecords(t, l, 0, 10, 1_000_000)
		l.UpdateHighWatermark(5)
		at8 := startWait(t.Context(), l, 8, IsolationHighWatermark)
		at10 := startWait(t.Context(), l, 10, IsolationLogEnd)
		at5 := startWait(t.Context(), l, 5, IsolationHighWatermark)
		synctest.Wait()
		require.True(t, pending(t, at8))
		require.True(t, pending(t, at10))
		require.True(t, pending(t, at5))

		_, err := l.TruncateTo(6)
		require.NoError(t, err)
		synctest.Wait()
		for _, w := range []<-chan waitResult{at8, at10} {
			r := returned(t, w)
			require.ErrorIs(t, r.err, ErrOffsetOutOfRange)
			var re *OffsetRangeError
			require.ErrorAs(t, r.err, &re)
			require.Equal(t, int64(6), re.LogEndOffset)
			require.Equal(t, int64(6), r.o.LogEndOffset)
			_, rerr := l.Read(nil, re.Offset, 1<<20, IsolationLogEnd, true)
			require.ErrorIs(t, rerr, ErrOffsetOutOfRange, "a read there agrees")
		}
		require.True(t, pending(t, at5))
		l.UpdateHighWatermark(6)
		synctest.Wait()
		require.NoError(t, returned(t, at5).err)
	})
}

// TestWaitForOffline: a write failure takes the log offline; a follower
// waiting at the log end is woken with it (an I/O error, Kafka's
// KAFKA_STORAGE_ERROR), since no append will ever move its bound.
func TestWaitForOffline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var fail atomic.Bool
		fs := errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
			if fail.Load() && op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
				return errorfs.ErrInjected
			}
			return nil
		}))
		l := openTestLog(t, fs, Options{})
		defer l.Close()
		appendRecords(t, l, 0, 2, 1_000_000)
		w := startWait(t.Context(), l, 2, IsolationLogEnd)
		synctest.Wait()
		require.True(t, pending(t, w))
		fail.Store(true)
		_, err := l.AppendAsLeader(buildBatches(t, 1, 1, 10, 1_000_000, 0, -1), 0, OriginClient)
		require.Error(t, err)
		synctest.Wait()
		r := returned(t, w)
		require.ErrorIs(t, r.err, ErrIO)
		require.Equal(t, int64(2), r.o.LogEndOffset)
	})
}

// TestWaitForManyWaiters: 10,000 consumers wait at offset 0; one high
// watermark advance wakes them all, and they shared one channel.
func TestWaitForManyWaiters(t *testing.T) {
	n := 10_000
	synctest.Test(t, func(t *testing.T) {
		l := openTestLog(t, vfs.NewMem(), Options{})
		defer l.Close()
		appendRecords(t, l, 0, 1, 1_000_000)
		var woken atomic.Int64
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				if _, err := l.WaitFor(t.Context(), 0, IsolationHighWatermark); err == nil {
					woken.Add(1)
				}
			})
		}
		synctest.Wait()
		require.Zero(t, woken.Load())
		_, ch1 := l.Watch(IsolationHighWatermark)
		_, ch2 := l.Watch(IsolationHighWatermark)
		require.Equal(t, ch1, ch2, "one channel per generation")
		l.UpdateHighWatermark(1)
		wg.Wait()
		require.Equal(t, int64(n), woken.Load())
	})
}

// TestWatchClosesOnlyWhenItsBoundMoves: a publication wakes the bounds it
// moved, not the others; a truncation wakes every bound.
func TestWatchClosesOnlyWhenItsBoundMoves(t *testing.T) {
	l := openTestLog(t, vfs.NewMem(), Options{})
	defer l.Close()
	isClosed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	appendRecords(t, l, 0, 4, 1_000_000)
	l.UpdateHighWatermark(2)
	_, leo := l.Watch(IsolationLogEnd)
	_, hw := l.Watch(IsolationHighWatermark)
	_, lso := l.Watch(IsolationCommitted)
	appendRecords(t, l, 0, 1, 1_000_000)
	require.True(t, isClosed(leo))
	require.False(t, isClosed(hw))
	require.False(t, isClosed(lso))
	l.UpdateHighWatermark(3)
	require.True(t, isClosed(hw))
	require.True(t, isClosed(lso))

	_, leo = l.Watch(IsolationLogEnd)
	_, hw = l.Watch(IsolationHighWatermark)
	_, lso = l.Watch(IsolationCommitted)
	_, err := l.TruncateTo(4) // log end 5 -> 4, high watermark stays 3
	require.NoError(t, err)
	require.Equal(t, int64(3), l.HighWatermark())
	require.True(t, isClosed(leo))
	require.True(t, isClosed(hw))
	require.True(t, isClosed(lso))
}

// TestReadEmptyRecordsNotNil: a read with nothing to return (at the
// high watermark, at the log end, on an empty log, on an error) gives an
// empty, non-nil Records, so an encoder writes an empty record set and
// never a null one (size -1, which librdkafka refuses with "invalid
// MessageSetSize -1").
func TestReadEmptyRecordsNotNil(t *testing.T) {
	l := openTestLog(t, vfs.NewMem(), Options{})
	defer l.Close()
	fd, err := l.Read(nil, 0, 1<<20, IsolationLogEnd, true)
	require.NoError(t, err)
	require.NotNil(t, fd.Records, "empty log")
	require.Empty(t, fd.Records)

	appendRecords(t, l, 0, 3, 1_000_000)
	l.UpdateHighWatermark(1)
	for _, c := range []struct {
		offset int64
		iso    Isolation
	}{{1, IsolationHighWatermark}, {1, IsolationCommitted}, {3, IsolationLogEnd}} {
		fd, err := l.Read(nil, c.offset, 1<<20, c.iso, true)
		require.NoError(t, err)
		require.NotNil(t, fd.Records, "%d %v", c.offset, c.iso)
		require.Empty(t, fd.Records)
	}
	fd, err = l.Read(nil, 0, 10, IsolationLogEnd, false) // first batch larger than maxBytes
	require.NoError(t, err)
	require.NotNil(t, fd.Records, "cut by maxBytes")
	require.Empty(t, fd.Records)
	fd, err = l.Read(nil, 9, 1<<20, IsolationLogEnd, true)
	require.ErrorIs(t, err, ErrOffsetOutOfRange)
	require.NotNil(t, fd.Records, "on an error")

	require.NotNil(t, NonNilRecords(nil))
	require.Empty(t, NonNilRecords(nil))
	b := []byte("x")
	require.Equal(t, b, NonNilRecords(b))
}

// BenchmarkWaitForWake10000: 10,000 consumers wait for the high
// watermark; each iteration moves it by one and waits until every one of
// them has seen the advance (one channel close, 10,000 re-checks and
// re-waits).
func BenchmarkWaitForWake10000(b *testing.B) {
	const waiters = 10_000
	l, err := Open("p0", Options{FS: vfs.NewMem(), SegmentIndexBytes: 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	batch := func() []byte {
		bl := record.NewBuilder(record.DefaultBuilderOptions())
		bl.Add(1_000_000, nil, []byte("v"))
		buf, err := bl.Build()
		if err != nil {
			b.Fatal(err)
		}
		return buf
	}
	rounds := b.N
	for range rounds {
		if _, err := l.AppendAsLeader(batch(), 0, OriginClient); err != nil {
			b.Fatal(err)
		}
	}
	done := make([]sync.WaitGroup, rounds)
	for i := range done {
		done[i].Add(waiters)
	}
	ctx := context.Background()
	var start sync.WaitGroup
	start.Add(waiters)
	for range waiters {
		go func() {
			start.Done()
			for r := range rounds {
				if _, err := l.WaitFor(ctx, int64(r), IsolationHighWatermark); err != nil {
					panic(err)
				}
				done[r].Done()
			}
		}()
	}
	start.Wait()
	b.ReportAllocs()
	b.ResetTimer()
	for r := range rounds {
		l.UpdateHighWatermark(int64(r + 1))
		done[r].Wait()
	}
}
