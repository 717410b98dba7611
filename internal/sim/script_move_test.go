package sim

import (
	"fmt"

	"github.com/cockroachdb/datadriven"
)

// Script commands for a log directory move (move.go):
//
//	start-move broker=N   move-copy broker=N   promote-future broker=N
//	future broker=N
func init() {
	registerScriptCommand("start-move", brokerAction((*Cluster).StartMove))
	registerScriptCommand("move-copy", brokerAction((*Cluster).MoveCopy))
	registerScriptCommand("promote-future", brokerAction((*Cluster).PromoteFuture))
}

func init() {
	// future broker=N prints broker N's future log and whether the move
	// fetcher holds the partition.
	registerScriptCommand("future", func(e *scriptEnv, d *datadriven.TestData) string {
		id := scriptBroker(e.t, d)
		b := e.c.Broker(id)
		if b == nil || !b.Up() {
			return fmt.Sprintf("b%d down\n", id)
		}
		if b.future == nil {
			_, err := b.fs.Stat(b.otherDir())
			return fmt.Sprintf("b%d no future log (%s on disk: %t); current log in %s\n", id, b.otherDir(), err == nil,
				b.currentDir())
		}
		f := b.future
		return fmt.Sprintf("b%d future log in %s: log-start=%d leo=%d epochs=%s; move fetcher: %t\n", id, b.otherDir(),
			f.LogStartOffset(), f.LogEndOffset(), formatEpochs(f.EpochEntries()), b.moving)
	})
}
