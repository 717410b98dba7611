package remote

import (
	"encoding/binary"
)

// Pebble key layout (see doc.go for the table). Every key but the format
// version key starts with a partition prefix that is self-delimiting (the
// topic name carries its length), so one partition's keys form one
// contiguous range and no partition's prefix is a prefix of another's.
const (
	keyVersion = "\x00tierlog-remote-metadata-version"

	kindPartition = 0x01 // first byte of every partition key

	kindSegment = 's' // prefix | 's' | start offset u64 | segment id [16]
	kindEpoch   = 'e' // prefix | 'e' | epoch u32 | start offset u64 -> segment id
	kindHighest = 'h' // prefix | 'h' | epoch u32 -> highest offset u64
	kindDelete  = 'd' // prefix | 'd' -> partition delete marker

	metadataFormatVersion = 1
)

// partitionPrefix returns 0x01 | topic id [16] | partition u32 | topic
// length u8 | topic. tp must be valid.
func partitionPrefix(tp TopicIDPartition) []byte {
	k := make([]byte, 0, 1+16+4+1+len(tp.Topic)+1+8+16)
	k = append(k, kindPartition)
	k = append(k, tp.TopicID[:]...)
	k = binary.BigEndian.AppendUint32(k, uint32(tp.Partition))
	k = append(k, uint8(len(tp.Topic)))
	return append(k, tp.Topic...)
}

// prefixEnd returns the smallest key greater than every key starting with
// prefix (prefix is never all 0xff: it starts with kindPartition).
func prefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil
}

func segmentKey(prefix []byte, start int64, id UUID) []byte {
	k := append(append(make([]byte, 0, len(prefix)+1+8+16), prefix...), kindSegment)
	k = binary.BigEndian.AppendUint64(k, uint64(start))
	return append(k, id[:]...)
}

func epochKey(prefix []byte, epoch int32, start int64) []byte {
	k := append(append(make([]byte, 0, len(prefix)+1+4+8), prefix...), kindEpoch)
	k = binary.BigEndian.AppendUint32(k, uint32(epoch))
	return binary.BigEndian.AppendUint64(k, uint64(start))
}

func highestKey(prefix []byte, epoch int32) []byte {
	k := append(append(make([]byte, 0, len(prefix)+1+4), prefix...), kindHighest)
	return binary.BigEndian.AppendUint32(k, uint32(epoch))
}

func deleteKey(prefix []byte) []byte {
	return append(append(make([]byte, 0, len(prefix)+1), prefix...), kindDelete)
}

// parsePartitionPrefix splits a partition key into its partition and the
// rest (kind byte onwards).
func parsePartitionPrefix(k []byte) (TopicIDPartition, []byte, error) {
	var tp TopicIDPartition
	if len(k) < 1+16+4+1 || k[0] != kindPartition {
		return tp, nil, corruptionf("bad key %x", k)
	}
	copy(tp.TopicID[:], k[1:17])
	tp.Partition = int32(binary.BigEndian.Uint32(k[17:21]))
	n := int(k[21])
	if len(k) < 22+n {
		return tp, nil, corruptionf("bad key %x", k)
	}
	tp.Topic = string(k[22 : 22+n])
	if err := tp.validate(); err != nil {
		return tp, nil, corruptionf("bad key %x: %v", k, err)
	}
	return tp, k[22+n:], nil
}
