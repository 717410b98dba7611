package remote

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tierlog/tierlog/epochcache"
)

// TestCrashAfterEveryWrite runs a seeded series of adds, updates and
// partition deletes on a crashable in-memory FS. After every acknowledged
// write it takes a CrashClone (keeping none, or a random part, of the
// unsynced data), opens a manager on the clone and checks that it answers
// every query exactly as the live manager does: every acknowledged change
// survived, in memory order, with its per-epoch index.
func TestCrashAfterEveryWrite(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			runCrashSeries(t, seed, 120)
		})
	}
}

func runCrashSeries(t *testing.T, seed uint64, steps int) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, seed))
	cloneRNG := rand.New(rand.NewPCG(seed, 99))
	mem := vfs.NewCrashableMem()
	m, err := Open(mem, "meta", MetadataOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	parts := []TopicIDPartition{testPartition(0), testPartition(1)}
	var ids []SegmentID // every id ever added
	acked := 0
	for step := 0; acked < steps && step < 10*steps; step++ {
		var err error
		switch op := rng.IntN(10); {
		case op < 4 || len(ids) == 0:
			// Overlapping segments in a small offset space from a few
			// "leaders" so that superseding happens.
			tp := parts[rng.IntN(len(parts))]
			start := rng.Int64N(200)
			end := start + rng.Int64N(80)
			epochs := []epochcache.Entry{{Epoch: rng.Int32N(3), StartOffset: start}}
			if mid := start + 1 + rng.Int64N(end-start+1); mid <= end && rng.IntN(2) == 0 {
				epochs = append(epochs, epochcache.Entry{Epoch: epochs[0].Epoch + 1 + rng.Int32N(2), StartOffset: mid})
			}
			seg := SegmentMetadata{SegmentID: NewSegmentID(tp), StartOffset: start, EndOffset: end,
				SegmentLeaderEpochs: epochs, SizeBytes: rng.Int64N(1000), TxnIndexEmpty: rng.IntN(2) == 0}
			err = m.AddSegment(ctx, seg)
			if err == nil {
				ids = append(ids, seg.SegmentID)
			}
		case op < 9:
			id := ids[rng.IntN(len(ids))]
			state := []SegmentState{CopySegmentFinished, CopySegmentFinished, DeleteSegmentStarted, DeleteSegmentFinished}[rng.IntN(4)]
			err = m.UpdateSegment(ctx, SegmentMetadataUpdate{SegmentID: id, State: state, EventTimestampMs: int64(step)})
		default:
			tp := parts[rng.IntN(len(parts))]
			state := PartitionDeleteState(rng.IntN(3))
			err = m.PutPartitionDeleteMetadata(ctx, PartitionDeleteMetadata{TopicIDPartition: tp, State: state})
		}
		if errors.Is(err, ErrInvalidTransition) || errors.Is(err, ErrSegmentNotFound) {
			continue // refused: nothing was written
		}
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		acked++
		pct := 0
		if acked%2 == 1 {
			pct = 50
		}
		clone := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: cloneRNG})
		got, err := Open(clone, "meta", MetadataOptions{})
		if err != nil {
			t.Fatalf("step %d: open crash clone: %v", step, err)
		}
		if diff := compareManagers(m, got, parts); diff != "" {
			t.Fatalf("step %d (unsynced kept %d%%): crash clone differs: %s", step, pct, diff)
		}
		if err := got.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if acked < steps {
		t.Fatalf("only %d writes acknowledged", acked)
	}
}

// compareManagers returns "" if a and b answer every query on parts the
// same way, else a description of the first difference.
func compareManagers(a, b *MetadataManager, parts []TopicIDPartition) string {
	for _, tp := range parts {
		la, _ := a.ListSegments(tp)
		lb, _ := b.ListSegments(tp)
		if !slices.EqualFunc(la, lb, func(x, y SegmentMetadata) bool { return equalMetadata(&x, &y) }) {
			return fmt.Sprintf("%s: ListSegments %v vs %v", tp, la, lb)
		}
		da, _ := a.PartitionDeleteState(tp)
		db, _ := b.PartitionDeleteState(tp)
		if da != db {
			return fmt.Sprintf("%s: delete state %s vs %s", tp, da, db)
		}
		for epoch := int32(0); epoch < 6; epoch++ {
			ha, oka, _ := a.HighestOffsetForEpoch(tp, epoch)
			hb, okb, _ := b.HighestOffsetForEpoch(tp, epoch)
			if ha != hb || oka != okb {
				return fmt.Sprintf("%s: highest(%d) %d,%v vs %d,%v", tp, epoch, ha, oka, hb, okb)
			}
			sa, _ := a.RemoteLogSize(tp, epoch)
			sb, _ := b.RemoteLogSize(tp, epoch)
			if sa != sb {
				return fmt.Sprintf("%s: size(%d) %d vs %d", tp, epoch, sa, sb)
			}
			for off := int64(0); off < 300; off++ {
				ga, oka, _ := a.SegmentFor(tp, epoch, off)
				gb, okb, _ := b.SegmentFor(tp, epoch, off)
				if oka != okb || ga.SegmentID != gb.SegmentID {
					return fmt.Sprintf("%s: SegmentFor(%d, %d) %s,%v vs %s,%v", tp, epoch, off, ga.SegmentID, oka, gb.SegmentID, okb)
				}
			}
		}
	}
	return ""
}
