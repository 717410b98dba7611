package log

import (
	"fmt"
	"io"

	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/log/internal/producer"
)

// This file is what the remote tier reads of a log to copy its segments
// (docs/remote-tier.md, "Copying: what and when"): the segment list, a
// rolled segment's files, and the epoch entries the copy records. Nothing here takes l.mu for longer than a
// copy of a small slice; the bytes are read from pinned segments, so an
// upload never blocks an append.

// SegmentInfo describes one local segment, from a snapshot of the list.
type SegmentInfo struct {
	// BaseOffset is the segment's first offset.
	BaseOffset int64
	// NextOffset is the next segment's base offset; for the active
	// segment, the log end offset at the time of the snapshot.
	NextOffset int64
	// SizeBytes is the size of the .log file.
	SizeBytes int64
	// MaxTimestampMs is the largest batch timestamp (the creation time
	// when no batch has one).
	MaxTimestampMs int64
	// Active is true for the last segment, the one appends go to; it is
	// never copied to remote storage.
	Active bool
}

// Segments returns the local segments holding offsets at or above from,
// starting with the one holding from (Kafka's logSegments(from, ∞) with
// the floor segment included, which the copy task needs), in offset order.
func (l *UnifiedLog) Segments(from int64) ([]SegmentInfo, error) {
	st, err := l.acquireState()
	if err != nil {
		return nil, err
	}
	v := st.view
	defer v.unref()
	i := max(v.floor(from), 0)
	leo := st.offsets.LogEndOffset // the end of this view's active segment
	out := make([]SegmentInfo, 0, len(v.segments)-i)
	for j := i; j < len(v.segments); j++ {
		s := v.segments[j]
		info := SegmentInfo{
			BaseOffset:     s.BaseOffset(),
			NextOffset:     leo,
			SizeBytes:      s.Size(),
			MaxTimestampMs: s.LargestTimestamp(),
			Active:         j == len(v.segments)-1,
		}
		if !info.Active {
			info.NextOffset = v.segments[j+1].BaseOffset()
		}
		out = append(out, info)
	}
	return out, nil
}

// SegmentFiles is a rolled segment pinned for a copy: its files stay
// readable until Close even if retention deletes or a truncation replaces
// them meanwhile (the copy then uploads the old bytes, and the truncation
// count fences the result; docs/remote-tier.md, "The truncation fence").
type SegmentFiles struct {
	Info SegmentInfo
	// Log reads the .log file in [0, Info.SizeBytes). It also has
	// ReadvAt(bufs [][]byte, off int64) (int, error), a vectored read
	// (one preadv(2) on Linux; remote.VectorReaderAt), which the remote
	// copy uses to read blocks straight into its framed layout.
	Log io.ReaderAt
	// OffsetIndex and TimeIndex are the index entries in file format.
	OffsetIndex, TimeIndex []byte
	// TxnIndex is the .txnindex content; empty when the segment has no
	// aborted transaction.
	TxnIndex []byte

	view *segmentView
}

// Close releases the pinned segment. It is idempotent.
func (f *SegmentFiles) Close() error {
	if f.view != nil {
		f.view.unref()
		f.view = nil
	}
	return nil
}

// OpenSegment pins the rolled segment whose base offset is base. It fails
// with an error wrapping ErrSegmentNotFound when no such segment is in
// the log any more, or when it is the active segment.
func (l *UnifiedLog) OpenSegment(base int64) (*SegmentFiles, error) {
	v, err := l.acquireView()
	if err != nil {
		return nil, err
	}
	i := v.floor(base)
	if i < 0 || v.segments[i].BaseOffset() != base || i == len(v.segments)-1 {
		v.unref()
		return nil, fmt.Errorf("%w: no rolled segment at base offset %d", ErrSegmentNotFound, base)
	}
	s := v.segments[i]
	offIdx, timeIdx, err := s.IndexBytes()
	if err != nil {
		v.unref()
		return nil, fmt.Errorf("log: indexes of segment %d: %w", base, err)
	}
	return &SegmentFiles{
		Info: SegmentInfo{
			BaseOffset:     base,
			NextOffset:     v.segments[i+1].BaseOffset(),
			SizeBytes:      s.Size(),
			MaxTimestampMs: s.LargestTimestamp(),
		},
		Log:         s.Segment,
		OffsetIndex: offIdx,
		TimeIndex:   timeIdx,
		TxnIndex:    s.txn.AppendEncoded(nil, 0),
		view:        v,
	}, nil
}

// EpochEntriesInRange returns the epoch entries covering [start, end)
// (start -1: from the beginning of the cache), the first clipped to start
// at start. The copy task records EpochEntriesInRange(base, next) as a
// remote segment's epochs and uploads EpochEntriesInRange(-1, next) as
// its leader-epoch checkpoint (KIP-405: RemoteLogSegmentMetadata's
// segmentLeaderEpochs and the LEADER_EPOCH index; docs/remote-tier.md).
func (l *UnifiedLog) EpochEntriesInRange(start, end int64) []epochcache.Entry {
	return l.epochs.EntriesInRange(start, end)
}

// Retention returns the log's effective retention.ms and retention.bytes
// (defaults filled; RetentionInfinite for no limit): the remote tier's
// expiration task applies them to local plus remote data
// (docs/remote-tier.md, "Expiration and retention").
func (l *UnifiedLog) Retention() (ms, bytes int64) {
	return l.opts.RetentionMs, l.opts.RetentionBytes
}

// CollectAbortedTransactions returns the aborted transactions overlapping
// [fetchOffset, upper) that the local segments' transaction indexes hold,
// from the segment holding fetchOffset (or the first local segment) on,
// stopping once the search is complete. A remote read finishes with it
// when the remote indexes did not complete the search
// (docs/remote-tier.md, "Remote reads").
func (l *UnifiedLog) CollectAbortedTransactions(fetchOffset, upper int64) ([]AbortedTxn, error) {
	v, err := l.acquireView()
	if err != nil {
		return nil, err
	}
	defer v.unref()
	return collectAborted(v.segments[max(v.floor(fetchOffset), 0):], fetchOffset, upper), nil
}

// CollectAbortedFromIndex appends to dst the aborted transactions of a
// .txnindex file's bytes (of the segment based at segmentBase) that
// overlap [fetchOffset, upper), and reports whether the search is
// complete (an entry's last stable offset reached upper, so no later
// segment can add to it). Bytes that do not parse are an error wrapping
// ErrCorruption. The remote tier reads uploaded indexes with it.
func CollectAbortedFromIndex(dst []AbortedTxn, data []byte, segmentBase, fetchOffset, upper int64) ([]AbortedTxn, bool, error) {
	ti, err := producer.ParseTxnIndex(data, segmentBase)
	if err != nil {
		return dst, false, fmt.Errorf("log: transaction index of segment %d: %w", segmentBase, err)
	}
	out, complete := ti.CollectAborted(dst, fetchOffset, upper)
	return out, complete, nil
}
