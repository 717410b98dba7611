package pebblecp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/tierlog/tierlog/wal"
)

// Values: every value is
//
//	version u8 (1) | kind u8 | fields | crc32c u32 (of all bytes before)
//
// with fixed-width big-endian integers and strings as u16 length + bytes.
// The kind byte names the record type, so a value stored under the wrong
// key is corruption rather than a misread. Decoders check every length
// against what remains and return a *CorruptionError, never panic.
const (
	valueVersion = 1

	kindLog         = 1
	kindBatch       = 2 // a batch row without its binding (written before bindings)
	kindProducer    = 3
	kindFile        = 4
	kindReservation = 5
	kindBoundBatch  = 6 // a batch row with its binding: kindBatch's fields, then the binding
	kindRunBatch    = 7 // a run (wal.JoinRun): kindBoundBatch's fields, then the run bytes

	// numKinds is the number of kinds (they run from 1).
	numKinds = 7
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CorruptionError reports a stored value that fails its checks. It
// unwraps to wal.ErrCorruption.
type CorruptionError struct {
	Key    []byte
	Reason string
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("%v: pebblecp: value of key %x: %s", wal.ErrCorruption, e.Key, e.Reason)
}

func (e *CorruptionError) Unwrap() error { return wal.ErrCorruption }

var errShort = errors.New("value too short")

type encoder struct{ b []byte }

func newEncoder(kind byte) *encoder { return &encoder{b: []byte{valueVersion, kind}} }

func (e *encoder) u8(v uint8)   { e.b = append(e.b, v) }
func (e *encoder) u16(v uint16) { e.b = binary.BigEndian.AppendUint16(e.b, v) }
func (e *encoder) u32(v uint32) { e.b = binary.BigEndian.AppendUint32(e.b, v) }
func (e *encoder) i64(v int64)  { e.b = binary.BigEndian.AppendUint64(e.b, uint64(v)) }
func (e *encoder) str(s string) {
	e.u16(uint16(len(s)))
	e.b = append(e.b, s...)
}
func (e *encoder) bytes(p []byte) { e.b = append(e.b, p...) }

func (e *encoder) finish() []byte {
	return binary.BigEndian.AppendUint32(e.b, crc32.Checksum(e.b, castagnoli))
}

type decoder struct {
	b   []byte
	err error
}

// newDecoder checks the frame (length, CRC, version, kind) and returns a
// decoder positioned at the fields.
func newDecoder(v []byte, kind byte) (*decoder, error) {
	d, _, err := newDecoderOf(v, kind)
	if err != nil {
		return nil, err
	}
	return &d, nil
}

// newDecoderOf is newDecoder for a value that may be of any of kinds; it
// also returns the kind found.
func newDecoderOf(v []byte, kinds ...byte) (decoder, byte, error) {
	if len(v) < 6 {
		return decoder{}, 0, fmt.Errorf("%d bytes, want at least 6", len(v))
	}
	body, sum := v[:len(v)-4], binary.BigEndian.Uint32(v[len(v)-4:])
	if got := crc32.Checksum(body, castagnoli); got != sum {
		return decoder{}, 0, fmt.Errorf("crc32c %08x, stored %08x", got, sum)
	}
	if body[0] != valueVersion {
		return decoder{}, 0, fmt.Errorf("value version %d, want %d", body[0], valueVersion)
	}
	for _, k := range kinds {
		if body[1] == k {
			return decoder{b: body[2:]}, k, nil
		}
	}
	return decoder{}, 0, fmt.Errorf("value kind %d, want one of %v", body[1], append([]byte(nil), kinds...))
}

func (d *decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n > len(d.b) {
		d.err = errShort
		return nil
	}
	p := d.b[:n]
	d.b = d.b[n:]
	return p
}

func (d *decoder) u8() uint8 {
	if p := d.take(1); p != nil {
		return p[0]
	}
	return 0
}

func (d *decoder) u16() uint16 {
	if p := d.take(2); p != nil {
		return binary.BigEndian.Uint16(p)
	}
	return 0
}

func (d *decoder) u32() uint32 {
	if p := d.take(4); p != nil {
		return binary.BigEndian.Uint32(p)
	}
	return 0
}

func (d *decoder) i64() int64 {
	if p := d.take(8); p != nil {
		return int64(binary.BigEndian.Uint64(p))
	}
	return 0
}

func (d *decoder) str() string { return string(d.take(int(d.u16()))) }

// lenBytes reads u32 length + bytes, copied (the value's buffer is the
// iterator's); nil on an error.
func (d *decoder) lenBytes() []byte {
	n := d.u32()
	if d.err != nil {
		return nil
	}
	if p := d.take(int(n)); p != nil {
		return append([]byte{}, p...)
	}
	return nil
}

// done reports the first error, or trailing bytes.
func (d *decoder) done() error {
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%d trailing bytes", len(d.b))
	}
	return d.err
}

// check records a semantic problem found while decoding.
func (d *decoder) check(ok bool, format string, args ...any) {
	if !ok && d.err == nil {
		d.err = fmt.Errorf(format, args...)
	}
}

func corrupt(key []byte, err error) error {
	return &CorruptionError{Key: append([]byte(nil), key...), Reason: err.Error()}
}

// logRow is a partition's row (wal.LogInfo).
type logRow = wal.LogInfo

func encodeLog(r *logRow) []byte {
	e := newEncoder(kindLog)
	e.i64(r.LogStartOffset)
	e.i64(r.HighWatermark)
	e.i64(r.DisklessStartOffset)
	e.i64(r.CrossTierLogStartOffset)
	e.i64(r.ByteSize)
	e.str(r.Topic)
	return e.finish()
}

func decodeLog(key, v []byte) (logRow, error) {
	d, err := newDecoder(v, kindLog)
	if err != nil {
		return logRow{}, corrupt(key, err)
	}
	r := logRow{
		LogStartOffset:          d.i64(),
		HighWatermark:           d.i64(),
		DisklessStartOffset:     d.i64(),
		CrossTierLogStartOffset: d.i64(),
		ByteSize:                d.i64(),
		Topic:                   d.str(),
	}
	d.check(0 <= r.LogStartOffset && r.LogStartOffset <= r.HighWatermark,
		"log start %d, high watermark %d", r.LogStartOffset, r.HighWatermark)
	d.check(r.DisklessStartOffset >= 0 && r.CrossTierLogStartOffset >= -1 && r.ByteSize >= 0,
		"diskless start %d, cross-tier start %d, byte size %d", r.DisklessStartOffset, r.CrossTierLogStartOffset, r.ByteSize)
	if err := d.done(); err != nil {
		return logRow{}, corrupt(key, err)
	}
	return r, nil
}

// batchRow is a committed batch; its last offset is in the key.
type batchRow struct {
	BaseOffset    int64
	ObjectKey     string
	ByteOffset    int64
	Size          int64
	MaxTimestamp  int64
	LogAppendTime int64
	TimestampType wal.TimestampType
	// Binding is what ties the row to the batch's bytes. Known is false
	// only for a row written before bindings (kind kindBatch).
	Binding wal.BatchBinding
	// Run is nil for a row of one batch; for a run (kind kindRunBatch)
	// the run bytes, and the fields above are the run's whole
	// coordinates (wal.JoinRun): split it with wal.SplitRun.
	Run []byte
}

// encodeBatch writes a row with a known binding as kindBoundBatch:
//
//	base offset u64 | byte offset u64 | size u64 | max timestamp u64 |
//	log-append time u64 | timestamp type u8 | object key str |
//	crc u32 | partition leader epoch u32 | producer id u64 |
//	producer epoch u16 | base sequence u32
//
// a row without one as kindBatch, the same fields without the binding
// (the layout written before bindings, kept so that the decoder's answer
// re-encodes to the stored bytes), and a run as kindRunBatch,
// kindBoundBatch's fields then the run bytes u32 length + bytes.
func encodeBatch(r *batchRow) []byte {
	kind := byte(kindBatch)
	switch {
	case r.Run != nil:
		kind = kindRunBatch
	case r.Binding.Known:
		kind = kindBoundBatch
	}
	e := newEncoder(kind)
	e.i64(r.BaseOffset)
	e.i64(r.ByteOffset)
	e.i64(r.Size)
	e.i64(r.MaxTimestamp)
	e.i64(r.LogAppendTime)
	e.u8(uint8(r.TimestampType))
	e.str(r.ObjectKey)
	if r.Binding.Known {
		e.u32(r.Binding.CRC)
		e.u32(uint32(r.Binding.PartitionLeaderEpoch))
		e.i64(r.Binding.ProducerID)
		e.u16(uint16(r.Binding.ProducerEpoch))
		e.u32(uint32(r.Binding.BaseSequence))
	}
	if r.Run != nil {
		e.u32(uint32(len(r.Run)))
		e.bytes(r.Run)
	}
	return e.finish()
}

func decodeBatch(key, v []byte) (batchRow, error) {
	return decodeBatchWith(key, v, nil)
}

// batchScan is what a scan of many batch rows shares (FindBatches):
// the object keys decoded so far, so that the rows of one object share
// one string, and rows whose Run aliases the iterator's value (valid
// until the iterator moves: the scan splits it at once).
type batchScan struct {
	keys     map[string]string
	aliasRun bool
}

// objectKey returns b as a string, the same one for equal bytes.
func (s *batchScan) objectKey(b []byte) string {
	if k, ok := s.keys[string(b)]; ok {
		return k
	}
	k := string(b)
	if s.keys == nil {
		s.keys = map[string]string{}
	}
	s.keys[k] = k
	return k
}

// decodeBatchWith is decodeBatch sharing scan's keys (scan may be nil:
// every field its own copy).
func decodeBatchWith(key, v []byte, scan *batchScan) (batchRow, error) {
	d, kind, err := newDecoderOf(v, kindBatch, kindBoundBatch, kindRunBatch)
	if err != nil {
		return batchRow{}, corrupt(key, err)
	}
	r := batchRow{
		BaseOffset:    d.i64(),
		ByteOffset:    d.i64(),
		Size:          d.i64(),
		MaxTimestamp:  d.i64(),
		LogAppendTime: d.i64(),
		TimestampType: wal.TimestampType(d.u8()),
	}
	if scan != nil {
		if b := d.take(int(d.u16())); b != nil {
			r.ObjectKey = scan.objectKey(b)
		}
	} else {
		r.ObjectKey = d.str()
	}
	if kind == kindBoundBatch || kind == kindRunBatch {
		r.Binding = wal.BatchBinding{Known: true, CRC: d.u32(), PartitionLeaderEpoch: int32(d.u32()),
			ProducerID: d.i64(), ProducerEpoch: int16(d.u16()), BaseSequence: int32(d.u32())}
	}
	if kind == kindRunBatch {
		if scan != nil && scan.aliasRun {
			if n := d.u32(); d.err == nil {
				r.Run = d.take(int(n))
			}
		} else {
			r.Run = d.lenBytes()
		}
		if r.Run == nil {
			d.check(false, "a run without run bytes")
		}
	}
	// The checks' arguments are boxed only when one fails (each row of
	// a find passes here).
	if !(r.BaseOffset >= 0 && r.ByteOffset >= 0 && r.Size > 0) {
		d.check(false, "base offset %d, byte offset %d, size %d", r.BaseOffset, r.ByteOffset, r.Size)
	}
	if !(r.TimestampType == wal.CreateTime || r.TimestampType == wal.LogAppendTime) {
		d.check(false, "timestamp type %d", r.TimestampType)
	}
	if r.ObjectKey == "" {
		d.check(false, "empty object key")
	}
	if err := d.done(); err != nil {
		return batchRow{}, corrupt(key, err)
	}
	return r, nil
}

func encodeProducer(st *wal.ProducerState) []byte {
	e := newEncoder(kindProducer)
	e.i64(st.ProducerID)
	e.u16(uint16(st.ProducerEpoch))
	e.u8(uint8(len(st.Batches)))
	for _, b := range st.Batches {
		e.u32(uint32(b.BaseSequence))
		e.u32(uint32(b.LastSequence))
		e.i64(b.AssignedOffset)
		e.i64(b.Timestamp)
	}
	return e.finish()
}

func decodeProducer(key, v []byte) (wal.ProducerState, error) {
	d, err := newDecoder(v, kindProducer)
	if err != nil {
		return wal.ProducerState{}, corrupt(key, err)
	}
	st := wal.ProducerState{ProducerID: d.i64(), ProducerEpoch: int16(d.u16())}
	n := int(d.u8())
	d.check(n <= wal.MaxProducerBatches, "%d producer batches, at most %d", n, wal.MaxProducerBatches)
	for i := 0; i < n && d.err == nil; i++ {
		st.Batches = append(st.Batches, wal.ProducerBatch{
			BaseSequence:   int32(d.u32()),
			LastSequence:   int32(d.u32()),
			AssignedOffset: d.i64(),
			Timestamp:      d.i64(),
		})
	}
	d.check(st.ProducerID >= 0 && st.ProducerEpoch >= 0, "producer %d epoch %d", st.ProducerID, st.ProducerEpoch)
	if err := d.done(); err != nil {
		return wal.ProducerState{}, corrupt(key, err)
	}
	return st, nil
}

// File states and reasons.
const (
	fileUploaded = 1
	fileDeleting = 2

	reasonProduce = 1
	reasonOrphan  = 2 // a reservation that expired: never committed
)

// storedResult is one wal.BatchResult as the file row keeps it, so that a
// retried commit answers exactly as the first one did.
type storedResult = wal.StoredBatchResult

// fileRow is one object.
type fileRow struct {
	State       uint8
	Reason      uint8
	BrokerID    int32
	BrokerEpoch int64
	Size        int64
	CommittedAt int64 // ms
	MarkedAt    int64 // ms; 0 unless State == fileDeleting
	LiveBatches int64
	Digest      [32]byte // of the CommitFileRequest
	Results     []storedResult
}

func encodeFile(r *fileRow) []byte {
	e := newEncoder(kindFile)
	e.u8(r.State)
	e.u8(r.Reason)
	e.u32(uint32(r.BrokerID))
	e.i64(r.BrokerEpoch)
	e.i64(r.Size)
	e.i64(r.CommittedAt)
	e.i64(r.MarkedAt)
	e.i64(r.LiveBatches)
	e.bytes(r.Digest[:])
	e.u32(uint32(len(r.Results)))
	for _, res := range r.Results {
		e.u8(uint8(res.Status))
		e.i64(res.BaseOffset)
		e.i64(res.LogAppendTime)
		e.i64(res.LogStartOffset)
		e.str(res.Detail)
	}
	return e.finish()
}

// minStoredResult is the smallest encoding of one storedResult.
const minStoredResult = 1 + 3*8 + 2

func decodeFile(key, v []byte) (fileRow, error) {
	d, err := newDecoder(v, kindFile)
	if err != nil {
		return fileRow{}, corrupt(key, err)
	}
	r := fileRow{
		State: d.u8(), Reason: d.u8(), BrokerID: int32(d.u32()), BrokerEpoch: d.i64(),
		Size: d.i64(), CommittedAt: d.i64(), MarkedAt: d.i64(), LiveBatches: d.i64(),
	}
	copy(r.Digest[:], d.take(32))
	n := d.u32()
	// Check the count against the bytes left before allocating for it.
	d.check(uint64(n) <= uint64(len(d.b))/minStoredResult, "%d results in %d bytes", n, len(d.b))
	if d.err == nil {
		r.Results = make([]storedResult, 0, n)
	}
	for i := uint32(0); i < n && d.err == nil; i++ {
		res := storedResult{Status: wal.BatchStatus(d.u8()), BaseOffset: d.i64(), LogAppendTime: d.i64(),
			LogStartOffset: d.i64(), Detail: d.str()}
		d.check(res.Status.Valid(), "result status %d", res.Status)
		r.Results = append(r.Results, res)
	}
	d.check(r.State == fileUploaded || r.State == fileDeleting, "file state %d", r.State)
	d.check(r.Reason == reasonProduce || r.Reason == reasonOrphan, "file reason %d", r.Reason)
	d.check(r.Size >= 0 && r.LiveBatches >= 0 && r.LiveBatches <= math.MaxInt32,
		"size %d, live batches %d", r.Size, r.LiveBatches)
	// An object is marked for deletion exactly when no batch lives in it.
	d.check((r.State == fileUploaded) == (r.LiveBatches > 0),
		"state %d with %d live batches", r.State, r.LiveBatches)
	if err := d.done(); err != nil {
		return fileRow{}, corrupt(key, err)
	}
	return r, nil
}

func encodeReservation(reservedAtMs int64) []byte {
	e := newEncoder(kindReservation)
	e.i64(reservedAtMs)
	return e.finish()
}

func decodeReservation(key, v []byte) (int64, error) {
	d, err := newDecoder(v, kindReservation)
	if err != nil {
		return 0, corrupt(key, err)
	}
	t := d.i64()
	if err := d.done(); err != nil {
		return 0, corrupt(key, err)
	}
	return t, nil
}
