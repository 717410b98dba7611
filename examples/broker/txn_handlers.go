package main

import (
	"cmp"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tierlog/tierlog/kafkaerr"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
)

// fencedCode is Kafka's answer to a request from a fenced producer
// epoch: PRODUCER_FENCED from the version that introduced it (KIP-588:
// InitProducerId v4, AddPartitionsToTxn v2, EndTxn v2), the older
// INVALID_PRODUCER_EPOCH before (KafkaApis maps it so).
func fencedCode(version, since int16) int16 {
	if version < since {
		return kerr.InvalidProducerEpoch.Code
	}
	return kerr.ProducerFenced.Code
}

// initTransactionalProducerID serves InitProducerId with a transactional
// id. Kafka: TransactionCoordinator.handleInitProducerId. A new id gets a
// new producer id at epoch 0; a known one keeps its producer id and gets
// the next epoch, which fences the producers of the older epochs. A
// transaction the id left open is aborted first, under a bumped epoch (the
// fence Kafka writes before it answers CONCURRENT_TRANSACTIONS and the
// client retries; here the retry's bump follows at once). A request naming
// the producer id and epoch it had (KIP-360) must name the current ones.
// Library: log.UnifiedLog.AppendAsLeader with OriginCoordinator writes the
// abort markers (record.AppendEndTxnBatch builds them).
func (s *Server) initTransactionalProducerID(r *kmsg.InitProducerIDRequest, resp *kmsg.InitProducerIDResponse) {
	timeout := time.Duration(r.TransactionTimeoutMillis) * time.Millisecond
	if timeout <= 0 || timeout > maxTxnTimeout {
		resp.ErrorCode = kerr.InvalidTransactionTimeout.Code
		return
	}
	t := s.txns.get(*r.TransactionalID, true)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.producerID < 0 {
		pid, err := s.pids.next()
		if err != nil {
			s.logger.Error("producer id block write failed", "err", err)
			resp.ErrorCode = kerr.KafkaStorageError.Code
			return
		}
		t.mu.producerID, t.mu.epoch, t.mu.timeout, t.mu.state = pid, 0, timeout, txnEmpty
		if resp.ErrorCode = s.saveTxnLocked(t); resp.ErrorCode == 0 {
			resp.ProducerID, resp.ProducerEpoch = t.mu.producerID, t.mu.epoch
		} else {
			t.mu.producerID, t.mu.epoch = -1, -1 // not durable: not handed out
		}
		return
	}
	if r.ProducerID >= 0 && (r.ProducerID != t.mu.producerID || r.ProducerEpoch != t.mu.epoch) {
		resp.ErrorCode = fencedCode(r.Version, 4)
		return
	}
	if code := s.finishTxnLocked(t, "InitProducerId"); code != 0 {
		resp.ErrorCode = code
		return
	}
	prev := t.recordLocked()
	pid, epoch, err := nextEpoch(t.mu.producerID, t.mu.epoch, s.pids.next)
	if err != nil {
		s.logger.Error("producer id block write failed", "err", err)
		resp.ErrorCode = kerr.KafkaStorageError.Code
		return
	}
	t.mu.producerID, t.mu.epoch, t.mu.timeout, t.mu.state = pid, epoch, timeout, txnEmpty
	if resp.ErrorCode = s.saveTxnLocked(t); resp.ErrorCode != 0 {
		t.mu.producerID, t.mu.epoch, t.mu.timeout, t.mu.state = prev.ProducerID, prev.ProducerEpoch,
			time.Duration(prev.TimeoutMs)*time.Millisecond, prev.State
		return
	}
	resp.ProducerID, resp.ProducerEpoch = pid, epoch
}

// finishTxnLocked brings t to a state where a new epoch may be handed
// out: an Ongoing transaction is fenced and aborted (fenceLocked), a
// Prepare state writes its remaining markers. why names the cause in the
// log. It returns 0 or the error code to answer (CONCURRENT_TRANSACTIONS
// when markers could not be written: the client retries).
//
// REQUIRES: t.mu held.
func (s *Server) finishTxnLocked(t *txn, why string) int16 {
	if t.mu.state == txnOngoing {
		if code := s.fenceLocked(t, why); code != 0 {
			return code
		}
	}
	if t.mu.state == txnPrepareCommit || t.mu.state == txnPrepareAbort {
		if err := s.writeMarkersLocked(t); err != nil {
			return kerr.ConcurrentTransactions.Code
		}
	}
	return 0
}

// fenceLocked aborts t's Ongoing transaction under a bumped epoch (Kafka:
// prepareFenceProducerEpoch, then the abort): the markers carry the new
// epoch, so every partition of the transaction refuses the old epoch's
// batches from then on, and the coordinator refuses its requests. An
// exhausted epoch is not bumped (the next InitProducerId gives a new
// producer id instead, which fences as well).
//
// REQUIRES: t.mu held; t.mu.state is txnOngoing.
func (s *Server) fenceLocked(t *txn, why string) int16 {
	prev := t.recordLocked()
	if t.mu.epoch < maxEpochBeforeExhausted {
		t.mu.epoch++
	}
	t.mu.state = txnPrepareAbort
	if code := s.saveTxnLocked(t); code != 0 {
		t.mu.epoch, t.mu.state = prev.ProducerEpoch, prev.State
		return code
	}
	s.logger.Info("transaction fenced and aborted", "transactional_id", t.id, "why", why,
		"producer_id", t.mu.producerID, "epoch", t.mu.epoch, "partitions", len(t.mu.partitions))
	if err := s.writeMarkersLocked(t); err != nil {
		return kerr.ConcurrentTransactions.Code
	}
	return 0
}

// saveTxnLocked writes t's record to the state file, and returns 0 or
// KAFKA_STORAGE_ERROR.
//
// REQUIRES: t.mu held.
func (s *Server) saveTxnLocked(t *txn) int16 {
	if err := s.txns.saveLocked(t); err != nil {
		s.logger.Error("transaction state write failed", "transactional_id", t.id, "err", err)
		return kerr.KafkaStorageError.Code
	}
	return 0
}

// checkProducerLocked is the coordinator's check of a request's producer
// id and epoch against t's. Kafka: the checks that open
// handleAddPartitionsToTransaction and handleEndTransaction.
//
// REQUIRES: t.mu held.
func checkProducerLocked(t *txn, pid int64, epoch int16, version, fencedSince int16) int16 {
	switch {
	case t.mu.producerID < 0 || pid != t.mu.producerID:
		return kerr.InvalidProducerIDMapping.Code
	case epoch != t.mu.epoch:
		return fencedCode(version, fencedSince)
	}
	return 0
}

// addPartitionsToTxn adds partitions to the producer's transaction,
// starting one in the Empty and Complete states (made durable as Ongoing
// first). Versions 0 to 3, the client's form; 4 and later are the
// broker-to-broker batches of KIP-890 part 1 (one broker here). Each
// partition must exist (UNKNOWN_TOPIC_OR_PARTITION; the others then
// answer OPERATION_NOT_ATTEMPTED, as Kafka). Kafka:
// TransactionCoordinator.handleAddPartitionsToTransaction. Library: none
// (logmanager.Manager.GetOrCreate checks the partitions through
// partitionLog).
func (s *Server) addPartitionsToTxn(r *kmsg.AddPartitionsToTxnRequest) *kmsg.AddPartitionsToTxnResponse {
	resp := r.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	codes := map[topicPartition]int16{}
	var tps []topicPartition
	unknown := false
	for _, rt := range r.Topics {
		for _, p := range rt.Partitions {
			tp := topicPartition{rt.Topic, p}
			tps = append(tps, tp)
			if _, ok, err := s.partitionLog(rt.Topic, p); err != nil || !ok {
				codes[tp] = kerr.UnknownTopicOrPartition.Code
				unknown = true
			}
		}
	}
	code := int16(0)
	if unknown {
		code = kerr.OperationNotAttempted.Code
	} else {
		code = s.addPartitions(r, tps)
	}
	for _, rt := range r.Topics {
		t := kmsg.NewAddPartitionsToTxnResponseTopic()
		t.Topic = rt.Topic
		for _, p := range rt.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			rp.Partition = p
			rp.ErrorCode = code
			if c, ok := codes[topicPartition{rt.Topic, p}]; ok {
				rp.ErrorCode = c
			}
			t.Partitions = append(t.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

// addPartitions adds tps to the transaction of r's producer and returns
// the error code for every partition.
func (s *Server) addPartitions(r *kmsg.AddPartitionsToTxnRequest, tps []topicPartition) int16 {
	t := s.txns.get(r.TransactionalID, false)
	if t == nil {
		return kerr.InvalidProducerIDMapping.Code
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if code := checkProducerLocked(t, r.ProducerID, r.ProducerEpoch, r.Version, 2); code != 0 {
		return code
	}
	switch t.mu.state {
	case txnPrepareCommit, txnPrepareAbort:
		return kerr.ConcurrentTransactions.Code
	case txnEmpty, txnCompleteCommit, txnCompleteAbort:
		prev := t.mu.state
		t.mu.state = txnOngoing
		if code := s.saveTxnLocked(t); code != 0 {
			t.mu.state = prev
			return code
		}
		t.mu.started = time.Now()
		clear(t.mu.partitions)
	}
	for _, tp := range tps {
		t.mu.partitions[tp] = true
	}
	return 0
}

// endTxn commits or aborts the producer's transaction: the decision
// (PrepareCommit or PrepareAbort) is made durable in the state file, then
// a COMMIT or ABORT marker is written to every partition of the
// transaction, and only then is the answer sent (Kafka answers once the
// decision is durable and writes the markers after; here they are written
// first, so a client that heard of the commit reads it at once). A retry
// of a completed EndTxn is answered as it was. Versions 0 to 4 (5 is
// KIP-890 part 2's epoch bump per transaction). Kafka:
// TransactionCoordinator.handleEndTransaction. Library:
// log.UnifiedLog.AppendAsLeader with OriginCoordinator writes the markers
// (record.AppendEndTxnBatch builds them); the log checks the producer
// epoch and the coordinator epoch, completes the transaction in its
// producer state, adds an aborted one to the transaction index and moves
// the last stable offset.
func (s *Server) endTxn(r *kmsg.EndTxnRequest) *kmsg.EndTxnResponse {
	resp := r.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	t := s.txns.get(r.TransactionalID, false)
	if t == nil {
		resp.ErrorCode = kerr.InvalidProducerIDMapping.Code
		return resp
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if resp.ErrorCode = checkProducerLocked(t, r.ProducerID, r.ProducerEpoch, r.Version, 2); resp.ErrorCode != 0 {
		return resp
	}
	prepare, complete := txnPrepareAbort, txnCompleteAbort
	if r.Commit {
		prepare, complete = txnPrepareCommit, txnCompleteCommit
	}
	switch t.mu.state {
	case complete:
		return resp // a retry
	case prepare:
		// The markers failed before: write those left.
	case txnOngoing:
		t.mu.state = prepare
		if resp.ErrorCode = s.saveTxnLocked(t); resp.ErrorCode != 0 {
			t.mu.state = txnOngoing
			return resp
		}
	default:
		resp.ErrorCode = kerr.InvalidTxnState.Code
		return resp
	}
	if err := s.writeMarkersLocked(t); err != nil {
		resp.ErrorCode = kafkaerr.ErrorCode(err)
	}
	return resp
}

// writeMarkersLocked writes the marker of t's Prepare state (COMMIT for
// PrepareCommit, ABORT for PrepareAbort, with t's producer id and epoch)
// to each partition still in t.mu.partitions, removing it once written,
// and moves t to the Complete state when none is left. Library:
// record.AppendEndTxnBatch and log.UnifiedLog.AppendAsLeader with
// OriginCoordinator, then MaybeIncrementHighWatermark (one replica).
//
// REQUIRES: t.mu held; t.mu.state is a Prepare state.
func (s *Server) writeMarkersLocked(t *txn) error {
	commit := t.mu.state == txnPrepareCommit
	var firstErr error
	for tp := range t.mu.partitions {
		l, ok, err := s.partitionLog(tp.topic, tp.partition)
		if err == nil && ok {
			err = s.writeMarker(l, t.mu.producerID, t.mu.epoch, commit)
		}
		if err != nil {
			s.logger.Error("transaction marker not written", "transactional_id", t.id, "partition", tp.String(), "err", err)
			firstErr = cmp.Or(firstErr, err)
			continue
		}
		delete(t.mu.partitions, tp) // written (or the partition is gone)
	}
	if firstErr != nil {
		return firstErr
	}
	t.mu.state = txnCompleteAbort
	if commit {
		t.mu.state = txnCompleteCommit
	}
	return nil
}

// writeMarker appends one COMMIT or ABORT marker of producer (pid, epoch)
// to l and commits it (one replica: the high watermark follows the log
// end). Library: record.AppendEndTxnBatch, log.UnifiedLog.AppendAsLeader
// with OriginCoordinator (Kafka: the WriteTxnMarkers request a
// coordinator sends each partition leader).
func (s *Server) writeMarker(l *log.UnifiedLog, pid int64, epoch int16, commit bool) error {
	opts := record.DefaultBuilderOptions()
	opts.ProducerID, opts.ProducerEpoch = pid, epoch
	typ := record.ControlAbort
	if commit {
		typ = record.ControlCommit
	}
	marker, err := record.AppendEndTxnBatch(nil, opts, time.Now().UnixMilli(), typ, txnCoordinatorEpoch)
	if err != nil {
		return err
	}
	if _, err := l.AppendAsLeader(marker, leaderEpoch, log.OriginCoordinator); err != nil {
		s.errorCode(l, err) // takes the directory offline on an I/O error
		return err
	}
	_, err = l.MaybeIncrementHighWatermark(l.LogEndOffset())
	return err
}

// produceInTxn appends a partition's transactional batches of producer
// (pid, epoch): the producer must hold its transactional id's current
// epoch (INVALID_PRODUCER_EPOCH, Kafka's produce answer to a fenced
// producer) and have added the partition to its Ongoing transaction
// (INVALID_TXN_STATE, what Kafka answers once KIP-890 part 1 verifies
// it; the coordinator is in this process, so the check is a lookup).
// The check and the append are one step under the transaction's lock, so
// no batch lands after the transaction's marker. Library:
// log.UnifiedLog.AppendAsLeader (appendAndCommit), which starts the
// transaction in the partition's producer state at its first batch.
func (s *Server) produceInTxn(l *log.UnifiedLog, tp topicPartition, pid int64, epoch int16, records []byte) (base, logStart int64, code int16) {
	t := s.txns.byProducerID(pid)
	if t == nil {
		return -1, -1, kerr.InvalidTxnState.Code
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case pid != t.mu.producerID: // a new producer id since the lookup
		return -1, -1, kerr.InvalidTxnState.Code
	case epoch != t.mu.epoch:
		return -1, -1, kerr.InvalidProducerEpoch.Code
	case t.mu.state != txnOngoing || !t.mu.partitions[tp]:
		return -1, -1, kerr.InvalidTxnState.Code
	}
	return s.appendAndCommit(l, records)
}

// abortExpiredTransactions aborts, every interval until the server
// closes, the Ongoing transactions older than their timeout, fencing
// their producers (Kafka: abortTimedOutTransactions, which bumps the
// epoch), and retries the markers of a Prepare state that failed.
func (s *Server) abortExpiredTransactions(interval time.Duration) {
	defer s.wg.Done()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-tick.C:
		}
		for _, t := range s.txns.all() {
			t.mu.Lock()
			switch t.mu.state {
			case txnOngoing:
				if time.Since(t.mu.started) > t.mu.timeout {
					s.fenceLocked(t, "transaction timeout")
				}
			case txnPrepareCommit, txnPrepareAbort:
				_ = s.writeMarkersLocked(t)
			}
			t.mu.Unlock()
		}
	}
}
