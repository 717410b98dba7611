package pgcp_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tierlog/tierlog/internal/harness/pgtest"
	"github.com/tierlog/tierlog/internal/harness/testseed"
	"github.com/tierlog/tierlog/wal"
	"github.com/tierlog/tierlog/wal/controlplanetest"
	"github.com/tierlog/tierlog/wal/pgcp"
)

func TestMain(m *testing.M) {
	if helperMain() {
		return
	}
	os.Exit(pgtest.Main(m))
}

var schemaSeq atomic.Uint64

func databaseURL(t testing.TB) string {
	t.Helper()
	return pgtest.PackageDatabase(t)
}

// openFresh opens a control plane on a schema no other test uses.
func openFresh(t testing.TB, now func() time.Time) *pgcp.ControlPlane {
	t.Helper()
	schema := fmt.Sprintf("t%d", schemaSeq.Add(1))
	cp, err := pgcp.Open(context.Background(), pgcp.Options{ConnString: databaseURL(t), Schema: schema, Now: now, MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

func TestConformance(t *testing.T) {
	controlplanetest.Run(t, func(t *testing.T, now func() time.Time) wal.ControlPlane {
		return openFresh(t, now)
	}, controlplanetest.Options{Seed: testseed.Seed(t, 1)})
}

// TestConcurrentCommits: many goroutines commit to shared partitions
// through the commit queue (see controlplanetest.ConcurrentCommits).
func TestConcurrentCommits(t *testing.T) {
	cp := openFresh(t, time.Now)
	defer cp.Close()
	controlplanetest.ConcurrentCommits(t, cp, controlplanetest.ConcurrentOptions{})
}

// TestGroupCommitFailingStep: see controlplanetest.GroupCommitFailingStep.
func TestGroupCommitFailingStep(t *testing.T) {
	cp := openFresh(t, time.Now)
	defer cp.Close()
	controlplanetest.GroupCommitFailingStep(t, cp, cp.CommitGroup)
}

// TestGroupCommitSeesProducerState: the same idempotent batch in two
// objects of one group (a producer's retry sent twice at once): the
// second object sees the first's producer state and answers
// DUPLICATE_SEQUENCE with the first's offset.
func TestGroupCommitSeesProducerState(t *testing.T) {
	cp := openFresh(t, time.Now)
	defer cp.Close()
	ctx := context.Background()
	tp := wal.TopicIDPartition{TopicID: wal.TopicID{0x1D, 0xE5}}
	if err := cp.CreatePartitions(ctx, []wal.CreatePartitionsRequest{{TopicID: tp.TopicID, Topic: "idem", NumPartitions: 1}}); err != nil {
		t.Fatal(err)
	}
	b := wal.CommitBatch{Partition: tp, Size: 5, LastOffset: 2, RecordCount: 3, ProducerID: 7, ProducerEpoch: 0, BaseSequence: 0}
	res, errs := cp.CommitGroup(ctx, []wal.CommitFileRequest{controlplanetest.GroupRequest("idem/1", b), controlplanetest.GroupRequest("idem/2", b)})
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := res[0].Batches[0].Err; err != nil {
		t.Fatal(err)
	}
	if err := res[1].Batches[0].Err; !errors.Is(err, wal.ErrDuplicateSequence) || res[1].Batches[0].BaseOffset != res[0].Batches[0].BaseOffset {
		t.Fatalf("second copy: %v at %d, want a duplicate of offset %d", err, res[1].Batches[0].BaseOffset, res[0].Batches[0].BaseOffset)
	}
	info, err := cp.LogInfo(ctx, tp)
	if err != nil || info.HighWatermark != 3 {
		t.Fatalf("high watermark %d (%v), want 3: the sequence assigned once", info.HighWatermark, err)
	}
}
