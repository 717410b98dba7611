package tierstate

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/tierlog/tierlog/epochcache"
)

// Tag numbers of the Inkless fields on PartitionRecord and
// PartitionChangeRecord. Kafka carries them as unknown tagged
// fields (RawTaggedField), so upstream brokers skip them.
const (
	TagClassicToDisklessStartOffset uint32 = 100
	TagProducerStates               uint32 = 101
	TagDisklessLeaderEpoch          uint32 = 102
	TagClassicPrefixInRemoteStorage uint32 = 103
	TagLastClassicLeaderEpoch       uint32 = 104
	// TagSealLineage is tierlog's own (State.SealLineage); Inkless
	// brokers and controllers skip it as they skip any unknown tag.
	TagSealLineage uint32 = 105
)

// producerStateBytes is the size of one tag-101 entry.
const producerStateBytes = 8 + 2 + 4 + 4 + 8 + 8

// ProducerStateEntry is one producer's state committed with the seal
// (tag 101): what the leader's log knew of the producer at the seal, so
// that the diskless log continues its sequence numbers.
type ProducerStateEntry struct {
	ProducerID        int64
	ProducerEpoch     int16
	BaseSequence      int32
	LastSequence      int32
	AssignedOffset    int64
	BatchMaxTimestamp int64
}

// RawTaggedField is one tagged field of a metadata record as Kafka keeps
// an unknown one: its tag and its payload bytes.
type RawTaggedField struct {
	Tag  uint32
	Data []byte
}

// Optional is a tagged field's value and whether the record carries it.
// In a change record an absent field keeps the previous value.
type Optional[T any] struct {
	Value   T
	Present bool
}

// Some returns a present field.
func Some[T any](v T) Optional[T] { return Optional[T]{Value: v, Present: true} }

// Tags are the Inkless fields of one PartitionRecord or
// PartitionChangeRecord, decoded, each with its presence.
type Tags struct {
	// ClassicToDisklessStartOffset is tag 100, int64 big-endian: -1 not
	// switched (absent means -1, but an explicit -1 aborts), -2 seal
	// pending, >= 0 the committed seal.
	ClassicToDisklessStartOffset Optional[int64]
	// ProducerStates is tag 101: int32 count, then 34 bytes per entry.
	ProducerStates Optional[[]ProducerStateEntry]
	// DisklessLeaderEpoch is tag 102, int32 big-endian; absent means -1.
	DisklessLeaderEpoch Optional[int32]
	// ClassicPrefixInRemoteStorage is tag 103, one byte 0 or 1 [INF: the
	// seeds give no encoding]; absent means false.
	ClassicPrefixInRemoteStorage Optional[bool]
	// LastClassicLeaderEpoch is tag 104, int32 big-endian [INF, like tag
	// 102]; absent means -1.
	LastClassicLeaderEpoch Optional[int32]
	// SealLineage is tag 105: the sealing leader's epoch entries below
	// the seal, 12 bytes each (int32 epoch, int64 start offset, big
	// endian; State.SealLineage). Absent or empty means unknown; an
	// empty one in a change record clears it.
	SealLineage Optional[[]epochcache.Entry]
}

// Empty reports whether no Inkless field is present.
func (t Tags) Empty() bool {
	return !t.ClassicToDisklessStartOffset.Present && !t.ProducerStates.Present &&
		!t.DisklessLeaderEpoch.Present && !t.ClassicPrefixInRemoteStorage.Present &&
		!t.LastClassicLeaderEpoch.Present && !t.SealLineage.Present
}

// String prints the present fields in tag order, for example
// "seal=100 producers=2 diskless-epoch=6 flag=true recorded-epoch=2", or
// "(none)".
func (t Tags) String() string {
	var parts []string
	if f := t.ClassicToDisklessStartOffset; f.Present {
		parts = append(parts, fmt.Sprintf("seal=%d", f.Value))
	}
	if f := t.ProducerStates; f.Present {
		parts = append(parts, fmt.Sprintf("producers=%d", len(f.Value)))
	}
	if f := t.DisklessLeaderEpoch; f.Present {
		parts = append(parts, fmt.Sprintf("diskless-epoch=%d", f.Value))
	}
	if f := t.ClassicPrefixInRemoteStorage; f.Present {
		parts = append(parts, fmt.Sprintf("flag=%t", f.Value))
	}
	if f := t.LastClassicLeaderEpoch; f.Present {
		parts = append(parts, fmt.Sprintf("recorded-epoch=%d", f.Value))
	}
	if f := t.SealLineage; f.Present {
		parts = append(parts, fmt.Sprintf("seal-lineage=%s", formatSealLineage(f.Value)))
	}
	if len(parts) == 0 {
		return "(none)"
	}
	return strings.Join(parts, " ")
}

// Encode returns the present fields as raw tagged fields in increasing
// tag order, as Kafka requires on the wire (102 before 103 before 104;
// https://github.com/aiven/inkless/pull/827).
func (t Tags) Encode() []RawTaggedField {
	var out []RawTaggedField
	if f := t.ClassicToDisklessStartOffset; f.Present {
		out = append(out, RawTaggedField{TagClassicToDisklessStartOffset, binary.BigEndian.AppendUint64(nil, uint64(f.Value))})
	}
	if f := t.ProducerStates; f.Present {
		data := binary.BigEndian.AppendUint32(nil, uint32(len(f.Value)))
		out = append(out, RawTaggedField{TagProducerStates, appendProducerStates(data, f.Value)})
	}
	if f := t.DisklessLeaderEpoch; f.Present {
		out = append(out, RawTaggedField{TagDisklessLeaderEpoch, binary.BigEndian.AppendUint32(nil, uint32(f.Value))})
	}
	if f := t.ClassicPrefixInRemoteStorage; f.Present {
		b := byte(0)
		if f.Value {
			b = 1
		}
		out = append(out, RawTaggedField{TagClassicPrefixInRemoteStorage, []byte{b}})
	}
	if f := t.LastClassicLeaderEpoch; f.Present {
		out = append(out, RawTaggedField{TagLastClassicLeaderEpoch, binary.BigEndian.AppendUint32(nil, uint32(f.Value))})
	}
	if f := t.SealLineage; f.Present {
		out = append(out, RawTaggedField{TagSealLineage, []byte(encodeSealLineage(f.Value))})
	}
	return out
}

// DecodeTags reads the Inkless fields from a record's unknown tagged
// fields. Tags outside 100..105 belong to others and are skipped; tags
// must be strictly increasing, as on the wire. A payload of the wrong
// size, a flag byte other than 0 or 1, or a producer count that does not
// match the bytes is a *TagError wrapping ErrCorruption. Values are not
// range-checked here: FromPartitionRecord and ApplyChange do that.
func DecodeTags(fields []RawTaggedField) (Tags, error) {
	var t Tags
	for i, f := range fields {
		if i > 0 && f.Tag <= fields[i-1].Tag {
			return Tags{}, corruptTag(f.Tag, "follows tag %d: tags must increase", fields[i-1].Tag)
		}
		switch f.Tag {
		case TagClassicToDisklessStartOffset:
			if len(f.Data) != 8 {
				return Tags{}, corruptTag(f.Tag, "%d bytes, want 8", len(f.Data))
			}
			t.ClassicToDisklessStartOffset = Some(int64(binary.BigEndian.Uint64(f.Data)))
		case TagProducerStates:
			if len(f.Data) < 4 {
				return Tags{}, corruptTag(f.Tag, "%d bytes, want at least 4", len(f.Data))
			}
			n := binary.BigEndian.Uint32(f.Data)
			rest := f.Data[4:]
			// Compare before multiplying: n comes from the bytes.
			if uint64(n) != uint64(len(rest))/producerStateBytes || len(rest)%producerStateBytes != 0 {
				return Tags{}, corruptTag(f.Tag, "count %d does not match %d entry bytes", n, len(rest))
			}
			ps, err := decodeProducerStates(rest)
			if err != nil {
				return Tags{}, err
			}
			if ps == nil {
				ps = []ProducerStateEntry{}
			}
			t.ProducerStates = Some(ps)
		case TagSealLineage:
			if len(f.Data)%sealLineageEntryBytes != 0 || len(f.Data) > MaxSealLineageEntries*sealLineageEntryBytes {
				return Tags{}, corruptTag(f.Tag, "%d bytes, want a multiple of %d up to %d entries",
					len(f.Data), sealLineageEntryBytes, MaxSealLineageEntries)
			}
			es := decodeSealLineage(string(f.Data))
			if es == nil {
				es = []epochcache.Entry{}
			}
			t.SealLineage = Some(es)
		case TagDisklessLeaderEpoch, TagLastClassicLeaderEpoch:
			if len(f.Data) != 4 {
				return Tags{}, corruptTag(f.Tag, "%d bytes, want 4", len(f.Data))
			}
			v := Some(int32(binary.BigEndian.Uint32(f.Data)))
			if f.Tag == TagDisklessLeaderEpoch {
				t.DisklessLeaderEpoch = v
			} else {
				t.LastClassicLeaderEpoch = v
			}
		case TagClassicPrefixInRemoteStorage:
			if len(f.Data) != 1 || f.Data[0] > 1 {
				return Tags{}, corruptTag(f.Tag, "payload %x, want one byte 0 or 1", f.Data)
			}
			t.ClassicPrefixInRemoteStorage = Some(f.Data[0] == 1)
		}
	}
	return t, nil
}

func corruptTag(tag uint32, format string, args ...any) *TagError {
	return &TagError{Tag: tag, Reason: ErrCorruption, Detail: fmt.Sprintf(format, args...)}
}

func appendProducerStates(dst []byte, ps []ProducerStateEntry) []byte {
	for _, p := range ps {
		dst = binary.BigEndian.AppendUint64(dst, uint64(p.ProducerID))
		dst = binary.BigEndian.AppendUint16(dst, uint16(p.ProducerEpoch))
		dst = binary.BigEndian.AppendUint32(dst, uint32(p.BaseSequence))
		dst = binary.BigEndian.AppendUint32(dst, uint32(p.LastSequence))
		dst = binary.BigEndian.AppendUint64(dst, uint64(p.AssignedOffset))
		dst = binary.BigEndian.AppendUint64(dst, uint64(p.BatchMaxTimestamp))
	}
	return dst
}

// encodeProducerStates is the State's form of tag 101: the entries
// without the count, "" for none.
func encodeProducerStates(ps []ProducerStateEntry) string {
	return string(appendProducerStates(nil, ps))
}

func producerStateCount(enc string) int { return len(enc) / producerStateBytes }

// decodeProducerStates reads entries without a count; nil for none.
func decodeProducerStates(b []byte) ([]ProducerStateEntry, error) {
	if len(b)%producerStateBytes != 0 {
		return nil, corruptTag(TagProducerStates, "%d entry bytes, not a multiple of %d", len(b), producerStateBytes)
	}
	var out []ProducerStateEntry
	for ; len(b) > 0; b = b[producerStateBytes:] {
		out = append(out, ProducerStateEntry{
			ProducerID:        int64(binary.BigEndian.Uint64(b[0:])),
			ProducerEpoch:     int16(binary.BigEndian.Uint16(b[8:])),
			BaseSequence:      int32(binary.BigEndian.Uint32(b[10:])),
			LastSequence:      int32(binary.BigEndian.Uint32(b[14:])),
			AssignedOffset:    int64(binary.BigEndian.Uint64(b[18:])),
			BatchMaxTimestamp: int64(binary.BigEndian.Uint64(b[26:])),
		})
	}
	return out, nil
}
