package wal

import (
	"fmt"
	"math"
)

// IncrementSequence returns seq+n wrapping past MaxInt32 to 0, as Kafka's
// DefaultRecordBatch.incrementSequence does: sequences are int32 and an
// idempotent producer that reaches MaxInt32 continues at 0.
func IncrementSequence(seq, n int32) int32 {
	if seq > math.MaxInt32-n {
		return n - (math.MaxInt32 - seq) - 1
	}
	return seq + n
}

// SequenceCheck is the outcome of CheckSequence.
type SequenceCheck struct {
	// Err is nil (accept), or ErrDuplicateSequence,
	// ErrOutOfOrderSequence, ErrInvalidProducerEpoch.
	Err    error
	Detail string
	// Duplicate is the remembered batch a duplicate repeats.
	Duplicate ProducerBatch
}

// CheckSequence decides an idempotent batch (epoch, baseSeq..lastSeq)
// against the producer's state (nil if the partition has none for it), as
// Kafka's ProducerAppendInfo.checkProducerEpoch and checkSequence do:
//
//   - an epoch below the state's is fenced (ErrInvalidProducerEpoch);
//   - a new epoch, or a producer never seen, must start at sequence 0
//     (the state of an older epoch does not count);
//   - the same epoch: a batch equal in (baseSeq, lastSeq) to one of the
//     last five is a duplicate; otherwise baseSeq must follow the last
//     batch's lastSeq, where 0 follows MaxInt32 (the wrap-around Kafka
//     allows and Inkless's plane rejects; tierlog allows it).
func CheckSequence(st *ProducerState, epoch int16, baseSeq, lastSeq int32) SequenceCheck {
	if st != nil && epoch < st.ProducerEpoch {
		return SequenceCheck{Err: ErrInvalidProducerEpoch,
			Detail: fmt.Sprintf("producer %d epoch %d is older than %d", st.ProducerID, epoch, st.ProducerEpoch)}
	}
	if st == nil || epoch > st.ProducerEpoch || len(st.Batches) == 0 {
		if baseSeq != 0 {
			return SequenceCheck{Err: ErrOutOfOrderSequence,
				Detail: fmt.Sprintf("epoch %d starts at sequence %d, want 0", epoch, baseSeq)}
		}
		return SequenceCheck{}
	}
	for _, b := range st.Batches {
		if b.BaseSequence == baseSeq && b.LastSequence == lastSeq {
			return SequenceCheck{Err: ErrDuplicateSequence, Duplicate: b,
				Detail: fmt.Sprintf("sequences %d..%d were assigned offset %d", baseSeq, lastSeq, b.AssignedOffset)}
		}
	}
	last := st.Batches[len(st.Batches)-1].LastSequence
	if baseSeq != IncrementSequence(last, 1) {
		return SequenceCheck{Err: ErrOutOfOrderSequence,
			Detail: fmt.Sprintf("sequence %d after %d", baseSeq, last)}
	}
	return SequenceCheck{}
}

// AcceptSequence returns the producer state after an accepted batch: a
// new epoch starts a fresh list, and only the last MaxProducerBatches
// batches are kept. st is not modified.
func AcceptSequence(st *ProducerState, producerID int64, epoch int16, b ProducerBatch) ProducerState {
	next := ProducerState{ProducerID: producerID, ProducerEpoch: epoch}
	if st != nil && st.ProducerEpoch == epoch {
		next.Batches = append(next.Batches, st.Batches...)
	}
	next.Batches = append(next.Batches, b)
	if n := len(next.Batches); n > MaxProducerBatches {
		next.Batches = next.Batches[n-MaxProducerBatches:]
	}
	return next
}
