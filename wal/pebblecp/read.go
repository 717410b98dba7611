package pebblecp

import (
	"context"
	"fmt"
	"math"

	"github.com/cockroachdb/pebble/v2"

	"github.com/tierlog/tierlog/wal"
)

func unknown(tp wal.TopicIDPartition) error {
	return &wal.PartitionError{Partition: tp, Err: wal.ErrUnknownTopicOrPartition}
}

func outOfRange(tp wal.TopicIDPartition, offset int64, row *logRow) error {
	return &wal.PartitionError{Partition: tp, Err: wal.ErrOffsetOutOfRange,
		Detail: fmt.Sprintf("offset %d outside [%d, %d]", offset, row.LogStartOffset, row.HighWatermark)}
}

// lookupLog reads a row, treating a negative partition or the zero topic
// id as unknown.
func lookupLog(r pebble.Reader, tp wal.TopicIDPartition) (logRow, bool, error) {
	if tp.Partition < 0 || tp.TopicID.IsZero() {
		return logRow{}, false, nil
	}
	return readLog(r, tp)
}

// FindBatches implements wal.ControlPlane.
func (cp *ControlPlane) FindBatches(ctx context.Context, req wal.FindBatchesRequest) ([]wal.FindBatchesResult, error) {
	budget := wal.NewFindBudget(req.MaxBytes)
	// One scan state for the whole find: the partitions' rows of one
	// object share its key, and one scratch slice splits every row.
	f := &finder{scan: batchScan{aliasRun: true}}
	return viewEach(ctx, cp, req.Partitions, func(r pebble.Reader, p wal.FindPartition) (wal.FindBatchesResult, error) {
		return f.findPartition(r, p, budget, req.MaxBatchesPerPartition)
	})
}

// finder is one FindBatches call's shared decoding state (its partitions
// are answered one after the other).
type finder struct {
	scan    batchScan
	scratch []wal.BatchInfo
}

func (f *finder) findPartition(r pebble.Reader, p wal.FindPartition, budget *wal.FindBudget, maxBatches int) (wal.FindBatchesResult, error) {
	row, found, err := lookupLog(r, p.Partition)
	if err != nil {
		return wal.FindBatchesResult{}, err
	}
	if !found {
		return wal.FindBatchesResult{Err: unknown(p.Partition), LogStartOffset: -1, HighWatermark: -1}, nil
	}
	res := wal.FindBatchesResult{LogStartOffset: row.LogStartOffset, HighWatermark: row.HighWatermark}
	if p.Offset < row.LogStartOffset || p.Offset > row.HighWatermark {
		res.Err = outOfRange(p.Partition, p.Offset, &row)
		return res, nil
	}
	res.Batches = []wal.BatchInfo{}
	if p.Offset == row.HighWatermark {
		return res, nil
	}
	var partBytes int64
	err = eachBatchScan(r, p.Partition, p.Offset, -1, &f.scan, func(last int64, b *batchRow) (bool, error) {
		var err error
		f.scratch, err = wal.AppendSplitRun(f.scratch[:0], batchInfo(last, b), b.Run)
		if err != nil {
			return false, err
		}
		for _, bi := range f.scratch {
			if bi.LastOffset < p.Offset {
				continue // a run's batches before the requested offset
			}
			if maxBatches > 0 && len(res.Batches) >= maxBatches {
				return false, nil
			}
			if !budget.Admit(partBytes, p.MaxPartitionBytes, bi.Size) {
				return false, nil
			}
			partBytes += bi.Size
			res.Batches = append(res.Batches, bi)
		}
		return true, nil
	})
	return res, err
}

// batchInfo is the row as one BatchInfo: a run's whole coordinates.
func batchInfo(last int64, b *batchRow) wal.BatchInfo {
	return wal.BatchInfo{ObjectKey: b.ObjectKey, ByteOffset: b.ByteOffset, Size: b.Size,
		BaseOffset: b.BaseOffset, LastOffset: last, MaxTimestamp: b.MaxTimestamp,
		TimestampType: b.TimestampType, LogAppendTime: b.LogAppendTime, Binding: b.Binding}
}

// rowBatches returns the batches of a row (wal.SplitRun).
func rowBatches(last int64, b *batchRow) ([]wal.BatchInfo, error) {
	return wal.SplitRun(batchInfo(last, b), b.Run)
}

// ListOffsets implements wal.ControlPlane.
func (cp *ControlPlane) ListOffsets(ctx context.Context, reqs []wal.ListOffsetsRequest) ([]wal.ListOffsetsResult, error) {
	return viewEach(ctx, cp, reqs, listOffset)
}

var noOffset = wal.ListOffsetsResult{Offset: -1, Timestamp: -1}

func listOffset(r pebble.Reader, q wal.ListOffsetsRequest) (wal.ListOffsetsResult, error) {
	row, found, err := lookupLog(r, q.Partition)
	if err != nil {
		return wal.ListOffsetsResult{}, err
	}
	if !found {
		return wal.ListOffsetsResult{Err: unknown(q.Partition), Offset: -1, Timestamp: -1}, nil
	}
	if res, ok := wal.FixedListOffset(q, row); ok {
		return res, nil
	}
	if q.Timestamp == wal.MaxTimestamp {
		return maxTimestamp(r, q.Partition)
	}
	res := noOffset
	err = eachBatch(r, q.Partition, 0, -1, func(last int64, b *batchRow) (bool, error) {
		// A run's max timestamp is its batches' largest.
		if batchInfo(last, b).EffectiveTimestamp() < q.Timestamp {
			return true, nil
		}
		batches, err := rowBatches(last, b)
		if err == nil {
			res, err = wal.ListOffsetInRow(q.Timestamp, batches, row.LogStartOffset)
		}
		return false, err
	})
	return res, err
}

// maxTimestamp answers MAX_TIMESTAMP: the largest effective timestamp and
// the last offset of the first batch that has it.
func maxTimestamp(r pebble.Reader, tp wal.TopicIDPartition) (wal.ListOffsetsResult, error) {
	res, best := noOffset, int64(math.MinInt64)
	err := eachBatch(r, tp, 0, -1, func(last int64, b *batchRow) (bool, error) {
		if ts := batchInfo(last, b).EffectiveTimestamp(); ts > best {
			batches, err := rowBatches(last, b)
			if err == nil {
				res, err = wal.ListOffsetInRow(wal.MaxTimestamp, batches, 0)
			}
			if err != nil {
				return false, err
			}
			best = ts
		}
		return true, nil
	})
	return res, err
}

// LogInfo implements wal.ControlPlane.
func (cp *ControlPlane) LogInfo(ctx context.Context, tp wal.TopicIDPartition) (wal.LogInfo, error) {
	var info wal.LogInfo
	err := cp.viewKey(ctx, func(r pebble.Reader) error {
		row, found, err := lookupLog(r, tp)
		if err != nil {
			return err
		}
		if !found {
			return unknown(tp)
		}
		info = row
		return nil
	})
	return info, err
}

// ProducerStates implements wal.ControlPlane.
func (cp *ControlPlane) ProducerStates(ctx context.Context, tp wal.TopicIDPartition) ([]wal.ProducerState, error) {
	var out []wal.ProducerState
	err := cp.view(ctx, func(r pebble.Reader) error {
		if _, found, err := lookupLog(r, tp); err != nil || !found {
			if err == nil {
				err = unknown(tp)
			}
			return err
		}
		p := partitionPrefix(tagProducer, tp)
		it, err := r.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
		if err != nil {
			return fmt.Errorf("pebblecp: iterate producers of %s: %w", tp, err)
		}
		defer it.Close()
		for ok := it.First(); ok; ok = it.Next() {
			st, err := decodeProducer(it.Key(), it.Value())
			if err != nil {
				return err
			}
			out = append(out, st)
		}
		return nil
	})
	return out, err
}
