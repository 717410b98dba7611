package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// The transaction coordinator (KIP-98), as Kafka's TransactionCoordinator
// runs it for transaction version 1 (no KIP-890 part 2), on one node. This
// file holds its state and the durable state file; txn_handlers.go the
// requests; txn_recover.go the abort of what a crash left open.
//
// A transactional id maps to a producer id and epoch. Its transaction
// goes through Kafka's states:
//
//	Empty --AddPartitionsToTxn--> Ongoing --EndTxn--> PrepareCommit --markers--> CompleteCommit
//	                                |                 PrepareAbort  --markers--> CompleteAbort
//	                                +-- InitProducerId, timeout: epoch bump, then PrepareAbort
//
// The state file DIR/transaction-state holds, per transactional id, the
// producer id, epoch, timeout and state. It is one JSON document rewritten
// whole with the atomic-write pattern (producerid.go's writeFileAtomic: a
// temporary file, fsync, rename, fsync of the directory), so a crash
// leaves the old or the new document, never a mix. That is the simplest
// crash-safe store for a handful of ids; a broker with many writes
// Kafka's __transaction_state log instead (each write here costs two
// fsyncs and rewrites every id). It is written before the step it
// allows takes effect:
//
//   - a new producer id or epoch (InitProducerId, a fence), before the
//     producer hears of it;
//   - Ongoing, before the first partition of a transaction is added, so
//     a restart knows the transaction was open (it then fences and aborts
//     it);
//   - PrepareCommit or PrepareAbort, before the first marker: the
//     decision. A restart that finds PrepareCommit completes the commit on
//     the partitions whose transaction the logs still hold open.
//
// The markers are log records: like every record they are fsynced before
// the answer only with -flush-messages 1 (Options.FlushMessages); without
// it a crash of the machine (not of the process) can lose a marker whose
// Prepare record a later transaction's Ongoing has replaced, and the
// restart then aborts that transaction's records, if they survived.
//
// Complete states are not written: the next transaction's Ongoing replaces
// the Prepare record, and a Prepare record whose markers are all in the
// logs has nothing left to do at a restart. The partitions of a
// transaction are not in the file: the logs know them (each log's
// producer state lists its open transactions, log.UnifiedLog.OngoingTransactions).

// txnState is a transaction's state. Kafka: TransactionState.
type txnState int8

const (
	txnEmpty txnState = iota
	txnOngoing
	txnPrepareCommit
	txnPrepareAbort
	txnCompleteCommit
	txnCompleteAbort
)

var txnStateNames = [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort"}

func (s txnState) String() string {
	if int(s) < len(txnStateNames) {
		return txnStateNames[s]
	}
	return fmt.Sprintf("txnState(%d)", int8(s))
}

// MarshalText writes the state's name in the state file.
func (s txnState) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a state name.
func (s *txnState) UnmarshalText(b []byte) error {
	i := slices.Index(txnStateNames[:], string(b))
	if i < 0 {
		return fmt.Errorf("unknown transaction state %q", b)
	}
	*s = txnState(i)
	return nil
}

// Transaction coordinator constants.
const (
	// txnCoordinatorEpoch is the coordinator epoch every marker carries.
	// Kafka's is the leader epoch of the __transaction_state partition,
	// which changes when another broker takes the coordinator over; this
	// broker is the only coordinator there ever is, so it never changes
	// (the log refuses a marker from an older coordinator epoch).
	txnCoordinatorEpoch int32 = 0
	// maxTxnTimeout bounds TransactionTimeoutMillis. Kafka:
	// transaction.max.timeout.ms (default 15 minutes).
	maxTxnTimeout = 15 * time.Minute
	// defaultTxnAbortInterval is how often expired transactions are
	// looked for. Kafka:
	// transaction.abort.timed.out.transaction.cleanup.interval.ms.
	defaultTxnAbortInterval = 10 * time.Second
	// maxEpochBeforeExhausted: an epoch at or above it is not bumped
	// (Kafka: TransactionMetadata.isEpochExhausted).
	maxEpochBeforeExhausted = math.MaxInt16 - 1
)

// topicPartition names a partition by topic name (of a transaction, of
// a group's committed offsets).
type topicPartition struct {
	topic     string
	partition int32
}

func (tp topicPartition) String() string { return fmt.Sprintf("%s-%d", tp.topic, tp.partition) }

// txnRecord is one transactional id in the state file.
type txnRecord struct {
	TransactionalID string   `json:"transactionalId"`
	ProducerID      int64    `json:"producerId"`
	ProducerEpoch   int16    `json:"producerEpoch"`
	TimeoutMs       int64    `json:"timeoutMs"`
	State           txnState `json:"state"`
}

// txnStateFile is the state file's document.
type txnStateFile struct {
	Version         int         `json:"version"`
	TransactionalID []txnRecord `json:"transactionalIds"`
}

// txn is one transactional id: its producer id and epoch and its
// current transaction. Kafka: TransactionMetadata.
type txn struct {
	id string

	// mu is held across a change of the transaction and the markers it
	// writes, and across a transactional produce's check and append, so
	// that no batch of a transaction lands after its marker. Lock order:
	// txn.mu -> txnCoordinator.mu -> log.UnifiedLog's locks.
	mu struct {
		sync.Mutex
		producerID int64
		epoch      int16
		timeout    time.Duration
		state      txnState
		// partitions are the partitions of the Ongoing transaction, and
		// in a Prepare state those whose marker is still to be written.
		partitions map[topicPartition]bool
		// started is when the transaction became Ongoing (the timeout
		// counts from it, as Kafka's txnStartTimestamp).
		started time.Time
	}

	// durable is what the state file holds for this id. Guarded by
	// txnCoordinator.mu.
	durable txnRecord
}

// recordLocked is the state file record of t's current fields.
//
// REQUIRES: t.mu held.
func (t *txn) recordLocked() txnRecord {
	return txnRecord{TransactionalID: t.id, ProducerID: t.mu.producerID, ProducerEpoch: t.mu.epoch,
		TimeoutMs: t.mu.timeout.Milliseconds(), State: t.mu.state}
}

// txnCoordinator holds every transactional id and the state file.
type txnCoordinator struct {
	path string

	// mu guards the maps and every txn's durable record, and is held
	// across a write of the state file (its fsyncs: the file is written
	// one version at a time, each with every id's latest record). Only
	// transactional requests wait for it.
	mu struct {
		sync.Mutex
		byID  map[string]*txn
		byPID map[int64]*txn // by current producer id
	}
}

// openTxnCoordinator reads the state file at path (none: no transactional
// id yet).
func openTxnCoordinator(path string) (*txnCoordinator, error) {
	c := &txnCoordinator{path: path}
	c.mu.byID = map[string]*txn{}
	c.mu.byPID = map[int64]*txn{}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return c, nil
	case err != nil:
		return nil, err
	}
	var doc txnStateFile
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("broker: %s: damaged transaction state: %w", path, err)
	}
	if doc.Version != 1 {
		return nil, fmt.Errorf("broker: %s: transaction state version %d, want 1", path, doc.Version)
	}
	for _, r := range doc.TransactionalID {
		if r.ProducerID < 0 || r.ProducerEpoch < 0 || r.TimeoutMs <= 0 {
			return nil, fmt.Errorf("broker: %s: damaged transaction state for %q: %+v", path, r.TransactionalID, r)
		}
		t := &txn{id: r.TransactionalID, durable: r}
		t.mu.producerID, t.mu.epoch, t.mu.state = r.ProducerID, r.ProducerEpoch, r.State
		t.mu.timeout = time.Duration(r.TimeoutMs) * time.Millisecond
		t.mu.partitions = map[topicPartition]bool{}
		c.mu.byID[t.id] = t
		c.mu.byPID[r.ProducerID] = t
	}
	return c, nil
}

// get returns the transactional id's txn, creating an empty one (producer
// id -1, not in the state file until it gets one) when create is set.
func (c *txnCoordinator) get(id string, create bool) *txn {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.mu.byID[id]
	if t == nil && create {
		t = &txn{id: id}
		t.mu.producerID, t.mu.epoch = -1, -1
		t.mu.partitions = map[topicPartition]bool{}
		c.mu.byID[id] = t
	}
	return t
}

// byProducerID returns the txn whose current producer id is pid.
func (c *txnCoordinator) byProducerID(pid int64) *txn {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.byPID[pid]
}

// all returns every txn.
func (c *txnCoordinator) all() []*txn {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*txn, 0, len(c.mu.byID))
	for _, t := range c.mu.byID {
		out = append(out, t)
	}
	return out
}

// save makes the records durable: it writes the state file with them in
// place of the txns' previous records. On an error nothing changed
// (the file holds the old document, the txns their old records).
//
// REQUIRES: each txn's mu held (lock order).
func (c *txnCoordinator) save(recs map[*txn]txnRecord) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := make(map[*txn]txnRecord, len(recs))
	for t, r := range recs {
		old[t] = t.durable
		t.durable = r
	}
	doc := txnStateFile{Version: 1}
	for _, t := range c.mu.byID {
		if t.durable.ProducerID >= 0 && t.durable.TransactionalID != "" {
			doc.TransactionalID = append(doc.TransactionalID, t.durable)
		}
	}
	slices.SortFunc(doc.TransactionalID, func(a, b txnRecord) int { return strings.Compare(a.TransactionalID, b.TransactionalID) })
	b, err := json.MarshalIndent(doc, "", "  ")
	if err == nil {
		err = writeFileAtomic(c.path, append(b, '\n'))
	}
	if err != nil {
		for t, r := range old {
			t.durable = r
		}
		return fmt.Errorf("broker: write the transaction state: %w", err)
	}
	for t, r := range recs {
		if o := old[t].ProducerID; o != r.ProducerID && c.mu.byPID[o] == t {
			delete(c.mu.byPID, o)
		}
		c.mu.byPID[r.ProducerID] = t
	}
	return nil
}

// saveLocked makes t's current fields durable.
//
// REQUIRES: t.mu held.
func (c *txnCoordinator) saveLocked(t *txn) error {
	return c.save(map[*txn]txnRecord{t: t.recordLocked()})
}

// nextEpoch is the identity after a bump of (pid, epoch): the next epoch,
// or a new producer id at epoch 0 when the epoch is exhausted (Kafka:
// TransactionMetadata.isEpochExhausted, epoch >= Short.MaxValue - 1).
// newPID is called only then.
func nextEpoch(pid int64, epoch int16, newPID func() (int64, error)) (int64, int16, error) {
	if epoch < maxEpochBeforeExhausted {
		return pid, epoch + 1, nil
	}
	id, err := newPID()
	return id, 0, err
}
