package wal_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/internal/harness/crashtest"
	"github.com/tierlog/tierlog/internal/harness/testseed"
	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/remote/objstore/mem"
	"github.com/tierlog/tierlog/wal"
	"github.com/tierlog/tierlog/wal/pebblecp"
)

// pointStore adds crash points around every Put: before it (the object is
// reserved, not stored) and after it (stored, not committed).
type pointStore struct {
	objstore.Store
	rec *crashtest.Recorder
}

func (s pointStore) Put(ctx context.Context, key string, r io.Reader, size int64, opts objstore.PutOptions) error {
	s.rec.Point("put " + key)
	err := s.Store.Put(ctx, key, r, size, opts)
	s.rec.Point("after put " + key)
	return err
}

// ackModel is what producers were told: partition -> offset -> value.
type ackModel struct {
	mu    sync.Mutex
	acked map[int32]map[int64]string
	dup   error // the first offset acknowledged twice
}

func (m *ackModel) record(p int32, recs []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.acked[p] == nil {
		m.acked[p] = map[int64]string{}
	}
	for _, r := range recs {
		offText, val, _ := strings.Cut(r, ":")
		var off int64
		_, _ = fmt.Sscan(offText, &off)
		if old, ok := m.acked[p][off]; ok && m.dup == nil {
			m.dup = fmt.Errorf("partition %d offset %d acknowledged for %q and %q", p, off, old, val)
		}
		m.acked[p][off] = val
	}
}

func (m *ackModel) snapshot() map[int32]map[int64]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[int32]map[int64]string{}
	for p, offs := range m.acked {
		out[p] = map[int64]string{}
		for o, v := range offs {
			out[p][o] = v
		}
	}
	return out
}

// checkReadBack reads every partition through cp and checks that offsets
// run from 0 without a gap, that no value sits at two offsets, and that
// every acknowledged record is at its acknowledged offset.
func checkReadBack(ctx context.Context, store objstore.Store, cp wal.ControlPlane, topic wal.TopicID, partitions int32, acked map[int32]map[int64]string) error {
	r, err := wal.NewReader(wal.ReaderOptions{Store: store, ControlPlane: cp})
	if err != nil {
		return err
	}
	req := wal.FindBatchesRequest{MaxBytes: 1 << 30}
	for p := range partitions {
		req.Partitions = append(req.Partitions, wal.FindPartition{Partition: wal.TopicIDPartition{TopicID: topic, Partition: p}, MaxPartitionBytes: 1 << 30})
	}
	res, err := r.Fetch(ctx, req)
	if err != nil {
		return err
	}
	for p, fr := range res {
		if fr.Err != nil {
			return fmt.Errorf("partition %d: %w", p, fr.Err)
		}
		got := values(nopTB{}, fr.Records)
		seen := map[string]bool{}
		for i, v := range got {
			off, val, _ := strings.Cut(v, ":")
			if off != fmt.Sprint(i) {
				return fmt.Errorf("partition %d: record %d at offset %s", p, i, off)
			}
			if seen[val] {
				return fmt.Errorf("partition %d: value %q at two offsets", p, val)
			}
			seen[val] = true
		}
		for off, val := range acked[int32(p)] {
			if off >= int64(len(got)) || got[off] != fmt.Sprintf("%d:%s", off, val) {
				return fmt.Errorf("partition %d: acknowledged %d:%s lost (read %d records)", p, off, val, len(got))
			}
		}
	}
	return nil
}

// nopTB lets values run outside a test goroutine; a decode failure shows
// up as a mismatch instead.
type nopTB struct{ testing.TB }

func (nopTB) Helper()               {}
func (nopTB) Errorf(string, ...any) {}
func (nopTB) FailNow()              {}

// TestWriterCrash produces from several goroutines through a store that
// fails and loses Put answers, with the control plane on a crashable FS.
// At crash points before every control-plane write and around every Put,
// the control plane is reopened on a crash image: every acknowledged
// record is there at its offset, offsets have no gap, and no value sits at
// two offsets.
func TestWriterCrash(t *testing.T) {
	seed := testseed.Seed(t, 29)
	ctx := context.Background()
	const partitions = 3
	memFS := vfs.NewCrashableMem()
	store := mem.New(mem.Options{Seed: seed, Faults: mem.FaultConfig{Put: mem.Faults{ErrorRate: 0.15, LostResponseRate: 0.15}}})
	clock := newFakeClock()
	clock.fireAtOnceBelow = 5 * time.Second // upload backoffs, not the 30 s deadline
	topic := wal.TopicID{7}
	model := &ackModel{acked: map[int32]map[int64]string{}}
	rng := rand.New(rand.NewPCG(seed, 1))
	rec := crashtest.New(2, func(point int, what string) error {
		acked := model.snapshot() // before the image: these must be in it
		clone := memFS.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(100), RNG: rng})
		cp, err := pebblecp.Open(clone, "cp", pebblecp.Options{Now: clock.Now})
		if err != nil {
			return err
		}
		defer cp.Close()
		return checkReadBack(ctx, store, cp, topic, partitions, acked)
	})
	cp, err := pebblecp.Open(rec.Wrap(memFS), "cp", pebblecp.Options{Now: clock.Now})
	require.NoError(t, err)
	defer cp.Close()
	require.NoError(t, cp.CreatePartitions(ctx, []wal.CreatePartitionsRequest{{TopicID: topic, Topic: "t", NumPartitions: partitions}}))
	w, err := wal.NewWriter(wal.WriterOptions{Store: pointStore{store, rec}, ControlPlane: cp, Clock: clock, MaxBytes: 1, UploadConcurrency: 3})
	require.NoError(t, err)

	rec.Arm(true)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range 12 {
				var reqs []wal.ProduceRequest
				for p := range int32(partitions) {
					if (g+c+int(p))%2 == 0 {
						reqs = append(reqs, wal.ProduceRequest{Partition: wal.TopicIDPartition{TopicID: topic, Partition: p},
							Batches: batch(t, 1+(c%3), fmt.Sprintf("g%d-c%d-p%d", g, c, p))})
					}
				}
				res, err := w.Produce(ctx, reqs)
				if err != nil {
					continue
				}
				for i, r := range res {
					if r.Err != nil || r.Batches[0].Err != nil {
						continue
					}
					var recs []string
					for _, v := range values(nopTB{}, reqs[i].Batches) {
						off, val, _ := strings.Cut(v, ":")
						var d int64
						_, _ = fmt.Sscan(off, &d)
						recs = append(recs, fmt.Sprintf("%d:%s", r.Batches[0].BaseOffset+d, val))
					}
					model.record(reqs[i].Partition.Partition, recs)
				}
			}
		}()
	}
	wg.Wait()
	require.NoError(t, w.Close())
	rec.Arm(false)
	require.NoError(t, rec.Err())
	require.NoError(t, model.dup)
	require.NoError(t, checkReadBack(ctx, store, cp, topic, partitions, model.snapshot()))
	require.Greater(t, rec.Checked(), 10)
	m := w.Metrics()
	require.Positive(t, m.ObjectsCommitted)
	t.Logf("%d crash points checked; %d objects committed, %d commit errors", rec.Checked(), m.ObjectsCommitted, m.CommitErrors)
}
