package consolidate

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tierlog/tierlog/internal/harness/walcheck"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/tierstate"
	"github.com/tierlog/tierlog/wal"
)

// gappyWAL is a WAL that lies itself: for the partitions in gaps it
// drops one batch from the reader's answer (the first, so the records
// start after the fetch offset, or the second of three or more, so they
// hold a hole).
type gappyWAL struct {
	inner WALFetcher
	gaps  map[wal.TopicIDPartition]bool
	first bool
}

func (g gappyWAL) Fetch(ctx context.Context, req wal.FindBatchesRequest) ([]wal.FetchResult, error) {
	res, err := g.inner.Fetch(ctx, req)
	for i := range res {
		if !g.gaps[req.Partitions[i].Partition] {
			continue
		}
		var spans [][2]int
		for pos := 0; pos < len(res[i].Records); {
			b, err := record.ReadBatch(res[i].Records[pos:])
			if err != nil {
				break
			}
			spans = append(spans, [2]int{pos, pos + b.Size()})
			pos += b.Size()
		}
		if len(spans) < 2 {
			continue
		}
		drop := spans[0]
		if !g.first && len(spans) >= 3 {
			drop = spans[1]
		}
		recs := append([]byte(nil), res[i].Records[:drop[0]]...)
		res[i].Records = append(recs, res[i].Records[drop[1]:]...)
	}
	return res, err
}

// TestFetcherRandomDamage consolidates random WAL histories (walcheck)
// into born-diskless logs through an Endpoint over a wal.Reader, after
// random damage to the store, random lies in FindBatches' answers and,
// in some iterations, a WAL answer with a batch left out. Every log must
// hold a contiguous prefix of its partition's committed batches from 0,
// byte-identical but for the stamped leader epoch (never a hole, never
// another partition's or batch's bytes); a partition nothing touched is
// consolidated whole, and a damaged one up to its first damaged batch.
// Iterations and seed: TIERLOG_WALCHECK_ITERS, TIERLOG_WALCHECK_SEED.
func TestFetcherRandomDamage(t *testing.T) {
	iters := 400
	if testing.Short() {
		iters = 150
	}
	// "reader" reads through wal.Reader; "reference" through
	// walcheck.Reference, a reader that keeps the read path's contract,
	// so that what fails there is the fetcher's own.
	for _, name := range []string{"reader", "reference"} {
		t.Run(name, func(t *testing.T) {
			seed, iters := walcheck.Seeds(t, 1, iters)
			meta, err := remote.Open(vfs.NewMem(), "meta", remote.MetadataOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = meta.Close() })
			ctx := context.Background()
			tally := walcheck.Tally{}
			for i := range iters {
				s := seed + uint64(i)
				w, err := walcheck.NewWorld(ctx, walcheck.NewRand(s), walcheck.NewModelPlane())
				if err != nil {
					t.Fatalf("seed %d: %v", s, err)
				}
				if err := w.RandomDamage(ctx); err != nil {
					t.Fatalf("seed %d: %v", s, err)
				}
				gaps := gappyWAL{gaps: map[wal.TopicIDPartition]bool{}, first: w.Rand.IntN(2) == 0}
				if w.Rand.IntN(2) == 0 {
					tp := w.Parts[w.Rand.IntN(len(w.Parts))]
					gaps.gaps[tp] = true
					w.Damage = append(w.Damage, fmt.Sprintf("the WAL's answers for %s leave out a batch (the first: %v)", tp, gaps.first))
				}
				gaps.inner = walcheck.Reference{Store: w.Store, ControlPlane: w.Liar}
				if name == "reader" {
					r, err := wal.NewReader(wal.ReaderOptions{Store: w.Store, ControlPlane: w.Liar})
					if err != nil {
						t.Fatal(err)
					}
					gaps.inner = r
				}
				tally.Add(s, w, consolidateWorld(t, ctx, meta, w, gaps))
			}
			tally.Report(t, iters)
		})
	}
}

// consolidateWorld runs a Fetcher over w's partitions until it stops
// making progress and checks the logs.
func consolidateWorld(t *testing.T, ctx context.Context, meta *remote.MetadataManager, w *walcheck.World, gaps gappyWAL) (vs []walcheck.Violation) {
	defer func() {
		if r := recover(); r != nil {
			vs = append(vs, walcheck.Violation{Class: walcheck.ClassPanic, Detail: fmt.Sprint(r)})
		}
	}()
	parts := &partitionMap{m: map[remote.TopicIDPartition]partitionEntry{}}
	ep, err := NewEndpoint(EndpointOptions{ControlPlane: w.Liar, WAL: gaps, Remote: meta, Partitions: parts})
	if err != nil {
		t.Fatal(err)
	}
	m, err := tierstate.NewMachine(tierstate.MachineOptions{Leader: ep, Metadata: meta, Data: checkpointData{}})
	if err != nil {
		t.Fatal(err)
	}
	clock := &manualClock{now: time.UnixMilli(1_700_000_000_000)}
	f, err := NewFetcher(FetcherOptions{Endpoint: ep, Machine: m, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	fs := vfs.NewMem()
	born := tierstate.State{}.WithConsolidating(true)
	logs := map[wal.TopicIDPartition]*log.UnifiedLog{}
	tps := map[wal.TopicIDPartition]remote.TopicIDPartition{}
	for _, wtp := range w.Parts {
		tp := remote.TopicIDPartition{TopicID: remote.UUID(wtp.TopicID), Topic: wtp.TopicID.String(), Partition: wtp.Partition}
		l, err := log.Open(fmt.Sprintf("p-%s", wtp), log.Options{FS: fs, RemoteStorageEnabled: true, SegmentBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		parts.set(tp, born, l)
		if err := f.Add(FetcherPartition{Partition: tp, Log: l, State: born}); err != nil {
			t.Fatal(err)
		}
		logs[wtp], tps[wtp] = l, tp
	}
	for range 8 {
		if _, err := f.Step(ctx); err != nil {
			t.Fatal(err)
		}
		clock.advance(time.Minute) // past every backoff and idle wait
	}
	for _, wtp := range w.Parts {
		l := logs[wtp]
		var batches []record.Batch
		for off := int64(0); off < l.LogEndOffset(); {
			info, err := l.Read(nil, off, 1<<20, log.IsolationLogEnd, true)
			if err != nil || len(info.Records) == 0 {
				vs = append(vs, walcheck.Violation{Class: walcheck.ClassUntyped, Detail: fmt.Sprintf("%s: reading the log at %d: %v", wtp, off, err)})
				break
			}
			s := record.NewScanner(info.Records, record.ScannerOptions{})
			for s.Next() {
				if b := s.Batch(); b.LastOffset() >= off {
					batches = append(batches, b)
					off = b.NextOffset()
				}
			}
			if s.Err() != nil {
				break
			}
		}
		vs = append(vs, w.CheckStored(wtp, 0, batches)...)
		leo, hw, bad := l.LogEndOffset(), w.HighWatermark(wtp), w.FirstDamaged(wtp)
		switch {
		case w.LiedAbout(wtp) || gaps.gaps[wtp]:
		case leo < bad:
			vs = append(vs, walcheck.Violation{Class: walcheck.ClassStalled, Detail: fmt.Sprintf(
				"partition %s: log end %d, high watermark %d, first damaged batch at %d; failed: %v", wtp, leo, hw, bad, f.Failed(tps[wtp]))})
		}
	}
	return vs
}
