package remote

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/harness/testseed"
)

// TestRegisterCopiedSegmentMatchesAddThenFinish: RegisterCopiedSegment
// leaves the store as AddSegment plus UpdateSegment(COPY_SEGMENT_FINISHED)
// with the same fields would, in memory and after a reopen: the same
// listing, the same offset lookups, the same highest offsets per epoch.
func TestRegisterCopiedSegmentMatchesAddThenFinish(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(testseed.Seed(t, 11), 0))
	fsA, fsB := vfs.NewMem(), vfs.NewMem()
	a, err := Open(fsA, "meta", MetadataOptions{})
	require.NoError(t, err)
	b, err := Open(fsB, "meta", MetadataOptions{})
	require.NoError(t, err)
	tp := testPartition(0)
	var segs []SegmentMetadata
	for range 50 {
		seg := randomSegment(rng, tp)
		seg.State = CopySegmentFinished
		segs = append(segs, seg)
		require.NoError(t, a.RegisterCopiedSegment(ctx, seg))
		started := seg
		started.State = CopySegmentStarted
		require.NoError(t, b.AddSegment(ctx, started))
		require.NoError(t, b.UpdateSegment(ctx, SegmentMetadataUpdate{SegmentID: seg.SegmentID, State: CopySegmentFinished,
			EventTimestampMs: seg.EventTimestampMs, BrokerID: seg.BrokerID, CustomMetadata: seg.CustomMetadata}))
	}
	compare := func() {
		t.Helper()
		la, err := a.ListSegments(tp)
		require.NoError(t, err)
		lb, err := b.ListSegments(tp)
		require.NoError(t, err)
		require.Equal(t, lb, la)
		for _, s := range segs {
			for _, e := range s.SegmentLeaderEpochs {
				ha, oka, err := a.HighestOffsetForEpoch(tp, e.Epoch)
				require.NoError(t, err)
				hb, okb, err := b.HighestOffsetForEpoch(tp, e.Epoch)
				require.NoError(t, err)
				require.Equal(t, []any{hb, okb}, []any{ha, oka}, "epoch %d", e.Epoch)
				fa, oka, err := a.SegmentFor(tp, e.Epoch, e.StartOffset)
				require.NoError(t, err)
				fb, okb, err := b.SegmentFor(tp, e.Epoch, e.StartOffset)
				require.NoError(t, err)
				require.Equal(t, okb, oka)
				require.Equal(t, fb.SegmentID, fa.SegmentID, "epoch %d offset %d", e.Epoch, e.StartOffset)
			}
		}
	}
	compare()
	require.NoError(t, a.Close())
	require.NoError(t, b.Close())
	a, err = Open(fsA, "meta", MetadataOptions{})
	require.NoError(t, err)
	defer a.Close()
	b, err = Open(fsB, "meta", MetadataOptions{})
	require.NoError(t, err)
	defer b.Close()
	compare()
}

// TestRegisterCopiedSegment: one call makes a segment readable
// (COPY_SEGMENT_FINISHED, with the broker id and event time given), a
// repeat is a no-op, a started copy is finished by it, and bad input is
// refused with a typed error and changes nothing.
func TestRegisterCopiedSegment(t *testing.T) {
	ctx := context.Background()
	m, err := Open(vfs.NewMem(), "meta", MetadataOptions{})
	require.NoError(t, err)
	defer m.Close()
	tp := testPartition(0)
	seg := SegmentMetadata{SegmentID: NewSegmentID(tp), StartOffset: 100, EndOffset: 199,
		SegmentLeaderEpochs: []epochcache.Entry{{Epoch: 3, StartOffset: 100}, {Epoch: 5, StartOffset: 150}},
		SizeBytes:           4096, BrokerID: 7, EventTimestampMs: 1_700_000_000_000, TxnIndexEmpty: true}

	// The state is unset (the zero value): taken as finished.
	require.NoError(t, m.RegisterCopiedSegment(ctx, seg))
	got, ok, err := m.SegmentFor(tp, 5, 180)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, CopySegmentFinished, got.State)
	require.EqualValues(t, 7, got.BrokerID)
	require.EqualValues(t, 1_700_000_000_000, got.EventTimestampMs)
	h, ok, err := m.HighestOffsetForEpoch(tp, 3)
	require.NoError(t, err)
	require.True(t, ok)
	require.EqualValues(t, 149, h)

	// Again, same fields: nothing changes.
	require.NoError(t, m.RegisterCopiedSegment(ctx, seg))
	// The same id with other offsets is another copy.
	other := seg
	other.EndOffset = 198
	require.ErrorIs(t, m.RegisterCopiedSegment(ctx, other), ErrSegmentIDReused)

	// A copy started with AddSegment is finished by the call.
	started := SegmentMetadata{SegmentID: NewSegmentID(tp), StartOffset: 200, EndOffset: 249,
		SegmentLeaderEpochs: []epochcache.Entry{{Epoch: 5, StartOffset: 200}}, SizeBytes: 10, State: CopySegmentStarted}
	require.NoError(t, m.AddSegment(ctx, started))
	require.NoError(t, m.RegisterCopiedSegment(ctx, started))
	h, _, err = m.HighestOffsetForEpoch(tp, 5)
	require.NoError(t, err)
	require.EqualValues(t, 249, h)

	// A segment being deleted cannot be registered again.
	require.NoError(t, m.UpdateSegment(ctx, SegmentMetadataUpdate{SegmentID: started.SegmentID, State: DeleteSegmentStarted}))
	var te *TransitionError
	require.ErrorAs(t, m.RegisterCopiedSegment(ctx, started), &te)
	require.Equal(t, "DELETE_SEGMENT_STARTED", te.From)

	before, err := m.ListSegments(tp)
	require.NoError(t, err)
	for _, c := range []struct {
		name string
		edit func(*SegmentMetadata)
		want any // *SegmentMetadataError or *TransitionError
	}{
		{"end before start", func(s *SegmentMetadata) { s.EndOffset = 50 }, new(*SegmentMetadataError)},
		{"no epochs", func(s *SegmentMetadata) { s.SegmentLeaderEpochs = nil }, new(*SegmentMetadataError)},
		{"first epoch below start", func(s *SegmentMetadata) {
			s.SegmentLeaderEpochs = []epochcache.Entry{{Epoch: 3, StartOffset: 99}}
		}, new(*SegmentMetadataError)},
		{"negative size", func(s *SegmentMetadata) { s.SizeBytes = -1 }, new(*SegmentMetadataError)},
		{"zero segment id", func(s *SegmentMetadata) { s.SegmentID.ID = UUID{} }, new(*SegmentMetadataError)},
		{"no topic name", func(s *SegmentMetadata) { s.SegmentID.TopicIDPartition.Topic = "" }, new(*SegmentMetadataError)},
		{"delete state", func(s *SegmentMetadata) { s.State = DeleteSegmentStarted }, new(*TransitionError)},
	} {
		t.Run(c.name, func(t *testing.T) {
			bad := seg
			bad.SegmentID = NewSegmentID(tp)
			bad.SegmentLeaderEpochs = append([]epochcache.Entry(nil), seg.SegmentLeaderEpochs...)
			c.edit(&bad)
			err := m.RegisterCopiedSegment(ctx, bad)
			require.ErrorAs(t, err, c.want)
			if _, ok := c.want.(**TransitionError); ok {
				require.ErrorIs(t, err, ErrInvalidTransition)
			} else {
				require.ErrorIs(t, err, ErrInvalidSegmentMetadata)
				require.ErrorIs(t, err, ErrInvalidArgument)
			}
		})
	}
	after, err := m.ListSegments(tp)
	require.NoError(t, err)
	require.Equal(t, before, after, "refused registrations change nothing")
}
