package epochcache

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tierlog/tierlog/internal/base"
	"github.com/tierlog/tierlog/internal/invariants"
)

// Entry records that leader epoch Epoch wrote its first record at
// StartOffset (inclusive). The entry covers offsets from StartOffset up to,
// but excluding, the next entry's StartOffset, or up to the log end offset
// for the latest entry. Kafka: EpochEntry.
type Entry struct {
	Epoch       int32
	StartOffset int64
}

// String formats the entry as epoch@startOffset, e.g. "3@8".
func (e Entry) String() string {
	return string(e.appendTo(nil))
}

func (e Entry) appendTo(b []byte) []byte {
	b = strconv.AppendInt(b, int64(e.Epoch), 10)
	b = append(b, '@')
	return strconv.AppendInt(b, e.StartOffset, 10)
}

// FormatEntries formats entries as "2@6 3@8" (epoch@startOffset, space
// separated), or "(empty)" when there are none. Tests and tools print
// caches with it.
func FormatEntries(entries []Entry) string {
	if len(entries) == 0 {
		return "(empty)"
	}
	var sb strings.Builder
	var buf [48]byte
	for i, e := range entries {
		if i > 0 {
			sb.WriteByte(' ')
		}
		sb.Write(e.appendTo(buf[:0]))
	}
	return sb.String()
}

// ParseEntries reads entries as FormatEntries and the tools print them:
// epoch@startOffset, separated by commas or spaces ("2@6,3@8", "2@6 3@8").
// "" and "(empty)" are no entries. Each epoch must fit an int32 and each
// start offset an int64; the order is not checked.
func ParseEntries(s string) ([]Entry, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "(empty)" {
		return nil, nil
	}
	var out []Entry
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		ep, off, ok := strings.Cut(f, "@")
		epoch, err1 := strconv.ParseInt(ep, 10, 32)
		start, err2 := strconv.ParseInt(off, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("epochcache: entry %q: want EPOCH@START", f)
		}
		out = append(out, Entry{Epoch: int32(epoch), StartOffset: start})
	}
	return out, nil
}

// The functions below are the model of the cache: pure operations on a
// sorted entry list, shared by the Cache methods (under its mutex) and by
// EntriesInRange (on a copy). Every list they take and return satisfies
// checkEntries.

// assignEntry applies the rules of Kafka's LeaderEpochFileCache.assign to
// entries (which it may
// modify in place) and reports whether anything changed. The arguments
// must already be validated (non-negative).
//
// The update is needed iff the list is empty, the epoch differs from the
// latest epoch, or the start offset moved below the latest start offset.
// If needed, entries are removed walking back from the newest while they
// conflict with the new one (epoch >= epoch or startOffset >= startOffset),
// then the new entry is appended. Whenever the update is needed the list
// changes: an unchanged result would need the new entry to equal the
// latest one, which is exactly the "not needed" case.
func assignEntry(entries []Entry, e Entry) ([]Entry, bool) {
	if n := len(entries); n > 0 {
		latest := entries[n-1]
		if e.Epoch == latest.Epoch && e.StartOffset >= latest.StartOffset {
			return entries, false
		}
	}
	i := len(entries)
	for i > 0 && (entries[i-1].Epoch >= e.Epoch || entries[i-1].StartOffset >= e.StartOffset) {
		i--
	}
	return append(entries[:i], e), true
}

// truncateEntriesFromEnd removes the entries whose StartOffset >= endOffset
// (Kafka's LeaderEpochFileCache.truncateFromEnd). A negative endOffset
// changes nothing.
func truncateEntriesFromEnd(entries []Entry, endOffset int64) ([]Entry, bool) {
	if endOffset < 0 || len(entries) == 0 || entries[len(entries)-1].StartOffset < endOffset {
		return entries, false
	}
	// Entries whose StartOffset >= endOffset form a suffix; keep the rest.
	return entries[:searchStartOffsetAtLeast(entries, endOffset)], true
}

// truncateEntriesFromStart removes the entries whose StartOffset <=
// startOffset and, if any were removed, puts the last removed one back
// with StartOffset = startOffset (Kafka's
// LeaderEpochFileCache.truncateFromStart): the epoch that was current at
// startOffset keeps covering it. It reports false when the result equals
// the input (startOffset below the earliest entry, or exactly at it). A
// negative startOffset changes nothing.
func truncateEntriesFromStart(entries []Entry, startOffset int64) ([]Entry, bool) {
	if startOffset < 0 || len(entries) == 0 || entries[0].StartOffset >= startOffset {
		// Nothing at or below startOffset, or only entries[0] exactly at
		// it, which Kafka removes and re-inserts unchanged.
		return entries, false
	}
	// k = number of entries with StartOffset <= startOffset (k >= 1).
	k := searchStartOffsetAbove(entries, startOffset)
	n := copy(entries, entries[k-1:])
	entries = entries[:n]
	entries[0].StartOffset = startOffset
	return entries, true
}

// searchEpochAbove returns the index of the first entry whose Epoch is
// greater than epoch, or len(entries). Hand-written rather than
// sort.Search so that the hot query paths provably do not allocate.
func searchEpochAbove(entries []Entry, epoch int32) int {
	lo, hi := 0, len(entries)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if entries[m].Epoch <= epoch {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// searchEpochAtLeast returns the index of the first entry whose Epoch is
// at least epoch, or len(entries).
func searchEpochAtLeast(entries []Entry, epoch int32) int {
	lo, hi := 0, len(entries)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if entries[m].Epoch < epoch {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// searchStartOffsetAbove returns the index of the first entry whose
// StartOffset is greater than offset, or len(entries).
func searchStartOffsetAbove(entries []Entry, offset int64) int {
	lo, hi := 0, len(entries)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if entries[m].StartOffset <= offset {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// searchStartOffsetAtLeast returns the index of the first entry whose
// StartOffset is at least offset, or len(entries).
func searchStartOffsetAtLeast(entries []Entry, offset int64) int {
	lo, hi := 0, len(entries)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if entries[m].StartOffset < offset {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// endOffsetFor answers OffsetsForLeaderEpoch on a sorted list; see
// Cache.EndOffsetFor.
func endOffsetFor(entries []Entry, epoch int32, logEndOffset int64) (int32, int64) {
	if epoch < 0 {
		return base.UndefinedEpoch, base.UndefinedOffset
	}
	n := len(entries)
	if n > 0 && entries[n-1].Epoch == epoch {
		// The latest epoch is still being written: it ends at the LEO.
		return epoch, logEndOffset
	}
	higher := searchEpochAbove(entries, epoch)
	switch {
	case higher == n:
		// Nothing above the requested epoch (includes the empty cache and
		// a requested epoch above the latest): this replica cannot say.
		return base.UndefinedEpoch, base.UndefinedOffset
	case higher == 0:
		// The requested epoch is older than everything cached: echo it
		// with the start of the earliest known epoch (Kafka behaviour).
		return epoch, entries[0].StartOffset
	default:
		// Floor epoch, ending where the next higher epoch starts.
		return entries[higher-1].Epoch, entries[higher].StartOffset
	}
}

// EpochForOffsetIn is Cache.EpochForOffset over a sorted entry list (a
// snapshot of a cache, a remote segment's leader epochs): the epoch of the
// last entry starting at or below offset, false when none does.
func EpochForOffsetIn(entries []Entry, offset int64) (int32, bool) {
	return epochForOffset(entries, offset)
}

// epochForOffset finds the epoch that wrote an offset in a sorted list; see
// Cache.EpochForOffset.
func epochForOffset(entries []Entry, offset int64) (int32, bool) {
	i := searchStartOffsetAbove(entries, offset)
	if i == 0 {
		return base.UndefinedEpoch, false
	}
	return entries[i-1].Epoch, true
}

// checkEntries asserts the model invariant: epochs and start offsets are
// non-negative and strictly increasing. It costs O(n), so it only runs
// when invariants are compiled in (-race or -tags invariants).
func checkEntries(entries []Entry) {
	if !invariants.Enabled {
		return
	}
	for i, e := range entries {
		invariants.Assertf(e.Epoch >= 0 && e.StartOffset >= 0,
			"epochcache: entry %d is %s: negative epoch or start offset", i, e)
		if i > 0 {
			prev := entries[i-1]
			invariants.Assertf(prev.Epoch < e.Epoch && prev.StartOffset < e.StartOffset,
				"epochcache: entries %d and %d (%s, %s) not strictly increasing", i-1, i, prev, e)
		}
	}
}
