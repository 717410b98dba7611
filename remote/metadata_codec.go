package remote

import (
	"encoding/binary"
	"hash/crc32"
	"math"

	"github.com/tierlog/tierlog/epochcache"
)

// The stored form of a SegmentMetadata (the value of a segment key, see
// doc.go), big-endian:
//
//	 0  version        uint8   (segmentFormatV1)
//	 1  state          uint8   Kafka's RemoteLogSegmentState id
//	 2  flags          uint8   bit 0 TxnIndexEmpty, bit 1 CustomMetadata present
//	 3  brokerID       int32
//	 7  startOffset    int64
//	15  endOffset      int64
//	23  maxTimestampMs int64
//	31  eventTsMs      int64
//	39  sizeBytes      int64
//	47  segment id     [16]byte
//	63  topic id       [16]byte
//	79  partition      int32
//	83  topic length   uint8, then the topic name
//	    epoch count    uint32, then count x (epoch int32, startOffset int64)
//	    custom length  uint32, then the bytes (only if flag bit 1)
//	    crc            uint32  CRC-32C (Castagnoli) of every byte before it
//
// The encoding is canonical: DecodeSegmentMetadata accepts exactly the
// bytes EncodeSegmentMetadata produces for some valid SegmentMetadata.
const (
	segmentFormatV1 = 1

	flagTxnIndexEmpty = 1 << 0
	flagCustom        = 1 << 1
	flagsKnown        = flagTxnIndexEmpty | flagCustom

	segmentFixedLen = 84 // up to and including the topic length byte
	epochEntryLen   = 12
	crcLen          = 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// EncodeSegmentMetadata appends the stored form of m to dst. m must be
// valid (Validate); the manager validates before it encodes.
func EncodeSegmentMetadata(dst []byte, m *SegmentMetadata) []byte {
	start := len(dst)
	var flags uint8
	if m.TxnIndexEmpty {
		flags |= flagTxnIndexEmpty
	}
	if m.CustomMetadata != nil {
		flags |= flagCustom
	}
	tp := m.SegmentID.TopicIDPartition
	dst = append(dst, segmentFormatV1, byte(m.State), flags)
	dst = binary.BigEndian.AppendUint32(dst, uint32(m.BrokerID))
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.StartOffset))
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.EndOffset))
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.MaxTimestampMs))
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.EventTimestampMs))
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.SizeBytes))
	dst = append(dst, m.SegmentID.ID[:]...)
	dst = append(dst, tp.TopicID[:]...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(tp.Partition))
	dst = append(dst, uint8(len(tp.Topic)))
	dst = append(dst, tp.Topic...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(m.SegmentLeaderEpochs)))
	for _, e := range m.SegmentLeaderEpochs {
		dst = binary.BigEndian.AppendUint32(dst, uint32(e.Epoch))
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.StartOffset))
	}
	if m.CustomMetadata != nil {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(m.CustomMetadata)))
		dst = append(dst, m.CustomMetadata...)
	}
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// decoder reads big-endian fields from b, recording the first shortfall
// instead of panicking; every read after a failure returns zero.
type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) take(n int) []byte {
	if d.bad || n < 0 || n > len(d.b) {
		d.bad = true
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

func (d *decoder) u32() uint32 {
	if p := d.take(4); p != nil {
		return binary.BigEndian.Uint32(p)
	}
	return 0
}

func (d *decoder) u64() uint64 {
	if p := d.take(8); p != nil {
		return binary.BigEndian.Uint64(p)
	}
	return 0
}

// DecodeSegmentMetadata parses the stored form of a SegmentMetadata. It
// never panics and never allocates more than len(b) bytes' worth: every
// length is checked against what remains. Anything but a canonical,
// checksummed encoding of valid metadata is an error wrapping
// ErrCorruption. The result does not alias b.
func DecodeSegmentMetadata(b []byte) (SegmentMetadata, error) {
	var m SegmentMetadata
	if len(b) < segmentFixedLen+4+crcLen {
		return m, corruptionf("segment metadata of %d bytes is too short", len(b))
	}
	body, sum := b[:len(b)-crcLen], binary.BigEndian.Uint32(b[len(b)-crcLen:])
	if got := crc32.Checksum(body, castagnoli); got != sum {
		return m, corruptionf("segment metadata checksum %08x, stored %08x", got, sum)
	}
	d := decoder{b: body}
	if v := d.u8(); v != segmentFormatV1 {
		return m, corruptionf("segment metadata version %d, want %d", v, segmentFormatV1)
	}
	m.State = SegmentState(d.u8())
	flags := d.u8()
	if flags&^flagsKnown != 0 {
		return m, corruptionf("segment metadata flags %#x", flags)
	}
	m.TxnIndexEmpty = flags&flagTxnIndexEmpty != 0
	m.BrokerID = int32(d.u32())
	m.StartOffset = int64(d.u64())
	m.EndOffset = int64(d.u64())
	m.MaxTimestampMs = int64(d.u64())
	m.EventTimestampMs = int64(d.u64())
	m.SizeBytes = int64(d.u64())
	copy(m.SegmentID.ID[:], d.take(16))
	tp := &m.SegmentID.TopicIDPartition
	copy(tp.TopicID[:], d.take(16))
	tp.Partition = int32(d.u32())
	tp.Topic = string(d.take(int(d.u8())))
	n := d.u32()
	if d.bad || uint64(n) > uint64(len(d.b)/epochEntryLen) {
		return m, corruptionf("segment metadata: %d leader epochs do not fit", n)
	}
	if n > 0 {
		m.SegmentLeaderEpochs = make([]epochcache.Entry, n)
		for i := range m.SegmentLeaderEpochs {
			m.SegmentLeaderEpochs[i] = epochcache.Entry{Epoch: int32(d.u32()), StartOffset: int64(d.u64())}
		}
	}
	if flags&flagCustom != 0 {
		size := d.u32()
		if size > math.MaxInt32 {
			return m, corruptionf("segment metadata: custom metadata of %d bytes", size)
		}
		if p := d.take(int(size)); !d.bad {
			m.CustomMetadata = append(make([]byte, 0, len(p)), p...)
		}
	}
	if d.bad {
		return m, corruptionf("segment metadata truncated")
	}
	if len(d.b) != 0 {
		return m, corruptionf("segment metadata has %d trailing bytes", len(d.b))
	}
	if err := m.Validate(); err != nil {
		return m, corruptionf("%v", err)
	}
	return m, nil
}

// The stored form of a PartitionDeleteMetadata (the value of a partition
// delete key): version uint8, state uint8, brokerID int32, eventTsMs int64,
// CRC-32C uint32. The partition is in the key.
const deleteMarkerLen = 1 + 1 + 4 + 8 + crcLen

func encodeDeleteMarker(dst []byte, d *PartitionDeleteMetadata) []byte {
	start := len(dst)
	dst = append(dst, segmentFormatV1, byte(d.State))
	dst = binary.BigEndian.AppendUint32(dst, uint32(d.BrokerID))
	dst = binary.BigEndian.AppendUint64(dst, uint64(d.EventTimestampMs))
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

func decodeDeleteMarker(b []byte, tp TopicIDPartition) (PartitionDeleteMetadata, error) {
	var d PartitionDeleteMetadata
	if len(b) != deleteMarkerLen {
		return d, corruptionf("partition delete marker of %d bytes", len(b))
	}
	if got, sum := crc32.Checksum(b[:len(b)-crcLen], castagnoli), binary.BigEndian.Uint32(b[len(b)-crcLen:]); got != sum {
		return d, corruptionf("partition delete marker checksum %08x, stored %08x", got, sum)
	}
	if b[0] != segmentFormatV1 || b[1] > byte(DeletePartitionStarted) {
		// FINISHED is never stored: it removes the partition's keys.
		return d, corruptionf("partition delete marker version %d state %d", b[0], b[1])
	}
	d.TopicIDPartition = tp
	d.State = PartitionDeleteState(b[1])
	d.BrokerID = int32(binary.BigEndian.Uint32(b[2:]))
	d.EventTimestampMs = int64(binary.BigEndian.Uint64(b[6:]))
	return d, nil
}
