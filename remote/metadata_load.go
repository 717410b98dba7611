package remote

import (
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// load reads the whole database into memory with one forward scan and
// checks it against itself. Keys of one partition are contiguous and
// ordered 'd' < 'e' < 'h' < 's', so mappings are read before the segments
// they name: they are collected per partition and resolved once the
// partition's range ends.
func load(db *pebble.DB) (map[TopicIDPartition]*partitionState, error) {
	iter, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{kindPartition}, UpperBound: []byte{kindPartition + 1}})
	if err != nil {
		return nil, fmt.Errorf("remote: scan metadata: %w", err)
	}
	parts := make(map[TopicIDPartition]*partitionState)
	var (
		cur      *partitionState
		mappings []loadedMapping
	)
	finish := func() error {
		if cur == nil {
			return nil
		}
		if err := resolveMappings(cur, mappings); err != nil {
			return err
		}
		if msg := cur.checkInvariants(); msg != "" {
			return corruptionf("partition %s: %s", cur.tp, msg)
		}
		return nil
	}
	for valid := iter.First(); valid; valid = iter.Next() {
		key := iter.Key()
		tp, rest, err := parsePartitionPrefix(key)
		if err != nil {
			_ = iter.Close()
			return nil, err
		}
		if cur == nil || cur.tp != tp {
			if err := finish(); err != nil {
				_ = iter.Close()
				return nil, err
			}
			if parts[tp] != nil {
				_ = iter.Close()
				return nil, corruptionf("partition %s keys not contiguous", tp)
			}
			cur, mappings = newPartitionState(tp), mappings[:0]
			parts[tp] = cur
		}
		value, err := iter.ValueAndErr()
		if err == nil {
			mappings, err = loadKey(cur, rest, value, mappings)
		}
		if err != nil {
			_ = iter.Close()
			return nil, err
		}
	}
	err = finish()
	if cerr := iter.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("remote: scan metadata: %w", cerr)
	}
	if err != nil {
		return nil, err
	}
	return parts, nil
}

type loadedMapping struct {
	epoch int32
	start int64
	id    UUID
}

// loadKey adds one key of partition ps (rest is the key after the
// partition prefix) to ps. Mappings are returned for resolveMappings.
func loadKey(ps *partitionState, rest, value []byte, mappings []loadedMapping) ([]loadedMapping, error) {
	if len(rest) == 0 {
		return mappings, corruptionf("partition %s: key without kind", ps.tp)
	}
	switch body := rest[1:]; rest[0] {
	case kindDelete:
		if len(body) != 0 {
			return mappings, corruptionf("partition %s: bad delete key", ps.tp)
		}
		d, err := decodeDeleteMarker(value, ps.tp)
		if err != nil {
			return mappings, err
		}
		ps.deleteMarker = d
	case kindEpoch:
		if len(body) != 12 || len(value) != 16 {
			return mappings, corruptionf("partition %s: bad epoch index key %x value %x", ps.tp, body, value)
		}
		var id UUID
		copy(id[:], value)
		mappings = append(mappings, loadedMapping{
			epoch: int32(binary.BigEndian.Uint32(body)),
			start: int64(binary.BigEndian.Uint64(body[4:])),
			id:    id,
		})
	case kindHighest:
		if len(body) != 4 || len(value) != 8 {
			return mappings, corruptionf("partition %s: bad highest offset key %x value %x", ps.tp, body, value)
		}
		st := ps.epoch(int32(binary.BigEndian.Uint32(body)))
		st.highestOffset, st.hasHighest = int64(binary.BigEndian.Uint64(value)), true
	case kindSegment:
		seg, err := DecodeSegmentMetadata(value)
		if err != nil {
			return mappings, fmt.Errorf("partition %s key %x: %w", ps.tp, body, err)
		}
		if len(body) != 24 || seg.SegmentID.TopicIDPartition != ps.tp ||
			int64(binary.BigEndian.Uint64(body)) != seg.StartOffset ||
			UUID(body[8:24]) != seg.SegmentID.ID {
			return mappings, corruptionf("partition %s: segment key %x does not match its value %s", ps.tp, body, seg.SegmentID)
		}
		if seg.State == DeleteSegmentFinished {
			return mappings, corruptionf("stored segment %s is DELETE_SEGMENT_FINISHED", seg.SegmentID)
		}
		if ps.segments[seg.SegmentID.ID] != nil {
			return mappings, corruptionf("segment %s stored twice", seg.SegmentID)
		}
		ps.apply(&segmentChange{next: seg})
	default:
		return mappings, corruptionf("partition %s: unknown key kind %q", ps.tp, rest[0])
	}
	return mappings, nil
}

// resolveMappings installs the loaded per-epoch mappings once all of the
// partition's segments are known. checkInvariants then verifies each
// against its segment.
func resolveMappings(ps *partitionState, mappings []loadedMapping) error {
	for _, lm := range mappings {
		seg := ps.segments[lm.id]
		if seg == nil {
			return corruptionf("partition %s: epoch %d index at %d names unknown segment %s",
				ps.tp, lm.epoch, lm.start, lm.id)
		}
		st := ps.epoch(lm.epoch)
		// Keys arrive sorted by (epoch, start): appending keeps order.
		st.offsetToID = append(st.offsetToID, epochMapping{start: lm.start, seg: seg})
	}
	return nil
}
