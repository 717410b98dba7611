package sim

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cockroachdb/datadriven"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/logmanager"
)

// Script commands for a log directory move (move.go):
//
//	start-move broker=N   move-copy broker=N   promote-future broker=N
//	future broker=N
func init() {
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
		f := b.futureLog()
		if f == nil {
			l := b.Log()
			if l == nil {
				return fmt.Sprintf("b%d no future log; no current log\n", id)
			}
			// A future log directory left on the disk (one the log
			// manager renamed for deletion is not).
			names, err := b.fs.List(otherDir(l))
			require.NoError(e.t, err)
			onDisk := slices.ContainsFunc(names, func(n string) bool { return strings.HasSuffix(n, logmanager.FutureDirSuffix) })
			return fmt.Sprintf("b%d no future log (one in %s on disk: %t); current log in %s\n", id, otherDir(l), onDisk,
				b.logDirOf(l))
		}
		return fmt.Sprintf("b%d future log in %s: log-start=%d leo=%d epochs=%s; move fetcher: %t\n", id, b.logDirOf(f),
			f.LogStartOffset(), f.LogEndOffset(), formatEpochs(f.EpochEntries()), b.moving)
	})
}
