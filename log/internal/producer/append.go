package producer

import (
	"fmt"

	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/log/record"
)

// Origin says who wrote an append, which decides how much is validated.
// Kafka: AppendOrigin.
type Origin int8

const (
	// OriginClient is a producer's request to the leader: epochs,
	// sequences, transaction state and coordinator epochs are checked,
	// and duplicates detected.
	OriginClient Origin = iota
	// OriginCoordinator is a write by the group or transaction
	// coordinator (offset commits, transaction markers): as a client
	// append but without sequence checks or duplicate detection.
	OriginCoordinator
	// OriginReplication is a follower append or a replay of the log
	// (recovery, rebuild): nothing is rejected, the state follows the
	// batches.
	OriginReplication
)

func (o Origin) String() string {
	switch o {
	case OriginClient:
		return "client"
	case OriginCoordinator:
		return "coordinator"
	case OriginReplication:
		return "replication"
	}
	return fmt.Sprintf("Origin(%d)", int8(o))
}

// AppendInfo holds the validated producer-state changes of one append,
// not yet applied: Kafka's ProducerAppendInfo per producer, the
// transactions started, and the completed transactions. PrepareAppend
// returns it; Apply installs it after the batches are written.
//
// It is owned by the Manager and reused: it is valid until the next
// PrepareAppend, Replay or state-changing call, after which Apply
// refuses it.
type AppendInfo struct {
	gen     uint64
	applied bool
	origin  Origin

	updates   []producerUpdate
	started   []TxnMetadata
	completed []CompletedTxn

	duplicate   BatchMetadata
	isDuplicate bool
	// lastOffset is the last offset of the append's last batch, -1 for
	// none.
	lastOffset int64
}

// producerUpdate is the pending change of one producer.
type producerUpdate struct {
	pid int64
	// current is the producer's entry in the Manager, nil for a new one.
	current *entry
	// updated starts as current's scalar fields without batches and
	// accumulates the append's batches (Kafka's updatedEntry).
	updated entry
}

// Duplicate reports whether the append is a retry of batches already in
// the log, and if so the metadata of the original batch: the append must
// write nothing and answer with its offsets (FirstOffset, LastOffset)
// and timestamp. Only client appends detect duplicates.
func (a *AppendInfo) Duplicate() (BatchMetadata, bool) { return a.duplicate, a.isDuplicate }

// Completed returns the transactions the append's markers close, in
// order. LastStableOffset is set only after Apply.
func (a *AppendInfo) Completed() []CompletedTxn { return a.completed }

func (a *AppendInfo) reset(gen uint64, origin Origin) {
	a.gen, a.applied, a.origin = gen, false, origin
	a.updates = a.updates[:0]
	a.started = a.started[:0]
	a.completed = a.completed[:0]
	a.duplicate, a.isDuplicate = BatchMetadata{}, false
	a.lastOffset = base.UndefinedOffset
}

// PrepareAppend validates the producer state changes of batches (one or
// more concatenated, framed record batches v2 with their final offsets:
// the caller has validated them and, as leader, assigned offsets) without
// changing the Manager, so a refused append changes nothing. Batches
// without a producer id are skipped.
//
// For OriginClient, a batch whose producer epoch and sequence range match
// one of the producer's cached batches makes the whole append a duplicate
// (AppendInfo.Duplicate): write nothing and do not Apply.
//
// Errors: *OutOfOrderSequenceError, *InvalidProducerEpochError,
// *UnknownProducerIDError, *InvalidTxnStateError, *CoordinatorEpochError
// (never for OriginReplication), or an error wrapping ErrCorruption for a
// malformed transaction marker or batch framing (any origin).
//
// The returned AppendInfo is the Manager's own (see AppendInfo); with a
// known producer PrepareAppend allocates nothing.
func (m *Manager) PrepareAppend(batches []byte, origin Origin) (*AppendInfo, error) {
	m.invalidate()
	a := &m.pending
	a.reset(m.gen, origin)
	for rest := batches; len(rest) > 0; {
		b, err := record.ReadBatch(rest)
		if err != nil {
			m.invalidate()
			return nil, fmt.Errorf("producer: %w", err)
		}
		rest = rest[b.Size():]
		if err := m.prepareBatch(a, b); err != nil {
			m.invalidate()
			return nil, err
		}
		if a.isDuplicate {
			return a, nil
		}
	}
	return a, nil
}

// PrepareBatches is PrepareAppend over batches the caller has framed
// (and validated) already, so the append path frames its bytes once.
func (m *Manager) PrepareBatches(batches []record.Batch, origin Origin) (*AppendInfo, error) {
	m.invalidate()
	a := &m.pending
	a.reset(m.gen, origin)
	for _, b := range batches {
		if err := m.prepareBatch(a, b); err != nil {
			m.invalidate()
			return nil, err
		}
		if a.isDuplicate {
			return a, nil
		}
	}
	return a, nil
}

// Apply installs a prepared append after its batches were written, and
// returns the transactions it completed with their LastStableOffset set:
// the aborted ones go to the active segment's transaction index
// (CompletedTxn.AbortedTxn). It raises the map end offset to the end of
// the append. The returned slice is the Manager's, valid until the next
// PrepareAppend.
//
// Applying a duplicate does nothing. Applying an AppendInfo twice, or one
// made stale by a later call, is an error wrapping ErrInvalidArgument.
func (m *Manager) Apply(a *AppendInfo) ([]CompletedTxn, error) {
	if a != &m.pending || a.gen != m.gen || a.applied {
		return nil, fmt.Errorf("producer: apply of a stale or applied append: %w", ErrInvalidArgument)
	}
	a.applied = true
	if a.isDuplicate {
		return nil, nil
	}
	for i := range a.updates {
		u := &a.updates[i]
		if u.current == nil {
			e := new(entry)
			*e = u.updated
			m.producers[u.pid] = e
		} else {
			u.current.update(&u.updated)
		}
	}
	for _, t := range a.started {
		m.insertOngoing(t)
	}
	for i := range a.completed {
		c := &a.completed[i]
		c.LastStableOffset = m.lastStableOffsetAfter(c)
		m.completeTxn(c)
	}
	if a.lastOffset >= 0 {
		m.mapEndOffset = a.lastOffset + 1
	}
	m.checkInvariants()
	return a.completed, nil
}

// Replay applies one batch read back from the log (recovery, rebuilding
// after a truncation, a follower's fetched batch) with OriginReplication
// and returns the transactions it completed, as Apply. It raises the map
// end offset past the batch even without a producer id. Kafka:
// LogSegment.updateProducerState.
func (m *Manager) Replay(b record.Batch) ([]CompletedTxn, error) {
	m.invalidate()
	a := &m.pending
	a.reset(m.gen, OriginReplication)
	if err := m.prepareBatch(a, b); err != nil {
		m.invalidate()
		return nil, err
	}
	return m.Apply(a)
}

// prepareBatch validates one batch into a. Kafka:
// UnifiedLog.analyzeAndValidateProducerState and ProducerAppendInfo.append.
func (m *Manager) prepareBatch(a *AppendInfo, b record.Batch) error {
	a.lastOffset = b.LastOffset()
	pid := b.ProducerID()
	if pid <= base.NoProducerID {
		return nil
	}
	cur := m.producers[pid]
	if a.origin == OriginClient && cur != nil {
		if dup, ok := cur.findDuplicate(b.ProducerEpoch(), b.BaseSequence(), b.LastSequence()); ok {
			a.duplicate, a.isDuplicate = dup, true
			return nil
		}
	}
	u := a.update(pid, cur)
	if b.IsControl() {
		return m.prepareMarker(a, u, b)
	}
	return m.prepareData(a, u, b)
}

// update returns the pending update of pid, adding one if needed.
func (a *AppendInfo) update(pid int64, cur *entry) *producerUpdate {
	for i := range a.updates {
		if a.updates[i].pid == pid {
			return &a.updates[i]
		}
	}
	u := producerUpdate{pid: pid, current: cur}
	if cur != nil {
		u.updated = cur.withoutBatches()
	} else {
		u.updated = emptyEntry()
	}
	a.updates = append(a.updates, u)
	return &a.updates[len(a.updates)-1]
}

// prepareData validates a data batch. Kafka: appendDataBatch.
func (m *Manager) prepareData(a *AppendInfo, u *producerUpdate, b record.Batch) error {
	epoch, offset := b.ProducerEpoch(), b.BaseOffset()
	if epoch < u.updated.producerEpoch && a.origin != OriginReplication {
		return &InvalidProducerEpochError{ProducerID: u.pid, Offset: offset, Epoch: epoch,
			CurrentEpoch: u.updated.producerEpoch}
	}
	if a.origin == OriginClient {
		if err := m.checkSequence(u, epoch, b.BaseSequence(), offset); err != nil {
			return err
		}
	}
	u.updated.addBatch(epoch, BatchMetadata{LastSeq: b.LastSequence(), LastOffset: b.LastOffset(),
		OffsetDelta: b.LastOffsetDelta(), Timestamp: b.MaxTimestamp()})
	txn := u.updated.currentTxnFirstOffset
	switch {
	case txn >= 0 && !b.IsTransactional():
		// A follower keeps the transaction open and goes on: the
		// leader decided (Kafka rejects here for every origin).
		if a.origin != OriginReplication {
			return &InvalidTxnStateError{ProducerID: u.pid, Offset: offset, Epoch: epoch, TxnFirstOffset: txn}
		}
	case txn < 0 && b.IsTransactional():
		u.updated.currentTxnFirstOffset = offset
		a.started = append(a.started, TxnMetadata{ProducerID: u.pid, FirstOffset: offset, LastOffset: base.UndefinedOffset})
	}
	return nil
}

// checkSequence checks a client batch's first sequence. Kafka:
// ProducerAppendInfo.checkSequence.
func (m *Manager) checkSequence(u *producerUpdate, epoch int16, firstSeq int32, offset int64) error {
	upd := &u.updated
	if epoch != upd.producerEpoch {
		// A new epoch (or a new producer) starts at sequence 0.
		if firstSeq == 0 {
			return nil
		}
		if upd.producerEpoch != base.NoProducerEpoch {
			return &OutOfOrderSequenceError{ProducerID: u.pid, Offset: offset, Epoch: epoch,
				CurrentEpoch: upd.producerEpoch, FirstSeq: firstSeq, LastSeq: base.NoSequence}
		}
		if m.opts.StrictUnknownProducer {
			return &UnknownProducerIDError{ProducerID: u.pid, Offset: offset, Epoch: epoch, FirstSeq: firstSeq}
		}
		return nil // KIP-360: state lost to retention or expiration
	}
	curEpoch := base.NoProducerEpoch
	if u.current != nil {
		curEpoch = u.current.producerEpoch
	}
	lastSeq := base.NoSequence
	switch {
	case upd.n > 0:
		lastSeq = upd.lastSeq()
	case u.current != nil && epoch == u.current.producerEpoch:
		lastSeq = u.current.lastSeq()
	}
	if inSequence(lastSeq, firstSeq) {
		return nil
	}
	if curEpoch == base.NoProducerEpoch && !m.opts.StrictUnknownProducer {
		// No epoch known at all (Kafka: all the producer's records
		// were deleted): any sequence is accepted.
		return nil
	}
	return &OutOfOrderSequenceError{ProducerID: u.pid, Offset: offset, Epoch: epoch,
		CurrentEpoch: upd.producerEpoch, FirstSeq: firstSeq, LastSeq: lastSeq}
}

// prepareMarker validates a transaction marker. Kafka: appendEndTxnMarker
// (with the transaction version 0/1 epoch rule: a marker may carry the
// producer's current epoch or a newer one).
func (m *Manager) prepareMarker(a *AppendInfo, u *producerUpdate, b record.Batch) error {
	if b.RecordsCount() == 0 {
		return nil // the transaction was cleaned from the log (Kafka)
	}
	offset := b.BaseOffset()
	m.iter.Reset(b)
	if !m.iter.Next() {
		err := m.iter.Err()
		if err == nil {
			err = fmt.Errorf("%w: no record", ErrCorruption)
		}
		return fmt.Errorf("producer: marker of producer %d at offset %d: %w", u.pid, offset, err)
	}
	r := m.iter.Record()
	key, err := record.ParseControlKey(r.Key)
	if err != nil {
		return fmt.Errorf("producer: marker of producer %d at offset %d: %w", u.pid, offset, err)
	}
	if key.Type != record.ControlAbort && key.Type != record.ControlCommit {
		return fmt.Errorf("producer: marker of producer %d at offset %d: %w: control type %s is not a transaction marker",
			u.pid, offset, ErrCorruption, key.Type)
	}
	marker, err := record.ParseEndTxnMarker(r.Value)
	if err != nil {
		return fmt.Errorf("producer: marker of producer %d at offset %d: %w", u.pid, offset, err)
	}
	epoch := b.ProducerEpoch()
	if a.origin != OriginReplication {
		if epoch < u.updated.producerEpoch {
			return &InvalidProducerEpochError{ProducerID: u.pid, Offset: offset, Epoch: epoch,
				CurrentEpoch: u.updated.producerEpoch, Marker: true}
		}
		if u.updated.coordinatorEpoch > marker.CoordinatorEpoch {
			return &CoordinatorEpochError{ProducerID: u.pid, Offset: offset,
				CoordinatorEpoch: marker.CoordinatorEpoch, CurrentCoordinatorEpoch: u.updated.coordinatorEpoch}
		}
	}
	// Only a non-empty transaction completes: a marker without data
	// changes neither the LSO nor the transaction index (Kafka).
	if first := u.updated.currentTxnFirstOffset; first >= 0 {
		a.completed = append(a.completed, CompletedTxn{ProducerID: u.pid, FirstOffset: first, LastOffset: offset,
			IsAborted: key.Type == record.ControlAbort, LastStableOffset: base.UndefinedOffset})
	}
	u.updated.maybeUpdateEpoch(epoch)
	u.updated.currentTxnFirstOffset = base.UndefinedOffset
	u.updated.coordinatorEpoch = marker.CoordinatorEpoch
	u.updated.lastTimestamp = r.Timestamp
	return nil
}
