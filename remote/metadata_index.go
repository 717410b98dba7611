package remote

import (
	"bytes"
	"cmp"
	"slices"

	"github.com/tierlog/tierlog/internal/invariants"
	"github.com/tierlog/tierlog/internal/mutation"
)

// This file is the in-memory model of one partition's remote metadata: the
// reference semantics of Kafka's RemoteLogMetadataCache and
// RemoteLogLeaderEpochState, as pure data structures without
// I/O or locks. The MetadataManager plans a change against the current
// state (plan*), writes the planned change to Pebble, then applies it here
// (apply), so memory and disk are changed by the same value.

// partitionState holds one partition's segments and per-epoch indexes.
type partitionState struct {
	tp     TopicIDPartition
	prefix []byte // partitionPrefix(tp)

	// segments holds every segment not yet DELETE_SEGMENT_FINISHED. The
	// pointers are shared with byStart, the epochs' members and their
	// offsetToID; a state change overwrites the pointee in place (under
	// the manager's write lock), so they never go stale.
	segments map[UUID]*SegmentMetadata
	// byStart holds the same segments sorted by (StartOffset, ID).
	byStart []*SegmentMetadata
	// epochs holds the state of every epoch any segment ever carried.
	// Like Kafka's cache it never forgets an epoch: highestOffset stays
	// after the epoch's segments are deleted.
	epochs    map[int32]*epochState
	sizeBytes int64 // sum of SizeBytes over segments

	// deleteMarker is the partition's delete state; State is
	// NoPartitionDeleteState when it is not being deleted.
	deleteMarker PartitionDeleteMetadata
}

// epochState is Kafka's RemoteLogLeaderEpochState for one epoch.
type epochState struct {
	// offsetToID maps the epoch's start offset inside a segment to that
	// segment, for COPY_SEGMENT_FINISHED segments that no newer segment
	// superseded. Sorted by start, keys unique.
	offsetToID []epochMapping
	// members are all live segments carrying the epoch, in any state,
	// sorted by (StartOffset, ID): Kafka's offsetToId values plus its
	// unreferencedSegmentIds.
	members []*SegmentMetadata
	// highestOffset is the largest in-segment end of the epoch over every
	// segment that reached COPY_SEGMENT_FINISHED; never lowered. Valid iff
	// hasHighest.
	highestOffset int64
	hasHighest    bool
	sizeBytes     int64 // sum of SizeBytes over members
}

type epochMapping struct {
	start int64
	seg   *SegmentMetadata
}

func newPartitionState(tp TopicIDPartition) *partitionState {
	return &partitionState{
		tp:           tp,
		prefix:       partitionPrefix(tp),
		segments:     make(map[UUID]*SegmentMetadata),
		epochs:       make(map[int32]*epochState),
		deleteMarker: PartitionDeleteMetadata{TopicIDPartition: tp, State: NoPartitionDeleteState},
	}
}

func compareSegments(a *SegmentMetadata, start int64, id UUID) int {
	if c := cmp.Compare(a.StartOffset, start); c != 0 {
		return c
	}
	return bytes.Compare(a.SegmentID.ID[:], id[:])
}

func insertSorted(list []*SegmentMetadata, seg *SegmentMetadata) []*SegmentMetadata {
	i, found := slices.BinarySearchFunc(list, seg, func(a, b *SegmentMetadata) int {
		return compareSegments(a, b.StartOffset, b.SegmentID.ID)
	})
	invariants.Assertf(!found, "segment %s inserted twice", seg.SegmentID)
	return slices.Insert(list, i, seg)
}

func removeSorted(list []*SegmentMetadata, seg *SegmentMetadata) []*SegmentMetadata {
	i, found := slices.BinarySearchFunc(list, seg, func(a, b *SegmentMetadata) int {
		return compareSegments(a, b.StartOffset, b.SegmentID.ID)
	})
	if !found {
		invariants.Assertf(false, "segment %s not in its list", seg.SegmentID)
		return list
	}
	return slices.Delete(list, i, i+1)
}

// mappingIndex returns the index of the mapping with key start, or where it
// would be inserted.
func (st *epochState) mappingIndex(start int64) (int, bool) {
	return slices.BinarySearchFunc(st.offsetToID, start, func(m epochMapping, s int64) int {
		return cmp.Compare(m.start, s)
	})
}

// floor returns the mapping with the greatest key <= offset.
func (st *epochState) floor(offset int64) (epochMapping, bool) {
	i, found := st.mappingIndex(offset)
	if found {
		return st.offsetToID[i], true
	}
	if i == 0 {
		return epochMapping{}, false
	}
	return st.offsetToID[i-1], true
}

// lookup is Kafka's remoteLogSegmentMetadata(epoch, offset): the
// mapping with the greatest key <= offset, if offset also lies at or
// below the epoch's end inside that segment; else, unlike Kafka, any
// other COPY_SEGMENT_FINISHED segment whose range of the epoch holds
// offset.
//
// Why the second step. The mapping keeps one segment per epoch start: a
// segment that finishes later with the same start replaces the mapping
// even when it holds less of the epoch (a replica that diverged inside
// the epoch, elected uncleanly, copies a segment where the epoch ends
// sooner). The epoch's highest offset still counts the longer segment,
// so a replica of that lineage finds its records in remote storage and
// its retention may delete them locally; Kafka's lookup would then
// answer that remote storage does not hold them. Every segment carrying
// an epoch holds the same records of it (one leader wrote them), so the
// longer segment serves them.
func (ps *partitionState) lookup(epoch int32, offset int64) (*SegmentMetadata, bool) {
	st := ps.epochs[epoch]
	if st == nil {
		return nil, false
	}
	if m, ok := st.floor(offset); ok {
		_, end, ok := m.seg.epochRange(epoch)
		invariants.Assertf(ok, "segment %s mapped under epoch %d it does not carry", m.seg.SegmentID, epoch)
		if ok && offset <= end {
			return m.seg, true
		}
	}
	if mutation.Disabled(mutation.RemoteLookupEpochMembers) {
		return nil, false
	}
	for _, seg := range st.members {
		if seg.State != CopySegmentFinished {
			continue
		}
		if start, end, ok := seg.epochRange(epoch); ok && start <= offset && offset <= end {
			return seg, true
		}
	}
	return nil, false
}

// epochStart is a key of an epoch's offsetToID.
type epochStart struct {
	epoch int32
	start int64
}

// segmentChange is one planned change of one segment: the new value and
// the per-epoch index changes it implies. It is written to Pebble as is
// (writeTo) and applied to memory as is (apply).
type segmentChange struct {
	// prev is the segment's current in-memory value; nil for a new one.
	prev *SegmentMetadata
	// next is the value after the change.
	next SegmentMetadata
	// forget removes the segment (DELETE_SEGMENT_FINISHED).
	forget bool
	// mapDel are offsetToID keys to remove, applied before mapPut.
	mapDel []epochStart
	// mapPut are offsetToID keys to point at this segment.
	mapPut []epochStart
	// highest are new highestOffset values.
	highest []epochStart // start holds the offset
}

// planCopyFinished plans Kafka's handleSegmentWithCopySegmentFinishedState
// for every epoch of next: with s the epoch's start and eEnd
// its end inside the segment, while the last mapped key is >= s and the
// epoch's highestOffset <= eEnd, that mapping is superseded (dropped);
// then s maps to this segment (replacing any mapping with key s), and
// highestOffset = max(highestOffset, eEnd).
func (ps *partitionState) planCopyFinished(c *segmentChange) {
	for _, e := range c.next.SegmentLeaderEpochs {
		s, eEnd, _ := c.next.epochRange(e.Epoch)
		st := ps.epochs[e.Epoch]
		if st != nil {
			for j := len(st.offsetToID); j > 0 && st.offsetToID[j-1].start >= s &&
				st.hasHighest && st.highestOffset <= eEnd; j-- {
				c.mapDel = append(c.mapDel, epochStart{e.Epoch, st.offsetToID[j-1].start})
			}
		}
		c.mapPut = append(c.mapPut, epochStart{e.Epoch, s})
		if st == nil || !st.hasHighest || eEnd > st.highestOffset {
			c.highest = append(c.highest, epochStart{e.Epoch, eEnd})
		}
	}
}

// planDeleteStarted plans Kafka's handleSegmentWithDeleteSegmentStartedState:
// the segment's own mappings go; a mapping that a newer segment took over
// stays.
func (ps *partitionState) planDeleteStarted(c *segmentChange) {
	for _, e := range c.next.SegmentLeaderEpochs {
		st := ps.epochs[e.Epoch]
		if st == nil {
			continue
		}
		if i, ok := st.mappingIndex(e.StartOffset); ok && st.offsetToID[i].seg.SegmentID.ID == c.next.SegmentID.ID {
			c.mapDel = append(c.mapDel, epochStart{e.Epoch, e.StartOffset})
		}
	}
}

// plan fills the index changes for the transition to c.next.State. The
// transition must already be valid.
func (ps *partitionState) plan(c *segmentChange) {
	switch c.next.State {
	case CopySegmentFinished:
		ps.planCopyFinished(c)
	case DeleteSegmentStarted:
		ps.planDeleteStarted(c)
	case DeleteSegmentFinished:
		c.forget = true
		// DELETE_SEGMENT_STARTED already dropped the mappings; drop any
		// left anyway so no mapping can point at a forgotten segment.
		ps.planDeleteStarted(c)
	}
}

func (ps *partitionState) epoch(epoch int32) *epochState {
	st := ps.epochs[epoch]
	if st == nil {
		st = &epochState{}
		ps.epochs[epoch] = st
	}
	return st
}

// apply makes the planned change in memory.
//
// REQUIRES: the manager's mu held for writing (readers copy the pointees).
func (ps *partitionState) apply(c *segmentChange) {
	seg := c.prev
	if seg == nil {
		seg = new(SegmentMetadata)
		*seg = c.next
		ps.segments[seg.SegmentID.ID] = seg
		ps.byStart = insertSorted(ps.byStart, seg)
		ps.sizeBytes += seg.SizeBytes
		for _, e := range seg.SegmentLeaderEpochs {
			st := ps.epoch(e.Epoch)
			st.members = insertSorted(st.members, seg)
			st.sizeBytes += seg.SizeBytes
		}
	}
	for _, k := range c.mapDel {
		st := ps.epochs[k.epoch]
		if i, ok := st.mappingIndex(k.start); ok {
			st.offsetToID = slices.Delete(st.offsetToID, i, i+1)
		}
	}
	for _, k := range c.mapPut {
		st := ps.epoch(k.epoch)
		if i, ok := st.mappingIndex(k.start); ok {
			st.offsetToID[i].seg = seg
		} else {
			st.offsetToID = slices.Insert(st.offsetToID, i, epochMapping{start: k.start, seg: seg})
		}
	}
	for _, h := range c.highest {
		st := ps.epoch(h.epoch)
		st.highestOffset, st.hasHighest = h.start, true
	}
	if c.forget {
		delete(ps.segments, seg.SegmentID.ID)
		ps.byStart = removeSorted(ps.byStart, seg)
		ps.sizeBytes -= seg.SizeBytes
		for _, e := range seg.SegmentLeaderEpochs {
			st := ps.epochs[e.Epoch]
			st.members = removeSorted(st.members, seg)
			st.sizeBytes -= seg.SizeBytes
		}
		return
	}
	*seg = c.next
}

// checkInvariants verifies the cross-structure invariants; it runs after
// Open's load and, with assertions compiled in, after every change. It
// returns a description of the first violation, or "".
func (ps *partitionState) checkInvariants() string {
	if len(ps.byStart) != len(ps.segments) {
		return "byStart and segments differ in size"
	}
	var total int64
	for i, seg := range ps.byStart {
		if ps.segments[seg.SegmentID.ID] != seg {
			return "byStart holds a segment not in segments: " + seg.SegmentID.String()
		}
		if i > 0 && compareSegments(ps.byStart[i-1], seg.StartOffset, seg.SegmentID.ID) >= 0 {
			return "byStart not sorted"
		}
		total += seg.SizeBytes
	}
	if total != ps.sizeBytes {
		return "partition size does not match its segments"
	}
	for epoch, st := range ps.epochs {
		for i, m := range st.offsetToID {
			if i > 0 && st.offsetToID[i-1].start >= m.start {
				return "offsetToID not sorted"
			}
			if ps.segments[m.seg.SegmentID.ID] != m.seg || m.seg.State != CopySegmentFinished {
				return "offsetToID maps a segment that is unknown or not COPY_SEGMENT_FINISHED: " + m.seg.SegmentID.String()
			}
			s, end, ok := m.seg.epochRange(epoch)
			if !ok || s != m.start {
				return "offsetToID key is not the epoch's start in its segment: " + m.seg.SegmentID.String()
			}
			if !st.hasHighest || st.highestOffset < end {
				return "epoch highest offset below a mapped segment's end: " + m.seg.SegmentID.String()
			}
		}
		var size int64
		for _, seg := range st.members {
			if ps.segments[seg.SegmentID.ID] != seg {
				return "epoch member not in segments: " + seg.SegmentID.String()
			}
			size += seg.SizeBytes
		}
		if size != st.sizeBytes {
			return "epoch size does not match its members"
		}
	}
	for _, seg := range ps.segments {
		for _, e := range seg.SegmentLeaderEpochs {
			st := ps.epochs[e.Epoch]
			if st == nil {
				return "segment epoch without epoch state: " + seg.SegmentID.String()
			}
			if _, found := slices.BinarySearchFunc(st.members, seg, func(a, b *SegmentMetadata) int {
				return compareSegments(a, b.StartOffset, b.SegmentID.ID)
			}); !found {
				return "segment missing from its epoch's members: " + seg.SegmentID.String()
			}
		}
	}
	return ""
}
