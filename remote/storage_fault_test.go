package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/remote/objstore/mem"
)

// TestStorageFaults runs copies, fetches and deletes against a mem store
// that injects errors, lost responses, truncated bodies and lying bodies
// (short with a clean EOF) into every operation. Every call must either
// fail with a typed error or return exactly the source bytes: never wrong
// bytes, never a short read that looks complete, never a hang, and every
// body is closed.
func TestStorageFaults(t *testing.T) {
	ops := 300
	if testing.Short() {
		ops = 120
	}
	for seed := range uint64(4) {
		for _, compression := range []bool{false, true} {
			t.Run(fmt.Sprintf("seed=%d/compression=%t", seed, compression), func(t *testing.T) {
				runStorageFaults(t, seed, compression, ops)
			})
		}
	}
}

func runStorageFaults(t *testing.T, seed uint64, compression bool, ops int) {
	ctx := context.Background()
	store := mem.New(mem.Options{Seed: seed})
	opts := StorageOptions{ChunkSize: 700, DataObjectBytes: 2000, Compression: compression}
	if seed%2 == 1 {
		opts.ManifestCacheEntries = -1 // every fetch reads the manifest through the faults
	}
	s := newTestStorage(t, store, opts)
	f := mem.Faults{ErrorRate: 0.15, LostResponseRate: 0.1, TruncateRate: 0.1, LieRate: 0.1}
	store.SetFaults(mem.FaultConfig{Put: f, Get: f, Stat: f, List: f, Delete: f})
	rng := rand.New(rand.NewPCG(seed, 77))

	// faultErr reports whether err is one the faults explain. A cut
	// manifest fails its own format check (its length is only known from
	// its bytes), so corruption is allowed for the manifest only.
	faultErr := func(err error) bool {
		var ce *CorruptionError
		if errors.As(err, &ce) {
			_, _, object, perr := s.ParseObjectKey(ce.Key)
			return perr == nil && object == manifestObject
		}
		return errors.Is(err, mem.ErrInjected) || errors.Is(err, objstore.ErrShortRead)
	}

	var copies []*testCopy
	for i := range 3 {
		c := newTestCopy(storageTopic, seed*10+uint64(i), int64(i)*100, 3000+rng.IntN(3000), i == 1)
		if i == 2 {
			c.data.ProducerBatches = segmentBytes(seed*10+5, 131)
		}
		for attempt := 0; ; attempt++ {
			require.Less(t, attempt, 100, "copy never succeeded")
			_, err := s.CopySegment(ctx, &c.m, c.data)
			if err == nil {
				break
			}
			require.ErrorIs(t, err, mem.ErrInjected) // a retry of the same id overwrites
		}
		copies = append(copies, c)
	}

	var okFetches, failedFetches int
	for range ops {
		c := copies[rng.IntN(len(copies))]
		switch rng.IntN(4) {
		case 0, 1:
			if readFaultyRange(t, s, c, rng, faultErr) {
				okFetches++
			} else {
				failedFetches++
			}
		case 2:
			typ := IndexType(1 + rng.IntN(numIndexTypes))
			got, err := s.FetchIndex(ctx, &c.m, typ)
			switch {
			case typ == IndexTransaction && c.m.TxnIndexEmpty && errors.Is(err, ErrIndexNotFound):
			case typ == IndexProducerBatches && len(c.data.ProducerBatches) == 0 && errors.Is(err, ErrIndexNotFound):
			case err != nil:
				require.True(t, faultErr(err), "FetchIndex: %v", err)
			default:
				want := map[IndexType][]byte{IndexOffset: c.data.OffsetIndex, IndexTimestamp: c.data.TimeIndex,
					IndexProducerSnapshot: c.data.ProducerSnapshot, IndexTransaction: c.data.TxnIndex,
					IndexLeaderEpoch:     appendEpochCheckpoint(nil, c.data.LeaderEpochs),
					IndexProducerBatches: c.data.ProducerBatches}[typ]
				require.Equal(t, want, got, "%s", typ)
			}
		case 3:
			got, err := s.FetchLeaderEpochs(ctx, &c.m)
			if err != nil {
				require.True(t, faultErr(err), "FetchLeaderEpochs: %v", err)
				continue
			}
			require.Equal(t, c.data.LeaderEpochs, got)
		}
	}
	require.Positive(t, okFetches)
	require.Positive(t, failedFetches)

	for _, c := range copies {
		for attempt := 0; ; attempt++ {
			require.Less(t, attempt, 100, "delete never succeeded")
			err := s.DeleteSegment(ctx, &c.m)
			if err == nil {
				break
			}
			require.ErrorIs(t, err, mem.ErrInjected)
		}
	}
	store.SetFaults(mem.FaultConfig{})
	require.Empty(t, store.Keys(), "every object deleted")
	require.Zero(t, store.Counts().OpenBodies, "every body closed")
	c := store.Counts().Get
	require.Positive(t, c.TruncatedBodies+c.LyingBodies+c.InjectedErrors)
}

// readFaultyRange reads a random range of c in small pieces and reports
// whether it succeeded; whatever arrives before an error must be a correct
// prefix, and a clean EOF must come only after the whole range.
func readFaultyRange(t *testing.T, s *StorageManager, c *testCopy, rng *rand.Rand, faultErr func(error) bool) bool {
	n := int64(len(c.src))
	start := rng.Int64N(n + 1)
	length := rng.Int64N(n - start + 1)
	if rng.IntN(4) == 0 {
		length = -1
	}
	want := c.src[start:]
	if length >= 0 {
		want = want[:length]
	}
	body, err := s.FetchSegment(context.Background(), &c.m, start, length)
	if err != nil {
		require.True(t, faultErr(err), "FetchSegment: %v", err)
		return false
	}
	defer func() { require.NoError(t, body.Close()) }()
	var got []byte
	buf := make([]byte, 1+rng.IntN(900))
	for {
		m, err := body.Read(buf)
		got = append(got, buf[:m]...)
		require.True(t, bytes.HasPrefix(want, got), "wrong bytes from [%d, +%d)", start, length)
		if err == io.EOF {
			require.Equal(t, len(want), len(got), "a clean EOF only after the whole range")
			return true
		}
		if err != nil {
			require.True(t, faultErr(err), "Read: %v", err)
			return false
		}
	}
}

// TestStorageContext: deadlines and cancellation end every call, also in
// the middle of a body, in fake time.
func TestStorageContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := mem.New(mem.Options{})
		s := newTestStorage(t, store, StorageOptions{ChunkSize: 500, DataObjectBytes: 1000, Compression: true})
		c := newTestCopy(storageTopic, 1, 0, 5000, false)
		_, err := s.CopySegment(context.Background(), &c.m, c.data)
		require.NoError(t, err)
		cold := newTestStorage(t, store, StorageOptions{})

		store.SetFaults(mem.FaultConfig{Get: mem.Faults{Latency: time.Second}, Put: mem.Faults{Latency: time.Second}})
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err = cold.FetchSegment(ctx, &c.m, 0, -1)
		require.ErrorIs(t, err, context.DeadlineExceeded, "manifest read")
		_, err = s.FetchSegment(ctx, &c.m, 0, -1)
		require.ErrorIs(t, err, context.DeadlineExceeded, "first data read")
		_, err = s.FetchIndex(ctx, &c.m, IndexOffset)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		c2 := newTestCopy(storageTopic, 2, 100, 100, false)
		_, err = s.CopySegment(ctx, &c2.m, c2.data)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Equal(t, 100*time.Millisecond, time.Since(start), "nothing waits past the deadline")

		// Cancelled in the middle of a body spanning several objects.
		ctx2, cancel2 := context.WithCancel(context.Background())
		body, err := s.FetchSegment(ctx2, &c.m, 0, -1)
		require.NoError(t, err)
		buf := make([]byte, 100)
		_, err = io.ReadFull(body, buf)
		require.NoError(t, err)
		require.Equal(t, c.src[:100], buf)
		cancel2()
		_, err = io.ReadAll(body)
		require.ErrorIs(t, err, context.Canceled)
		require.NoError(t, body.Close())
		_, err = body.Read(buf)
		require.Error(t, err, "read after close")
		require.NoError(t, body.Close(), "close twice")

		canceled, cancel3 := context.WithCancel(context.Background())
		cancel3()
		_, err = s.FetchSegment(canceled, &c.m, 0, -1)
		require.ErrorIs(t, err, context.Canceled)
		require.ErrorIs(t, s.DeleteSegment(canceled, &c.m), context.Canceled)
		_, err = s.DeleteOrphans(canceled, storageTopic, func(SegmentID) bool { return false })
		require.ErrorIs(t, err, context.Canceled)
		require.Zero(t, store.Counts().OpenBodies)
	})
}
