package producer

import (
	"math"

	"github.com/tierlog/tierlog/internal/base"
)

// NumBatchesToRetain is how many of a producer's most recent batches the
// Manager remembers for duplicate detection: a producer has at most 5
// requests in flight per connection (Kafka:
// ProducerStateEntry.NUM_BATCHES_TO_RETAIN).
const NumBatchesToRetain = 5

// BatchMetadata describes one appended data batch of a producer. Kafka:
// BatchMetadata.
type BatchMetadata struct {
	// LastSeq is the sequence of the batch's last record.
	LastSeq int32
	// LastOffset is the offset of the batch's last record.
	LastOffset int64
	// OffsetDelta is LastOffset minus the batch's base offset, which is
	// also the difference of its last and first sequence.
	OffsetDelta int32
	// Timestamp is the batch's MaxTimestamp.
	Timestamp int64
}

// FirstSeq returns the sequence of the batch's first record, undoing the
// wrap at MaxInt32 (KIP-98's batch v2 sequences).
func (b BatchMetadata) FirstSeq() int32 { return decrementSequence(b.LastSeq, b.OffsetDelta) }

// FirstOffset returns the offset of the batch's first record.
func (b BatchMetadata) FirstOffset() int64 { return b.LastOffset - int64(b.OffsetDelta) }

// decrementSequence is the inverse of record.LastSequence: seq - dec,
// wrapping below 0 to MaxInt32.
func decrementSequence(seq, dec int32) int32 {
	if seq < dec {
		return math.MaxInt32 - (dec - seq) + 1
	}
	return seq - dec
}

// inSequence reports whether next is the sequence that follows last:
// last+1, or 0 after MaxInt32 (KIP-98's batch v2 sequences).
func inSequence(last, next int32) bool {
	return int64(next) == int64(last)+1 || (next == 0 && last == math.MaxInt32)
}

// entry is the state of one producer. Kafka: ProducerStateEntry.
//
// The batches are a ring of the NumBatchesToRetain most recent ones, so
// adding a batch never allocates.
type entry struct {
	producerEpoch    int16
	coordinatorEpoch int32
	// lastTimestamp is the MaxTimestamp of the last data batch or the
	// timestamp of the last marker, whichever came last.
	lastTimestamp int64
	// currentTxnFirstOffset is the first offset of the producer's open
	// transaction, -1 if none.
	currentTxnFirstOffset int64

	ring  [NumBatchesToRetain]BatchMetadata
	start int // index of the oldest batch in ring
	n     int // batches held
}

// emptyEntry is the state of a producer the Manager knows nothing of.
func emptyEntry() entry {
	return entry{
		producerEpoch:         base.NoProducerEpoch,
		coordinatorEpoch:      -1,
		lastTimestamp:         -1, // Kafka: RecordBatch.NO_TIMESTAMP
		currentTxnFirstOffset: -1,
	}
}

// withoutBatches returns a copy of e's scalar fields with no batches:
// the starting point of the updates of one append (Kafka's updatedEntry).
func (e *entry) withoutBatches() entry {
	c := *e
	c.start, c.n = 0, 0
	return c
}

// batch returns the i-th oldest batch, 0 <= i < e.n.
func (e *entry) batch(i int) BatchMetadata {
	return e.ring[(e.start+i)%NumBatchesToRetain]
}

func (e *entry) addBatchMetadata(b BatchMetadata) {
	if e.n == NumBatchesToRetain {
		e.ring[e.start] = b
		e.start = (e.start + 1) % NumBatchesToRetain
		return
	}
	e.ring[(e.start+e.n)%NumBatchesToRetain] = b
	e.n++
}

// addBatch records a data batch written in epoch.
func (e *entry) addBatch(epoch int16, b BatchMetadata) {
	e.maybeUpdateEpoch(epoch)
	e.addBatchMetadata(b)
	e.lastTimestamp = b.Timestamp
}

// maybeUpdateEpoch switches to epoch, forgetting the batches of the old
// one (sequences restart with a new epoch).
func (e *entry) maybeUpdateEpoch(epoch int16) {
	if e.producerEpoch != epoch {
		e.start, e.n = 0, 0
		e.producerEpoch = epoch
	}
}

// update merges the updates of one append into e. Kafka:
// ProducerStateEntry.update.
func (e *entry) update(next *entry) {
	e.maybeUpdateEpoch(next.producerEpoch)
	e.coordinatorEpoch = next.coordinatorEpoch
	e.lastTimestamp = next.lastTimestamp
	for i := 0; i < next.n; i++ {
		e.addBatchMetadata(next.batch(i))
	}
	e.currentTxnFirstOffset = next.currentTxnFirstOffset
}

// lastSeq is the last sequence written, base.NoSequence if no batch is
// held.
func (e *entry) lastSeq() int32 {
	if e.n == 0 {
		return base.NoSequence
	}
	return e.batch(e.n - 1).LastSeq
}

// lastDataOffset is the last offset of the newest batch, -1 if none.
func (e *entry) lastDataOffset() int64 {
	if e.n == 0 {
		return base.UndefinedOffset
	}
	return e.batch(e.n - 1).LastOffset
}

// lastOffsetDelta is the offset delta of the newest batch, 0 if none.
func (e *entry) lastOffsetDelta() int32 {
	if e.n == 0 {
		return 0
	}
	return e.batch(e.n - 1).OffsetDelta
}

// findDuplicate returns the held batch of epoch with exactly the sequence
// range [firstSeq, lastSeq]. Kafka: ProducerStateEntry.findDuplicateBatch.
func (e *entry) findDuplicate(epoch int16, firstSeq, lastSeq int32) (BatchMetadata, bool) {
	if epoch != e.producerEpoch {
		return BatchMetadata{}, false
	}
	for i := 0; i < e.n; i++ {
		b := e.batch(i)
		if b.LastSeq == lastSeq && b.FirstSeq() == firstSeq {
			return b, true
		}
	}
	return BatchMetadata{}, false
}

// removeBatchesBelow forgets the batches whose last offset is below
// offset. Kafka: ProducerStateEntry.removeBatchesOlderThan.
func (e *entry) removeBatchesBelow(offset int64) {
	for e.n > 0 && e.batch(0).LastOffset < offset {
		e.start = (e.start + 1) % NumBatchesToRetain
		e.n--
	}
}

// ProducerStateEntry is a copy of one producer's state, for inspection.
// Kafka: ProducerStateEntry.
type ProducerStateEntry struct {
	ProducerID       int64
	ProducerEpoch    int16
	CoordinatorEpoch int32
	// LastTimestamp is the MaxTimestamp of the producer's last data
	// batch or the timestamp of its last marker; expiration measures
	// idleness from it.
	LastTimestamp int64
	// CurrentTxnFirstOffset is the first offset of the producer's open
	// transaction, -1 if none.
	CurrentTxnFirstOffset int64
	// Batches are the most recent batches, oldest first, at most
	// NumBatchesToRetain.
	Batches []BatchMetadata
}

func (e *entry) export(pid int64) ProducerStateEntry {
	s := ProducerStateEntry{
		ProducerID:            pid,
		ProducerEpoch:         e.producerEpoch,
		CoordinatorEpoch:      e.coordinatorEpoch,
		LastTimestamp:         e.lastTimestamp,
		CurrentTxnFirstOffset: e.currentTxnFirstOffset,
	}
	if e.n > 0 {
		s.Batches = make([]BatchMetadata, e.n)
		for i := range s.Batches {
			s.Batches[i] = e.batch(i)
		}
	}
	return s
}
