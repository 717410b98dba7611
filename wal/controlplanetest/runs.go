package controlplanetest

import (
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/wal"
)

// runSetup commits one object of wal.MaxRunBatches+6 contiguous batches
// of t1p0 (so a plane that coalesces stores at least two runs) with a
// batch of t1p1 after them, and a second object of two more batches of
// t1p0. Batch i of the first object covers i%3+1 offsets and 10+i bytes;
// the max timestamps go up and down. It returns what FindBatches must
// answer for t1p0, batch by batch, and the two objects' keys.
func (e *env) runSetup() ([]wal.BatchInfo, [2]string) {
	n := wal.MaxRunBatches + 6
	var bs []wal.CommitBatch
	for i := range n {
		b := batch(t1p0, int64(i%3+1))
		b.Size, b.MaxTimestamp = int64(10+i), 1000+int64(i*37%50)
		bs = append(bs, b)
	}
	req1, res1 := e.commit(append(bs, batch(t1p1, 5))...)
	x, y := batch(t1p0, 4), batch(t1p0, 2)
	x.MaxTimestamp, y.MaxTimestamp = 1049, 999
	req2, res2 := e.commit(x, y)
	var want []wal.BatchInfo
	add := func(req wal.CommitFileRequest, res wal.CommitFileResult, upTo int) {
		for i, b := range req.Batches[:upTo] {
			r := res.Batches[i]
			require.NoError(e.t, r.Err)
			want = append(want, wal.BatchInfo{ObjectKey: req.ObjectKey, ByteOffset: b.ByteOffset, Size: b.Size,
				BaseOffset: r.BaseOffset, LastOffset: r.BaseOffset + b.OffsetCount() - 1, MaxTimestamp: b.MaxTimestamp,
				TimestampType: b.TimestampType, LogAppendTime: r.LogAppendTime, Binding: b.Binding()})
		}
	}
	add(req1, res1, n)
	add(req2, res2, 2)
	return want, [2]string{req1.ObjectKey, req2.ObjectKey}
}

// from returns the batches of want from the one holding offset.
func from(want []wal.BatchInfo, offset int64) []wal.BatchInfo {
	for i, b := range want {
		if b.LastOffset >= offset {
			return want[i:]
		}
	}
	return nil
}

func sizeOf(bs []wal.BatchInfo) int64 {
	var n int64
	for _, b := range bs {
		n += b.Size
	}
	return n
}

// testRunsAnswerBatchByBatch: contiguous batches of one partition in one
// object (which a plane may store as one row, a run) are found, listed
// and budgeted batch by batch, each with its own coordinates and binding.
func testRunsAnswerBatchByBatch(e *env) {
	want, _ := e.runSetup()
	hw := want[len(want)-1].LastOffset + 1
	e.requireLog(t1p0, 0, hw, 0, sizeOf(want))
	for off := int64(0); off <= hw; off++ {
		got := e.find1(t1p0, off)
		require.NoError(e.t, got.Err)
		require.Equal(e.t, from(want, off), nilIfEmpty(got.Batches), "find from %d", off)
	}
	// A partition budget that ends inside a run: the batch that crosses
	// it is the last one.
	res, err := e.cp.FindBatches(e.ctx, wal.FindBatchesRequest{MaxBytes: 1 << 30,
		Partitions: []wal.FindPartition{{Partition: t1p0, Offset: want[4].BaseOffset + 1, MaxPartitionBytes: want[4].Size + 1}}})
	require.NoError(e.t, err)
	require.Equal(e.t, want[4:6], res[0].Batches, "from inside batch 4; batch 5 crosses the budget")
	res, err = e.cp.FindBatches(e.ctx, wal.FindBatchesRequest{MaxBytes: 1 << 30, MaxBatchesPerPartition: 7,
		Partitions: []wal.FindPartition{{Partition: t1p0, Offset: want[60].BaseOffset, MaxPartitionBytes: 1 << 30}}})
	require.NoError(e.t, err)
	require.Equal(e.t, want[60:67], res[0].Batches, "seven batches across the seam of two runs")

	// ListOffsets: the first batch whose timestamp reaches each value,
	// and the first batch of the largest.
	for ts := int64(990); ts <= 1050; ts++ {
		wantOff, wantTs := int64(-1), int64(-1)
		for _, b := range want {
			if b.MaxTimestamp >= ts {
				wantOff, wantTs = b.BaseOffset, b.MaxTimestamp
				break
			}
		}
		off, got := e.listOffset(t1p0, ts)
		require.Equal(e.t, [2]int64{wantOff, wantTs}, [2]int64{off, got}, "timestamp %d", ts)
	}
	best := want[0]
	for _, b := range want {
		if b.MaxTimestamp > best.MaxTimestamp {
			best = b
		}
	}
	off, ts := e.listOffset(t1p0, wal.MaxTimestamp)
	require.Equal(e.t, [2]int64{best.LastOffset, best.MaxTimestamp}, [2]int64{off, ts})
}

func nilIfEmpty(bs []wal.BatchInfo) []wal.BatchInfo {
	if len(bs) == 0 {
		return nil
	}
	return bs
}

// testRunsRemovalInsideRun: DeleteRecords, prune and retention whose
// boundary falls inside a run drop exactly the whole batches below it,
// as they do with a row per batch; the object stays unmarked while any
// of its batches is live.
func testRunsRemovalInsideRun(e *env) {
	want, keys := e.runSetup()
	hw := want[len(want)-1].LastOffset + 1
	// DeleteRecords inside batch 5 (its second offset): W there, the
	// batches 0-4 go, batch 5 stays whole.
	w := want[5].BaseOffset + 1
	e.deleteRecords(t1p0, w, w)
	e.requireLog(t1p0, w, hw, 0, sizeOf(want[5:]))
	require.Equal(e.t, want[5:], e.find1(t1p0, w).Batches)

	// Prune with the remote storage's highest offset inside batch 20:
	// the batches up to 19 go, W = batch 20's base.
	e.prune1(t1p0, want[20].LastOffset-1, want[20].BaseOffset)
	e.requireLog(t1p0, want[20].BaseOffset, hw, 0, sizeOf(want[20:]))
	require.Equal(e.t, want[20:], e.find1(t1p0, want[20].BaseOffset).Batches)
	// At a batch's last offset inside a run: that batch goes too.
	e.prune1(t1p0, want[30].LastOffset, want[31].BaseOffset)
	require.Equal(e.t, want[31:], e.find1(t1p0, want[31].BaseOffset).Batches)

	// Retention by size to a limit that leaves the batches from 40 on
	// plus 3 bytes: 31..39 go (while more than the limit remains), so
	// the first batch kept is inside a run.
	limit := sizeOf(want[40:]) + 3
	e.requireRetained(e.retain(t1p0, limit, -1, 0), 9, sizeOf(want[31:40]), want[40].BaseOffset)
	e.requireLog(t1p0, want[40].BaseOffset, hw, 0, sizeOf(want[40:]))
	require.Equal(e.t, want[40:], e.find1(t1p0, want[40].BaseOffset).Batches)
	require.Empty(e.t, e.marked(), "the objects still hold live batches")

	// Every batch of the first object gone (t1p1's batch in it pruned
	// too): it is marked; the second object is not.
	last := len(want) - 3 // the first object's last batch
	e.prune1(t1p0, want[last].LastOffset, want[last+1].BaseOffset)
	require.Empty(e.t, e.marked(), "t1p1 still holds a batch of the first object")
	e.prune1(t1p1, 4, 5)
	require.Equal(e.t, []string{keys[0]}, e.marked())
	require.Equal(e.t, want[last+1:], e.find1(t1p0, want[last+1].BaseOffset).Batches)
}
