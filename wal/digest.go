package wal

import (
	"crypto/sha256"
	"encoding/binary"
)

// Digest identifies a commit's content (every field of the request), so
// that a control plane tells a retry of the same object key from a reuse:
// it stores the digest with the object and compares it on a second commit.
// The encoding is fixed: stored digests must keep matching.
func (req *CommitFileRequest) Digest() [32]byte {
	h := sha256.New()
	var buf []byte
	buf = binary.BigEndian.AppendUint64(buf, uint64(len(req.ObjectKey)))
	buf = append(buf, req.ObjectKey...)
	buf = binary.BigEndian.AppendUint64(buf, uint64(req.ObjectSize))
	buf = binary.BigEndian.AppendUint32(buf, uint32(req.BrokerID))
	buf = binary.BigEndian.AppendUint64(buf, uint64(req.BrokerEpoch))
	h.Write(buf)
	for _, b := range req.Batches {
		buf = buf[:0]
		buf = append(buf, b.Partition.TopicID[:]...)
		buf = binary.BigEndian.AppendUint32(buf, uint32(b.Partition.Partition))
		for _, v := range []int64{b.ByteOffset, b.Size, b.BaseOffset, b.LastOffset, int64(b.RecordCount),
			b.MaxTimestamp, int64(b.TimestampType), b.ProducerID, int64(b.ProducerEpoch), int64(b.BaseSequence)} {
			buf = binary.BigEndian.AppendUint64(buf, uint64(v))
		}
		h.Write(buf)
	}
	var d [32]byte
	h.Sum(d[:0])
	return d
}
