package wal

import "math"

// Validate checks what a CommitFile needs of the request itself. A bad
// request fails the whole commit (ErrInvalidArgument) and commits
// nothing; per-partition problems are per-batch rejections instead.
func (r *CommitFileRequest) Validate() error {
	if r.ObjectKey == "" || len(r.ObjectKey) > MaxObjectKeyLen {
		return invalidf("object key of %d bytes (want 1 to %d)", len(r.ObjectKey), MaxObjectKeyLen)
	}
	if r.ObjectSize < 0 {
		return invalidf("object %s: negative size %d", r.ObjectKey, r.ObjectSize)
	}
	end := int64(0)
	for i, b := range r.Batches {
		switch {
		case b.Size <= 0:
			return invalidf("object %s: batch %d has size %d (batches of size 0 are not allowed)", r.ObjectKey, i, b.Size)
		case b.ByteOffset < end:
			return invalidf("object %s: batch %d at byte %d overlaps or precedes the previous batch (ends at %d)", r.ObjectKey, i, b.ByteOffset, end)
		case b.ByteOffset > r.ObjectSize-b.Size:
			return invalidf("object %s: batch %d [%d, +%d) beyond the object's %d bytes", r.ObjectKey, i, b.ByteOffset, b.Size, r.ObjectSize)
		case b.BaseOffset < 0 || b.LastOffset < b.BaseOffset || b.LastOffset-b.BaseOffset >= math.MaxInt32:
			return invalidf("object %s: batch %d has offsets [%d, %d]", r.ObjectKey, i, b.BaseOffset, b.LastOffset)
		case b.RecordCount < 1 || int64(b.RecordCount) > b.OffsetCount():
			return invalidf("object %s: batch %d has %d records for %d offsets", r.ObjectKey, i, b.RecordCount, b.OffsetCount())
		case b.TimestampType != CreateTime && b.TimestampType != LogAppendTime:
			return invalidf("object %s: batch %d has timestamp type %d", r.ObjectKey, i, b.TimestampType)
		case b.Idempotent() && b.BaseSequence < 0:
			return invalidf("object %s: batch %d of producer %d has base sequence %d", r.ObjectKey, i, b.ProducerID, b.BaseSequence)
		}
		end = b.ByteOffset + b.Size
	}
	return nil
}

// MaxObjectKeyLen is the longest object key a control plane stores (the
// PostgreSQL schema's limit).
const MaxObjectKeyLen = 1024

// FindBudget applies FindBatchesRequest's byte budgets while a control
// plane walks the partitions in the caller's order.
type FindBudget struct {
	maxBytes     int64
	requestBytes int64
	granted      bool // the first batch of the request went out
}

// NewFindBudget starts the budget of one request.
func NewFindBudget(maxBytes int64) *FindBudget { return &FindBudget{maxBytes: maxBytes} }

// Admit reports whether a batch of size bytes joins a partition that has
// partitionBytes so far, and if so charges it.
func (f *FindBudget) Admit(partitionBytes, maxPartitionBytes, size int64) bool {
	if f.granted && (partitionBytes >= maxPartitionBytes || f.requestBytes >= f.maxBytes) {
		return false
	}
	f.granted = true
	f.requestBytes += size
	return true
}

// Spent reports whether no further batch can be admitted.
func (f *FindBudget) Spent() bool { return f.granted && f.requestBytes >= f.maxBytes }
