package remote

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/epochcache"
)

// randomSegment returns a valid SegmentMetadata with random fields.
func randomSegment(rng *rand.Rand, tp TopicIDPartition) SegmentMetadata {
	start := rng.Int64N(1 << 40)
	end := start + rng.Int64N(1000)
	epochs := []epochcache.Entry{{Epoch: rng.Int32N(10), StartOffset: start}}
	for off := start + 1; off <= end && len(epochs) < 5; off += 1 + rng.Int64N(300) {
		if rng.IntN(3) == 0 {
			last := epochs[len(epochs)-1]
			epochs = append(epochs, epochcache.Entry{Epoch: last.Epoch + 1 + rng.Int32N(3), StartOffset: off})
		}
	}
	m := SegmentMetadata{
		SegmentID:           NewSegmentID(tp),
		StartOffset:         start,
		EndOffset:           end,
		SegmentLeaderEpochs: epochs,
		SizeBytes:           rng.Int64N(1 << 30),
		MaxTimestampMs:      rng.Int64(),
		BrokerID:            rng.Int32(),
		EventTimestampMs:    rng.Int64(),
		State:               SegmentState(rng.IntN(4)),
		TxnIndexEmpty:       rng.IntN(2) == 0,
	}
	switch rng.IntN(3) {
	case 0:
		m.CustomMetadata = []byte{}
	case 1:
		m.CustomMetadata = []byte("custom")
	}
	return m
}

func TestUUID(t *testing.T) {
	for range 100 {
		u := NewUUID()
		require.NotEqual(t, UUID{}, u)
		s := u.String()
		require.Len(t, s, 22)
		require.NotEqual(t, byte('-'), s[0])
		back, err := ParseUUID(s)
		require.NoError(t, err)
		require.Equal(t, u, back)
	}
	// Kafka's text form of a known id.
	u := UUID{0: 0xff, 15: 0x01}
	require.Equal(t, "_wAAAAAAAAAAAAAAAAAAAQ", u.String())
	_, err := ParseUUID("short")
	require.ErrorIs(t, err, ErrInvalidArgument)
}

func TestCodecRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tp := TopicIDPartition{TopicID: NewUUID(), Topic: "orders", Partition: 7}
	for range 500 {
		m := randomSegment(rng, tp)
		require.NoError(t, m.Validate())
		enc := EncodeSegmentMetadata(nil, &m)
		got, err := DecodeSegmentMetadata(enc)
		require.NoError(t, err)
		require.True(t, equalMetadata(&m, &got), "%+v != %+v", m, got)
		require.Equal(t, m.CustomMetadata == nil, got.CustomMetadata == nil)

		// Every single-byte change and every truncation is corruption.
		i := rng.IntN(len(enc))
		bad := bytes.Clone(enc)
		bad[i] ^= 1 << rng.IntN(8)
		_, err = DecodeSegmentMetadata(bad)
		require.ErrorIs(t, err, ErrCorruption)
		_, err = DecodeSegmentMetadata(enc[:i])
		require.ErrorIs(t, err, ErrCorruption)
	}
}

// FuzzDecodeSegmentMetadata: the decoder never panics, and whatever it
// accepts is valid metadata whose encoding is exactly the input.
func FuzzDecodeSegmentMetadata(f *testing.F) {
	rng := rand.New(rand.NewPCG(3, 4))
	tp := TopicIDPartition{TopicID: UUID{1}, Topic: "t", Partition: 0}
	for range 4 {
		m := randomSegment(rng, tp)
		f.Add(EncodeSegmentMetadata(nil, &m))
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeSegmentMetadata(b)
		if err != nil {
			if !errors.Is(err, ErrCorruption) {
				t.Fatalf("error %v does not wrap ErrCorruption", err)
			}
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("decoded invalid metadata: %v", err)
		}
		if again := EncodeSegmentMetadata(nil, &m); !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs:\n%x\n%x", b, again)
		}
	})
}

func TestTransitionErrors(t *testing.T) {
	ctx := context.Background()
	m, err := Open(vfs.NewMem(), "meta", MetadataOptions{})
	require.NoError(t, err)
	defer m.Close()
	tp := testPartition(0)
	seg := SegmentMetadata{SegmentID: NewSegmentID(tp), EndOffset: 9,
		SegmentLeaderEpochs: []epochcache.Entry{{Epoch: 0, StartOffset: 0}}}
	require.NoError(t, m.AddSegment(ctx, seg))
	require.NoError(t, m.UpdateSegment(ctx, SegmentMetadataUpdate{SegmentID: seg.SegmentID, State: CopySegmentFinished}))

	err = m.UpdateSegment(ctx, SegmentMetadataUpdate{SegmentID: seg.SegmentID, State: DeleteSegmentFinished})
	var te *TransitionError
	require.ErrorAs(t, err, &te)
	require.ErrorIs(t, err, ErrInvalidTransition)
	require.Equal(t, "COPY_SEGMENT_FINISHED", te.From)

	bad := seg
	bad.SegmentID = NewSegmentID(tp)
	bad.SegmentLeaderEpochs = nil
	err = m.AddSegment(ctx, bad)
	var me *SegmentMetadataError
	require.ErrorAs(t, err, &me)
	require.ErrorIs(t, err, ErrInvalidSegmentMetadata)
	require.ErrorIs(t, err, ErrInvalidArgument)

	err = m.UpdateSegment(ctx, SegmentMetadataUpdate{SegmentID: NewSegmentID(tp), State: CopySegmentFinished})
	require.ErrorIs(t, err, ErrSegmentNotFound)

	// Custom metadata: replaced when the update carries some, kept otherwise.
	require.NoError(t, m.UpdateSegment(ctx, SegmentMetadataUpdate{SegmentID: seg.SegmentID,
		State: CopySegmentFinished, CustomMetadata: []byte("x")}))
	require.NoError(t, m.UpdateSegment(ctx, SegmentMetadataUpdate{SegmentID: seg.SegmentID, State: DeleteSegmentStarted}))
	segs, err := m.ListSegments(tp)
	require.NoError(t, err)
	require.Equal(t, []byte("x"), segs[0].CustomMetadata)

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, m.AddSegment(cctx, seg), context.Canceled)

	require.NoError(t, m.Close())
	require.ErrorIs(t, m.Close(), ErrClosed)
	_, _, err = m.SegmentFor(tp, 0, 0)
	require.ErrorIs(t, err, ErrClosed)
	_, _, err = m.HighestOffsetForEpoch(tp, 0)
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, m.AddSegment(ctx, seg), ErrClosed)
}

// TestOpenDetectsCorruption: a stored value whose checksum fails, or an
// index entry naming a missing segment, fails Open with ErrCorruption.
func TestOpenDetectsCorruption(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	m, err := Open(fs, "meta", MetadataOptions{})
	require.NoError(t, err)
	tp := testPartition(0)
	seg := SegmentMetadata{SegmentID: NewSegmentID(tp), EndOffset: 9,
		SegmentLeaderEpochs: []epochcache.Entry{{Epoch: 0, StartOffset: 0}}}
	require.NoError(t, m.AddSegment(ctx, seg))
	require.NoError(t, m.UpdateSegment(ctx, SegmentMetadataUpdate{SegmentID: seg.SegmentID, State: CopySegmentFinished}))
	prefix := partitionPrefix(tp)

	// Flip a byte of the segment value behind the manager's back.
	enc := EncodeSegmentMetadata(nil, &seg)
	enc[10] ^= 0xff
	require.NoError(t, m.db.Set(segmentKey(prefix, 0, seg.SegmentID.ID), enc, nil))
	require.NoError(t, m.Close())
	_, err = Open(fs, "meta", MetadataOptions{})
	require.ErrorIs(t, err, ErrCorruption)

	// A mapping to an unknown segment.
	fs2 := vfs.NewMem()
	m, err = Open(fs2, "meta", MetadataOptions{})
	require.NoError(t, err)
	var ghost UUID
	ghost[0] = 9
	require.NoError(t, m.db.Set(epochKey(prefix, 0, 0), ghost[:], nil))
	require.NoError(t, m.Close())
	_, err = Open(fs2, "meta", MetadataOptions{})
	require.ErrorIs(t, err, ErrCorruption)
}

// TestConcurrentReadersAndWriters runs lookups and listings while writers
// add, finish and delete segments; run under -race it checks the locking,
// and every lookup answer must be a finished segment holding the offset.
func TestConcurrentReadersAndWriters(t *testing.T) {
	ctx := context.Background()
	m, err := Open(vfs.NewMem(), "meta", MetadataOptions{})
	require.NoError(t, err)
	defer m.Close()
	const writers, segsPerWriter = 4, 50
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tp := testPartition(int32(w))
			for i := range segsPerWriter {
				seg := SegmentMetadata{SegmentID: NewSegmentID(tp), StartOffset: int64(i * 10), EndOffset: int64(i*10 + 9),
					SegmentLeaderEpochs: []epochcache.Entry{{Epoch: 0, StartOffset: int64(i * 10)}}, SizeBytes: 1}
				if err := m.AddSegment(ctx, seg); err != nil {
					t.Error(err)
					return
				}
				if err := m.UpdateSegment(ctx, SegmentMetadataUpdate{SegmentID: seg.SegmentID, State: CopySegmentFinished}); err != nil {
					t.Error(err)
					return
				}
				if i%3 == 0 {
					if err := m.UpdateSegment(ctx, SegmentMetadataUpdate{SegmentID: seg.SegmentID, State: DeleteSegmentStarted}); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	var rwg sync.WaitGroup
	for r := range 4 {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 0))
			for {
				select {
				case <-stop:
					return
				default:
				}
				tp := testPartition(rng.Int32N(writers))
				off := rng.Int64N(segsPerWriter * 10)
				seg, ok, err := m.SegmentFor(tp, 0, off)
				if err != nil {
					t.Error(err)
					return
				}
				if ok && (seg.State != CopySegmentFinished || off < seg.StartOffset || off > seg.EndOffset) {
					t.Errorf("lookup %d returned %+v", off, seg)
				}
				if _, err := m.ListSegments(tp); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	rwg.Wait()
	for w := range writers {
		segs, err := m.ListSegments(testPartition(int32(w)))
		require.NoError(t, err)
		require.Len(t, segs, segsPerWriter)
	}
}
