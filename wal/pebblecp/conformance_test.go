package pebblecp_test

import (
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tierlog/tierlog/internal/harness/testseed"
	"github.com/tierlog/tierlog/wal"
	"github.com/tierlog/tierlog/wal/controlplanetest"
	"github.com/tierlog/tierlog/wal/pebblecp"
)

func TestConformance(t *testing.T) {
	controlplanetest.Run(t, func(t *testing.T, now func() time.Time) wal.ControlPlane {
		cp, err := pebblecp.Open(vfs.NewMem(), "cp", pebblecp.Options{Now: now})
		if err != nil {
			t.Fatal(err)
		}
		return cp
	}, controlplanetest.Options{Seed: testseed.Seed(t, 1)})
}
