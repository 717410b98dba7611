package log

import "fmt"

// SegmentIndexes are the decoded index entries of one segment.
type SegmentIndexes struct {
	BaseOffset  int64
	OffsetIndex []IndexEntry
	TimeIndex   []TimeIndexEntry
}

// SegmentIndexes returns the offset- and time-index entries of the segment
// whose base offset is base, the active segment included, as the log holds
// them now (for the active segment, entries not yet written to its index
// files are included; the files of a rolled segment hold the same entries
// after a flush). It is the live counterpart of DecodeOffsetIndex and
// DecodeTimeIndex, which read files. Lock-free: it pins the segment view,
// so a concurrent truncation or retention never frees the segment under it.
// ErrSegmentNotFound if no segment starts at base.
func (l *UnifiedLog) SegmentIndexes(base int64) (SegmentIndexes, error) {
	v, err := l.acquireView()
	if err != nil {
		return SegmentIndexes{}, err
	}
	defer v.unref()
	i := v.floor(base)
	if i < 0 || v.segments[i].BaseOffset() != base {
		return SegmentIndexes{}, fmt.Errorf("%w: no segment at base offset %d", ErrSegmentNotFound, base)
	}
	offIdx, timeIdx, err := v.segments[i].IndexBytes()
	if err != nil {
		return SegmentIndexes{}, fmt.Errorf("log: indexes of segment %d: %w", base, err)
	}
	name := fmt.Sprintf("segment %d", base)
	out := SegmentIndexes{BaseOffset: base}
	if out.OffsetIndex, err = DecodeOffsetIndex(name+" offset index", base, offIdx); err != nil {
		return SegmentIndexes{}, err
	}
	if out.TimeIndex, err = DecodeTimeIndex(name+" time index", base, timeIdx); err != nil {
		return SegmentIndexes{}, err
	}
	return out, nil
}
