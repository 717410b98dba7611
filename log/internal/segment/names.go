package segment

import (
	"fmt"
	"strconv"
	"strings"
)

// FileKind says what a file of a partition directory holds.
type FileKind int8

const (
	// KindUnknown is not a segment file.
	KindUnknown FileKind = iota
	// KindLog is a segment's record batches: <base>.log.
	KindLog
	// KindIndex is a segment's sparse offset index: <base>.index.
	KindIndex
	// KindTimeIndex is a segment's sparse time index: <base>.timeindex.
	KindTimeIndex
	// KindTxnIndex is a segment's aborted-transaction index:
	// <base>.txnindex. Reserved; this package does not write it yet.
	KindTxnIndex
	// KindSnapshot is a producer-state snapshot: <offset>.snapshot.
	// Reserved; this package does not write it.
	KindSnapshot
	// KindTemp is a file being written for an atomic replace (TruncateTo,
	// Recover, an index rewrite): <base>.<ext>.tmp. It is never the live
	// copy: the rename over the live name is the commit point, so a loader
	// deletes every KindTemp file it finds.
	KindTemp
	// KindProducerBatches is the dedup windows that go with the producer
	// snapshot at the same offset: <offset>.producerbatches (tierlog's
	// own file; package log/internal/producer writes it).
	KindProducerBatches
)

var kindNames = [...]string{"unknown", "log", "index", "timeindex", "txnindex", "snapshot", "tmp", "producerbatches"}

func (k FileKind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("FileKind(%d)", int8(k))
}

// File name suffixes (Kafka's).
const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
	txnIndexSuffix  = ".txnindex"
	snapshotSuffix  = ".snapshot"
	tempSuffix      = ".tmp"
	// producerBatchesSuffix is producer.BatchesSuffix.
	producerBatchesSuffix = ".producerbatches"
)

// offsetDigits is the width of the zero-padded offset in file names, as
// Kafka's: 20 digits hold every non-negative int64 and sort in offset
// order.
const offsetDigits = 20

func fileName(offset int64, suffix string) string {
	return fmt.Sprintf("%020d%s", offset, suffix)
}

// LogFileName returns the name of the .log file of the segment at
// baseOffset: "00000000000000000042.log".
func LogFileName(baseOffset int64) string { return fileName(baseOffset, logSuffix) }

// IndexFileName returns the name of the offset index file:
// "00000000000000000042.index".
func IndexFileName(baseOffset int64) string { return fileName(baseOffset, indexSuffix) }

// TimeIndexFileName returns the name of the time index file:
// "00000000000000000042.timeindex".
func TimeIndexFileName(baseOffset int64) string { return fileName(baseOffset, timeIndexSuffix) }

// TxnIndexFileName returns the name of the transaction index file:
// "00000000000000000042.txnindex". Reserved for a later issue.
func TxnIndexFileName(baseOffset int64) string { return fileName(baseOffset, txnIndexSuffix) }

// SnapshotFileName returns the name of a producer-state snapshot taken at
// offset: "00000000000000000042.snapshot". Reserved for a later issue.
func SnapshotFileName(offset int64) string { return fileName(offset, snapshotSuffix) }

// tempName returns the temporary name a replacement of name is written
// under before it is renamed over name.
func tempName(name string) string { return name + tempSuffix }

// ParseFileName parses a file name found by listing a partition
// directory. It returns the offset in the name (the base offset for
// segment files), the kind, and ok = false for names that are not this
// package's. Temporary files ("00000000000000000042.log.tmp") parse as
// KindTemp with the offset of the segment they belonged to, so a loader
// can delete them.
func ParseFileName(name string) (baseOffset int64, kind FileKind, ok bool) {
	if len(name) <= offsetDigits || name[offsetDigits] != '.' {
		return 0, KindUnknown, false
	}
	for i := 0; i < offsetDigits; i++ {
		if name[i] < '0' || name[i] > '9' {
			return 0, KindUnknown, false
		}
	}
	offset, err := strconv.ParseInt(name[:offsetDigits], 10, 64)
	if err != nil {
		return 0, KindUnknown, false // beyond MaxInt64
	}
	suffix := name[offsetDigits:]
	temp := strings.HasSuffix(suffix, tempSuffix)
	suffix = strings.TrimSuffix(suffix, tempSuffix)
	switch suffix {
	case logSuffix:
		kind = KindLog
	case indexSuffix:
		kind = KindIndex
	case timeIndexSuffix:
		kind = KindTimeIndex
	case txnIndexSuffix:
		kind = KindTxnIndex
	case snapshotSuffix:
		kind = KindSnapshot
	case producerBatchesSuffix:
		kind = KindProducerBatches
	default:
		return 0, KindUnknown, false
	}
	if temp {
		kind = KindTemp
	}
	return offset, kind, true
}
