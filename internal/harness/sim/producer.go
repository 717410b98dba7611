package sim

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/tierstate"
)

// Idempotent producers (KIP-98's enable.idempotence, the Java client's
// default since Kafka 3.0). Each simulated producer has a producer id,
// epoch 0 and a next sequence; its batches carry them, and their values
// name the producer and the record's sequence ("p<producer>-<seq>"), so
// the committed log shows which record of which producer sits where.
//
// The client's side follows the Java producer with acks=all and
// max.in.flight.requests.per.connection=5:
//   - a batch is sent once (ProduceIdempotent) and stays unacknowledged
//     until an answer reaches the client after the high watermark passed
//     it (acks=all); the answer can be lost (a request timeout, a broken
//     connection), and a leader change fails the requests in flight
//     (NOT_LEADER_OR_FOLLOWER);
//   - up to five batches are in flight; a new batch is sent only while
//     every unacknowledged batch is still in flight on the leader and in
//     the leader epoch it was sent to (otherwise the client is retrying:
//     RecordAccumulator drains only the first batch by sequence of a
//     partition in retry);
//   - RetryProduce resends the oldest unacknowledged batch, bytes
//     unchanged (same producer id, epoch and sequence).
//
// The broker must answer a retry of a batch it holds with its original
// offsets (DUPLICATE_SEQUENCE_NUMBER handling: Kafka's
// ProducerStateManager keeps each producer's last five batches) and
// refuse a batch whose sequence does not follow the producer's last
// (OUT_OF_ORDER_SEQUENCE_NUMBER). The invariants (checkProducers):
//   - Duplicate: a record is committed at one offset only (a retry
//     appended again duplicates it), a duplicate answer names the
//     offsets holding the batch, and the retry of a committed batch is
//     not refused as out of order (unless the leader's log started above
//     the batch, Broker.stateFrom: it never held the batch's state, and
//     Kafka's leader refuses it the same way);
//   - SequenceGap: the committed records of a producer follow one
//     another by sequence (a batch accepted out of order leaves a gap),
//     but across a committed range an operator or an election gave up.

// producerCount is the number of idempotent producers of a cluster.
const producerCount = 2

// maxInFlight is the client's max.in.flight.requests.per.connection
// (Kafka's limit with idempotence).
const maxInFlight = 5

// producerIDBase is the first simulated producer id (any id > 0 works).
const producerIDBase = 1000

// simProducer is one idempotent producer.
type simProducer struct {
	// index is the producer's number, 1-based (its id is producerIDBase +
	// index).
	index   int
	nextSeq int32
	// unacked are the batches sent and not acknowledged, by sequence.
	unacked []*sentBatch
}

func (p *simProducer) id() int64 { return producerIDBase + int64(p.index) }

// sentBatch is one batch of a producer: its sequences and its bytes'
// inputs, so that a retry sends the same batch.
type sentBatch struct {
	seq         int32
	n           int
	timestampMs int64
	// inFlight: sent to leader in leaderEpoch and appended there, its
	// answer not lost; the answer arrives once the batch is committed.
	inFlight    bool
	leader      int32
	leaderEpoch int32
	first, last int64 // the offsets of the append (in flight only)
}

func producerValue(index int, seq int32) string { return fmt.Sprintf("p%d-%d", index, seq) }

// parseProducerValue is producerValue's inverse (ok false for another
// value).
func parseProducerValue(v string) (index int, seq int32, ok bool) {
	rest, found := strings.CutPrefix(v, "p")
	if !found {
		return 0, 0, false
	}
	a, b, found := strings.Cut(rest, "-")
	if !found {
		return 0, 0, false
	}
	i, err1 := strconv.Atoi(a)
	s, err2 := strconv.ParseInt(b, 10, 32)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return i, int32(s), true
}

func (p *simProducer) build(sb *sentBatch) []byte {
	opts := record.DefaultBuilderOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = p.id(), 0, sb.seq
	return buildBatch(opts, sb.timestampMs, sb.n, func(i int) []byte {
		return []byte(producerValue(p.index, sb.seq+int32(i)))
	})
}

// producerState is the cluster's producers and what the checker saw of
// the committed records.
type producerState struct {
	producers []*simProducer
	// seenAt maps each committed producer value to its offset; checkedTo
	// is where the checker's scan of the committed offsets stopped.
	seenAt    map[string]int64
	checkedTo int64
	// lastSeq and lastAt are each producer's last committed sequence and
	// its offset (by index).
	lastSeq map[int]int32
	lastAt  map[int]int64
	// cuts are the offsets an unclean or last-known-leader election
	// discarded the committed records from (model.discardFrom): the
	// sequences of the records it discarded are gone with them.
	cuts []int64
	// cutsSeen is how many of model.cuts the checker has taken.
	cutsSeen int
	// everSeq is each producer's highest sequence the checker ever saw
	// committed (by index), kept across the scans a cut starts again.
	everSeq map[int]int32
}

func (c *Cluster) producer(index int) (*simProducer, error) {
	ps := &c.prod
	if ps.producers == nil {
		ps.seenAt, ps.lastSeq, ps.lastAt = map[string]int64{}, map[int]int32{}, map[int]int64{}
		for i := 1; i <= producerCount; i++ {
			ps.producers = append(ps.producers, &simProducer{index: i})
		}
	}
	if index < 1 || index > len(ps.producers) {
		return nil, notApplicable("no producer %d", index)
	}
	return ps.producers[index-1], nil
}

// settleProducers settles every producer's batches at the end of a step
// that ran (Cluster.do): an action that does not apply changes nothing,
// so a replay of the steps taken settles at the same points.
func (c *Cluster) settleProducers() {
	for _, p := range c.prod.producers {
		c.settle(p)
	}
}

// settle delivers the answers of p's batches in flight, in sequence
// order as the connection delivers them (acks=all: the high watermark
// passes a producer's batches in that order): the committed ones are
// acknowledged up to the first batch that is not, which waits for a
// retry. A batch whose leader or leader epoch changed failed
// (NOT_LEADER_OR_FOLLOWER). The unacknowledged batches are thus always
// the producer's last ones, at most maxInFlight of them: the broker's
// window of five batches per producer covers every retry.
func (c *Cluster) settle(p *simProducer) {
	lb := c.leaderBroker()
	for _, sb := range p.unacked {
		if sb.inFlight && (lb == nil || lb.ID != sb.leader || c.ctrl.rec.LeaderEpoch != sb.leaderEpoch) {
			sb.inFlight = false
		}
	}
	acked := 0
	for _, sb := range p.unacked {
		if !sb.inFlight || lb.Log().HighWatermark() <= sb.last {
			break
		}
		acked++
	}
	p.unacked = p.unacked[acked:]
}

// classicProduceLeader is the leader taking classic produce, or why none
// does (not applicable: the client retries later).
func (c *Cluster) classicProduceLeader() (*Broker, error) {
	if c.ctrl.rec.State.SealCommitted() {
		// Diskless produce has no producer state in this model.
		return nil, notApplicable("idempotent produce is classic only")
	}
	b := c.leaderBroker()
	if b == nil || b.gate == nil {
		return nil, notApplicable("no leader")
	}
	return b, nil
}

// ProduceIdempotent sends a new batch of n records from producer index
// (1-based) to the leader; with lostAnswer the answer never reaches the
// client, which retries the batch (RetryProduce).
func (c *Cluster) ProduceIdempotent(index, n int, lostAnswer bool) error {
	return c.do("produce-idempotent", c.ctrl.rec.Leader, func() (string, error) {
		c.rec.note("producer", index)
		c.rec.note("n", n)
		if lostAnswer {
			c.rec.note("lost-answer", "")
		}
		p, err := c.producer(index)
		if err != nil {
			return "", err
		}
		if len(p.unacked) >= maxInFlight {
			return "", notApplicable("producer %d has %d batches in flight", index, len(p.unacked))
		}
		for _, sb := range p.unacked {
			if !sb.inFlight {
				return "", notApplicable("producer %d is retrying", index)
			}
		}
		b, err := c.classicProduceLeader()
		if err != nil {
			return "", err
		}
		sb := &sentBatch{seq: p.nextSeq, n: n, timestampMs: c.nowMs}
		p.nextSeq += int32(n)
		p.unacked = append(p.unacked, sb)
		return c.sendIdempotent(b, p, sb, lostAnswer)
	})
}

// RetryProduce resends producer index's oldest unacknowledged batch
// (lostAnswer: its answer is lost again).
func (c *Cluster) RetryProduce(index int, lostAnswer bool) error {
	return c.do("retry-produce", c.ctrl.rec.Leader, func() (string, error) {
		c.rec.note("producer", index)
		if lostAnswer {
			c.rec.note("lost-answer", "")
		}
		p, err := c.producer(index)
		if err != nil {
			return "", err
		}
		if len(p.unacked) == 0 || p.unacked[0].inFlight {
			return "", notApplicable("producer %d has no batch to retry", index)
		}
		b, err := c.classicProduceLeader()
		if err != nil {
			return "", err
		}
		return c.sendIdempotent(b, p, p.unacked[0], lostAnswer)
	})
}

// sendIdempotent sends sb to leader b and handles the answer.
func (c *Cluster) sendIdempotent(b *Broker, p *simProducer, sb *sentBatch, lostAnswer bool) (string, error) {
	epoch := c.ctrl.rec.LeaderEpoch
	what := fmt.Sprintf("producer %d seq [%d, %d]", p.index, sb.seq, sb.seq+int32(sb.n)-1)
	info, err := b.gate.AppendAsLeader(p.build(sb), epoch, log.OriginClient)
	var ooo *log.OutOfOrderSequenceError
	switch {
	case errors.As(err, &ooo):
		note := fmt.Sprintf("%s: OUT_OF_ORDER_SEQUENCE_NUMBER (%v)", what, err)
		// The batch is committed: the leader's producer state lost it
		// (the retry is within the window of five batches).
		// A leader whose log started above the batch never held its
		// state (Broker.stateFrom): Kafka answers the same.
		at, ok := c.prod.seenAt[producerValue(p.index, sb.seq)]
		if ok && !c.model.given(at, at+1) && at+int64(sb.n) > b.stateFrom {
			return note, c.violation(Duplicate, b.ID, at, "retry of seq %d, committed at %d, refused as out of order: %v",
				sb.seq, at, err)
		}
		return note, nil
	case err != nil:
		return fmt.Sprintf("%s refused: %v", what, err), nil
	}
	l := b.Log()
	note := fmt.Sprintf("%s [%d, %d) epoch %d", what, info.FirstOffset, info.LastOffset+1, epoch)
	if info.Duplicate {
		note += " DUPLICATE"
		if v := c.checkDuplicateAnswer(b, p, sb, info); v != nil {
			return note, v
		}
	}
	c.advanceHW()
	note += fmt.Sprintf(" hw=%d", l.HighWatermark())
	if lostAnswer {
		return note + " answer lost", nil
	}
	sb.inFlight, sb.leader, sb.leaderEpoch, sb.first, sb.last = true, b.ID, epoch, info.FirstOffset, info.LastOffset
	return note, nil
}

// checkDuplicateAnswer: a duplicate's offsets hold the retried batch's
// records: the committed values where the model knows them, else the
// leader's local log (offsets in neither cannot be checked).
func (c *Cluster) checkDuplicateAnswer(b *Broker, p *simProducer, sb *sentBatch, info log.AppendInfo) *Violation {
	if info.LastOffset-info.FirstOffset+1 != int64(sb.n) {
		return c.violation(Duplicate, b.ID, info.FirstOffset, "duplicate answer [%d, %d] for a batch of %d records",
			info.FirstOffset, info.LastOffset, sb.n)
	}
	held := map[int64]string{}
	err := readLocal(b.Log(), info.FirstOffset, info.LastOffset+1, func(o int64, val string) error {
		held[o] = val
		return nil
	})
	if err != nil {
		c.trace.detail("duplicate answer: read [%d, %d]: %v", info.FirstOffset, info.LastOffset, err)
	}
	logStart := b.Log().LogStartOffset()
	for i := range int64(sb.n) {
		o := info.FirstOffset + i
		want := producerValue(p.index, sb.seq+int32(i))
		got, ok := c.model.values[o]
		if ok && o < logStart && c.model.cutAtOrBelow(o) {
			// Below the leader's log start, after an unclean or
			// last-known-leader election discarded from o or below: the
			// committed value may be of a lineage that a later such
			// election gave up for the leader's, whose records there
			// were deleted; the leader's log cannot show which.
			ok = false
		}
		if !ok {
			got, ok = held[o]
		}
		if ok && got != want {
			return c.violation(Duplicate, b.ID, o, "duplicate answer [%d, %d]: offset %d holds %q, not %q",
				info.FirstOffset, info.LastOffset, o, got, want)
		}
	}
	return nil
}

// lostBetween reports whether an accepted loss lies in (a, b).
func (m *model) lostBetween(a, b int64) bool {
	for _, r := range m.lost {
		if r[0] < b && r[1] > a+1 {
			return true
		}
	}
	return false
}

// checkProducers scans the newly committed offsets: each producer value
// is committed once, and each producer's sequences follow one another.
// An offset committed without a known value yet (a WAL answer the
// simulation did not see) stops the scan until a replica shows it.
func (c *Cluster) checkProducers() *Violation {
	ps := &c.prod
	if ps.producers == nil {
		return nil
	}
	if len(c.model.cuts) > ps.cutsSeen {
		// An election discarded committed records (and its new leader's
		// may have taken their offsets at once): scan again.
		ps.cuts = append(ps.cuts, c.model.cuts[ps.cutsSeen:]...)
		ps.cutsSeen = len(c.model.cuts)
		ps.seenAt, ps.lastSeq, ps.lastAt, ps.checkedTo = map[string]int64{}, map[int]int32{}, map[int]int64{}, 0
	}
	for ; ps.checkedTo < c.model.end; ps.checkedTo++ {
		o := ps.checkedTo
		v, ok := c.model.values[o]
		if !ok {
			if c.model.given(o, o+1) {
				continue
			}
			return nil
		}
		idx, seq, ok := parseProducerValue(v)
		if !ok {
			continue
		}
		// A copy DeleteRecords removed does not count: a replica whose
		// log was reset at the leader's log start (or emptied) holds no
		// state of the producers whose batches were deleted, and takes
		// their retry as new, as Kafka does (ProducerAppendInfo's
		// checkSequence accepts any sequence from a producer with no
		// epoch: "all producer records have been deleted due to
		// retention or the DeleteRecords API").
		if at, dup := ps.seenAt[v]; dup && !c.model.given(at, at+1) && at >= c.model.deletedBelow {
			return c.violation(Duplicate, -1, o, "%q committed at %d and at %d", v, at, o)
		}
		ps.seenAt[v] = o
		last, seen := ps.lastSeq[idx]
		prevAt := ps.lastAt[idx]
		if !seen {
			last, prevAt = -1, -1
		}
		// A committed range given up between (or at) the previous record
		// and this one may hold the sequences in between, or the first
		// copy of a batch retried after its loss; so may records
		// DeleteRecords removed (a replica without the producer's state
		// takes any sequence, as above).
		gaveUp := c.model.lostBetween(prevAt, o) || (seen && c.model.given(prevAt, prevAt+1)) ||
			(seen && prevAt < c.model.deletedBelow) ||
			slices.ContainsFunc(ps.cuts, func(cut int64) bool { return prevAt < cut && cut <= o })
		// An election that discarded committed records (a cut) may have
		// discarded this producer's sequences from the previous record's
		// offset on in one lineage, while the lineage that won kept an
		// earlier record of the producer and then a later batch: the
		// producer had those sequences acknowledged and goes on after
		// them, and a leader that has no state for it (its log's records
		// of the producer lost with the discarded ones, or below a
		// truncation) takes any sequence, as Kafka's checkSequence does.
		// The gap is the discarded records: every skipped sequence was
		// committed once (at most the highest ever seen). A record
		// going back (seq <= last) is never excused.
		discarded := len(ps.cuts) > 0 && seq > last+1 && seq-1 <= ps.everSeq[idx]
		if seq != last+1 && !gaveUp && !discarded {
			return c.violation(SequenceGap, -1, o, "producer %d: sequence %d committed after %d (at %d)", idx, seq, last, prevAt)
		}
		ps.lastSeq[idx], ps.lastAt[idx] = seq, o
		if ps.everSeq == nil {
			ps.everSeq = map[int]int32{}
		}
		if ever, ok := ps.everSeq[idx]; !ok || seq > ever {
			ps.everSeq[idx] = seq
		}
	}
	return nil
}

// applyProducer runs a producer's script command: "produce-idempotent
// producer=P n=N [lost-answer]" or "retry-produce producer=P
// [lost-answer]".
func (a Action) applyProducer(c *Cluster) error {
	p, ok, err := a.intArg("producer")
	if err == nil && !ok {
		err = fmt.Errorf("%w: %q has no producer", ErrUnreplayable, a)
	}
	if err != nil {
		return err
	}
	_, lost := a.arg("lost-answer")
	if a.Cmd == "retry-produce" {
		return c.RetryProduce(int(p), lost)
	}
	n, ok, err := a.intArg("n")
	if err == nil && !ok {
		err = fmt.Errorf("%w: %q has no n", ErrUnreplayable, a)
	}
	if err != nil {
		return err
	}
	return c.ProduceIdempotent(int(p), int(n), lost)
}

// DeleteRecords is an admin client's DeleteRecords request
// (kafka-delete-records.sh) before the switch: the leader raises its log
// start offset to offset, at most its high watermark (Kafka:
// UnifiedLog.maybeIncrementLogStartOffset with ClientRecordDeletion);
// followers raise theirs from the leader's in their next fetch. The
// records below it are gone for good (model.deletedBelow); producers
// whose batches lie below it keep their state (idempotence still
// answers their retries).
func (c *Cluster) DeleteRecords(offset int64) error {
	return c.do("delete-records", c.ctrl.rec.Leader, func() (string, error) {
		c.rec.note("offset", offset)
		b := c.leaderBroker()
		if b == nil || c.ctrl.rec.State.Phase() != tierstate.PhaseClassic {
			return "", notApplicable("no classic leader")
		}
		l := b.Log()
		if offset <= l.LogStartOffset() || offset > l.HighWatermark() {
			return "", notApplicable("offset %d outside (%d, %d]", offset, l.LogStartOffset(), l.HighWatermark())
		}
		// Given up before the call: a raise that fails after its
		// commit point (a crash while the epoch checkpoint is written)
		// still deleted the records, as an admin whose request got an
		// error must assume.
		c.model.deletedBelow = max(c.model.deletedBelow, offset)
		if _, err := l.MaybeIncrementLogStartOffset(offset); err != nil {
			return "", err
		}
		return fmt.Sprintf("log start %d local start %d", l.LogStartOffset(), l.LocalLogStartOffset()), nil
	})
}

// followLogStart raises follower f's log start offset to the leader's,
// as far as its high watermark allows (Kafka: the follower's
// maybeIncrementLogStartOffset with LeaderOffsetIncremented after a
// fetch).
func followLogStart(ll, fl *log.UnifiedLog) error {
	to := min(ll.LogStartOffset(), fl.HighWatermark())
	if to <= fl.LogStartOffset() {
		return nil
	}
	_, err := fl.MaybeIncrementLogStartOffset(to)
	return err
}

// producerMarks is each producer's last batch in a broker's log when the
// broker went down between two operations (Crash) or stopped cleanly
// (Stop), for the check at its restart (checkRestartedProducers). fs is
// the disk the broker comes back on; a cut inside an operation
// (crashfs.go), a lost or wiped disk leave none.
type producerMarks struct {
	fs   *vfs.MemFS
	last map[int64]log.BatchMetadata
}

// markProducers records l's producers for a restart on fs (nil without
// a log).
func markProducers(l *log.UnifiedLog, fs *vfs.MemFS) *producerMarks {
	if l == nil {
		return nil
	}
	m := &producerMarks{fs: fs, last: map[int64]log.BatchMetadata{}}
	for _, p := range l.ActiveProducers() {
		if n := len(p.Batches); n > 0 {
			m.last[p.ProducerID] = p.Batches[n-1]
		}
	}
	return m
}

// checkRestartedProducers: a restart changes no idempotent producer's
// answer (Kafka's LogLoaderTest, testLoadProducersAfterDeleteRecordsMidSegment;
// log.TestProducerStateRestartProperty). Every producer whose last batch
// the restarted log still holds (it ends below the log end) is known with
// that batch or a later one: a producer whose state the recovery dropped
// has its retry appended again. Kafka keeps a producer's state when
// DeleteRecords or retention remove its batches (it expires by time
// only), so its batches below the log start count too. The Duplicate
// check of the committed records cannot see this: a replica reset at the
// leader's log start does take such a retry as new (checkProducers).
func (c *Cluster) checkRestartedProducers(b *Broker) *Violation {
	m := b.prodMarks
	b.prodMarks = nil
	l := b.Log()
	if m == nil || m.fs != b.fs || l == nil {
		return nil
	}
	after := map[int64]int32{}
	for _, p := range l.ActiveProducers() {
		if n := len(p.Batches); n > 0 {
			after[p.ProducerID] = p.Batches[n-1].LastSeq
		}
	}
	pids := slices.Sorted(maps.Keys(m.last))
	leo := l.LogEndOffset()
	for _, pid := range pids {
		bm := m.last[pid]
		if bm.LastOffset >= leo {
			continue // the crash took the batch
		}
		if seq, ok := after[pid]; !ok || seq < bm.LastSeq {
			known := "unknown"
			if ok {
				known = fmt.Sprintf("last sequence %d", seq)
			}
			o := l.Offsets()
			return c.violation(Duplicate, b.ID, bm.LastOffset,
				"restart forgot producer %d's batch ending at %d (sequence %d), now %s (log start %d, local start %d, log end %d): its retry would be appended again",
				pid, bm.LastOffset, bm.LastSeq, known, o.LogStartOffset, o.LocalLogStartOffset, o.LogEndOffset)
		}
	}
	return nil
}
