package pgcp_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tierlog/tierlog/internal/pgtest"
	"github.com/tierlog/tierlog/internal/testseed"
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
