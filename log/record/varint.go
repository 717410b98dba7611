package record

// Varints (Kafka ByteUtils, as DefaultRecord uses them): a signed value is zig-zag mapped to an unsigned one,
// so small magnitudes of either sign stay short, then written as unsigned
// LEB128, seven bits per byte, low group first, the high bit set on every
// byte but the last.
//
//	 0 -> 0x00    -1 -> 0x01    1 -> 0x02    63 -> 0x7e
//	-64 -> 0x7f   64 -> 0x80 0x01
//
// A varint (int32) takes at most 5 bytes, a varlong (int64) at most 10.
// The decoders reject longer encodings and a last byte with bits beyond
// the type's width, as Kafka's ByteUtils and franz-go's kbin do, so every
// value has a bounded encoding and decoding never overflows.

const (
	maxVarintLen  = 5
	maxVarlongLen = 10
)

// AppendVarint appends the zig-zag varint encoding of v.
func AppendVarint(dst []byte, v int32) []byte {
	return appendUvarint(dst, uint64(uint32((v<<1)^(v>>31))))
}

// AppendVarlong appends the zig-zag varlong encoding of v.
func AppendVarlong(dst []byte, v int64) []byte {
	return appendUvarint(dst, uint64((v<<1)^(v>>63)))
}

func appendUvarint(dst []byte, u uint64) []byte {
	for u >= 0x80 {
		dst = append(dst, byte(u)|0x80)
		u >>= 7
	}
	return append(dst, byte(u))
}

// VarintLen returns the number of bytes AppendVarint writes for v.
func VarintLen(v int32) int { return uvarintLen(uint64(uint32((v << 1) ^ (v >> 31)))) }

// VarlongLen returns the number of bytes AppendVarlong writes for v.
func VarlongLen(v int64) int { return uvarintLen(uint64((v << 1) ^ (v >> 63))) }

func uvarintLen(u uint64) int {
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

// Varint decodes a zig-zag varint from the start of b. It returns the value
// and the number of bytes read, or n <= 0 if b is too short (0) or the
// encoding is too long or overflows (-1).
func Varint(b []byte) (v int32, n int) {
	// The common case, a one-byte value, needs no loop.
	if len(b) > 0 && b[0] < 0x80 {
		u := uint32(b[0])
		return int32(u>>1) ^ -int32(u&1), 1
	}
	var u uint32
	for i := 0; i < maxVarintLen; i++ {
		if i >= len(b) {
			return 0, 0
		}
		c := b[i]
		if i == maxVarintLen-1 && c > 0x0f {
			return 0, -1 // bits beyond 32, or a sixth byte
		}
		u |= uint32(c&0x7f) << (7 * i)
		if c < 0x80 {
			return int32(u>>1) ^ -int32(u&1), i + 1
		}
	}
	return 0, -1 // unreachable: the last byte either ends the value or fails above
}

// Varlong decodes a zig-zag varlong from the start of b, with the results
// of Varint.
func Varlong(b []byte) (v int64, n int) {
	if len(b) > 0 && b[0] < 0x80 {
		u := uint64(b[0])
		return int64(u>>1) ^ -int64(u&1), 1
	}
	var u uint64
	for i := 0; i < maxVarlongLen; i++ {
		if i >= len(b) {
			return 0, 0
		}
		c := b[i]
		if i == maxVarlongLen-1 && c > 0x01 {
			return 0, -1 // bits beyond 64, or an eleventh byte
		}
		u |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return int64(u>>1) ^ -int64(u&1), i + 1
		}
	}
	return 0, -1 // unreachable: the last byte either ends the value or fails above
}
