package wal

import (
	"errors"
	"sync/atomic"
	"time"
)

// WriterMetrics is a snapshot of a Writer's counters and gauges.
type WriterMetrics struct {
	// ObjectsInFlight and BytesInFlight are gauges: objects sealed and
	// not yet answered, and request bytes admitted and not yet answered.
	ObjectsInFlight int64
	BytesInFlight   int64
	// BackPressureWaits counts Produce calls that waited for room.
	BackPressureWaits int64

	ObjectsUploaded  int64
	BytesUploaded    int64
	ObjectsCommitted int64
	CommitErrors     int64
	// CommitLatencySum is the total, over the objects committed or
	// failed, of the time each spent in its CommitFiles call (with
	// retries): a call of k objects counts k times, so that over
	// ObjectsCommitted+CommitErrors it is the mean commit latency of an
	// object. CommitCalls counts the CommitFiles calls (retries
	// included): ObjectsCommitted over it is the mean objects per call.
	CommitLatencySum time.Duration
	CommitCalls      int64
	// ObjectsDeletedUncommitted counts stored objects the writer deleted
	// because they were never registered: after a failed commit that the
	// control plane proved unregistered, or after an upload answered at
	// its deadline that stored its object later. ObjectsKeptUnknown
	// counts objects kept after a failed commit because the control
	// plane did not prove that: the proof failed, or the commit landed
	// after all (the cleaner deletes them once their batches are gone).
	ObjectsDeletedUncommitted int64
	ObjectsKeptUnknown        int64
	// ObjectsTimedOut counts objects answered at their deadline
	// (ObjectTimeout); UploadRetries counts Puts retried after a backoff.
	ObjectsTimedOut int64
	UploadRetries   int64

	// Rejected counts refused batches by cause: the writer's validation
	// (ErrCorruption, ErrInvalidRecord, ErrRecordTooLarge,
	// ErrTransactionalBatch; one per refused request) and the control
	// plane's (ErrUnknownTopicOrPartition, ErrDuplicateSequence,
	// ErrOutOfOrderSequence, ErrInvalidProducerEpoch; one per batch).
	Rejected map[string]int64
}

// WriterListener receives a Writer's events. Nil fields are skipped.
// Callbacks run on the committer goroutine with no lock held; a slow
// callback delays every later commit.
type WriterListener struct {
	ObjectCommitted func(ObjectInfo)
	ObjectFailed    func(ObjectInfo, error)
}

// ObjectInfo describes one object of a Writer.
type ObjectInfo struct {
	Key      string
	Bytes    int64
	Batches  int
	Requests int
	// UploadDuration is the Put with its retries (Phases.Put).
	UploadDuration time.Duration
	// Phases is the object's life on the writer's Clock, for latency
	// breakdowns; a phase the object did not reach is zero.
	Phases ObjectPhases
}

// ObjectPhases is where one object's time went, from its first request
// to its answer. The phases but ReserveCall follow each other, so their
// sum is the oldest request's wait (a later one misses part of Filling).
type ObjectPhases struct {
	// Filling: first request buffered to sealed (size, CommitInterval,
	// back pressure or Close).
	Filling time.Duration
	// ReserveWait: sealed to its key reserved, when the reservation
	// (which starts with the first request) took longer than Filling.
	ReserveWait time.Duration
	// SlotWait: sealed and reserved to an upload slot taken
	// (UploadConcurrency).
	SlotWait time.Duration
	// Build: the object's layout, footer and commit list (and its copy,
	// with a Cache).
	Build time.Duration
	// Put: Store.Put with its retries.
	Put time.Duration
	// CommitWait: uploaded to its CommitFiles call sent (the earlier
	// objects' uploads and the call in flight before it).
	CommitWait time.Duration
	// Commit: the CommitFiles call with its retries.
	Commit time.Duration
	// Answer: the call's answer to the object's requests answered (the
	// earlier objects of the same call answered first).
	Answer time.Duration
	// ReserveCall is the ControlPlane.ReserveObject call itself, which
	// overlaps Filling and ReserveWait.
	ReserveCall time.Duration
}

// rejectionCauses are the sentinels Rejected counts, in report order.
var rejectionCauses = []error{
	ErrCorruption, ErrInvalidRecord, ErrRecordTooLarge, ErrTransactionalBatch,
	ErrUnknownTopicOrPartition, ErrDuplicateSequence, ErrOutOfOrderSequence, ErrInvalidProducerEpoch,
}

type writerCounters struct {
	objectsInFlight, bytesInFlight, backPressureWaits atomic.Int64
	objectsUploaded, bytesUploaded                    atomic.Int64
	objectsCommitted, commitErrors, commitNanos       atomic.Int64
	commitCalls                                       atomic.Int64
	objectsDeletedUncommitted, objectsKept            atomic.Int64
	objectsTimedOut, uploadRetries                    atomic.Int64
	rejectedBy                                        [8]atomic.Int64 // indexed like rejectionCauses
}

func (c *writerCounters) rejected(err error) {
	for i, cause := range rejectionCauses {
		if errors.Is(err, cause) {
			c.rejectedBy[i].Add(1)
			return
		}
	}
}

// Metrics returns a snapshot of the counters and gauges.
func (w *Writer) Metrics() WriterMetrics {
	c := &w.metrics
	m := WriterMetrics{
		ObjectsInFlight: c.objectsInFlight.Load(), BytesInFlight: c.bytesInFlight.Load(),
		BackPressureWaits: c.backPressureWaits.Load(),
		ObjectsUploaded:   c.objectsUploaded.Load(), BytesUploaded: c.bytesUploaded.Load(),
		ObjectsCommitted: c.objectsCommitted.Load(), CommitErrors: c.commitErrors.Load(),
		CommitLatencySum: time.Duration(c.commitNanos.Load()), CommitCalls: c.commitCalls.Load(),
		ObjectsDeletedUncommitted: c.objectsDeletedUncommitted.Load(), ObjectsKeptUnknown: c.objectsKept.Load(),
		ObjectsTimedOut: c.objectsTimedOut.Load(), UploadRetries: c.uploadRetries.Load(),
		Rejected: map[string]int64{},
	}
	for i, cause := range rejectionCauses {
		if n := c.rejectedBy[i].Load(); n > 0 {
			m.Rejected[cause.Error()] = n
		}
	}
	return m
}
