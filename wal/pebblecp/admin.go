package pebblecp

import (
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/tierlog/tierlog/wal"
)

// CreatePartitions implements wal.ControlPlane.
func (cp *ControlPlane) CreatePartitions(ctx context.Context, topics []wal.CreatePartitionsRequest) error {
	for _, t := range topics {
		if t.TopicID.IsZero() || t.NumPartitions < 0 || len(t.Topic) > 0xffff {
			return fmt.Errorf("%w: pebblecp: create topic %q (%s) with %d partitions",
				wal.ErrInvalidArgument, t.Topic, t.TopicID, t.NumPartitions)
		}
	}
	return cp.update(ctx, func(tx *txn) error {
		for _, t := range topics {
			for p := int32(0); p < t.NumPartitions; p++ {
				l, err := tx.log(wal.TopicIDPartition{TopicID: t.TopicID, Partition: p})
				if err != nil {
					return err
				}
				if !l.found {
					l.found, l.dirty = true, true
					l.row = logRow{Topic: t.Topic, CrossTierLogStartOffset: -1}
				}
			}
		}
		return nil
	})
}

// DeleteTopics implements wal.ControlPlane.
func (cp *ControlPlane) DeleteTopics(ctx context.Context, topicIDs []wal.TopicID) error {
	return cp.update(ctx, func(tx *txn) error {
		for _, id := range topicIDs {
			if err := deleteTopic(tx, id); err != nil {
				return err
			}
		}
		return nil
	})
}

func deleteTopic(tx *txn, id wal.TopicID) error {
	lp := topicPrefix(tagLog, id)
	it, err := tx.b.NewIter(&pebble.IterOptions{LowerBound: lp, UpperBound: prefixEnd(lp)})
	if err != nil {
		return fmt.Errorf("pebblecp: iterate partitions of %s: %w", id, err)
	}
	var parts []wal.TopicIDPartition
	for ok := it.First(); ok; ok = it.Next() {
		tp, ok := keyPartition(it.Key())
		if !ok || len(it.Key()) != 21 {
			_ = it.Close()
			return &CorruptionError{Key: append([]byte(nil), it.Key()...), Reason: "bad log key"}
		}
		parts = append(parts, tp)
	}
	if err := it.Close(); err != nil {
		return err
	}
	for _, tp := range parts {
		if err := deleteBatchesBelow(tx, tp, -1, nil); err != nil {
			return err
		}
		if err := tx.dropPartitionProducers(tp); err != nil {
			return err
		}
		delete(tx.logs, tp)
		if err := tx.b.Delete(logKey(tp), nil); err != nil {
			return err
		}
	}
	return nil
}

// deleteBatchesBelow deletes the batches of tp with lastOffset < end (end
// < 0: all), adding their bytes to *bytes if non-nil. A run holding end
// after its first batch is cut there first (cutRunAt), so the batch
// holding end stays whole with the ones after it.
func deleteBatchesBelow(tx *txn, tp wal.TopicIDPartition, end int64, bytes *int64) error {
	if end >= 0 {
		if err := cutRunAt(tx, tp, end); err != nil {
			return err
		}
	}
	type victim struct {
		last int64
		row  batchRow
	}
	var vs []victim
	err := eachBatch(tx.b, tp, 0, end, func(last int64, b *batchRow) (bool, error) {
		vs = append(vs, victim{last, *b})
		return true, nil
	})
	if err != nil {
		return err
	}
	for i := range vs {
		if err := tx.deleteBatch(tp, vs[i].last, &vs[i].row); err != nil {
			return err
		}
		if bytes != nil {
			*bytes += vs[i].row.Size
		}
	}
	return nil
}

// cutRunAt makes the batch of tp that holds offset start a row: a run
// row that holds offset after its first batch becomes two rows
// (wal.CutRun), the batches before it under their last offset, the rest
// under the run's own; its object counts one more live row. Nothing to
// cut: no write.
func cutRunAt(tx *txn, tp wal.TopicIDPartition, offset int64) error {
	var last int64
	var row *batchRow
	err := eachBatch(tx.b, tp, offset, -1, func(l int64, b *batchRow) (bool, error) {
		last, row = l, b
		return false, nil
	})
	if err != nil || row == nil || row.Run == nil {
		return err
	}
	cut, ok, err := wal.CutRun(batchInfo(last, row), row.Run, offset)
	if err != nil || !ok {
		return err
	}
	f, err := tx.file(row.ObjectKey)
	if err != nil {
		return err
	}
	if !f.found || f.row.LiveBatches <= 0 {
		return &CorruptionError{Key: batchKey(tp, last),
			Reason: fmt.Sprintf("run in object %q, which has no live batch on record", row.ObjectKey)}
	}
	if err := tx.b.Set(batchKey(tp, last), encodeBatch(rowOf(cut.From, cut.FromRun)), nil); err != nil {
		return err
	}
	return tx.addBatch(tp, cut.Before.LastOffset, rowOf(cut.Before, cut.BeforeRun), f)
}

// firstBatchBase returns the base offset of tp's first batch as this
// call sees it.
func firstBatchBase(tx *txn, tp wal.TopicIDPartition) (int64, bool, error) {
	base, found := int64(0), false
	err := eachBatch(tx.b, tp, 0, -1, func(_ int64, b *batchRow) (bool, error) {
		base, found = b.BaseOffset, true
		return false, nil
	})
	return base, found, err
}

// DeleteRecords implements wal.ControlPlane.
func (cp *ControlPlane) DeleteRecords(ctx context.Context, reqs []wal.DeleteRecordsRequest) ([]wal.DeleteRecordsResult, error) {
	return updateEach(ctx, cp, reqs, deleteRecords)
}

func deleteRecords(tx *txn, q wal.DeleteRecordsRequest) (wal.DeleteRecordsResult, error) {
	l, known, err := tx.knownLog(q.Partition)
	if err != nil {
		return wal.DeleteRecordsResult{}, err
	}
	if !known {
		return wal.DeleteRecordsResult{Err: unknown(q.Partition), LogStartOffset: -1}, nil
	}
	offset := q.Offset
	if offset == -1 {
		offset = l.row.HighWatermark
	}
	if offset < 0 || offset > l.row.HighWatermark {
		return wal.DeleteRecordsResult{Err: outOfRange(q.Partition, q.Offset, &l.row), LogStartOffset: -1}, nil
	}
	if offset <= l.row.LogStartOffset {
		return wal.DeleteRecordsResult{LogStartOffset: l.row.LogStartOffset}, nil
	}
	var freed int64
	if err := deleteBatchesBelow(tx, q.Partition, offset, &freed); err != nil {
		return wal.DeleteRecordsResult{}, err
	}
	l.row.LogStartOffset, l.row.ByteSize, l.dirty = offset, l.row.ByteSize-freed, true
	return wal.DeleteRecordsResult{LogStartOffset: offset}, nil
}

// PruneDisklessLogs implements wal.ControlPlane.
func (cp *ControlPlane) PruneDisklessLogs(ctx context.Context, reqs []wal.PruneRequest) ([]wal.PruneResult, error) {
	return updateEach(ctx, cp, reqs, prune)
}

func prune(tx *txn, q wal.PruneRequest) (wal.PruneResult, error) {
	l, known, err := tx.knownLog(q.Partition)
	if err != nil {
		return wal.PruneResult{}, err
	}
	if !known {
		return wal.PruneResult{Err: unknown(q.Partition), LogStartOffset: -1}, nil
	}
	h := q.HighestOffsetInRemoteStorage
	if h < -1 {
		return wal.PruneResult{LogStartOffset: -1, Err: &wal.PartitionError{Partition: q.Partition,
			Err: wal.ErrInvalidArgument, Detail: fmt.Sprintf("highest offset in remote storage %d", h)}}, nil
	}
	// h at or beyond HW: everything is tiered (and h+1 cannot overflow).
	h = min(h, l.row.HighWatermark)
	var freed int64
	if h >= 0 {
		if err := deleteBatchesBelow(tx, q.Partition, h+1, &freed); err != nil {
			return wal.PruneResult{}, err
		}
	}
	minBase, remain, err := firstBatchBase(tx, q.Partition)
	if err != nil {
		return wal.PruneResult{}, err
	}
	w := wal.PrunedLogStart(l.row.LogStartOffset, l.row.HighWatermark, h, remain, minBase)
	l.row.LogStartOffset, l.row.ByteSize, l.dirty = w, l.row.ByteSize-freed, true
	return wal.PruneResult{LogStartOffset: w}, nil
}

// InitDisklessLog implements wal.ControlPlane.
func (cp *ControlPlane) InitDisklessLog(ctx context.Context, reqs []wal.InitDisklessLogRequest) ([]wal.InitDisklessLogResult, error) {
	return updateEach(ctx, cp, reqs, initLog)
}

func initLog(tx *txn, q wal.InitDisklessLogRequest) (wal.InitDisklessLogResult, error) {
	if err := q.Validate(); err != nil {
		return wal.InitDisklessLogResult{Err: err}, nil
	}
	l, err := tx.log(q.Partition)
	if err != nil {
		return wal.InitDisklessLogResult{}, err
	}
	if l.found {
		// An empty placeholder (created while the switch was under way)
		// must not answer LATEST = 0 for a sealed partition: a seal > 0
		// overwrites it. Any other row stays: the log was initialised.
		placeholder := l.row.HighWatermark == 0 && l.row.DisklessStartOffset == 0 && l.row.ByteSize == 0
		if !placeholder || q.DisklessStartOffset == 0 {
			return wal.InitDisklessLogResult{AlreadyInitialised: true}, nil
		}
		if err := tx.dropPartitionProducers(q.Partition); err != nil {
			return wal.InitDisklessLogResult{}, err
		}
	}
	topic := q.Topic
	if topic == "" {
		topic = l.row.Topic
	}
	l.found, l.dirty = true, true
	l.row = logRow{Topic: topic, LogStartOffset: q.LogStartOffset, HighWatermark: q.DisklessStartOffset,
		DisklessStartOffset: q.DisklessStartOffset, CrossTierLogStartOffset: q.InitialCrossTierLogStart()}
	for _, st := range q.ProducerStates {
		tx.setProducer(q.Partition, st)
	}
	return wal.InitDisklessLogResult{}, nil
}

// RepairDisklessLog implements wal.ControlPlane.
func (cp *ControlPlane) RepairDisklessLog(ctx context.Context, reqs []wal.RepairDisklessLogRequest) ([]wal.RepairDisklessLogResult, error) {
	for _, q := range reqs {
		if q.DisklessStartOffset < 0 {
			return nil, fmt.Errorf("%w: pebblecp: repair %s with diskless start %d", wal.ErrInvalidArgument, q.Partition, q.DisklessStartOffset)
		}
	}
	out := make([]wal.RepairDisklessLogResult, len(reqs))
	err := cp.update(ctx, func(tx *txn) error {
		for i, q := range reqs {
			l, known, err := tx.knownLog(q.Partition)
			if err != nil {
				return err
			}
			if known {
				l.row.DisklessStartOffset, l.dirty = q.DisklessStartOffset, true
				out[i].Found = true
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// AdvanceCrossTierLogStart implements wal.ControlPlane.
func (cp *ControlPlane) AdvanceCrossTierLogStart(ctx context.Context, reqs []wal.AdvanceCrossTierLogStartRequest) ([]wal.AdvanceCrossTierLogStartResult, error) {
	return updateEach(ctx, cp, reqs, advanceCrossTierLogStart)
}

func advanceCrossTierLogStart(tx *txn, q wal.AdvanceCrossTierLogStartRequest) (wal.AdvanceCrossTierLogStartResult, error) {
	l, known, err := tx.knownLog(q.Partition)
	if err != nil {
		return wal.AdvanceCrossTierLogStartResult{}, err
	}
	switch {
	case !known:
		return wal.AdvanceCrossTierLogStartResult{Err: unknown(q.Partition), CrossTierLogStart: -1}, nil
	case q.CrossTierLogStart < 0:
		return wal.AdvanceCrossTierLogStartResult{CrossTierLogStart: -1, Err: &wal.PartitionError{
			Partition: q.Partition, Err: wal.ErrInvalidArgument, Detail: fmt.Sprintf("cross-tier log start %d", q.CrossTierLogStart)}}, nil
	}
	if q.CrossTierLogStart > l.row.CrossTierLogStartOffset {
		l.row.CrossTierLogStartOffset, l.dirty = q.CrossTierLogStart, true
	}
	return wal.AdvanceCrossTierLogStartResult{CrossTierLogStart: l.row.CrossTierLogStartOffset}, nil
}

// EnforceRetention implements wal.ControlPlane.
func (cp *ControlPlane) EnforceRetention(ctx context.Context, reqs []wal.RetentionRequest, maxBatches int) ([]wal.RetentionResult, error) {
	return updateEach(ctx, cp, reqs, func(tx *txn, q wal.RetentionRequest) (wal.RetentionResult, error) {
		return enforceRetention(tx, q, maxBatches)
	})
}

func enforceRetention(tx *txn, q wal.RetentionRequest, maxBatches int) (wal.RetentionResult, error) {
	l, known, err := tx.knownLog(q.Partition)
	if err != nil {
		return wal.RetentionResult{}, err
	}
	if !known {
		return wal.RetentionResult{Err: unknown(q.Partition), LogStartOffset: -1}, nil
	}
	scan := wal.NewRetentionScan(l.row.ByteSize, q.RetentionBytes, q.RetentionMs, tx.nowMs, maxBatches)
	res := wal.RetentionResult{LogStartOffset: l.row.LogStartOffset}
	nextBase, remain := int64(0), false
	err = eachBatch(tx.b, q.Partition, 0, -1, func(last int64, b *batchRow) (bool, error) {
		batches, err := rowBatches(last, b)
		if err != nil {
			return false, err
		}
		for _, bi := range batches {
			if !scan.Delete(bi.Size, bi.EffectiveTimestamp()) {
				nextBase, remain = bi.BaseOffset, true
				return false, nil
			}
			res.DeletedBatches++
			res.DeletedBytes += bi.Size
		}
		return true, nil
	})
	if err != nil {
		return wal.RetentionResult{}, err
	}
	if res.DeletedBatches == 0 {
		return res, nil
	}
	// The victims are the batches below nextBase (all, when none
	// remains); a run holding nextBase is cut there.
	end := int64(-1)
	if remain {
		end = nextBase
	}
	var freed int64
	if err := deleteBatchesBelow(tx, q.Partition, end, &freed); err != nil {
		return wal.RetentionResult{}, err
	}
	if freed != res.DeletedBytes {
		return wal.RetentionResult{}, fmt.Errorf("%w: pebblecp: retention of %s deleted %d bytes, scanned %d",
			wal.ErrCorruption, q.Partition, freed, res.DeletedBytes)
	}
	w := l.row.HighWatermark
	if remain {
		w = nextBase
	}
	l.row.LogStartOffset = max(l.row.LogStartOffset, w)
	l.row.ByteSize -= res.DeletedBytes
	l.dirty = true
	res.LogStartOffset = l.row.LogStartOffset
	return res, nil
}
