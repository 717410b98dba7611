package truncation

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/tierlog/tierlog/epochcache"
)

// TestPlans runs testdata/plans: each `plan` command gives the leader's
// answer and the follower's epoch history (epoch@startOffset) and prints
// the plan; `reset` prints the out-of-range plan.
func TestPlans(t *testing.T) {
	datadriven.RunTest(t, "testdata/plans", func(t *testing.T, d *datadriven.TestData) string {
		switch d.Cmd {
		case "plan":
			var leaderEpoch int32
			var leaderEnd, leo, hw int64
			var history string
			d.ScanArgs(t, "leader-epoch", &leaderEpoch)
			d.ScanArgs(t, "leader-end", &leaderEnd)
			d.ScanArgs(t, "leo", &leo)
			d.ScanArgs(t, "hw", &hw)
			d.MaybeScanArgs(t, "local", &history)
			local := historyFunc(t, history, leo)
			return PlanDivergence(EpochEndOffset{Epoch: leaderEpoch, EndOffset: leaderEnd}, local, leo, hw).String()
		case "reset":
			var leaderEnd, leaderStart, leo int64
			d.ScanArgs(t, "leader-end", &leaderEnd)
			d.ScanArgs(t, "leader-start", &leaderStart)
			d.ScanArgs(t, "leo", &leo)
			return PlanOutOfRangeReset(leaderEnd, leaderStart, leo).String()
		}
		d.Fatalf(t, "unknown command %s", d.Cmd)
		return ""
	})
}

// historyFunc answers OffsetsForLeaderEpoch from an epoch history such as
// "1@0,2@3", through a real in-memory epoch cache (as the log does).
func historyFunc(t *testing.T, history string, leo int64) EndOffsetFunc {
	c := epochcache.New()
	for _, tok := range strings.Split(history, ",") {
		if tok == "" {
			continue
		}
		var e epochcache.Entry
		if _, err := fmt.Sscanf(tok, "%d@%d", &e.Epoch, &e.StartOffset); err != nil {
			t.Fatalf("bad history entry %q", tok)
		}
		if _, err := c.Assign(e.Epoch, e.StartOffset); err != nil {
			t.Fatal(err)
		}
	}
	return func(epoch int32) EpochEndOffset { return c.EndOffsetFor(epoch, leo) }
}
