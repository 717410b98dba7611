package producer

import (
	"cmp"
	"slices"
	"sort"

	"github.com/tierlog/tierlog/internal/invariants"
	"github.com/tierlog/tierlog/log/record"
)

// Options configures a Manager. The zero value is the default.
type Options struct {
	// StrictUnknownProducer makes a client batch from a producer without
	// state (never seen, expired, or dropped by TruncateHead) fail with
	// an *UnknownProducerIDError unless it starts at sequence 0, as Kafka
	// before 2.5 did. Default false: such a batch is accepted at any
	// sequence, as Kafka does since KIP-360 (a producer whose state was
	// lost to retention or expiration keeps producing).
	StrictUnknownProducer bool
}

// TxnMetadata is one transaction of the partition. Kafka: TxnMetadata.
type TxnMetadata struct {
	ProducerID int64
	// FirstOffset is the base offset of the transaction's first batch
	// in this partition (inclusive).
	FirstOffset int64
	// LastOffset is the offset of the transaction's marker, -1 while the
	// transaction is ongoing.
	LastOffset int64
}

// CompletedTxn is a transaction closed by a marker in an append. Kafka:
// CompletedTxn.
type CompletedTxn struct {
	ProducerID int64
	// FirstOffset is the transaction's first offset; LastOffset its
	// marker's offset. Both inclusive.
	FirstOffset int64
	LastOffset  int64
	// IsAborted is true for an ABORT marker.
	IsAborted bool
	// LastStableOffset is the last stable offset right after the marker
	// (the first offset of the oldest other ongoing transaction, or
	// LastOffset+1), set by Apply: the value the aborted-transaction index
	// stores.
	LastStableOffset int64
}

// AbortedTxn returns the transaction index entry of an aborted c.
func (c CompletedTxn) AbortedTxn() AbortedTxn {
	return AbortedTxn{ProducerID: c.ProducerID, FirstOffset: c.FirstOffset,
		LastOffset: c.LastOffset, LastStableOffset: c.LastStableOffset}
}

// Manager is the producer state of one partition: per producer id its
// epoch, recent batches and open transaction, plus the partition's
// ongoing and unreplicated transactions. Kafka: ProducerStateManager.
//
// A Manager is not safe for concurrent use: the log calls it with its
// mutex held (see the package comment).
type Manager struct {
	opts Options

	producers map[int64]*entry
	// ongoing are the open transactions, sorted by FirstOffset.
	// Invariant: a producer with currentTxnFirstOffset f >= 0 has an
	// ongoing entry at f, and vice versa.
	ongoing []TxnMetadata
	// unreplicated are completed transactions whose marker may be at or
	// above the high watermark, sorted by FirstOffset. They hold back the
	// first unstable offset until OnHighWatermarkUpdated passes them.
	unreplicated []TxnMetadata
	// mapEndOffset is the offset the state is known up to (exclusive):
	// the next offset to apply. Kafka: lastMapOffset.
	mapEndOffset int64

	// pending is the one AppendInfo PrepareAppend hands out, reused so
	// that appends allocate nothing. gen invalidates it: every change of
	// the state outside Apply increments gen.
	pending AppendInfo
	gen     uint64
	// iter reads the record of a transaction marker.
	iter record.Iter
}

// NewManager returns an empty Manager whose state is known up to offset
// 0.
func NewManager(opts Options) *Manager {
	return &Manager{opts: opts, producers: make(map[int64]*entry)}
}

// invalidate makes any outstanding AppendInfo unusable.
func (m *Manager) invalidate() { m.gen++ }

// MapEndOffset returns the offset the state is known up to (exclusive):
// every batch below it has been applied. Kafka: mapEndOffset.
func (m *Manager) MapEndOffset() int64 { return m.mapEndOffset }

// SetMapEndOffset sets the map end offset without changing the state:
// at a roll (the new segment's base) and after an append of batches
// without a producer id. Kafka: updateMapEndOffset.
func (m *Manager) SetMapEndOffset(offset int64) { m.mapEndOffset = offset }

// FirstUnstableOffset returns the first offset of the oldest transaction
// that is ongoing or whose marker may not be replicated yet, and false
// if there is none. Kafka: firstUnstableOffset.
func (m *Manager) FirstUnstableOffset() (int64, bool) {
	off, ok := int64(0), false
	if len(m.ongoing) > 0 {
		off, ok = m.ongoing[0].FirstOffset, true
	}
	if len(m.unreplicated) > 0 && (!ok || m.unreplicated[0].FirstOffset < off) {
		off, ok = m.unreplicated[0].FirstOffset, true
	}
	return off, ok
}

// FirstUndecidedOffset returns the first offset of the oldest ongoing
// transaction, ignoring replication. Kafka: firstUndecidedOffset.
func (m *Manager) FirstUndecidedOffset() (int64, bool) {
	if len(m.ongoing) == 0 {
		return 0, false
	}
	return m.ongoing[0].FirstOffset, true
}

// LastStableOffset returns the last stable offset for high watermark hw:
// the first unstable offset if it is below hw, else hw (Kafka's
// UnifiedLog.lastStableOffset).
func (m *Manager) LastStableOffset(hw int64) int64 {
	if fuo, ok := m.FirstUnstableOffset(); ok && fuo < hw {
		return fuo
	}
	return hw
}

// OnHighWatermarkUpdated forgets the completed transactions whose marker
// is below hw: they no longer hold back the last stable offset. Kafka:
// onHighWatermarkUpdated.
func (m *Manager) OnHighWatermarkUpdated(hw int64) {
	m.removeUnreplicatedBelow(hw)
}

func (m *Manager) removeUnreplicatedBelow(offset int64) {
	m.unreplicated = slices.DeleteFunc(m.unreplicated, func(t TxnMetadata) bool {
		return t.LastOffset < offset
	})
}

// OnLogStartOffsetIncremented is Kafka's reaction to a log start offset
// advance (DeleteRecords, retention): completed transactions below it
// are forgotten and the map end offset is raised to it; producers are
// kept (they expire by time). Use it or TruncateHead; see the package
// comment.
func (m *Manager) OnLogStartOffsetIncremented(logStart int64) {
	m.removeUnreplicatedBelow(logStart)
	m.mapEndOffset = max(m.mapEndOffset, logStart)
}

// TruncateHead drops what lies below a new log start offset: each
// producer's batches that end below it, the producers left without a
// batch at or above it (with their ongoing transaction), and completed
// transactions below it; the map end offset is raised to it. This is the
// older rule "a log start advance drops producers whose last batch is
// below it" (Kafka before 2.4, ProducerStateManager.truncateHead).
func (m *Manager) TruncateHead(logStart int64) {
	m.invalidate()
	for pid, e := range m.producers {
		e.removeBatchesBelow(logStart)
		if e.lastDataOffset() >= logStart {
			continue
		}
		if e.currentTxnFirstOffset >= 0 {
			m.removeOngoing(e.currentTxnFirstOffset)
		}
		delete(m.producers, pid)
	}
	m.removeUnreplicatedBelow(logStart)
	m.mapEndOffset = max(m.mapEndOffset, logStart)
	m.checkInvariants()
}

// TruncateFullyAndStartAt forgets every producer and transaction; the
// state is then known (empty) up to offset. Kafka:
// truncateFullyAndStartAt, minus the snapshot files (DeleteSnapshotsAbove
// and DeleteSnapshotsBelow).
func (m *Manager) TruncateFullyAndStartAt(offset int64) {
	m.invalidate()
	clear(m.producers)
	m.ongoing = m.ongoing[:0]
	m.unreplicated = m.unreplicated[:0]
	m.mapEndOffset = offset
}

// RemoveExpired drops the producers idle for at least expirationMs at
// nowMs (nowMs - LastTimestamp >= expirationMs) that have no open
// transaction, and returns how many it dropped. Kafka:
// removeExpiredProducers, producer.id.expiration.ms.
func (m *Manager) RemoveExpired(nowMs, expirationMs int64) int {
	m.invalidate()
	n := 0
	for pid, e := range m.producers {
		if isExpired(e, nowMs, expirationMs) {
			delete(m.producers, pid)
			n++
		}
	}
	return n
}

func isExpired(e *entry, nowMs, expirationMs int64) bool {
	return e.currentTxnFirstOffset < 0 && nowMs-e.lastTimestamp >= expirationMs
}

// LastEntry returns a copy of a producer's state.
func (m *Manager) LastEntry(producerID int64) (ProducerStateEntry, bool) {
	e, ok := m.producers[producerID]
	if !ok {
		return ProducerStateEntry{}, false
	}
	return e.export(producerID), true
}

// ProducerCount returns the number of producers with state.
func (m *Manager) ProducerCount() int { return len(m.producers) }

// ActiveProducers returns a copy of every producer's state, by producer
// id. Kafka: activeProducers.
func (m *Manager) ActiveProducers() []ProducerStateEntry {
	out := make([]ProducerStateEntry, 0, len(m.producers))
	for _, pid := range m.sortedIDs() {
		out = append(out, m.producers[pid].export(pid))
	}
	return out
}

// OngoingTxns returns the open transactions by first offset.
func (m *Manager) OngoingTxns() []TxnMetadata { return slices.Clone(m.ongoing) }

// UnreplicatedTxns returns the completed transactions still holding back
// the first unstable offset, by first offset.
func (m *Manager) UnreplicatedTxns() []TxnMetadata { return slices.Clone(m.unreplicated) }

func (m *Manager) sortedIDs() []int64 {
	ids := make([]int64, 0, len(m.producers))
	for pid := range m.producers {
		ids = append(ids, pid)
	}
	slices.Sort(ids)
	return ids
}

// insertOngoing adds t, keeping ongoing sorted by first offset. Appends
// start transactions at increasing offsets, so this is an append.
func (m *Manager) insertOngoing(t TxnMetadata) {
	i := sort.Search(len(m.ongoing), func(i int) bool { return m.ongoing[i].FirstOffset >= t.FirstOffset })
	if i < len(m.ongoing) && m.ongoing[i].FirstOffset == t.FirstOffset {
		invariants.Assertf(false, "two transactions start at offset %d (producers %d and %d)",
			t.FirstOffset, m.ongoing[i].ProducerID, t.ProducerID)
		m.ongoing[i] = t
		return
	}
	m.ongoing = slices.Insert(m.ongoing, i, t)
}

// removeOngoing removes the ongoing transaction starting at first and
// returns it.
func (m *Manager) removeOngoing(first int64) (TxnMetadata, bool) {
	i := sort.Search(len(m.ongoing), func(i int) bool { return m.ongoing[i].FirstOffset >= first })
	if i == len(m.ongoing) || m.ongoing[i].FirstOffset != first {
		return TxnMetadata{}, false
	}
	t := m.ongoing[i]
	m.ongoing = slices.Delete(m.ongoing, i, i+1)
	return t, true
}

// lastStableOffsetAfter is the last stable offset once c completes: the
// first offset of the oldest ongoing transaction of another producer, or
// the offset after c's marker. Kafka: lastStableOffset(CompletedTxn).
func (m *Manager) lastStableOffsetAfter(c *CompletedTxn) int64 {
	for _, t := range m.ongoing {
		if t.ProducerID != c.ProducerID {
			return t.FirstOffset
		}
	}
	return c.LastOffset + 1
}

// completeTxn moves c from the ongoing to the unreplicated transactions.
// Kafka: completeTxn.
func (m *Manager) completeTxn(c *CompletedTxn) {
	t, ok := m.removeOngoing(c.FirstOffset)
	if !ok {
		invariants.Assertf(false, "completed transaction of producer %d at %d was not ongoing", c.ProducerID, c.FirstOffset)
		return
	}
	t.LastOffset = c.LastOffset
	i := sort.Search(len(m.unreplicated), func(i int) bool { return m.unreplicated[i].FirstOffset >= t.FirstOffset })
	m.unreplicated = slices.Insert(m.unreplicated, i, t)
}

// checkInvariants asserts that the producers' open transactions and the
// ongoing list agree and that the lists are sorted. Each Assertf is
// behind its condition so that a passing check boxes no arguments (the
// append path stays allocation-free with assertions compiled in).
func (m *Manager) checkInvariants() {
	if !invariants.Enabled {
		return
	}
	open := 0
	for pid, e := range m.producers {
		if e.n > NumBatchesToRetain {
			invariants.Assertf(false, "producer %d holds %d batches", pid, e.n)
		}
		if e.currentTxnFirstOffset < 0 {
			continue
		}
		open++
		i, found := slices.BinarySearchFunc(m.ongoing, e.currentTxnFirstOffset, cmpFirstOffset)
		if !found || m.ongoing[i].ProducerID != pid {
			invariants.Assertf(false, "producer %d's transaction at %d is not ongoing", pid, e.currentTxnFirstOffset)
		}
	}
	if open != len(m.ongoing) {
		invariants.Assertf(false, "%d open transactions, %d ongoing", open, len(m.ongoing))
	}
	for i := 1; i < len(m.ongoing); i++ {
		if m.ongoing[i-1].FirstOffset >= m.ongoing[i].FirstOffset {
			invariants.Assertf(false, "ongoing transactions out of order at %d", i)
		}
	}
	for i := 1; i < len(m.unreplicated); i++ {
		if m.unreplicated[i-1].FirstOffset >= m.unreplicated[i].FirstOffset {
			invariants.Assertf(false, "unreplicated transactions out of order at %d", i)
		}
	}
}

func cmpFirstOffset(t TxnMetadata, offset int64) int { return cmp.Compare(t.FirstOffset, offset) }
