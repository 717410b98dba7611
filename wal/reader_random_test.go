package wal_test

import (
	"context"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tierlog/tierlog/internal/harness/walcheck"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/wal"
	"github.com/tierlog/tierlog/wal/pebblecp"
)

// TestReaderRandomDamage reads random objects through a wal.Reader after
// random damage to the store and random lies in FindBatches' answers, and
// checks every answer against what was committed (walcheck.CheckFetch):
// never another partition's, batch's or object version's bytes, the
// intact batches always served, typed errors only. Iterations and seed:
// TIERLOG_WALCHECK_ITERS, TIERLOG_WALCHECK_SEED.
//
// "model" commits into walcheck.ModelPlane; "pebblecp" into the embedded
// control plane, once it returns the bindings it was committed (it skips
// until then).
func TestReaderRandomDamage(t *testing.T) {
	iters := 1000
	if testing.Short() {
		iters = 300
	}
	t.Run("model", func(t *testing.T) {
		walcheck.Run(t, walcheck.Options{Seed: 1, Iterations: iters,
			NewPlane: func(testing.TB) wal.ControlPlane { return walcheck.NewModelPlane() },
			Fetch:    walcheck.ReadFetch})
	})
	t.Run("pebblecp", func(t *testing.T) {
		open := func(t testing.TB) wal.ControlPlane {
			cp, err := pebblecp.Open(vfs.NewMem(), "cp", pebblecp.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cp.Close() })
			return cp
		}
		if !storesBindings(t, open(t)) {
			t.Skip("pebblecp does not return BatchInfo.Binding: the binding check cannot run on it")
		}
		walcheck.Run(t, walcheck.Options{Seed: 1_000_000, Iterations: iters / 4, NewPlane: open, Fetch: walcheck.ReadFetch})
	})
}

// storesBindings commits one batch into cp and reports whether
// FindBatches returns its binding.
func storesBindings(t *testing.T, cp wal.ControlPlane) bool {
	t.Helper()
	ctx := context.Background()
	tp := wal.TopicIDPartition{TopicID: wal.TopicID{9}}
	if err := cp.CreatePartitions(ctx, []wal.CreatePartitionsRequest{{TopicID: tp.TopicID, Topic: "t", NumPartitions: 1}}); err != nil {
		t.Fatal(err)
	}
	b := record.NewBuilder(record.DefaultBuilderOptions())
	b.Add(1, nil, []byte("v"))
	buf, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	var o wal.ObjectBuilder
	if err := o.Add(tp, buf); err != nil {
		t.Fatal(err)
	}
	data, batches := o.Build()
	if _, err := cp.CommitFile(ctx, wal.CommitFileRequest{ObjectKey: "probe", ObjectSize: int64(len(data)), Batches: batches}); err != nil {
		t.Fatal(err)
	}
	res, err := cp.FindBatches(ctx, wal.FindBatchesRequest{MaxBytes: 1 << 20,
		Partitions: []wal.FindPartition{{Partition: tp, MaxPartitionBytes: 1 << 20}}})
	if err != nil || res[0].Err != nil || len(res[0].Batches) != 1 {
		t.Fatalf("probe: %v %+v", err, res)
	}
	return res[0].Batches[0].Binding == batches[0].Binding()
}
