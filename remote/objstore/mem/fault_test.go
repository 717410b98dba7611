package mem

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
)

func putString(ctx context.Context, m *Mem, key, v string) error {
	return m.Put(ctx, key, bytes.NewReader([]byte(v)), int64(len(v)), objstore.PutOptions{})
}

func requireInjected(t *testing.T, err error, op string) {
	t.Helper()
	require.ErrorIs(t, err, ErrInjected)
	var oe *objstore.OpError
	require.ErrorAs(t, err, &oe)
	require.Equal(t, op, oe.Op)
}

func TestErrorRateOne(t *testing.T) {
	ctx := context.Background()
	m := New(Options{})
	require.NoError(t, putString(ctx, m, "k", "value"))
	always := Faults{ErrorRate: 1}
	m.SetFaults(FaultConfig{Put: always, Get: always, Stat: always, List: always, Delete: always})

	requireInjected(t, putString(ctx, m, "new", "v"), objstore.OpPut)
	_, err := m.Get(ctx, "k", 0, -1)
	requireInjected(t, err, objstore.OpGet)
	_, err = m.Stat(ctx, "k")
	requireInjected(t, err, objstore.OpStat)
	_, _, err = m.List(ctx, "", "", 0)
	requireInjected(t, err, objstore.OpList)
	requireInjected(t, m.Delete(ctx, "k"), objstore.OpDelete)
	err = m.PutMultipart(ctx, "mp", bytes.NewReader([]byte("abc")), 3, objstore.MultipartOptions{})
	requireInjected(t, err, objstore.OpPutMultipart)

	// An injected error takes no effect.
	require.Equal(t, []string{"k"}, m.Keys())
	c := m.Counts()
	require.Equal(t, OpCounts{Calls: 3, InjectedErrors: 2}, c.Put)
	require.Equal(t, OpCounts{Calls: 1, InjectedErrors: 1}, c.Get)
	require.Equal(t, OpCounts{Calls: 1, InjectedErrors: 1}, c.Delete)
}

func TestLostResponse(t *testing.T) {
	ctx := context.Background()
	m := New(Options{Faults: FaultConfig{Put: Faults{LostResponseRate: 1}, Delete: Faults{LostResponseRate: 1}}})
	err := putString(ctx, m, "k", "stored anyway")
	require.ErrorIs(t, err, ErrLostResponse)
	requireInjected(t, err, objstore.OpPut)
	got, err := objstore.ReadAll(ctx, m, "k")
	require.NoError(t, err)
	require.Equal(t, "stored anyway", string(got))

	// The retry of a lost IfNoneMatch Put sees its own object.
	err = m.Put(ctx, "k", bytes.NewReader([]byte("x")), 1, objstore.PutOptions{IfNoneMatch: true})
	require.ErrorIs(t, err, objstore.ErrPreconditionFailed)

	err = m.Delete(ctx, "k")
	require.ErrorIs(t, err, ErrLostResponse)
	require.Empty(t, m.Keys())
	require.EqualValues(t, 1, m.Counts().Put.LostResponses)
	require.EqualValues(t, 1, m.Counts().Delete.LostResponses)
}

func TestTruncatedBody(t *testing.T) {
	ctx := context.Background()
	m := New(Options{Seed: 3})
	data := bytes.Repeat([]byte("0123456789"), 1000)
	require.NoError(t, m.Put(ctx, "k", bytes.NewReader(data), int64(len(data)), objstore.PutOptions{}))
	m.SetFaults(FaultConfig{Get: Faults{TruncateRate: 1}})

	for range 20 {
		body, err := m.Get(ctx, "k", 100, 5000)
		require.NoError(t, err)
		got, err := io.ReadAll(body)
		require.ErrorIs(t, err, objstore.ErrShortRead)
		require.ErrorIs(t, err, io.ErrUnexpectedEOF)
		require.Less(t, len(got), 5000)
		require.Equal(t, data[100:100+len(got)], got, "the prefix delivered is correct")
		require.NoError(t, body.Close())

		_, err = objstore.ReadRange(ctx, m, "k", 100, 5000)
		require.ErrorIs(t, err, objstore.ErrShortRead)
		_, err = objstore.ReadAll(ctx, m, "k")
		require.ErrorIs(t, err, objstore.ErrShortRead)
	}
	// An empty range has nothing to truncate.
	b, err := objstore.ReadRange(ctx, m, "k", 10, 0)
	require.NoError(t, err)
	require.Empty(t, b)
	require.EqualValues(t, 60, m.Counts().Get.TruncatedBodies)
	require.Zero(t, m.Counts().OpenBodies)
}

// TestLyingBody: the store ends the body early with a clean io.EOF, as a
// server that closes the connection early and an adapter that does not
// check would. A plain read is fooled; ReadRange is not.
func TestLyingBody(t *testing.T) {
	ctx := context.Background()
	m := New(Options{Seed: 4})
	data := bytes.Repeat([]byte("abcdefgh"), 512)
	require.NoError(t, m.Put(ctx, "k", bytes.NewReader(data), int64(len(data)), objstore.PutOptions{}))
	m.SetFaults(FaultConfig{Get: Faults{LieRate: 1}})

	body, err := m.Get(ctx, "k", 0, 4096)
	require.NoError(t, err)
	got, err := io.ReadAll(body)
	require.NoError(t, err, "the lie: a short body with no error")
	require.Less(t, len(got), 4096)
	require.NoError(t, body.Close())

	for range 20 {
		_, err := objstore.ReadRange(ctx, m, "k", 0, 4096)
		require.ErrorIs(t, err, objstore.ErrShortRead)
		var oe *objstore.OpError
		require.ErrorAs(t, err, &oe)
		require.Equal(t, "k", oe.Key)
	}
	require.EqualValues(t, 21, m.Counts().Get.LyingBodies)
}

func TestLatencyHonoursContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := New(Options{Faults: FaultConfig{
			Put: Faults{Latency: time.Second},
			Get: Faults{Latency: time.Second, LatencyJitter: time.Second},
		}})
		start := time.Now()
		require.NoError(t, putString(context.Background(), m, "k", "v"))
		require.Equal(t, time.Second, time.Since(start), "latency without a deadline")

		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		start = time.Now()
		err := putString(ctx, m, "late", "v")
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Equal(t, 100*time.Millisecond, time.Since(start), "never waits past the deadline")
		require.Equal(t, []string{"k"}, m.Keys(), "a timed-out put takes no effect")

		start = time.Now()
		_, err = objstore.ReadRange(ctx, m, "k", 0, 1)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Zero(t, time.Since(start), "the deadline had already passed")

		start = time.Now()
		b, err := objstore.ReadAll(context.Background(), m, "k")
		require.NoError(t, err)
		require.Equal(t, "v", string(b))
		d := time.Since(start)
		require.True(t, d >= time.Second && d < 2*time.Second, "latency %v", d)

		// Cancellation (not only deadlines) ends the wait.
		ctx2, cancel2 := context.WithCancel(context.Background())
		done := make(chan error)
		go func() {
			_, err := m.Get(ctx2, "k", 0, -1)
			done <- err
		}()
		time.Sleep(10 * time.Millisecond) // fake time inside the bubble
		cancel2()
		require.ErrorIs(t, <-done, context.Canceled)
	})
}

// faultPattern runs a fixed call sequence and records which calls failed.
func faultPattern(seed uint64) string {
	ctx := context.Background()
	f := Faults{ErrorRate: 0.3}
	m := New(Options{Seed: seed, Faults: FaultConfig{Put: f, Get: f, Stat: f}})
	var b []byte
	for i := range 200 {
		var err error
		switch i % 3 {
		case 0:
			err = putString(ctx, m, fmt.Sprint(i), "v")
		case 1:
			_, err = m.Stat(ctx, "0")
		case 2:
			_, err = objstore.ReadAll(ctx, m, "0")
		}
		switch {
		case errors.Is(err, ErrInjected):
			b = append(b, 'x')
		default:
			b = append(b, '.')
		}
	}
	return string(b)
}

func TestSeedDeterminism(t *testing.T) {
	a, b := faultPattern(42), faultPattern(42)
	require.Equal(t, a, b, "same seed, same faults")
	require.NotEqual(t, a, faultPattern(43), "another seed, other faults")
	n := bytes.Count([]byte(a), []byte("x"))
	require.True(t, n > 30 && n < 100, "about 30%% of 200 calls fail: %d", n)
}

// TestRandomFaultsNeverSilent runs a seeded random workload with every
// fault kind enabled. Each call either succeeds with exactly the model's
// data or fails with a typed error; a read never returns a wrong or short
// result, and the state after lost responses matches the model once the
// outcome is known.
func TestRandomFaultsNeverSilent(t *testing.T) {
	for seed := range uint64(5) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			ctx := context.Background()
			f := Faults{ErrorRate: 0.1, LostResponseRate: 0.1, TruncateRate: 0.1, LieRate: 0.1}
			m := New(Options{Seed: seed, Faults: FaultConfig{Put: f, Get: f, Stat: f, List: f, Delete: f}})
			rng := rand.New(rand.NewPCG(seed, 1))
			model := map[string][]byte{}
			keys := []string{"a", "b/c", "b/d", "e/f/g"}
			for range 2000 {
				key := keys[rng.IntN(len(keys))]
				switch rng.IntN(4) {
				case 0:
					v := make([]byte, rng.IntN(300))
					for i := range v {
						v[i] = byte(rng.Uint32())
					}
					err := m.Put(ctx, key, bytes.NewReader(v), int64(len(v)), objstore.PutOptions{})
					switch {
					case err == nil, errors.Is(err, ErrLostResponse):
						model[key] = v
					default:
						require.ErrorIs(t, err, ErrInjected)
					}
				case 1:
					err := m.Delete(ctx, key)
					switch {
					case err == nil, errors.Is(err, ErrLostResponse):
						delete(model, key)
					default:
						require.ErrorIs(t, err, ErrInjected)
					}
				case 2:
					want, ok := model[key]
					if !ok {
						_, err := objstore.ReadRange(ctx, m, key, 0, 0)
						require.True(t, objstore.IsNotExist(err) || errors.Is(err, ErrInjected), "%v", err)
						continue
					}
					off := rng.Int64N(int64(len(want)) + 1)
					n := rng.Int64N(int64(len(want)) - off + 1)
					got, err := objstore.ReadRange(ctx, m, key, off, n)
					if err != nil {
						require.True(t, errors.Is(err, ErrInjected) || errors.Is(err, objstore.ErrShortRead), "%v", err)
						continue
					}
					require.Equal(t, want[off:off+n], got)
				case 3:
					info, err := m.Stat(ctx, key)
					want, ok := model[key]
					switch {
					case errors.Is(err, ErrInjected):
					case !ok:
						require.True(t, objstore.IsNotExist(err), "%v", err)
					default:
						require.NoError(t, err)
						require.EqualValues(t, len(want), info.Size)
					}
				}
			}
			require.Zero(t, m.Counts().OpenBodies, "ReadRange closes every body")
			c := m.Counts().Get
			require.Positive(t, c.TruncatedBodies)
			require.Positive(t, c.LyingBodies)
		})
	}
}

func TestCountsCountInvalidCalls(t *testing.T) {
	ctx := context.Background()
	m := New(Options{})
	require.ErrorIs(t, putString(ctx, m, "/bad", "v"), objstore.ErrInvalidKey)
	_, err := m.Get(ctx, "k", -1, 0)
	require.ErrorIs(t, err, objstore.ErrInvalidArgument)
	require.EqualValues(t, 1, m.Counts().Put.Calls)
	require.EqualValues(t, 1, m.Counts().Get.Calls)

	body, err := m.Get(ctx, "k", 0, -1)
	require.True(t, objstore.IsNotExist(err))
	require.Nil(t, body)
	require.NoError(t, putString(ctx, m, "k", "v"))
	body, err = m.Get(ctx, "k", 0, -1)
	require.NoError(t, err)
	require.EqualValues(t, 1, m.Counts().OpenBodies)
	require.NoError(t, body.Close())
	require.NoError(t, body.Close(), "closing twice is fine")
	require.Zero(t, m.Counts().OpenBodies)
	_, err = body.Read(make([]byte, 1))
	require.Error(t, err)
}
