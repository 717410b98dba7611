package record

import (
	"encoding/binary"
	"fmt"

	"github.com/tierlog/tierlog/internal/base"
)

// ControlType is the type of a control record, from its key. Kafka:
// ControlRecordType.
type ControlType int16

const (
	// ControlAbort marks the end of an aborted transaction.
	ControlAbort ControlType = 0
	// ControlCommit marks the end of a committed transaction.
	ControlCommit ControlType = 1
)

func (t ControlType) String() string {
	switch t {
	case ControlAbort:
		return "ABORT"
	case ControlCommit:
		return "COMMIT"
	}
	return fmt.Sprintf("control(%d)", int16(t))
}

// Control record key and end transaction marker value (Kafka
// ControlRecordType, EndTransactionMarker; KIP-98):
//
//	key:   +-------------+----------+
//	       | version i16 | type i16 |
//	       +-------------+----------+
//	value: +-------------+-----------------------+
//	       | version i16 | coordinatorEpoch i32  |
//	       +-------------+-----------------------+
const (
	controlKeySize   = 4
	endTxnMarkerSize = 6
)

// ControlKey is the key of a control record.
type ControlKey struct {
	// Version is the key version, 0 for every type Kafka defines.
	Version int16
	// Type is ControlAbort, ControlCommit or a KRaft type (2-6).
	Type ControlType
}

// EndTxnMarker is the value of an ABORT or COMMIT control record.
// Kafka: EndTransactionMarker.
type EndTxnMarker struct {
	// Version is the value version, 0 as Kafka writes it.
	Version int16
	// CoordinatorEpoch is the epoch of the transaction coordinator that
	// wrote the marker.
	CoordinatorEpoch int32
}

// ControlRecordError reports a control record key or value that cannot be
// parsed. errors.Is(err, ErrCorruption) reports true for it.
type ControlRecordError struct {
	// Part is "key" or "value".
	Part string
	// Reason says what was wrong.
	Reason string
}

func (e *ControlRecordError) Error() string {
	return fmt.Sprintf("record: malformed control record %s: %s", e.Part, e.Reason)
}

// Unwrap returns ErrCorruption.
func (e *ControlRecordError) Unwrap() error { return ErrCorruption }

// AppendControlKey appends the encoded key k.
func AppendControlKey(dst []byte, k ControlKey) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(k.Version))
	return binary.BigEndian.AppendUint16(dst, uint16(k.Type))
}

// ParseControlKey decodes a control record key. As in Kafka, a negative
// version or a key shorter than 4 bytes is an error, and bytes after the
// type are ignored (a later version may add fields).
func ParseControlKey(key []byte) (ControlKey, error) {
	if len(key) < controlKeySize {
		return ControlKey{}, &ControlRecordError{Part: "key",
			Reason: fmt.Sprintf("%d bytes, want at least %d", len(key), controlKeySize)}
	}
	k := ControlKey{
		Version: int16(binary.BigEndian.Uint16(key)),
		Type:    ControlType(binary.BigEndian.Uint16(key[2:])),
	}
	if k.Version < 0 {
		return ControlKey{}, &ControlRecordError{Part: "key",
			Reason: fmt.Sprintf("negative version %d", k.Version)}
	}
	return k, nil
}

// AppendEndTxnMarker appends the encoded marker m.
func AppendEndTxnMarker(dst []byte, m EndTxnMarker) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(m.Version))
	return binary.BigEndian.AppendUint32(dst, uint32(m.CoordinatorEpoch))
}

// ParseEndTxnMarker decodes the value of an ABORT or COMMIT control record.
// A negative version or a value shorter than 6 bytes is an error; later
// bytes are ignored.
func ParseEndTxnMarker(value []byte) (EndTxnMarker, error) {
	if len(value) < endTxnMarkerSize {
		return EndTxnMarker{}, &ControlRecordError{Part: "value",
			Reason: fmt.Sprintf("%d bytes, want at least %d", len(value), endTxnMarkerSize)}
	}
	m := EndTxnMarker{
		Version:          int16(binary.BigEndian.Uint16(value)),
		CoordinatorEpoch: int32(binary.BigEndian.Uint32(value[2:])),
	}
	if m.Version < 0 {
		return EndTxnMarker{}, &ControlRecordError{Part: "value",
			Reason: fmt.Sprintf("negative version %d", m.Version)}
	}
	return m, nil
}

// AppendEndTxnBatch appends a transaction marker batch: one uncompressed
// control record with key (0, t) and value (0, coordinatorEpoch), at
// opts.BaseOffset. It takes the producer id and epoch, the leader epoch
// and the timestamp type from opts and sets what Kafka's
// MemoryRecords.withEndTransactionMarker sets: the transactional and
// control bits, no compression, NoSequence.
func AppendEndTxnBatch(dst []byte, opts BuilderOptions, timestamp int64, t ControlType, coordinatorEpoch int32) ([]byte, error) {
	if t != ControlAbort && t != ControlCommit {
		return dst, invalidArgf("end txn batch: type %s is not ABORT or COMMIT", t)
	}
	opts.Transactional = true
	opts.Control = true
	opts.Compression = CompressionNone
	opts.BaseSequence = base.NoSequence
	var kv [controlKeySize + endTxnMarkerSize]byte
	key := AppendControlKey(kv[:0], ControlKey{Type: t})
	value := AppendEndTxnMarker(kv[controlKeySize:controlKeySize], EndTxnMarker{CoordinatorEpoch: coordinatorEpoch})
	var b Builder
	b.Reset(opts)
	b.Add(timestamp, key, value)
	return b.AppendTo(dst)
}
