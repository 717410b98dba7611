package badinput

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
)

// areaOffsetArgs is for hostile offset arguments to the log's writer
// calls: truncation targets, high watermarks, log start offsets.
const areaOffsetArgs area = "offset argument"

func init() { rowSets = append(rowSets, truncateRows) }

// truncateRows drive TruncateTo, TruncateFullyAndStartAt, the high
// watermark and the log start offset with offsets a confused or hostile
// caller might pass. Each starts from fifteen records in three batches of
// five ([0, 5) [5, 10) [10, 15)) and reports where the readable records
// end afterwards (readableTo also checks that the log end offset agrees).
func truncateRows() []row {
	return []row{
		{areaOffsetArgs, "truncate inside a batch", outcome{readableTo: 5}, func(t *testing.T) outcome {
			l := fifteenRecords(t, 1<<20)
			_, err := l.TruncateTo(7) // inside [5, 10): the whole batch goes
			return observeLog(l, err)
		}},
		{areaOffsetArgs, "truncate to a negative offset", outcome{err: log.ErrInvalidArgument, readableTo: 15}, func(t *testing.T) outcome {
			l := fifteenRecords(t, 1<<20)
			_, err := l.TruncateTo(-1)
			return observeLog(l, err)
		}},
		{areaOffsetArgs, "truncate far beyond the log end", outcome{readableTo: 15}, func(t *testing.T) outcome {
			l := fifteenRecords(t, 1<<20)
			changed, err := l.TruncateTo(1 << 62)
			if err == nil && changed {
				err = errors.New("a truncation beyond the end reported a change")
			}
			return observeLog(l, err)
		}},
		{areaOffsetArgs, "truncate below the log start after retention", outcome{readableTo: 3}, func(t *testing.T) outcome {
			// One batch per segment: retention deletes [0, 5) and [5, 10),
			// so 3 is below every local segment and the log starts over
			// there, empty (Kafka's truncateFullyAndStartAt).
			l := fifteenRecords(t, 130) // a batch is 121 bytes
			l.UpdateHighWatermark(15)
			_, err := l.MaybeIncrementLogStartOffset(12)
			if err == nil {
				_, err = l.DeleteOldSegments()
			}
			if err == nil {
				_, err = l.TruncateTo(3)
			}
			if o := l.Offsets(); err == nil && (o.LogStartOffset != 3 || o.HighWatermark != 3) {
				err = fmt.Errorf("log start %d, high watermark %d after the truncation, want 3", o.LogStartOffset, o.HighWatermark)
			}
			return observeLog(l, err)
		}},
		{areaOffsetArgs, "truncate fully to a negative offset", outcome{err: log.ErrInvalidArgument, readableTo: 15}, func(t *testing.T) outcome {
			l := fifteenRecords(t, 1<<20)
			return observeLog(l, l.TruncateFullyAndStartAt(-1, -1))
		}},
		{areaOffsetArgs, "truncate fully with the log start above the new end", outcome{err: log.ErrInvalidArgument, readableTo: 15}, func(t *testing.T) outcome {
			l := fifteenRecords(t, 1<<20)
			return observeLog(l, l.TruncateFullyAndStartAt(5, 9))
		}},
		{areaOffsetArgs, "raise the high watermark beyond the log end", outcome{err: log.ErrHighWatermarkBeyondEnd, readableTo: 15}, func(t *testing.T) outcome {
			l := fifteenRecords(t, 1<<20)
			_, err := l.MaybeIncrementHighWatermark(16)
			if hw := l.HighWatermark(); err != nil && hw != 0 {
				err = fmt.Errorf("refused, yet the high watermark moved to %d", hw)
			}
			return observeLog(l, err)
		}},
		{areaOffsetArgs, "set the high watermark beyond the log end or below zero", outcome{readableTo: 15}, func(t *testing.T) outcome {
			l := fifteenRecords(t, 1<<20)
			var err error
			if hw := l.UpdateHighWatermark(1 << 40); hw != 15 {
				err = fmt.Errorf("high watermark %d set from 2^40, want it clamped to 15", hw)
			} else if hw := l.UpdateHighWatermark(-7); hw != 0 {
				err = fmt.Errorf("high watermark %d set from -7, want it clamped to 0", hw)
			}
			return observeLog(l, err)
		}},
		{areaOffsetArgs, "raise the log start beyond the high watermark", outcome{err: log.ErrOffsetOutOfRange, readableTo: 15}, func(t *testing.T) outcome {
			l := fifteenRecords(t, 1<<20)
			l.UpdateHighWatermark(5)
			_, err := l.MaybeIncrementLogStartOffset(10)
			var re *log.OffsetRangeError
			if errors.As(err, &re) && (re.Offset != 10 || re.HighWatermark != 5) {
				err = fmt.Errorf("range error names offset %d and high watermark %d, want 10 and 5", re.Offset, re.HighWatermark)
			}
			return observeLog(l, err)
		}},
		{areaOffsetArgs, "lower the log start to a negative offset", outcome{readableTo: 15}, func(t *testing.T) outcome {
			l := fifteenRecords(t, 1<<20)
			l.UpdateHighWatermark(15)
			moved, err := l.MaybeIncrementLogStartOffset(-3)
			if err == nil && (moved || l.LogStartOffset() != 0) {
				err = fmt.Errorf("log start moved to %d", l.LogStartOffset())
			}
			return observeLog(l, err)
		}},
		{areaOffsetArgs, "read at a negative offset", outcome{err: log.ErrOffsetOutOfRange, readableTo: 15}, func(t *testing.T) outcome {
			l := fifteenRecords(t, 1<<20)
			_, err := l.Read(nil, -1, 1<<20, log.IsolationLogEnd, true)
			return observeLog(l, err)
		}},
		{areaOffsetArgs, "epoch start beyond the log end", outcome{err: log.ErrInvalidArgument, readableTo: 15}, func(t *testing.T) outcome {
			l := fifteenRecords(t, 1<<20)
			return observeLog(l, l.AssignEpochStartOffset(3, 16))
		}},
	}
}

// fifteenRecords opens a log on a fresh in-memory file system and appends
// three leader batches of five records each, in epoch 0. segmentBytes
// small enough for one batch puts each batch in its own segment.
func fifteenRecords(t *testing.T, segmentBytes int64) *log.UnifiedLog {
	t.Helper()
	l, err := log.Open("p0", log.Options{FS: vfs.NewMem(), SegmentBytes: segmentBytes,
		Now: func() time.Time { return time.UnixMilli(1_000_000) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	for range 3 {
		b := record.NewBuilder(record.DefaultBuilderOptions())
		for range 5 {
			b.Add(1_000_000, nil, []byte("value"))
		}
		buf, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.AppendAsLeader(buf, 0, log.OriginClient); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// observeLog reports err and where the records readable from the log
// start end. It reads batch after batch and checks that they are
// contiguous and end at the log end offset. A failed read or a mismatch
// is reported as readable to -2, which no row expects, so no row passes on
// a log that misreports its end, even a row that expects an error.
func observeLog(l *log.UnifiedLog, err error) outcome {
	o := l.Offsets()
	next, problem := o.LogStartOffset, error(nil)
	for next < o.LogEndOffset && problem == nil {
		info, rerr := l.Read(nil, next, 1<<20, log.IsolationLogEnd, true)
		if rerr != nil || len(info.Records) == 0 {
			problem = fmt.Errorf("read at %d: %d bytes, error %v", next, len(info.Records), rerr)
			break
		}
		for data := info.Records; len(data) > 0; {
			b, berr := record.ReadBatch(data)
			if berr != nil || b.NextOffset() <= next || b.BaseOffset() > next {
				problem = fmt.Errorf("batch after offset %d: %v", next, berr)
				break
			}
			next = b.NextOffset()
			data = data[b.Size():]
		}
	}
	if problem == nil && next != o.LogEndOffset {
		problem = fmt.Errorf("records end at %d, log end offset %d", next, o.LogEndOffset)
	}
	if problem != nil {
		return outcome{err: errors.Join(err, problem), readableTo: -2}
	}
	return outcome{err: err, readableTo: next}
}
