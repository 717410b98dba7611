package wal

import "math"

// RetentionScan decides, batch by batch from the oldest, which batches of
// a partition that is not consolidated breach its retention. Only whole
// batches go, and only a prefix:
//
//   - size: a batch goes while the bytes from it onward exceed
//     retentionBytes (Kafka: retention.bytes; -1 = no size limit);
//   - time: a batch goes while every batch before it went by time and its
//     effective timestamp is older than now - retentionMs (Kafka:
//     retention.ms; -1 = no time limit). A batch not yet old stops the
//     time scan even if later batches are older, and a timestamp in the
//     future is never old;
//   - the union of both (both are prefixes: the longer one), at most
//     maxBatches per call (0 = no cap), so one call's work is bounded.
type RetentionScan struct {
	retentionBytes int64
	deadline       int64 // batches with a timestamp below it are old
	remaining      int64
	timePrefix     bool
	maxBatches     int
	deleted        int
}

// NewRetentionScan starts a scan of a partition of byteSize bytes.
func NewRetentionScan(byteSize, retentionBytes, retentionMs, nowMs int64, maxBatches int) *RetentionScan {
	s := &RetentionScan{retentionBytes: retentionBytes, remaining: byteSize, maxBatches: maxBatches,
		deadline: math.MinInt64, timePrefix: retentionMs >= 0}
	if retentionMs >= 0 && nowMs >= math.MinInt64+retentionMs {
		s.deadline = nowMs - retentionMs
	}
	return s
}

// Delete reports whether the next batch (its size and effective
// timestamp) goes; after the first false the scan is over.
func (s *RetentionScan) Delete(size, timestamp int64) bool {
	if s.maxBatches > 0 && s.deleted >= s.maxBatches {
		return false
	}
	bySize := s.retentionBytes >= 0 && s.remaining > s.retentionBytes
	s.timePrefix = s.timePrefix && timestamp < s.deadline
	if !bySize && !s.timePrefix {
		return false
	}
	s.remaining -= size
	s.deleted++
	return true
}
