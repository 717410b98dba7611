package producer

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/tierlog/tierlog/internal/mutation"
)

// Producer batches file (tierlog's own, beside Kafka's snapshot at the
// same offset), big-endian. Kafka's snapshot keeps each producer's last
// batch only, so a producer loaded from it answers a retry of any of its
// four earlier batches with OUT_OF_ORDER_SEQUENCE (Kafka's behaviour; a
// client such as franz-go then bumps its epoch and resends: duplicates).
// This file keeps the whole dedup window (NumBatchesToRetain batches) of
// every producer holding a batch, so that a load restores what the state
// held when the snapshot was taken. Why a file and not a re-read of the
// log's tail at load: a producer's earlier batches may lie anywhere back
// in the log, so a re-read bounded in bytes loses the windows of sparse
// producers, and an unbounded one reads the log; this file costs at most
// 131 bytes a producer (Kafka's snapshot entry is 46) at each snapshot
// write, and no read of batches at load:
//
//	offset size field
//	0      4    magic "TLPB"
//	4      2    version (1)
//	6      4    crc: CRC-32C (Castagnoli) of bytes [10, end)
//	10     4    snapshot crc: the crc field of the .snapshot it goes with
//	14     4    entry count N
//	18     entries, by producer id:
//	            +0  8 producer id
//	            +8  2 producer epoch
//	            +10 1 batch count n (1..5)
//	            +11 24*n batches, oldest first:
//	                +0 4 last sequence   +4 8 last offset
//	                +12 4 offset delta   +16 8 max timestamp
//
// A producer without a batch has no entry. The snapshot crc ties the file
// to one snapshot: WriteSnapshotFiles writes this file first and the
// snapshot second (each atomically), so the snapshot's rename is the
// commit point of the pair, and a file left by an interrupted write, or
// by an earlier snapshot at the same offset, names another snapshot and
// is ignored (see Manager.LoadSnapshotWithBatches for the load rules).
const (
	// BatchesVersion is the batches file format version written and
	// read.
	BatchesVersion = 1
	// BatchesHeaderSize is the size of magic, version, crc, snapshot
	// crc and count.
	BatchesHeaderSize = 18
	// batchesEntryHeaderSize is the size of an entry before its batches.
	batchesEntryHeaderSize = 11
	// BatchMetadataSize is the size of one encoded batch.
	BatchMetadataSize = 24

	batchesMagic        = "TLPB"
	batchesCRCOffset    = 6
	batchesCRCedOffset  = 10
	batchesSnapCRCField = 10
	batchesCountOffset  = 14
)

// BatchesEntry is one producer of a batches file: its epoch and dedup
// window, oldest batch first.
type BatchesEntry struct {
	ProducerID    int64
	ProducerEpoch int16
	Batches       []BatchMetadata
}

// snapshotCRC returns the crc field of encoded snapshot bytes (0 for a
// buffer too short to hold one; DecodeSnapshot refuses such a buffer).
func snapshotCRC(snap []byte) uint32 {
	if len(snap) < snapshotEntriesOffset {
		return 0
	}
	return binary.BigEndian.Uint32(snap[snapshotCRCOffset:])
}

// EncodeBatches appends the batches file of entries, tied to the snapshot
// whose crc field is snapCRC, to dst.
func EncodeBatches(dst []byte, snapCRC uint32, entries []BatchesEntry) []byte {
	start := len(dst)
	dst = append(dst, batchesMagic...)
	dst = binary.BigEndian.AppendUint16(dst, BatchesVersion)
	dst = binary.BigEndian.AppendUint32(dst, 0) // CRC, filled below
	dst = binary.BigEndian.AppendUint32(dst, snapCRC)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(entries)))
	for _, e := range entries {
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.ProducerID))
		dst = binary.BigEndian.AppendUint16(dst, uint16(e.ProducerEpoch))
		dst = append(dst, byte(len(e.Batches)))
		for _, b := range e.Batches {
			dst = binary.BigEndian.AppendUint32(dst, uint32(b.LastSeq))
			dst = binary.BigEndian.AppendUint64(dst, uint64(b.LastOffset))
			dst = binary.BigEndian.AppendUint32(dst, uint32(b.OffsetDelta))
			dst = binary.BigEndian.AppendUint64(dst, uint64(b.Timestamp))
		}
	}
	f := dst[start:]
	binary.BigEndian.PutUint32(f[batchesCRCOffset:], crc32.Checksum(f[batchesCRCedOffset:], castagnoli))
	return dst
}

// DecodeBatches decodes a batches file and returns the crc of the
// snapshot it goes with and its entries. A short buffer, another magic or
// version, a CRC mismatch, a batch count outside 1..NumBatchesToRetain,
// batches whose offsets do not increase, or bytes left over is an error
// wrapping ErrCorruption; it never panics and allocates at most what the
// validated size allows.
func DecodeBatches(data []byte) (snapCRC uint32, entries []BatchesEntry, err error) {
	if len(data) < BatchesHeaderSize {
		return 0, nil, corruptionf("batches", "%d bytes, want at least %d", len(data), BatchesHeaderSize)
	}
	if string(data[:4]) != batchesMagic {
		return 0, nil, corruptionf("batches", "magic %q, want %q", data[:4], batchesMagic)
	}
	if v := binary.BigEndian.Uint16(data[4:]); v != BatchesVersion {
		return 0, nil, corruptionf("batches", "version %d, want %d", v, BatchesVersion)
	}
	stored := binary.BigEndian.Uint32(data[batchesCRCOffset:])
	if computed := crc32.Checksum(data[batchesCRCedOffset:], castagnoli); stored != computed {
		return 0, nil, corruptionf("batches", "stored crc %#08x, computed %#08x", stored, computed)
	}
	snapCRC = binary.BigEndian.Uint32(data[batchesSnapCRCField:])
	count := binary.BigEndian.Uint32(data[batchesCountOffset:])
	rest := data[BatchesHeaderSize:]
	// Every entry takes at least one batch: bound the allocation by the
	// bytes present.
	if uint64(count) > uint64(len(rest)/(batchesEntryHeaderSize+BatchMetadataSize)) {
		return 0, nil, corruptionf("batches", "%d entries in %d bytes", count, len(rest))
	}
	entries = make([]BatchesEntry, count)
	for i := range entries {
		if len(rest) < batchesEntryHeaderSize {
			return 0, nil, corruptionf("batches", "entry %d: %d bytes left", i, len(rest))
		}
		e := BatchesEntry{
			ProducerID:    int64(binary.BigEndian.Uint64(rest)),
			ProducerEpoch: int16(binary.BigEndian.Uint16(rest[8:])),
		}
		n := int(rest[10])
		rest = rest[batchesEntryHeaderSize:]
		if n < 1 || n > NumBatchesToRetain || len(rest) < n*BatchMetadataSize {
			return 0, nil, corruptionf("batches", "entry %d (producer %d): %d batches in %d bytes", i, e.ProducerID, n, len(rest))
		}
		e.Batches = make([]BatchMetadata, n)
		for j := range e.Batches {
			b := rest[j*BatchMetadataSize:]
			e.Batches[j] = BatchMetadata{
				LastSeq:     int32(binary.BigEndian.Uint32(b)),
				LastOffset:  int64(binary.BigEndian.Uint64(b[4:])),
				OffsetDelta: int32(binary.BigEndian.Uint32(b[12:])),
				Timestamp:   int64(binary.BigEndian.Uint64(b[16:])),
			}
			if j > 0 && e.Batches[j].FirstOffset() <= e.Batches[j-1].LastOffset {
				return 0, nil, corruptionf("batches", "producer %d: batch %d at %d does not follow %d", e.ProducerID, j,
					e.Batches[j].FirstOffset(), e.Batches[j-1].LastOffset)
			}
		}
		rest = rest[n*BatchMetadataSize:]
		entries[i] = e
	}
	if len(rest) != 0 {
		return 0, nil, corruptionf("batches", "%d bytes after %d entries", len(rest), count)
	}
	return snapCRC, entries, nil
}

// SnapshotWithBatches returns the snapshot of the current state (Kafka's
// format, as Snapshot) and the batches file that goes with it: every
// producer's whole dedup window.
func (m *Manager) SnapshotWithBatches() (snap, batches []byte) {
	snap = m.Snapshot(nil)
	entries := make([]BatchesEntry, 0, len(m.producers))
	for _, pid := range m.sortedIDs() {
		e := m.producers[pid]
		if e.n == 0 {
			continue
		}
		be := BatchesEntry{ProducerID: pid, ProducerEpoch: e.producerEpoch, Batches: make([]BatchMetadata, e.n)}
		for i := range be.Batches {
			be.Batches[i] = e.batch(i)
		}
		entries = append(entries, be)
	}
	return snap, EncodeBatches(nil, snapshotCRC(snap), entries)
}

// BatchesUse says what LoadSnapshotWithBatches made of a batches file.
type BatchesUse int8

const (
	// BatchesAbsent: no batches file; each producer holds its last
	// batch only (Kafka's window).
	BatchesAbsent BatchesUse = iota
	// BatchesLoaded: every producer's whole window was restored.
	BatchesLoaded
	// BatchesStale: the file names another snapshot (an interrupted
	// write, or an earlier snapshot at the same offset) and was not
	// used; each producer holds its last batch only.
	BatchesStale
)

// LoadSnapshotWithBatches replaces the state with the snapshot in snap,
// taken at offset, and restores every producer's dedup window from
// batches, the batches file at the same offset (nil when there is none).
// The rules:
//
//   - no batches file: the snapshot alone (Kafka's window, the last
//     batch), BatchesAbsent;
//   - a batches file naming another snapshot (its snapshot crc differs):
//     ignored, BatchesStale;
//   - a batches file that does not decode, or that names this snapshot
//     but disagrees with it (a producer with a batch missing or extra, or
//     whose epoch or last batch differs): an error wrapping ErrCorruption
//     and the state unchanged; the caller drops the pair and falls back
//     to an older snapshot and a replay of the log, as for a corrupt
//     snapshot.
func (m *Manager) LoadSnapshotWithBatches(snap, batches []byte, offset int64) (BatchesUse, error) {
	entries, err := DecodeSnapshot(snap)
	if err != nil {
		return BatchesAbsent, err
	}
	if batches == nil || mutation.Disabled(mutation.ProducerBatchesWindow) {
		return BatchesAbsent, m.loadEntries(entries, offset)
	}
	crc, windows, err := DecodeBatches(batches)
	if err != nil {
		return BatchesAbsent, err
	}
	if crc != snapshotCRC(snap) {
		return BatchesStale, m.loadEntries(entries, offset)
	}
	withBatch := 0
	for _, se := range entries {
		if se.LastOffset >= 0 {
			withBatch++
		}
	}
	if len(windows) != withBatch {
		return BatchesAbsent, corruptionf("batches", "%d producers with a window, the snapshot has %d with a batch",
			len(windows), withBatch)
	}
	byID := make(map[int64]*SnapshotEntry, len(entries))
	for i := range entries {
		byID[entries[i].ProducerID] = &entries[i]
	}
	for _, w := range windows {
		se, ok := byID[w.ProducerID]
		last := w.Batches[len(w.Batches)-1]
		if !ok || se.ProducerEpoch != w.ProducerEpoch || se.LastOffset != last.LastOffset ||
			se.LastSequence != last.LastSeq || se.OffsetDelta != last.OffsetDelta {
			return BatchesAbsent, corruptionf("batches", "producer %d's window disagrees with the snapshot", w.ProducerID)
		}
	}
	if err := m.loadEntries(entries, offset); err != nil {
		return BatchesAbsent, err
	}
	for _, w := range windows {
		e := m.producers[w.ProducerID]
		e.start, e.n = 0, 0
		for _, b := range w.Batches {
			e.addBatchMetadata(b)
		}
	}
	m.checkInvariants()
	return BatchesLoaded, nil
}
