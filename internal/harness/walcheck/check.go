package walcheck

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/wal"
)

// Violation is one broken promise of the read path. Class names the
// promise (the same for every instance, so a run can count them); Detail
// says where.
type Violation struct {
	Class  string
	Detail string
}

// The classes of Violation.
const (
	ClassForeign      = "served another partition's batch"
	ClassOtherBatch   = "served another batch of the partition (a gap, an overlap or a reordering)"
	ClassForeignBytes = "served bytes committed nowhere (another object version, a changed field)"
	ClassOffset       = "served a batch at an offset other than its own (a gap or an overlap in the answer)"
	ClassEpoch        = "served a batch whose leader epoch is not the committed one"
	ClassNotPrefix    = "served more batches than were committed from the offset"
	ClassFraming      = "served records that do not frame as whole batches"
	ClassIntact       = "intact batches not served (a neighbour's damage or a later batch's failed them)"
	ClassSilent       = "nothing served and no error"
	ClassUntyped      = "error that is none of the read path's sentinels"
	ClassRetriable    = "bytes missing from an object reported as a retriable ErrObjectRead, not ErrCorruption"
	ClassErrRecords   = "records served with an error"
	ClassWholeCall    = "the whole fetch failed"
	ClassPanic        = "panic"
	ClassHole         = "stored a batch that does not start at the log's end (a hole or an overlap)"
	ClassStalled      = "intact batches not consolidated"
)

// CheckFetch checks results, the answer of a wal.Reader over the World's
// Liar to the FindBatches call a, against what was committed:
//   - every batch served is byte-identical to the batch committed at its
//     offset (the base offset written in), in the order of the honest
//     answer from the requested offset: a prefix of it, never a byte of
//     another partition, batch or object version;
//   - a partition is served at least every batch before the first one a
//     damage or a lie touched (an untouched partition: all of them);
//   - an error is typed (wal.ErrCorruption or wal.ErrInconsistentAnswer;
//     wal.ErrObjectRead only for an object that does not exist, since
//     the store injects no I/O fault) and comes with no records;
//   - a partition with batches to serve and none served has an error.
func (w *World) CheckFetch(a Answer, results []wal.FetchResult) []Violation {
	var out []Violation
	add := func(i int, class, format string, args ...any) {
		out = append(out, Violation{Class: class, Detail: fmt.Sprintf("partition %s from offset %d: %s",
			a.Request.Partitions[i].Partition, a.Request.Partitions[i].Offset, fmt.Sprintf(format, args...))})
	}
	if len(results) != len(a.Request.Partitions) {
		return []Violation{{Class: ClassWholeCall, Detail: fmt.Sprintf("%d results for %d partitions", len(results), len(a.Request.Partitions))}}
	}
	for i, res := range results {
		tp := a.Request.Partitions[i].Partition
		honest := a.Honest[i]
		if honest.Err != nil {
			if !errors.Is(res.Err, honest.Err) {
				add(i, ClassUntyped, "FindBatches said %v, the fetch %v", honest.Err, res.Err)
			}
			continue
		}
		// The first batch that may fail: the first a lie changed or
		// whose stored bytes were damaged.
		bad := a.FirstLie[i]
		for k, b := range honest.Batches[:bad] {
			if w.Damaged(tp, b.BaseOffset) {
				bad = k
				break
			}
		}
		served, wrong := 0, false
		for pos := 0; pos < len(res.Records) && !wrong; served++ {
			b, err := record.ReadBatch(res.Records[pos:])
			if err != nil {
				add(i, ClassFraming, "at byte %d of %d: %v", pos, len(res.Records), err)
				wrong = true
				break
			}
			pos += b.Size()
			if served >= len(honest.Batches) {
				add(i, ClassNotPrefix, "batch %d at offset %d; %d committed from the offset", served, b.BaseOffset(), len(honest.Batches))
				wrong = true
				break
			}
			want, ok := w.At(tp, honest.Batches[served].BaseOffset)
			if !ok {
				add(i, ClassNotPrefix, "no committed batch at offset %d", honest.Batches[served].BaseOffset)
				wrong = true
				break
			}
			if !bytes.Equal(b.Bytes(), want.Bytes) {
				class, what := w.identify(tp, b, want.Info.BaseOffset)
				add(i, class, "batch %d served at offset %d is %s, committed there: the batch of object %s byte %d (leader epoch %d, crc %08x)",
					served, b.BaseOffset(), what, want.Info.ObjectKey, want.Info.ByteOffset, want.Info.Binding.PartitionLeaderEpoch, want.Info.Binding.CRC)
				wrong = true
				break
			}
		}
		switch {
		case wrong:
		case served < bad:
			add(i, ClassIntact, "%d of %d batches served, the first %d are intact; error: %v", served, len(honest.Batches), bad, res.Err)
		case served == 0 && len(honest.Batches) > 0 && res.Err == nil:
			add(i, ClassSilent, "%d batches committed from the offset", len(honest.Batches))
		}
		if res.Err == nil {
			continue
		}
		if len(res.Records) > 0 {
			add(i, ClassErrRecords, "%d bytes with error %v", len(res.Records), res.Err)
		}
		switch {
		case errors.Is(res.Err, wal.ErrCorruption), errors.Is(res.Err, wal.ErrInconsistentAnswer):
			var be *wal.BatchReadError
			if !errors.As(res.Err, &be) {
				add(i, ClassUntyped, "%v is not a *wal.BatchReadError", res.Err)
			}
		case errors.Is(res.Err, wal.ErrObjectRead) && errors.Is(res.Err, objstore.ErrNotExist):
		case errors.Is(res.Err, wal.ErrObjectRead):
			add(i, ClassRetriable, "%v", res.Err)
		default:
			add(i, ClassUntyped, "%v", res.Err)
		}
	}
	return out
}

// identify says whose batch b, served where the batch at wantBase is
// due, is: another partition's, another of tp's, the right one at
// another offset or with another leader epoch, or none committed.
func (w *World) identify(tp wal.TopicIDPartition, b record.Batch, wantBase int64) (string, string) {
	// Compare from the length field on, except the leader epoch: the
	// base offset is the reader's to write.
	same := func(x, y []byte) bool {
		return len(x) == len(y) && bytes.Equal(x[8:12], y[8:12]) && bytes.Equal(x[16:], y[16:])
	}
	for p, l := range w.Log {
		for _, c := range l {
			if !same(c.Bytes, b.Bytes()) {
				continue
			}
			what := fmt.Sprintf("the batch committed at offset %d of %s (object %s byte %d)", c.Info.BaseOffset, p, c.Info.ObjectKey, c.Info.ByteOffset)
			if p != tp {
				return ClassForeign, what
			}
			switch {
			case c.Info.BaseOffset != wantBase:
				return ClassOtherBatch, what
			case b.BaseOffset() != wantBase:
				return ClassOffset, what + fmt.Sprintf(" with base offset %d", b.BaseOffset())
			}
			return ClassEpoch, what + fmt.Sprintf(" with leader epoch %d", b.PartitionLeaderEpoch())
		}
	}
	return ClassForeignBytes, fmt.Sprintf("a batch committed nowhere (leader epoch %d, crc %08x, producer %d/%d/%d)",
		b.PartitionLeaderEpoch(), b.CRC(), b.ProducerID(), b.ProducerEpoch(), b.BaseSequence())
}
