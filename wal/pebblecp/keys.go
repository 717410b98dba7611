package pebblecp

import (
	"encoding/binary"
	"time"

	"github.com/tierlog/tierlog/wal"
)

// Key layout. Integers are big-endian so that byte order is numeric order
// and each partition's batches are one range scan in offset order.
// Partitions and producer ids are never negative (checked before use), so
// their unsigned encoding keeps the order.
//
//	0x00 "tierlog-wal-control-plane-version"         format version u32
//	'L' topicID[16] partition u32                    log row
//	'B' topicID[16] partition u32 lastOffset u64     batch row (one batch, or a run ending at lastOffset)
//	'P' topicID[16] partition u32 producerID u64     producer state
//	'F' objectKey                                    object (file) row
//	'D' markedAtMs u64 objectKey                     deletion queue (empty value)
//	'R' objectKey                                    reservation (reserved-at ms)
//	'T' objectKey                                    tombstone of a reaped orphan (forgotten-at ms)
const (
	keyVersion = "\x00tierlog-wal-control-plane-version"

	tagLog         = 'L'
	tagBatch       = 'B'
	tagProducer    = 'P'
	tagFile        = 'F'
	tagDeleteQueue = 'D'
	tagReservation = 'R'
	tagTombstone   = 'T'

	// formatVersion 2: batch rows may carry their binding (value kind
	// kindBoundBatch). Open upgrades a version-1 database (whose batch
	// rows are all kindBatch, read with an unknown binding) by rewriting
	// this key, so that code which knows only version 1 refuses the
	// database at its Open instead of reporting bound rows as corrupt.
	//
	// formatVersion 3: a batch row may be a run of contiguous batches of
	// one partition in one object (value kind kindRunBatch, wal.JoinRun).
	// Open upgrades a version-1 or version-2 database the same way (its
	// rows are all of one batch and read as before); code that knows
	// only version 2 refuses a version-3 database at its Open, so it
	// never reads a run as one batch.
	formatVersion = 3
	// formatVersionsBefore are read, and upgraded at Open: 1 (before
	// bindings) and 2 (before runs).
	formatVersionBindings = 2
	formatVersionBefore   = 1
)

func partitionPrefix(tag byte, tp wal.TopicIDPartition) []byte {
	k := make([]byte, 0, 1+16+4+8)
	k = append(k, tag)
	k = append(k, tp.TopicID[:]...)
	return binary.BigEndian.AppendUint32(k, uint32(tp.Partition))
}

func topicPrefix(tag byte, id wal.TopicID) []byte {
	return append([]byte{tag}, id[:]...)
}

func logKey(tp wal.TopicIDPartition) []byte { return partitionPrefix(tagLog, tp) }

func batchKey(tp wal.TopicIDPartition, lastOffset int64) []byte {
	return binary.BigEndian.AppendUint64(partitionPrefix(tagBatch, tp), uint64(lastOffset))
}

func producerKey(tp wal.TopicIDPartition, producerID int64) []byte {
	return binary.BigEndian.AppendUint64(partitionPrefix(tagProducer, tp), uint64(producerID))
}

func fileKey(objectKey string) []byte { return append([]byte{tagFile}, objectKey...) }

func reservationKey(objectKey string) []byte { return append([]byte{tagReservation}, objectKey...) }

// tombstoneKey marks a key whose orphan was reaped and whose object row
// DeleteFiles forgot: the key may never be registered again.
func tombstoneKey(objectKey string) []byte { return append([]byte{tagTombstone}, objectKey...) }

func deleteQueueKey(markedAtMs int64, objectKey string) []byte {
	k := binary.BigEndian.AppendUint64([]byte{tagDeleteQueue}, uint64(markedAtMs))
	return append(k, objectKey...)
}

// prefixEnd returns the first key after every key that starts with p.
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil // p is all 0xff: no upper bound
}

// keyPartition decodes the partition of a 'L', 'B' or 'P' key.
func keyPartition(k []byte) (wal.TopicIDPartition, bool) {
	if len(k) < 21 {
		return wal.TopicIDPartition{}, false
	}
	var tp wal.TopicIDPartition
	copy(tp.TopicID[:], k[1:17])
	tp.Partition = int32(binary.BigEndian.Uint32(k[17:21]))
	return tp, tp.Partition >= 0
}

func millis(t time.Time) int64 { return t.UnixMilli() }
