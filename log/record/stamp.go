package record

import "encoding/binary"

// SetMaxTimestamp sets the batch's timestamp type and MaxTimestamp in
// place and recomputes the CRC, as a leader does when it stamps the log
// append time or corrects a producer's MaxTimestamp (Kafka:
// DefaultRecordBatch.setMaxTimestamp). Both fields are inside the CRC, so
// unlike SetBaseOffset this costs a checksum pass; when neither field
// changes it does nothing. The caller must have validated the batch: a
// batch with a bad CRC would come out with a good one.
func (b Batch) SetMaxTimestamp(t TimestampType, maxTimestamp int64) {
	if b.TimestampType() == t && b.MaxTimestamp() == maxTimestamp {
		return
	}
	attrs := b.Attributes() &^ AttrTimestampType
	if t == LogAppendTime {
		attrs |= AttrTimestampType
	}
	binary.BigEndian.PutUint16(b.b[offAttributes:], uint16(attrs))
	binary.BigEndian.PutUint64(b.b[offMaxTimestamp:], uint64(maxTimestamp))
	binary.BigEndian.PutUint32(b.b[offCRC:], b.ComputeCRC())
}
