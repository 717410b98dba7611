package remote

import (
	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/internal/base"
)

// This file holds the pure epoch arithmetic of the remote-log manager's
// tasks (Kafka: RemoteLogManager.findHighestRemoteOffset and the
// expiration task): which epochs have records, whether a remote
// segment belongs to the leader's lineage, and how far this log's lineage
// is already in remote storage. Entries are sorted by epoch, and their
// start offsets never decrease (the epoch cache's invariant).

// FilterLineage drops every epoch that holds no record: one whose start
// offset equals the next epoch's start. The last epoch is always kept.
// Kafka: RemoteLogManager.buildFilteredLeaderEpochMap. The result is a new
// slice.
//
//	{0:0, 1:0, 2:0, 3:30, 4:40, 5:60, 6:60, 7:70, 8:70}
//	-> {2:0, 3:30, 4:40, 6:60, 8:70}
func FilterLineage(entries []epochcache.Entry) []epochcache.Entry {
	out := make([]epochcache.Entry, 0, len(entries))
	for i, e := range entries {
		if i+1 < len(entries) && entries[i+1].StartOffset == e.StartOffset {
			continue
		}
		out = append(out, e)
	}
	return out
}

// filterLineageIfNeeded is FilterLineage, returning entries itself when
// no epoch is empty (the common case: the callers' lineage is filtered once
// per task run, and most segments hold one epoch).
func filterLineageIfNeeded(entries []epochcache.Entry) []epochcache.Entry {
	for i := 0; i+1 < len(entries); i++ {
		if entries[i+1].StartOffset == entries[i].StartOffset {
			return FilterLineage(entries)
		}
	}
	return entries
}

// lineageIndex returns the index of epoch in entries, or -1.
func lineageIndex(entries []epochcache.Entry, epoch int32) int {
	for i, e := range entries {
		if e.Epoch == epoch {
			return i
		}
		if e.Epoch > epoch {
			break
		}
	}
	return -1
}

// SegmentWithinLineage reports whether segment m belongs to the lineage of
// a leader whose epoch entries are lineage and whose log ends at logEnd
// (exclusive). Kafka: isRemoteSegmentWithinLeaderEpochs. Both the
// lineage and the segment's own epochs are filtered with FilterLineage
// first (a lineage filtered already is used as is, without a copy), so
// the caller may pass the log's epoch entries directly. It holds iff
//
//   - the segment's last epoch lies within [first, last] lineage epoch;
//   - first, the smallest segment epoch >= the lineage's first, exists;
//   - every segment epoch e >= first is in the lineage, and
//   - for e == first, when the lineage has an epoch below e, the
//     segment's start of e is at or above the lineage's start of e (an
//     older leader's records of e before this lineage's e would differ);
//   - for the segment's last epoch, the segment ends before the lineage's
//     next epoch starts;
//   - for any other e, the segment's next entry equals the lineage's next
//     entry (same epoch, same start): the epochs change where the
//     lineage's do;
//   - the segment ends below logEnd.
func SegmentWithinLineage(m *SegmentMetadata, logEnd int64, lineage []epochcache.Entry) bool {
	seg, lineage := filterLineageIfNeeded(m.SegmentLeaderEpochs), filterLineageIfNeeded(lineage)
	if len(seg) == 0 || len(lineage) == 0 {
		return false
	}
	segLast := seg[len(seg)-1].Epoch
	if segLast < lineage[0].Epoch || segLast > lineage[len(lineage)-1].Epoch {
		return false
	}
	firstIdx := -1
	for i, e := range seg {
		if e.Epoch >= lineage[0].Epoch {
			firstIdx = i
			break
		}
	}
	if firstIdx < 0 {
		return false
	}
	for i := firstIdx; i < len(seg); i++ {
		e := seg[i]
		li := lineageIndex(lineage, e.Epoch)
		if li < 0 {
			return false
		}
		if i == firstIdx && li > 0 && e.StartOffset < lineage[li].StartOffset {
			return false
		}
		if e.Epoch == segLast {
			if li+1 < len(lineage) && m.EndOffset > lineage[li+1].StartOffset-1 {
				return false
			}
			continue
		}
		if li+1 >= len(lineage) || lineage[li+1] != seg[i+1] {
			return false
		}
	}
	return m.EndOffset < logEnd
}

// HighestOffsetLookup answers the highest remote offset of one epoch
// (MetadataManager.HighestOffsetForEpoch).
type HighestOffsetLookup func(epoch int32) (offset int64, ok bool, err error)

// EndOffsetLookup answers the end offset of an epoch in this log
// (UnifiedLog.EndOffsetForEpoch: the epoch found and its exclusive end).
type EndOffsetLookup func(epoch int32) epochcache.EpochEndOffset

// FindHighestRemoteOffset returns the highest offset of this log's lineage
// that is in remote storage, and its epoch, or (-1, -1) when none is
// (Kafka: RemoteLogManager.findHighestRemoteOffset). It walks the epochs
// from the latest back: for the first epoch e with remote data h, if this
// log's own end of e is at or below h, the remote copy of e extends past
// what this lineage holds for e (an unclean election): the answer is capped
// at that end - 1, in the epoch the log found; otherwise it is (h, e).
//
//	cache {0:0, 1:500},        remote highest of 0: 200        -> (200, 0)
//	cache {0:0, 1:150, 2:300}, remote highest of 0: 200, no 1, 2 -> (149, 0)
func FindHighestRemoteOffset(entries []epochcache.Entry, highest HighestOffsetLookup, endOf EndOffsetLookup) (offset int64, epoch int32, err error) {
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i].Epoch
		h, ok, err := highest(e)
		if err != nil {
			return base.UndefinedOffset, base.UndefinedEpoch, err
		}
		if !ok {
			continue
		}
		ans := endOf(e)
		end, found, ok := ans.EndOffset, ans.Epoch, !ans.Undefined()
		if ok && end <= h {
			return end - 1, found, nil
		}
		return h, e, nil
	}
	return base.UndefinedOffset, base.UndefinedEpoch, nil
}
