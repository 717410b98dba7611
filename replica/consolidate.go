package replica

import (
	"context"
	"fmt"

	"github.com/tierlog/tierlog/consolidate"
	"github.com/tierlog/tierlog/remote"
)

// PartitionConsolidator is what NewConsolidationFetcher drives.
// *consolidate.Fetcher satisfies it.
type PartitionConsolidator interface {
	Add(p consolidate.FetcherPartition) error
	Remove(tp remote.TopicIDPartition)
}

var _ PartitionConsolidator = (*consolidate.Fetcher)(nil)

// NewConsolidationFetcher adapts tierlog's consolidation fetcher (or any
// PartitionConsolidator) to the driver's ConsolidationFetcher. The
// fetcher starts each partition at its log end, which is the driver's
// start offset in every case but a born-diskless partition whose log
// ends past its high watermark; the adapter refuses that case rather
// than start elsewhere. consolidate.Fetcher.Remove returns only once no
// fetch for the partition is in progress, so a recreate that follows
// RemovePartition never races a consolidation append.
func NewConsolidationFetcher(c PartitionConsolidator) ConsolidationFetcher {
	return consolidatorAdapter{c}
}

type consolidatorAdapter struct{ c PartitionConsolidator }

func (a consolidatorAdapter) AddPartition(_ context.Context, s ConsolidationStart) error {
	cl, ok := s.Log.(consolidate.ConsolidationLog)
	if !ok {
		return fmt.Errorf("replica: log of %s is not a consolidate.ConsolidationLog: %w", s.Partition, ErrInvalidArgument)
	}
	if leo := s.Log.LogEndOffset(); s.Offset != leo {
		return fmt.Errorf("replica: consolidation of %s at %d, but the fetcher starts at the log end %d: %w",
			s.Partition, s.Offset, leo, ErrInvalidArgument)
	}
	return a.c.Add(consolidate.FetcherPartition{Partition: s.Partition, Log: cl, State: s.State,
		CurrentLeaderEpoch: s.LeaderEpoch})
}

func (a consolidatorAdapter) RemovePartition(_ context.Context, tp remote.TopicIDPartition) error {
	a.c.Remove(tp)
	return nil
}
