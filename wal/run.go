package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
)

// A run is the stored form of contiguous batches of one partition in one
// object: one control-plane row instead of one per batch, as Inkless's
// commit_file_v2 coalesces them (github.com/aiven/inkless/pull/671). A
// commit of 1,000 batches of one partition writes 16 rows instead of
// 1,000, and a find of 50 batches reads one or two rows.
//
// The row keeps the run's whole coordinates: its first base offset, its
// last offset (the row's key), the byte range from the first batch's
// start to the last batch's end, the largest max timestamp, the first
// batch's binding, and the run bytes (EncodeRun), which hold each
// batch's offset count, size, max timestamp and binding. SplitRun gives
// every batch back as the BatchInfo a row of its own would have been, so
// that each batch served is still checked against its own base offset,
// offset count, byte range and binding (FetchResult). A run's batches
// are contiguous in both offsets and bytes, have one timestamp type and
// one log-append time (one commit), and every one has a known binding.
//
// Run bytes:
//
//	version u8 (1) | count uvarint (>= 2) |
//	count x (offsets uvarint | size uvarint | max timestamp varint |
//	         crc u32 LE | leader epoch varint | producer id varint |
//	         producer epoch varint | base sequence varint)
//
// The planes split a run before anything else sees it: FindBatches,
// ListOffsets and retention work batch by batch, and a removal whose
// boundary falls inside a run (DeleteRecords, prune, retention) first
// cuts the run in two rows at the batch that starts the kept part
// (CutRun), so that every removal still drops whole rows.

// MaxRunBatches caps the batches of one run: the run bytes stay small
// (about 20 bytes a batch, under PostgreSQL's 2 KiB TOAST threshold), and
// a find reads at most this many batches it does not need.
const MaxRunBatches = 64

const runVersion = 1

// RunCorruptionError reports run bytes that do not decode or do not
// agree with their row. It unwraps to ErrCorruption.
type RunCorruptionError struct {
	ObjectKey  string
	BaseOffset int64
	LastOffset int64
	Detail     string
}

func (e *RunCorruptionError) Error() string {
	return fmt.Sprintf("%v: run [%d, %d] in %q: %s", ErrCorruption, e.BaseOffset, e.LastOffset, e.ObjectKey, e.Detail)
}

func (e *RunCorruptionError) Unwrap() error { return ErrCorruption }

// Extends reports whether next can join a run that ends with prev:
// the same object, timestamp type and log-append time, next starting
// where prev ends in both bytes and offsets, both bindings known.
func (prev BatchInfo) Extends(next BatchInfo) bool {
	return prev.ObjectKey == next.ObjectKey && prev.TimestampType == next.TimestampType &&
		prev.LogAppendTime == next.LogAppendTime && prev.Binding.Known && next.Binding.Known &&
		prev.LastOffset < math.MaxInt64 && next.BaseOffset == prev.LastOffset+1 &&
		prev.ByteOffset <= math.MaxInt64-prev.Size && next.ByteOffset == prev.ByteOffset+prev.Size
}

// JoinRun is the row of batches (each Extends the one before it): the
// run's head (its whole coordinates) and its run bytes (nil for a single
// batch, which is stored as a plain row).
func JoinRun(batches []BatchInfo) (BatchInfo, []byte, error) {
	if len(batches) == 0 {
		return BatchInfo{}, nil, invalidf("an empty run")
	}
	head := batches[0]
	if len(batches) == 1 {
		return head, nil, nil
	}
	// About 30 bytes a batch (offsets and sizes of a few bytes, small
	// producer fields): one allocation for most runs.
	out := make([]byte, 1, 16+32*len(batches))
	out[0] = runVersion
	out = binary.AppendUvarint(out, uint64(len(batches)))
	for i, b := range batches {
		if i > 0 && !batches[i-1].Extends(b) {
			return BatchInfo{}, nil, invalidf("batch [%d, %d] does not extend the run before it", b.BaseOffset, b.LastOffset)
		}
		if !b.Binding.Known || b.LastOffset < b.BaseOffset || b.Size <= 0 {
			return BatchInfo{}, nil, invalidf("batch [%d, %d] of size %d cannot join a run", b.BaseOffset, b.LastOffset, b.Size)
		}
		out = binary.AppendUvarint(out, uint64(b.LastOffset-b.BaseOffset+1))
		out = binary.AppendUvarint(out, uint64(b.Size))
		out = binary.AppendVarint(out, b.MaxTimestamp)
		out = binary.LittleEndian.AppendUint32(out, b.Binding.CRC)
		out = binary.AppendVarint(out, int64(b.Binding.PartitionLeaderEpoch))
		out = binary.AppendVarint(out, b.Binding.ProducerID)
		out = binary.AppendVarint(out, int64(b.Binding.ProducerEpoch))
		out = binary.AppendVarint(out, int64(b.Binding.BaseSequence))
		head.MaxTimestamp = max(head.MaxTimestamp, b.MaxTimestamp)
	}
	last := batches[len(batches)-1]
	head.LastOffset = last.LastOffset
	head.Size = last.ByteOffset + last.Size - head.ByteOffset
	return head, out, nil
}

// SplitRun returns the batches of a row: the row itself when run is nil,
// else each batch of the run, checked against the row (the offsets and
// sizes add up to its range, the largest max timestamp is its max
// timestamp, the first binding is its binding). Bytes that fail are a
// *RunCorruptionError; nothing of such a row is returned.
func SplitRun(head BatchInfo, run []byte) ([]BatchInfo, error) {
	return AppendSplitRun(nil, head, run)
}

// AppendSplitRun is SplitRun appending the row's batches to dst (a
// control plane's find reuses one slice for every row); on an error it
// returns dst as it was.
func AppendSplitRun(dst []BatchInfo, head BatchInfo, run []byte) ([]BatchInfo, error) {
	if run == nil {
		return append(dst, head), nil
	}
	fail := func(format string, args ...any) ([]BatchInfo, error) {
		return dst, &RunCorruptionError{ObjectKey: head.ObjectKey, BaseOffset: head.BaseOffset, LastOffset: head.LastOffset,
			Detail: fmt.Sprintf(format, args...)}
	}
	if head.BaseOffset < 0 || head.LastOffset < head.BaseOffset || head.ByteOffset < 0 || head.Size <= 0 ||
		head.ByteOffset > math.MaxInt64-head.Size {
		return fail("row coordinates offset [%d, %d] bytes %d+%d", head.BaseOffset, head.LastOffset, head.ByteOffset, head.Size)
	}
	if len(run) < 1 || run[0] != runVersion {
		return fail("run bytes of %d bytes, version %v", len(run), run[:min(len(run), 1)])
	}
	d := runDecoder{b: run[1:]}
	n := d.uvarint()
	// Each batch takes at least 11 bytes, so a count beyond that is a
	// lie that must not size an allocation.
	if d.err != nil || n < 2 || n > uint64(len(d.b))/11 {
		return fail("batch count %d in %d bytes", n, len(run))
	}
	out := slices.Grow(dst, int(n))
	first := len(dst)
	base, byteOffset, maxTs := head.BaseOffset, head.ByteOffset, int64(math.MinInt64)
	for i := range n {
		count, size := d.uvarint(), d.uvarint()
		ts := d.varint()
		bb := BatchBinding{Known: true, CRC: d.u32(), PartitionLeaderEpoch: d.int32(), ProducerID: d.varint(),
			ProducerEpoch: d.int16(), BaseSequence: d.int32()}
		if d.err != nil {
			return fail("batch %d: %v", i, d.err)
		}
		if count < 1 || count > uint64(head.LastOffset-base)+1 || size < 1 || size > uint64(head.ByteOffset+head.Size-byteOffset) {
			return fail("batch %d: %d offsets from %d, %d bytes from %d, past the row", i, count, base, size, byteOffset)
		}
		out = append(out, BatchInfo{ObjectKey: head.ObjectKey, ByteOffset: byteOffset, Size: int64(size),
			BaseOffset: base, LastOffset: base + int64(count) - 1, MaxTimestamp: ts, TimestampType: head.TimestampType,
			LogAppendTime: head.LogAppendTime, Binding: bb})
		base += int64(count)
		byteOffset += int64(size)
		maxTs = max(maxTs, ts)
	}
	switch {
	case len(d.b) != 0:
		return fail("%d bytes after the batches", len(d.b))
	case base != head.LastOffset+1 || byteOffset != head.ByteOffset+head.Size:
		return fail("the batches end at offset %d byte %d, the row at offset %d byte %d", base-1, byteOffset, head.LastOffset, head.ByteOffset+head.Size)
	case maxTs != head.MaxTimestamp:
		return fail("largest max timestamp %d, the row's %d", maxTs, head.MaxTimestamp)
	case head.Binding != out[first].Binding:
		return fail("the first batch's binding %+v, the row's %+v", out[first].Binding, head.Binding)
	}
	return out, nil
}

// RunCut is how CutRun splits a row: the batches before the cut and the
// batches from it, each as the row it becomes.
type RunCut struct {
	Before, From         BatchInfo
	BeforeRun, FromRun   []byte
	BeforeCount, Batches int
}

// CutRun cuts a row's batches so that the batch holding offset starts a
// row. ok is false when there is nothing to cut: the row is one batch,
// or offset is outside it or in its first batch.
func CutRun(head BatchInfo, run []byte, offset int64) (cut RunCut, ok bool, err error) {
	if run == nil || offset <= head.BaseOffset || offset > head.LastOffset {
		return RunCut{}, false, nil
	}
	batches, err := SplitRun(head, run)
	if err != nil {
		return RunCut{}, false, err
	}
	i := 0
	for i < len(batches) && batches[i].LastOffset < offset {
		i++
	}
	if i == 0 {
		return RunCut{}, false, nil
	}
	cut.Before, cut.BeforeRun, err = JoinRun(batches[:i])
	if err == nil {
		cut.From, cut.FromRun, err = JoinRun(batches[i:])
	}
	if err != nil {
		// The batches came out of SplitRun, so they join again.
		return RunCut{}, false, fmt.Errorf("%w: re-joining run [%d, %d]: %w", ErrCorruption, head.BaseOffset, head.LastOffset, err)
	}
	cut.BeforeCount, cut.Batches = i, len(batches)
	return cut, true, nil
}

// RunBuilder coalesces the accepted batches of one commit into rows:
// Add a batch of a partition after the ones before it; a batch that
// extends the partition's open run (and finds it below MaxRunBatches)
// joins it, any other starts a new one.
type RunBuilder[P comparable] struct {
	open map[P]int // the partition's open run in runs
	runs []builderRun[P]
	// all holds the batches of the runs that grew only while they were
	// the last run started (a writer's object lists a partition's
	// batches together, so every run of it): all[start:end]. A run
	// extended after a later one started moves to its own slice.
	all []BatchInfo
}

type builderRun[P comparable] struct {
	part       P
	start, end int         // the run's batches in RunBuilder.all, unless own is set
	own        []BatchInfo // the run's batches once it left all
}

func (rb *RunBuilder[P]) batches(r *builderRun[P]) []BatchInfo {
	if r.own != nil {
		return r.own
	}
	return rb.all[r.start:r.end]
}

// Grow makes room for n more batches, so that a commit of n batches
// grows the builder once.
func (rb *RunBuilder[P]) Grow(n int) { rb.all = slices.Grow(rb.all, n) }

// Add adds b to its partition's open run or starts one.
func (rb *RunBuilder[P]) Add(part P, b BatchInfo) {
	if rb.open == nil {
		rb.open = map[P]int{}
	}
	if i, ok := rb.open[part]; ok {
		r := &rb.runs[i]
		if bs := rb.batches(r); len(bs) < MaxRunBatches && bs[len(bs)-1].Extends(b) {
			switch {
			case r.own == nil && r.end == len(rb.all):
				rb.all = append(rb.all, b)
				r.end++
			case r.own == nil:
				r.own = append(slices.Clip(bs), b) // a copy: bs is full to its capacity
			default:
				r.own = append(r.own, b)
			}
			return
		}
	}
	rb.open[part] = len(rb.runs)
	rb.all = append(rb.all, b)
	rb.runs = append(rb.runs, builderRun[P]{part: part, start: len(rb.all) - 1, end: len(rb.all)})
}

// Rows calls row for each run in the order the runs were started, with
// its head and run bytes (JoinRun).
func (rb *RunBuilder[P]) Rows(row func(part P, head BatchInfo, run []byte, batches int)) error {
	for i := range rb.runs {
		r := &rb.runs[i]
		bs := rb.batches(r)
		head, run, err := JoinRun(bs)
		if err != nil {
			return err
		}
		row(r.part, head, run, len(bs))
	}
	return nil
}

var errRunShort = errors.New("run bytes end early")

type runDecoder struct {
	b   []byte
	err error
}

func (d *runDecoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errRunShort
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *runDecoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errRunShort
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *runDecoder) u32() uint32 {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 4 {
		d.err = errRunShort
		return 0
	}
	v := binary.LittleEndian.Uint32(d.b)
	d.b = d.b[4:]
	return v
}

func (d *runDecoder) int32() int32 {
	v := d.varint()
	if d.err == nil && (v < math.MinInt32 || v > math.MaxInt32) {
		d.err = fmt.Errorf("value %d out of int32", v)
	}
	return int32(v)
}

func (d *runDecoder) int16() int16 {
	v := d.varint()
	if d.err == nil && (v < math.MinInt16 || v > math.MaxInt16) {
		d.err = fmt.Errorf("value %d out of int16", v)
	}
	return int16(v)
}

// ListOffsetInRow answers a ListOffsets of timestamp from the batches of
// the row a plane found for it: for MaxTimestamp, the row holding the
// largest effective timestamp (the first such row), and the last offset
// of its first batch that has it; else the first row holding a batch of
// effective timestamp >= timestamp, and that batch's base offset (at
// least logStart). A row that holds no such batch is corruption.
func ListOffsetInRow(timestamp int64, batches []BatchInfo, logStart int64) (ListOffsetsResult, error) {
	if timestamp == MaxTimestamp {
		best := -1
		for i, b := range batches {
			if best < 0 || b.EffectiveTimestamp() > batches[best].EffectiveTimestamp() {
				best = i
			}
		}
		if best >= 0 {
			return ListOffsetsResult{Offset: batches[best].LastOffset, Timestamp: batches[best].EffectiveTimestamp()}, nil
		}
	} else {
		for _, b := range batches {
			if ts := b.EffectiveTimestamp(); ts >= timestamp {
				return ListOffsetsResult{Offset: max(b.BaseOffset, logStart), Timestamp: ts}, nil
			}
		}
	}
	first, last := int64(-1), int64(-1)
	if len(batches) > 0 {
		first, last = batches[0].BaseOffset, batches[len(batches)-1].LastOffset
	}
	return ListOffsetsResult{}, &RunCorruptionError{BaseOffset: first, LastOffset: last,
		Detail: fmt.Sprintf("found for timestamp %d, no batch answers it", timestamp)}
}
