package producer

import (
	"cmp"
	"encoding/binary"
	"hash/crc32"
	"slices"

	"github.com/tierlog/tierlog/internal/base"
)

// Producer snapshot (Kafka's .snapshot, version 1), big-endian:
//
//	+-------------+--------------+-------------+----------------------+
//	| version i16 | crc u32      | count i32   | count entries ...    |
//	+-------------+--------------+-------------+----------------------+
//	0             2              6             10
//
//	entry (46 bytes):
//	+-----------------+-----------+------------------+-----------------+
//	| producer id i64 | epoch i16 | last seq i32     | last offset i64 |
//	+-----------------+-----------+------------------+-----------------+
//	| offset delta i32| timestamp i64 | coordinator epoch i32          |
//	+-----------------+---------------+--------------------------------+
//	| current txn first offset i64 |
//	+------------------------------+
//
// crc is the CRC-32C (Castagnoli) of bytes [6, end).
const (
	// SnapshotVersion is the snapshot format version written and read.
	SnapshotVersion = 1
	// SnapshotHeaderSize is the size of version, crc and count.
	SnapshotHeaderSize = 10
	// SnapshotEntrySize is the size of one encoded SnapshotEntry.
	SnapshotEntrySize = 46

	snapshotCRCOffset     = 2
	snapshotEntriesOffset = 6 // start of the CRC'd bytes
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// SnapshotEntry is one producer in a snapshot: the producer's state with
// only its last batch. Kafka: the ProducerSnapshotEntry schema.
type SnapshotEntry struct {
	ProducerID    int64
	ProducerEpoch int16
	// LastSequence, LastOffset and OffsetDelta describe the producer's
	// last batch; -1, -1 and 0 when it holds none.
	LastSequence int32
	LastOffset   int64
	OffsetDelta  int32
	// Timestamp is the producer's last timestamp.
	Timestamp        int64
	CoordinatorEpoch int32
	// CurrentTxnFirstOffset is the first offset of the open transaction,
	// -1 if none.
	CurrentTxnFirstOffset int64
}

// EncodeSnapshot appends the snapshot of entries, in the given order, to
// dst.
func EncodeSnapshot(dst []byte, entries []SnapshotEntry) []byte {
	start := len(dst)
	dst = binary.BigEndian.AppendUint16(dst, SnapshotVersion)
	dst = binary.BigEndian.AppendUint32(dst, 0) // CRC, filled below
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(entries)))
	for _, e := range entries {
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.ProducerID))
		dst = binary.BigEndian.AppendUint16(dst, uint16(e.ProducerEpoch))
		dst = binary.BigEndian.AppendUint32(dst, uint32(e.LastSequence))
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.LastOffset))
		dst = binary.BigEndian.AppendUint32(dst, uint32(e.OffsetDelta))
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.Timestamp))
		dst = binary.BigEndian.AppendUint32(dst, uint32(e.CoordinatorEpoch))
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.CurrentTxnFirstOffset))
	}
	snap := dst[start:]
	binary.BigEndian.PutUint32(snap[snapshotCRCOffset:], crc32.Checksum(snap[snapshotEntriesOffset:], castagnoli))
	return dst
}

// DecodeSnapshot decodes a snapshot. A short buffer, a version other
// than 1, a CRC mismatch, a negative count or a size that is not exactly
// header plus count entries is an error wrapping ErrCorruption (Kafka:
// CorruptSnapshotException); it never panics and allocates at most what
// the validated size allows.
func DecodeSnapshot(data []byte) ([]SnapshotEntry, error) {
	if len(data) < SnapshotHeaderSize {
		return nil, corruptionf("snapshot", "%d bytes, want at least %d", len(data), SnapshotHeaderSize)
	}
	if v := int16(binary.BigEndian.Uint16(data)); v != SnapshotVersion {
		return nil, corruptionf("snapshot", "version %d, want %d", v, SnapshotVersion)
	}
	stored := binary.BigEndian.Uint32(data[snapshotCRCOffset:])
	if computed := crc32.Checksum(data[snapshotEntriesOffset:], castagnoli); stored != computed {
		return nil, corruptionf("snapshot", "stored crc %#08x, computed %#08x", stored, computed)
	}
	count := int32(binary.BigEndian.Uint32(data[snapshotEntriesOffset:]))
	body := data[SnapshotHeaderSize:]
	if count < 0 || int64(count)*SnapshotEntrySize != int64(len(body)) {
		return nil, corruptionf("snapshot", "%d entries in %d bytes (entries are %d bytes)", count, len(body), SnapshotEntrySize)
	}
	entries := make([]SnapshotEntry, count)
	for i := range entries {
		b := body[i*SnapshotEntrySize:]
		entries[i] = SnapshotEntry{
			ProducerID:            int64(binary.BigEndian.Uint64(b)),
			ProducerEpoch:         int16(binary.BigEndian.Uint16(b[8:])),
			LastSequence:          int32(binary.BigEndian.Uint32(b[10:])),
			LastOffset:            int64(binary.BigEndian.Uint64(b[14:])),
			OffsetDelta:           int32(binary.BigEndian.Uint32(b[22:])),
			Timestamp:             int64(binary.BigEndian.Uint64(b[26:])),
			CoordinatorEpoch:      int32(binary.BigEndian.Uint32(b[34:])),
			CurrentTxnFirstOffset: int64(binary.BigEndian.Uint64(b[38:])),
		}
	}
	return entries, nil
}

// SnapshotEntries returns the state as snapshot entries, by producer id.
// Only each producer's last batch is kept (Kafka's format); a producer
// restored from it detects a retry of its last batch only.
func (m *Manager) SnapshotEntries() []SnapshotEntry {
	out := make([]SnapshotEntry, 0, len(m.producers))
	for _, pid := range m.sortedIDs() {
		e := m.producers[pid]
		out = append(out, SnapshotEntry{
			ProducerID:            pid,
			ProducerEpoch:         e.producerEpoch,
			LastSequence:          e.lastSeq(),
			LastOffset:            e.lastDataOffset(),
			OffsetDelta:           e.lastOffsetDelta(),
			Timestamp:             e.lastTimestamp,
			CoordinatorEpoch:      e.coordinatorEpoch,
			CurrentTxnFirstOffset: e.currentTxnFirstOffset,
		})
	}
	return out
}

// Snapshot appends the snapshot of the current state to dst and returns
// it. The snapshot describes the state at MapEndOffset(), which names its
// file. Unreplicated transactions are not in the format: a Manager loaded
// from it reports them stable, as Kafka's does.
func (m *Manager) Snapshot(dst []byte) []byte {
	return EncodeSnapshot(dst, m.SnapshotEntries())
}

// LoadSnapshot replaces the state with the snapshot in data, taken at
// offset (its MapEndOffset; the file name's offset): every producer of
// the snapshot, its last batch if any, and its open transaction. On an
// error (wrapping ErrCorruption: a bad encoding, two entries for one
// producer, two transactions starting at one offset) the state is
// unchanged. Expired producers are kept; call RemoveExpired after
// loading to drop them as Kafka's loader does.
func (m *Manager) LoadSnapshot(data []byte, offset int64) error {
	entries, err := DecodeSnapshot(data)
	if err != nil {
		return err
	}
	return m.loadEntries(entries, offset)
}

func (m *Manager) loadEntries(entries []SnapshotEntry, offset int64) error {
	producers := make(map[int64]*entry, len(entries))
	var ongoing []TxnMetadata
	for _, se := range entries {
		if _, dup := producers[se.ProducerID]; dup || se.ProducerID <= base.NoProducerID {
			return corruptionf("snapshot", "producer id %d repeated or invalid", se.ProducerID)
		}
		e := emptyEntry()
		e.producerEpoch = se.ProducerEpoch
		e.coordinatorEpoch = se.CoordinatorEpoch
		e.lastTimestamp = se.Timestamp
		if se.LastOffset >= 0 {
			e.addBatchMetadata(BatchMetadata{LastSeq: se.LastSequence, LastOffset: se.LastOffset,
				OffsetDelta: se.OffsetDelta, Timestamp: se.Timestamp})
		}
		if se.CurrentTxnFirstOffset >= 0 {
			e.currentTxnFirstOffset = se.CurrentTxnFirstOffset
			ongoing = append(ongoing, TxnMetadata{ProducerID: se.ProducerID, FirstOffset: se.CurrentTxnFirstOffset,
				LastOffset: base.UndefinedOffset})
		}
		producers[se.ProducerID] = &e
	}
	sortTxns(ongoing)
	for i := 1; i < len(ongoing); i++ {
		if ongoing[i-1].FirstOffset == ongoing[i].FirstOffset {
			return corruptionf("snapshot", "producers %d and %d both open a transaction at %d",
				ongoing[i-1].ProducerID, ongoing[i].ProducerID, ongoing[i].FirstOffset)
		}
	}
	m.invalidate()
	m.producers = producers
	m.ongoing = ongoing
	m.unreplicated = m.unreplicated[:0]
	m.mapEndOffset = offset
	m.checkInvariants()
	return nil
}

func sortTxns(ts []TxnMetadata) {
	slices.SortStableFunc(ts, func(a, b TxnMetadata) int { return cmp.Compare(a.FirstOffset, b.FirstOffset) })
}
