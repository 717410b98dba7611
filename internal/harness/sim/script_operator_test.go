package sim

import (
	"fmt"

	"github.com/cockroachdb/datadriven"

	"github.com/tierlog/tierlog/tierstate"
)

// Script commands for the controller's elections (KIP-966) and the
// operator's recovery of a phase-1 partition
// (github.com/aiven/inkless/pull/855 and /pull/871):
//
//	new-kraft [elr|no-elr] [min-isr=N] [unclean] [brokers=N] [seed=N] [segment-bytes=N]
//	stop broker=N [lose-tail-from=N]     restart-unclean broker=N
//	wipe-disk broker=N                   kip966
//	log-dir-failure broker=N             rebuild broker=N
//	describe [broker=N]                  elect-replica broker=N
//	start-phase-2 [accept-data-loss]     reseal seal=N
//	repair                               elect-leaders type=preferred|unclean
//	rebalance
func init() {
	registerScriptCommand("new-kraft", func(e *scriptEnv, d *datadriven.TestData) string {
		opts := Options{Seed: 1}
		d.MaybeScanArgs(e.t, "brokers", &opts.Brokers)
		d.MaybeScanArgs(e.t, "seed", &opts.Seed)
		d.MaybeScanArgs(e.t, "segment-bytes", &opts.SegmentBytes)
		d.MaybeScanArgs(e.t, "min-isr", &opts.MinInsyncReplicas)
		// KIP-966 is on by default; `elr` says so explicitly, `no-elr`
		// turns it off.
		opts.DisableEligibleLeaderReplicas = d.HasArg("no-elr")
		opts.UncleanLeaderElection = d.HasArg("unclean")
		// The runner built a default cluster for the first command that
		// is not `new`; replace it (no step has run on it).
		if e.c != nil && e.c.Step() == 0 {
			_ = e.c.Close()
			e.c = nil
		}
		e.newCluster(opts)
		return e.stateString() + e.kip966String()
	})
	registerScriptCommand("describe", func(e *scriptEnv, d *datadriven.TestData) string {
		if d.HasArg("broker") || d.HasArg("b") {
			_, err := e.c.Describe(scriptBroker(e.t, d))
			return e.result(err)
		}
		_, err := e.c.DescribeAll()
		return e.result(err)
	})
	registerScriptCommand("kip966", func(e *scriptEnv, _ *datadriven.TestData) string { return e.kip966String() })
}

// kip966String is one row of KIP-966's table: ISR, ELR, last known ELR,
// leader and its recovery state.
func (e *scriptEnv) kip966String() string {
	r := e.c.ctrl.rec
	leader := fmt.Sprint(r.Leader)
	if r.Leader < 0 {
		leader = "none"
	}
	state := "RECOVERED"
	if r.Recovering {
		state = "RECOVERING"
	}
	return fmt.Sprintf("isr=%v elr=%v last-known-elr=%v leader=%s %s\n", r.ISR, r.ELR, r.LastKnownELR, leader, state)
}

func init() {
	// rebuild runs broker N's rebuild from remote storage once, as its
	// consolidation fetcher does on OFFSET_MOVED_TO_TIERED_STORAGE
	// (tierstate.Machine through the broker's consolidation endpoint),
	// and prints the result or the error the fetcher would only log.
	registerScriptCommand("rebuild", func(e *scriptEnv, d *datadriven.TestData) string {
		b := e.c.Broker(scriptBroker(e.t, d))
		l := b.Log()
		if l == nil {
			return "no log\n"
		}
		m, err := tierstate.NewMachine(tierstate.MachineOptions{Leader: b.endpoint, Metadata: e.c.meta, Data: e.c.storage})
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		res, err := m.Rebuild(e.c.ctx, tierstate.RebuildRequest{Partition: Partition, Log: l, State: e.c.ctrl.rec.State,
			CurrentLeaderEpoch: e.c.ctrl.rec.LeaderEpoch, LeaderLogStartOffset: l.LogStartOffset()})
		if err != nil {
			return fmt.Sprintf("%s\nerror: %v\n", res, err)
		}
		return res.String() + "\n"
	})
}
