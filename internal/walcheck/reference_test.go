package walcheck

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/wal"
)

// referenceReader is the read path's contract written as plainly as
// possible (one GET per batch, every check in order): the checker must
// find nothing wrong with it, so what it reports against wal.Reader is
// the reader's fault and not the checker's. Without binding it skips the
// binding check, as the reader does with the wal-read-binding guard off.
type referenceReader struct{ binding bool }

func (r referenceReader) fetch(ctx context.Context, w *World, req wal.FindBatchesRequest) []Violation {
	w.Liar.TakeAnswers()
	found, err := w.Liar.FindBatches(ctx, req)
	answers := w.Liar.TakeAnswers()
	if err != nil || len(answers) != 1 {
		return []Violation{{Class: ClassWholeCall, Detail: fmt.Sprint(err)}}
	}
	out := make([]wal.FetchResult, len(found))
	for i, f := range found {
		out[i].Err = f.Err
		if f.Err != nil {
			continue
		}
		tp := req.Partitions[i].Partition
		next := int64(-1)
		for _, info := range f.Batches {
			raw, err := r.batch(ctx, w.Store, tp, info, next)
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
	return w.CheckFetch(answers[0], out)
}

func (r referenceReader) batch(ctx context.Context, store objstore.Store, tp wal.TopicIDPartition, info wal.BatchInfo, next int64) ([]byte, error) {
	fail := func(sentinel error, detail string) error {
		return &wal.BatchReadError{ObjectKey: info.ObjectKey, ByteOffset: info.ByteOffset, Partition: tp,
			BaseOffset: info.BaseOffset, Err: sentinel, Detail: detail}
	}
	switch {
	case info.ByteOffset < 0 || info.Size <= 0 || info.LastOffset < info.BaseOffset:
		return nil, fail(wal.ErrInconsistentAnswer, "not a range")
	case next >= 0 && info.BaseOffset != next:
		return nil, fail(wal.ErrInconsistentAnswer, "not contiguous")
	}
	raw, err := objstore.ReadRange(ctx, store, info.ObjectKey, info.ByteOffset, info.Size)
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
		return nil, fail(wal.ErrCorruption, "shape")
	case r.binding && bd.Known && (b.CRC() != bd.CRC || b.PartitionLeaderEpoch() != bd.PartitionLeaderEpoch ||
		b.ProducerID() != bd.ProducerID || b.ProducerEpoch() != bd.ProducerEpoch || b.BaseSequence() != bd.BaseSequence):
		return nil, fail(wal.ErrCorruption, "binding")
	}
	return raw, nil
}

func modelPlane(testing.TB) wal.ControlPlane { return NewModelPlane() }

// TestReferenceReaderPasses: the checker finds no fault in a reader that
// keeps the contract, over more iterations than the reader's test runs.
func TestReferenceReaderPasses(t *testing.T) {
	Run(t, Options{Seed: 1, Iterations: 1500, NewPlane: modelPlane, Fetch: referenceReader{binding: true}.fetch})
}

// TestReferenceReaderWithoutBindingFails: the same reader without the
// binding check serves valid but foreign batches (another partition's,
// another object version's, a flipped leader epoch), and the checker
// says so within the reader test's short iteration count: the
// wal-read-binding guard's catching test relies on it.
func TestReferenceReaderWithoutBindingFails(t *testing.T) {
	seen, _ := Collect(t, Options{Seed: 1, Iterations: 300, NewPlane: modelPlane, Fetch: referenceReader{}.fetch})
	for _, c := range []string{ClassForeign, ClassForeignBytes, ClassEpoch} {
		if seen[c] == nil {
			t.Errorf("without the binding check no %q in 300 iterations", c)
		} else {
			t.Logf("%s: %d times", c, seen[c].Count)
		}
	}
	for c := range seen {
		if c != ClassForeign && c != ClassForeignBytes && c != ClassEpoch && c != ClassOtherBatch {
			t.Errorf("without the binding check: unexpected %q: %+v", c, *seen[c])
		}
	}
}
