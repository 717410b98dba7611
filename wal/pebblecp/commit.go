package pebblecp

import (
	"context"
	"fmt"
	"math"

	"github.com/tierlog/tierlog/wal"
)

// CommitFile implements wal.ControlPlane.
func (cp *ControlPlane) CommitFile(ctx context.Context, req wal.CommitFileRequest) (wal.CommitFileResult, error) {
	if err := req.Validate(); err != nil {
		return wal.CommitFileResult{}, err
	}
	digest := req.Digest()
	var res wal.CommitFileResult
	err := cp.update(ctx, func(tx *txn) error {
		f, err := tx.file(req.ObjectKey)
		if err != nil {
			return err
		}
		if f.found {
			// A retry answers as the first commit did; anything else
			// under this key is a different object.
			if f.row.Reason == reasonOrphan {
				return errReaped(req.ObjectKey)
			}
			if !req.MatchesDigest(f.row.Digest) {
				return fmt.Errorf("%w: %q is already registered with other content", wal.ErrObjectKeyReused, req.ObjectKey)
			}
			res = resultsOf(&req, &f.row)
			return nil
		}
		// An orphan reaped and forgotten keeps its tombstone: without it
		// a writer slower than the reaper would register batches in an
		// object the cleaner deleted.
		if reaped, err := get(tx.b, tombstoneKey(req.ObjectKey), func([]byte) error { return nil }); err != nil || reaped {
			if err != nil {
				return err
			}
			return errReaped(req.ObjectKey)
		}
		f.found, f.dirty = true, true
		f.row = fileRow{State: fileUploaded, Reason: reasonProduce, BrokerID: req.BrokerID,
			BrokerEpoch: req.BrokerEpoch, Size: req.ObjectSize, CommittedAt: tx.nowMs, Digest: digest}
		for i := range req.Batches {
			r, err := commitBatch(tx, &req.Batches[i], req.ObjectKey, f)
			if err != nil {
				return err
			}
			f.row.Results = append(f.row.Results, r)
		}
		if f.row.LiveBatches == 0 {
			f.row.State, f.row.MarkedAt = fileDeleting, tx.nowMs
		}
		// The reservation, if the writer made one, is confirmed.
		if err := tx.b.Delete(reservationKey(req.ObjectKey), nil); err != nil {
			return err
		}
		res = resultsOf(&req, &f.row)
		return nil
	})
	if err != nil {
		return wal.CommitFileResult{}, err
	}
	return res, nil
}

// errReaped is CommitFile's answer for a key reaped as an orphan.
func errReaped(key string) error {
	return fmt.Errorf("%w (%w): %q: its reservation expired before the commit", wal.ErrObjectReaped, wal.ErrObjectKeyReused, key)
}

// commitBatch decides one batch: unknown partition, the producer check,
// or accept at the partition's high watermark.
func commitBatch(tx *txn, b *wal.CommitBatch, objectKey string, f *fileEntry) (storedResult, error) {
	l, known, err := tx.knownLog(b.Partition)
	if err != nil {
		return storedResult{}, err
	}
	if !known {
		return wal.UnknownPartitionResult(), nil
	}
	assigned := l.row.HighWatermark
	if assigned > math.MaxInt64-b.OffsetCount() {
		return storedResult{}, fmt.Errorf("%w: pebblecp: partition %s: %d offsets after the high watermark %d overflow",
			wal.ErrInvalidArgument, b.Partition, b.OffsetCount(), assigned)
	}
	appendTime := tx.nowMs
	if b.Idempotent() {
		st, err := tx.producer(b.Partition, b.ProducerID)
		if err != nil {
			return storedResult{}, err
		}
		c := wal.CheckSequence(st, b.ProducerEpoch, b.BaseSequence, b.LastSequence())
		if c.Err != nil {
			return wal.RejectedResult(c, l.row.LogStartOffset), nil
		}
		ts := b.MaxTimestamp
		if b.TimestampType == wal.LogAppendTime {
			ts = appendTime
		}
		tx.setProducer(b.Partition, wal.AcceptSequence(st, b.ProducerID, b.ProducerEpoch, wal.ProducerBatch{
			BaseSequence: b.BaseSequence, LastSequence: b.LastSequence(), AssignedOffset: assigned, Timestamp: ts}))
	}
	l.row.HighWatermark += b.OffsetCount()
	l.row.ByteSize += b.Size
	l.dirty = true
	row := batchRow{BaseOffset: assigned, ObjectKey: objectKey, ByteOffset: b.ByteOffset, Size: b.Size,
		MaxTimestamp: b.MaxTimestamp, LogAppendTime: appendTime, TimestampType: b.TimestampType, Binding: b.Binding()}
	if err := tx.addBatch(b.Partition, l.row.HighWatermark-1, &row, f); err != nil {
		return storedResult{}, err
	}
	return storedResult{Status: wal.BatchAccepted, BaseOffset: assigned, LogAppendTime: appendTime,
		LogStartOffset: l.row.LogStartOffset}, nil
}

// resultsOf turns the stored results into the call's answer.
func resultsOf(req *wal.CommitFileRequest, f *fileRow) wal.CommitFileResult {
	return wal.CommitAnswer(req, f.Results)
}
