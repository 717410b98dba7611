package consolidate

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/tierstate"
	"github.com/tierlog/tierlog/wal"
)

// skippingWAL is a WALFetcher that cuts the batch starting at skip (when
// skip >= 0) out of every answer of wal: an answer that skipped a batch.
type skippingWAL struct {
	wal  WALFetcher
	skip int64
}

func (s *skippingWAL) Fetch(ctx context.Context, req wal.FindBatchesRequest) ([]wal.FetchResult, error) {
	res, err := s.wal.Fetch(ctx, req)
	for i := range res {
		var kept []byte
		for buf := res[i].Records; len(buf) > 0; {
			b, err := record.ReadBatch(buf)
			if err != nil {
				return nil, err
			}
			if b.BaseOffset() != s.skip {
				kept = append(kept, buf[:b.Size()]...)
			}
			buf = buf[b.Size():]
		}
		res[i].Records = kept
	}
	return res, err
}

// A WAL answer that skips a batch is never appended past the hole: the
// fetcher appends the batches that start at its log end, refuses the rest
// (ErrNotAtLogEnd, counted, backed off), refuses an answer whose first
// batch starts past its log end, and consolidates every record once the
// answers are whole again.
func TestFetcherNeverAppendsAGap(t *testing.T) {
	e := newWALEnv(t)
	require.NoError(t, e.cp.CreatePartitions(e.ctx, []wal.CreatePartitionsRequest{{TopicID: walTP(e.tp).TopicID, Topic: e.tp.Topic, NumPartitions: 1}}))
	born := tierstate.State{}.WithConsolidating(true)
	var want []string
	for _, p := range []string{"a", "b", "c"} {
		base := e.produce(5, p)
		want = append(want, expect(base, 5, p)...)
	}
	l := e.openLog("p0")
	e.parts.set(e.tp, born, l)
	lying := &skippingWAL{wal: e.reader, skip: 5}
	ep := e.endpoint(EndpointOptions{})
	ep.opts.WAL = lying
	clock := &manualClock{}
	f, err := NewFetcher(FetcherOptions{Endpoint: ep, Machine: e.machine(ep, checkpointData{}), Clock: clock})
	require.NoError(t, err)
	require.NoError(t, f.Add(FetcherPartition{Partition: e.tp, Log: l, State: born}))

	step := func() {
		t.Helper()
		n, err := f.Step(e.ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		clock.advance(time.Hour)
	}
	step() // [0, 4] appended, [10, 14] after the skipped [5, 9] refused
	require.Equal(t, int64(5), l.LogEndOffset())
	require.Equal(t, want[:5], readAll(t, l, 0, 0))
	m := f.Metrics()
	require.Equal(t, int64(1), m.NotAtLogEnd)
	require.Equal(t, int64(1), m.Backoffs)
	require.Equal(t, int64(1), m.Appends)

	step() // the answer at 5 starts at 10: nothing appended
	require.Equal(t, int64(5), l.LogEndOffset())
	require.Equal(t, int64(2), f.Metrics().NotAtLogEnd)
	require.Equal(t, int64(1), f.Metrics().Appends)

	lying.skip = -1
	step()
	require.Equal(t, int64(15), l.LogEndOffset())
	require.Equal(t, want, readAll(t, l, 0, 0))
	require.NoError(t, f.Failed(e.tp))
}

// appendablePrefix's rule, batch by batch: contiguous from the log end;
// the first batch past the end only on a log that ends at its committed
// seal (a lowered seal); the refusal is typed.
func TestAppendablePrefix(t *testing.T) {
	e := newWALEnv(t)
	batchAt := func(base int64, n int) []byte {
		b := record.NewBuilder(record.DefaultBuilderOptions())
		for i := range n {
			b.Add(int64(i), nil, []byte("v"))
		}
		buf, err := b.Build()
		require.NoError(t, err)
		bt, err := record.ReadBatch(buf)
		require.NoError(t, err)
		bt.SetBaseOffset(base)
		return buf
	}
	cat := func(bs ...[]byte) []byte {
		var out []byte
		for _, b := range bs {
			out = append(out, b...)
		}
		return out
	}
	l := e.openLog("p")
	require.NoError(t, l.TruncateFullyAndStartAt(60, 60))
	born := tierstate.State{}.WithConsolidating(true)
	sealed, sealedAt50 := committedSeal(t, 60, nil), committedSeal(t, 50, nil)

	a, b, gap := batchAt(60, 2), batchAt(62, 3), batchAt(100, 1)
	for name, tc := range map[string]struct {
		state     tierstate.State
		records   []byte
		n         int
		want, got int64 // the refusal, 0/0 for none
	}{
		"contiguous":            {born, cat(a, b), len(a) + len(b), 0, 0},
		"gap-after-first":       {born, cat(a, gap), len(a), 62, 100},
		"first-past-end":        {born, cat(b), 0, 60, 62},
		"first-before-end":      {born, cat(batchAt(59, 2)), 0, 60, 59},
		"lowered-seal":          {sealed, cat(gap, batchAt(101, 1)), len(gap) * 2, 0, 0},
		"lowered-seal-then-gap": {sealed, cat(gap, batchAt(103, 1)), len(gap), 101, 103},
		"seal-not-at-log-end":   {sealedAt50, cat(gap), 0, 60, 100},
	} {
		t.Run(name, func(t *testing.T) {
			n, err := appendablePrefix(FetcherPartition{Partition: e.tp, Log: l, State: tc.state}, tc.records)
			require.Equal(t, tc.n, n)
			if tc.want == 0 {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrNotAtLogEnd)
			var ne *NotAtLogEndError
			require.ErrorAs(t, err, &ne)
			require.Equal(t, tc.want, ne.Want)
			require.Equal(t, tc.got, ne.BaseOffset)
			require.Equal(t, e.tp, ne.Partition)
		})
	}
}
