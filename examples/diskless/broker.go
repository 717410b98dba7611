package main

import (
	"context"
	"fmt"

	"github.com/tierlog/tierlog/internal/harness/demo"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/replica"
)

// logManager stands in for one broker's log manager: its log directory.
type logManager struct {
	c      *demo.Cluster
	broker string
}

func (m logManager) CreateLog(context.Context, remote.TopicIDPartition) (replica.Log, error) {
	return m.c.OpenLog(m.broker)
}

func (logManager) DeleteLog(_ context.Context, _ remote.TopicIDPartition, l replica.Log) error {
	return l.Delete()
}

func (logManager) DeleteFutureLog(context.Context, remote.TopicIDPartition) error { return nil }

// noFetcher stands in for the broker's fetcher managers: the example runs
// the consolidation fetcher by hand (consolidate.Fetcher.Step) and C's
// classic fetch with demo.Fetcher.
type noFetcher struct{}

func (noFetcher) AddPartition(context.Context, replica.ConsolidationStart) error { return nil }

func (noFetcher) RemovePartition(context.Context, remote.TopicIDPartition) error { return nil }

type noClassicFetcher struct{ noFetcher }

func (noClassicFetcher) AddPartition(context.Context, remote.TopicIDPartition, int32, int64) error {
	return nil
}

// failedStep returns the error of a switch step the driver's last call
// reported (a failed step leaves the delta applied; the example stops).
func failedStep(drv *replica.Replica) error {
	if m := drv.Metrics(); m.SwitchFailures > 0 {
		return fmt.Errorf("a switch step failed (%d)", m.SwitchFailures)
	}
	return nil
}

// openTxns is the producers of l with an undecided transaction.
func openTxns(l *log.UnifiedLog) []log.ProducerState {
	var open []log.ProducerState
	for _, p := range l.ActiveProducers() {
		if p.CurrentTxnFirstOffset >= 0 {
			open = append(open, p)
		}
	}
	return open
}
