package wal

import (
	"crypto/sha256"
	"encoding/binary"
)

// Digest identifies a commit's content, so that a control plane tells a
// retry of the same object key from a reuse: it stores the digest with
// the object and, on a second commit of the key, compares it with
// MatchesDigest.
//
// It covers every field of the request, each batch's CRC and partition
// leader epoch included. A retry sends the same request (the writer keeps
// it, or ParseObject rebuilds it from the same bytes), so it matches; a
// second object uploaded under the key, with other records or another
// leader epoch in the same coordinates, does not, and is refused
// (ErrObjectKeyReused) instead of being answered with offsets that the
// stored binding would then make unreadable.
//
// Encoding, fixed (stored digests must keep matching): SHA-256 of the
// marker u64 0xffffffffffffffff (a key length the first encoding never
// writes, so the two encodings never hash the same bytes), then the
// first encoding's fields (see digestWithoutBinding), each batch followed
// by its CRC u32 and partition leader epoch u32.
func (req *CommitFileRequest) Digest() [32]byte {
	return req.digest(true)
}

// MatchesDigest reports whether stored, the digest a control plane kept
// for req's key, is req's: Digest, or the encoding without the bindings
// that objects committed before the planes stored bindings carry. So a
// commit retried across that upgrade still gets the first answer; its
// batch rows have no binding (BatchBinding.Known false) and the old
// digest could not have compared what it did not cover.
func (req *CommitFileRequest) MatchesDigest(stored [32]byte) bool {
	return stored == req.Digest() || stored == req.digestWithoutBinding()
}

// digestWithoutBinding is the first encoding, stored by control planes
// before bindings: SHA-256 of key length u64, key, object size u64,
// broker id u32, broker epoch u64, then per batch topic id [16],
// partition u32 and u64 each of byte offset, size, base offset, last
// offset, record count, max timestamp, timestamp type, producer id,
// producer epoch, base sequence.
func (req *CommitFileRequest) digestWithoutBinding() [32]byte {
	return req.digest(false)
}

func (req *CommitFileRequest) digest(binding bool) [32]byte {
	h := sha256.New()
	var buf []byte
	if binding {
		buf = binary.BigEndian.AppendUint64(buf, ^uint64(0))
	}
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
		if binding {
			buf = binary.BigEndian.AppendUint32(buf, b.CRC)
			buf = binary.BigEndian.AppendUint32(buf, uint32(b.PartitionLeaderEpoch))
		}
		h.Write(buf)
	}
	var d [32]byte
	h.Sum(d[:0])
	return d
}
