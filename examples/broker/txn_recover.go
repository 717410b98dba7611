package main

import (
	"github.com/tierlog/tierlog/log"
)

// openTxn is a transaction a log holds open at start: its partition and
// what the log's producer state knows of it.
type openTxn struct {
	tp topicPartition
	log.OngoingTransaction
}

// txnRecoveryPlan is what a start does with the transactions a crash (or
// a shutdown) left open: planTxnRecovery decides, recoverTransactions
// executes.
type txnRecoveryPlan struct {
	// records are the state file records to write before any marker, by
	// transactional id: an Ongoing transaction becomes PrepareAbort under
	// a bumped epoch (fenced, as a timed-out one), and an epoch below a
	// log's is raised to it.
	records map[string]txnRecord
	// mark lists, by transactional id, the partitions whose open
	// transaction gets the marker of the id's Prepare state (COMMIT for
	// PrepareCommit, ABORT otherwise) with the record's producer id and
	// epoch.
	mark map[string][]topicPartition
	// unknown are the open transactions of producer ids no transactional
	// id holds (the state file was lost or replaced): they get an ABORT
	// marker with the log's epoch, or they would hold the last stable
	// offset, and every read_committed consumer, forever.
	unknown []openTxn
}

// planTxnRecovery joins the state file's records with the transactions
// the logs hold open. Kafka's coordinator, when it loads
// __transaction_state after a failover, completes what is in a Prepare
// state and lets the Ongoing transactions time out; this broker aborts
// them at once (a restart is treated as their timeout: their partitions
// are not in the state file, and their producer cannot know which of its
// batches survived), fencing their producers.
func planTxnRecovery(recs []txnRecord, open []openTxn) txnRecoveryPlan {
	p := txnRecoveryPlan{records: map[string]txnRecord{}, mark: map[string][]topicPartition{}}
	byPID := map[int64]txnRecord{}
	for _, r := range recs {
		if r.State == txnOngoing {
			if r.ProducerEpoch < maxEpochBeforeExhausted {
				r.ProducerEpoch++
			}
			r.State = txnPrepareAbort
			p.records[r.TransactionalID] = r
		}
		byPID[r.ProducerID] = r
	}
	for _, o := range open {
		r, ok := byPID[o.ProducerID]
		if !ok {
			p.unknown = append(p.unknown, o)
			continue
		}
		changed := false
		if r.State != txnPrepareCommit && r.State != txnPrepareAbort {
			// Open in a log but not in the state file: the file is
			// older than the log (replaced). Abort.
			r.State, changed = txnPrepareAbort, true
		}
		if o.ProducerEpoch > r.ProducerEpoch {
			r.ProducerEpoch, changed = o.ProducerEpoch, true
		}
		if changed {
			p.records[r.TransactionalID] = r
			byPID[r.ProducerID] = r
		}
		p.mark[r.TransactionalID] = append(p.mark[r.TransactionalID], o.tp)
	}
	return p
}

// recoverTransactions ends, before the broker serves, every transaction
// the logs hold open (planTxnRecovery): it writes the state file's new
// records, then the markers. A marker that fails is left to the
// background task (abortExpiredTransactions retries a Prepare state's
// markers); one of an unknown producer is only logged (its log is then
// offline, KAFKA_STORAGE_ERROR). Library: log.UnifiedLog.OngoingTransactions
// (each log's producer state, rebuilt from the log at an unclean start),
// and the markers through log.UnifiedLog.AppendAsLeader with
// OriginCoordinator.
//
// No request is served yet: the txns' locks are taken only for the
// methods that require them.
func (s *Server) recoverTransactions() error {
	var open []openTxn
	logs := map[topicPartition]*log.UnifiedLog{}
	for _, p := range s.mgr.Partitions() {
		if p.Future {
			continue
		}
		l, err := s.mgr.Get(p.Partition)
		if err != nil {
			continue // commitLogEnds warned
		}
		tp := topicPartition{p.Partition.Topic, p.Partition.Partition}
		logs[tp] = l
		for _, o := range l.OngoingTransactions() {
			open = append(open, openTxn{tp, o})
		}
	}
	txns := map[string]*txn{}
	var recs []txnRecord
	for _, t := range s.txns.all() {
		if t.durable.ProducerID >= 0 {
			txns[t.id] = t
			recs = append(recs, t.durable)
		}
	}
	plan := planTxnRecovery(recs, open)

	save := map[*txn]txnRecord{}
	for id, r := range plan.records {
		t := txns[id]
		t.mu.Lock()
		t.mu.producerID, t.mu.epoch, t.mu.state = r.ProducerID, r.ProducerEpoch, r.State
		save[t] = r
	}
	var err error
	if len(save) > 0 {
		err = s.txns.save(save)
	}
	for t := range save {
		t.mu.Unlock()
	}
	if err != nil {
		return err
	}
	for id, tps := range plan.mark {
		t := txns[id]
		t.mu.Lock()
		for _, tp := range tps {
			t.mu.partitions[tp] = true
		}
		s.logger.Warn("transaction left open by the last run", "transactional_id", id, "producer_id", t.mu.producerID,
			"epoch", t.mu.epoch, "decision", t.mu.state.String(), "partitions", len(tps))
		_ = s.writeMarkersLocked(t) // logged; retried by abortExpiredTransactions
		t.mu.Unlock()
	}
	for _, t := range txns {
		t.mu.Lock()
		if (t.mu.state == txnPrepareCommit || t.mu.state == txnPrepareAbort) && len(t.mu.partitions) == 0 {
			_ = s.writeMarkersLocked(t) // none left: moves to the Complete state
		}
		t.mu.Unlock()
	}
	for _, o := range plan.unknown {
		s.logger.Warn("transaction of a producer the coordinator does not know (transaction state lost?): aborted",
			"partition", o.tp.String(), "producer_id", o.ProducerID, "epoch", o.ProducerEpoch, "first_offset", o.FirstOffset)
		if err := s.writeMarker(logs[o.tp], o.ProducerID, o.ProducerEpoch, false); err != nil {
			s.logger.Error("abort marker not written: the partition's last stable offset stays at the transaction",
				"partition", o.tp.String(), "producer_id", o.ProducerID, "err", err)
		}
	}
	return nil
}
