package remote

import (
	"context"
	"fmt"
	"io"

	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
)

// FindOffsetByTimestamp answers ListOffsets for a timestamp ts >= 0 from
// the remote tier (Kafka: RemoteLogManager.findOffsetByTimestamp): the
// first record with offset >= startingOffset and timestamp >= ts in the
// finished remote segments below the log's local log start, each segment
// found as Read finds it (the leader epoch the log's cache gives its
// first offset, then SegmentFor, so only segments of the log's lineage
// are searched), from the one holding startingOffset on. A segment whose
// MaxTimestampMs is below ts is skipped without a read; in the others the
// uploaded time index gives where to start, the offset index the
// position, and the batches read are checked as a remote read checks
// them. found is false when no remote record below the local log start
// qualifies: the local segments answer then (log.UnifiedLog.
// FetchOffsetByTimestamp), as Kafka falls back to the local log.
//
// Below a committed seal (Partition.Seal), no record at or above the
// seal is an answer, as Read serves none. Errors: a *ReadRangeError when
// no remote segment holds startingOffset; corrupt remote data wraps
// ErrCorruption.
func (m *Manager) FindOffsetByTimestamp(ctx context.Context, tp TopicIDPartition, ts, startingOffset int64) (log.TimestampAndOffset, bool, error) {
	none := log.TimestampAndOffset{Timestamp: log.NoTimestamp, Offset: base.UndefinedOffset, Epoch: base.UndefinedEpoch}
	if ts < 0 {
		return none, false, fmt.Errorf("%w: find offset by timestamp %d: not a timestamp", ErrInvalidArgument, ts)
	}
	pt, err := m.partition(tp)
	if err != nil {
		return none, false, err
	}
	l := pt.p.Log
	end := l.LocalLogStartOffset()
	if c := pt.readCap.Load(); c != noReadCap && startingOffset < c {
		end = min(end, c)
	}
	if startingOffset >= end {
		return none, false, nil
	}
	epoch, ok := l.EpochForOffset(startingOffset)
	if !ok {
		return none, false, &ReadRangeError{TopicIDPartition: tp, Offset: startingOffset, Epoch: base.UndefinedEpoch}
	}
	seg, ok, err := m.meta.SegmentFor(tp, epoch, startingOffset)
	if err != nil {
		return none, false, err
	}
	if !ok {
		return none, false, &ReadRangeError{TopicIDPartition: tp, Offset: startingOffset, Epoch: epoch}
	}
	for {
		if seg.MaxTimestampMs >= ts {
			r, found, err := m.findInSegment(ctx, &seg, ts, startingOffset, end)
			if err != nil || found {
				return r, found, err
			}
		}
		next := seg.EndOffset + 1
		if next >= end {
			return none, false, nil
		}
		if seg, ok, err = m.nextSegment(tp, l, next); err != nil || !ok {
			return none, false, err
		}
	}
}

// findInSegment returns the first record of seg with offset in
// [startingOffset, end) and timestamp >= ts.
func (m *Manager) findInSegment(ctx context.Context, seg *SegmentMetadata, ts, startingOffset, end int64) (log.TimestampAndOffset, bool, error) {
	none := log.TimestampAndOffset{Timestamp: log.NoTimestamp, Offset: base.UndefinedOffset, Epoch: base.UndefinedEpoch}
	from, err := m.timeIndexStart(ctx, seg, ts)
	if err != nil {
		return none, false, err
	}
	pos, indexed, err := m.lookupPosition(ctx, seg, max(from, startingOffset))
	if err != nil {
		return none, false, err
	}
	body, err := m.storage.FetchSegment(ctx, seg, pos, seg.SizeBytes-pos)
	if err != nil {
		return none, false, err
	}
	defer body.Close()
	sc := newBatchStream(body, seg, pos, indexed)
	it := record.NewIter(record.IterOptions{})
	for {
		b, err := sc.next()
		if err == io.EOF {
			return none, false, nil
		}
		if err != nil {
			return none, false, err
		}
		if b.BaseOffset() >= end {
			return none, false, nil
		}
		if b.MaxTimestamp() < ts || b.LastOffset() < startingOffset {
			continue
		}
		it.Reset(b)
		for it.Next() {
			r := it.Record()
			if r.Offset >= end {
				return none, false, nil
			}
			if r.Timestamp >= ts && r.Offset >= startingOffset {
				return log.TimestampAndOffset{Timestamp: r.Timestamp, Offset: r.Offset, Epoch: b.PartitionLeaderEpoch()}, true, nil
			}
		}
		if err := it.Err(); err != nil {
			return none, false, fmt.Errorf("%w: remote segment %s: batch at %d: %w", ErrCorruption, seg.SegmentID, b.BaseOffset(), err)
		}
	}
}

// timeIndexStart returns the offset a search for ts may start at in seg:
// the offset of the last time index entry whose timestamp is below ts
// (every record before it has a timestamp at most that entry's, so none
// qualifies), or the segment's start offset. Strictly below, where
// Kafka's TimeIndex.lookup takes the entry at or below: the two agree on
// an index whose timestamps strictly increase, as Kafka appends them;
// strictly below stays right on an index that repeats a timestamp (an
// earlier record may carry ts too), at the cost of reading one more
// stretch of the segment.
func (m *Manager) timeIndexStart(ctx context.Context, seg *SegmentMetadata, ts int64) (int64, error) {
	data, err := m.storage.FetchIndex(ctx, seg, IndexTimestamp)
	if err != nil {
		return 0, err
	}
	entries, err := log.DecodeTimeIndex("timeindex of remote segment "+seg.SegmentID.String(), seg.StartOffset, data)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrCorruption, err)
	}
	from := seg.HeldStartOffset()
	for _, e := range entries {
		if e.Timestamp >= ts {
			break
		}
		if e.Offset > seg.EndOffset {
			return 0, fmt.Errorf("%w: timeindex of remote segment %s: offset %d past the segment's end %d",
				ErrCorruption, seg.SegmentID, e.Offset, seg.EndOffset)
		}
		from = e.Offset
	}
	return from, nil
}
