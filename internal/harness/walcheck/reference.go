package walcheck

import (
	"context"
	"errors"
	"fmt"

	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/wal"
)

// Reference is the read path's contract written as plainly as possible:
// one GET per batch, every check in order (range, contiguity, framing,
// CRC, size, offset count, binding), the good prefix or the first
// batch's typed error per partition. The checks find nothing wrong with
// it (TestReferenceReaderPasses), so what they report against wal.Reader
// is the reader's fault and not the checker's; and a consumer of the
// read path (the consolidation fetcher) can be checked over it alone.
// SkipBinding and SkipContiguity leave out the binding check and the
// check that each batch starts where the one before ended, as the reader
// does with the wal-read-binding and wal-read-gap guards off.
type Reference struct {
	Store          objstore.Store
	ControlPlane   wal.ControlPlane
	SkipBinding    bool
	SkipContiguity bool
}

// Fetch answers as wal.Reader.Fetch does.
func (r Reference) Fetch(ctx context.Context, req wal.FindBatchesRequest) ([]wal.FetchResult, error) {
	found, err := r.ControlPlane.FindBatches(ctx, req)
	if err != nil {
		return nil, err
	}
	if len(found) != len(req.Partitions) {
		return nil, fmt.Errorf("%w: %d answers for %d partitions", wal.ErrInconsistentAnswer, len(found), len(req.Partitions))
	}
	out := make([]wal.FetchResult, len(found))
	for i, f := range found {
		out[i] = wal.FetchResult{Err: f.Err, LogStartOffset: f.LogStartOffset, HighWatermark: f.HighWatermark}
		if f.Err != nil {
			continue
		}
		tp := req.Partitions[i].Partition
		next := int64(-1)
		for _, info := range f.Batches {
			raw, err := r.batch(ctx, tp, info, next)
			if err != nil {
				if len(out[i].Records) == 0 {
					out[i].Err = err
				}
				break
			}
			b, _ := record.ReadBatch(raw)
			b.SetBaseOffset(info.BaseOffset)
			out[i].Records = append(out[i].Records, raw...)
			next = info.LastOffset + 1
		}
	}
	return out, nil
}

func (r Reference) batch(ctx context.Context, tp wal.TopicIDPartition, info wal.BatchInfo, next int64) ([]byte, error) {
	fail := func(sentinel error, detail string) error {
		return &wal.BatchReadError{ObjectKey: info.ObjectKey, ByteOffset: info.ByteOffset, Partition: tp,
			BaseOffset: info.BaseOffset, Err: sentinel, Detail: detail}
	}
	switch {
	case info.ByteOffset < 0 || info.Size <= 0 || info.LastOffset < info.BaseOffset:
		return nil, fail(wal.ErrInconsistentAnswer, "not a range")
	case !r.SkipContiguity && next >= 0 && info.BaseOffset != next:
		return nil, fail(wal.ErrInconsistentAnswer, "not contiguous with the batch before")
	}
	raw, err := objstore.ReadRange(ctx, r.Store, info.ObjectKey, info.ByteOffset, info.Size)
	switch {
	case errors.Is(err, objstore.ErrNotExist):
		return nil, &wal.StorageError{ObjectKey: info.ObjectKey, Err: wal.ErrObjectRead, Cause: err}
	case err != nil:
		return nil, fail(wal.ErrCorruption, err.Error())
	}
	b, err := record.ReadBatch(raw)
	if err == nil {
		err = b.Validate()
	}
	bd := info.Binding
	switch {
	case err != nil:
		return nil, fail(wal.ErrCorruption, err.Error())
	case int64(b.Size()) != info.Size || b.LastOffset()-b.BaseOffset() != info.LastOffset-info.BaseOffset:
		return nil, fail(wal.ErrCorruption, "size or offset count")
	case !r.SkipBinding && bd.Known && (b.CRC() != bd.CRC || b.PartitionLeaderEpoch() != bd.PartitionLeaderEpoch ||
		b.ProducerID() != bd.ProducerID || b.ProducerEpoch() != bd.ProducerEpoch || b.BaseSequence() != bd.BaseSequence):
		return nil, fail(wal.ErrCorruption, "binding")
	}
	return raw, nil
}
