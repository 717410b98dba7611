package wal

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// runBatches is n contiguous batches of one object from offset 100 and
// byte 40: batch i covers i%3+1 offsets and 10+i bytes, each with its own
// binding and max timestamp.
func runBatches(n int) []BatchInfo {
	out := make([]BatchInfo, n)
	base, at := int64(100), int64(40)
	for i := range out {
		count, size := int64(i%3+1), int64(10+i)
		out[i] = BatchInfo{ObjectKey: "wal/o", ByteOffset: at, Size: size, BaseOffset: base, LastOffset: base + count - 1,
			MaxTimestamp: int64(1000 - 7*i + 20*(i%2)), TimestampType: CreateTime, LogAppendTime: 5000,
			Binding: BatchBinding{Known: true, CRC: uint32(0xfffffff0 + i), PartitionLeaderEpoch: int32(i - 1),
				ProducerID: int64(i) * 1e12, ProducerEpoch: int16(i), BaseSequence: int32(i * 1000)}}
		base += count
		at += size
	}
	return out
}

func TestJoinSplitRun(t *testing.T) {
	for _, n := range []int{1, 2, 3, MaxRunBatches} {
		batches := runBatches(n)
		head, run, err := JoinRun(batches)
		require.NoError(t, err)
		last := batches[n-1]
		require.Equal(t, int64(100), head.BaseOffset)
		require.Equal(t, last.LastOffset, head.LastOffset)
		require.Equal(t, last.ByteOffset+last.Size-40, head.Size)
		require.Equal(t, batches[0].Binding, head.Binding)
		require.Equal(t, n == 1, run == nil, "a single batch is a plain row")
		got, err := SplitRun(head, run)
		require.NoError(t, err)
		require.Equal(t, batches, got, "n=%d", n)
	}
}

func TestJoinRunRefusesGaps(t *testing.T) {
	for name, change := range map[string]func(b *BatchInfo){
		"byte gap":        func(b *BatchInfo) { b.ByteOffset++ },
		"offset gap":      func(b *BatchInfo) { b.BaseOffset++; b.LastOffset++ },
		"other object":    func(b *BatchInfo) { b.ObjectKey = "wal/p" },
		"timestamp type":  func(b *BatchInfo) { b.TimestampType = LogAppendTime },
		"append time":     func(b *BatchInfo) { b.LogAppendTime++ },
		"unknown binding": func(b *BatchInfo) { b.Binding = BatchBinding{} },
	} {
		batches := runBatches(3)
		require.True(t, batches[1].Extends(batches[2]))
		change(&batches[2])
		require.False(t, batches[1].Extends(batches[2]), name)
		_, _, err := JoinRun(batches)
		require.ErrorIs(t, err, ErrInvalidArgument, name)
	}
}

// TestSplitRunChecksTheRow: run bytes that disagree with their row's
// coordinates, or are cut short or padded, are corruption, never a
// shifted batch.
func TestSplitRunChecksTheRow(t *testing.T) {
	head, run, err := JoinRun(runBatches(4))
	require.NoError(t, err)
	for name, tc := range map[string]struct {
		head func(h *BatchInfo)
		run  func(r []byte) []byte
	}{
		"row one offset longer": {head: func(h *BatchInfo) { h.LastOffset++ }},
		"row one byte shorter":  {head: func(h *BatchInfo) { h.Size-- }},
		"row max timestamp":     {head: func(h *BatchInfo) { h.MaxTimestamp++ }},
		"row binding":           {head: func(h *BatchInfo) { h.Binding.CRC++ }},
		"row reversed":          {head: func(h *BatchInfo) { h.LastOffset = h.BaseOffset - 1 }},
		"cut short":             {run: func(r []byte) []byte { return r[:len(r)-1] }},
		"padded":                {run: func(r []byte) []byte { return append(r, 0) }},
		"version":               {run: func(r []byte) []byte { r[0] = 2; return r }},
		"count 1":               {run: func(r []byte) []byte { r[1] = 1; return r }},
		"count huge":            {run: func(r []byte) []byte { return append([]byte{1, 0xff, 0xff, 0xff, 0xff, 0x0f}, r[2:]...) }},
		"empty":                 {run: func([]byte) []byte { return []byte{} }},
	} {
		h, r := head, append([]byte(nil), run...)
		if tc.head != nil {
			tc.head(&h)
		}
		if tc.run != nil {
			r = tc.run(r)
		}
		got, err := SplitRun(h, r)
		require.ErrorIs(t, err, ErrCorruption, name)
		var re *RunCorruptionError
		require.True(t, errors.As(err, &re), name)
		require.Nil(t, got, name)
	}
}

func TestCutRun(t *testing.T) {
	batches := runBatches(5) // [100,100] [101,102] [103,105] [106,106] [107,108]
	head, run, err := JoinRun(batches)
	require.NoError(t, err)
	for _, tc := range []struct {
		offset int64
		want   string // the rows after the cut, "" for no cut
	}{
		{99, ""}, {100, ""}, {109, ""},
		{101, "[100,100] | [101,108]"},
		{102, "[100,100] | [101,108]"}, // inside a batch: it stays whole in the kept part
		{103, "[100,102] | [103,108]"},
		{108, "[100,106] | [107,108]"},
	} {
		cut, ok, err := CutRun(head, run, tc.offset)
		require.NoError(t, err)
		if tc.want == "" {
			require.False(t, ok, "offset %d", tc.offset)
			continue
		}
		require.True(t, ok, "offset %d", tc.offset)
		require.Equal(t, tc.want, fmt.Sprintf("[%d,%d] | [%d,%d]", cut.Before.BaseOffset, cut.Before.LastOffset,
			cut.From.BaseOffset, cut.From.LastOffset), "offset %d", tc.offset)
		before, err := SplitRun(cut.Before, cut.BeforeRun)
		require.NoError(t, err)
		from, err := SplitRun(cut.From, cut.FromRun)
		require.NoError(t, err)
		require.Equal(t, batches, append(before, from...), "offset %d: the two rows hold the same batches", tc.offset)
		require.Equal(t, len(before), cut.BeforeCount)
	}
	_, _, err = CutRun(head, run[:len(run)-1], 103)
	require.ErrorIs(t, err, ErrCorruption)
}

func TestRunBuilder(t *testing.T) {
	a := runBatches(MaxRunBatches + 3)
	b := runBatches(2)
	var rb RunBuilder[string]
	rb.Add("p0", a[0])
	rb.Add("p1", b[0])
	for _, x := range a[1:] {
		rb.Add("p0", x)
	}
	rb.Add("p1", b[1])
	rb.Add("p1", b[1]) // not after b[1]: a new row
	var got []string
	require.NoError(t, rb.Rows(func(part string, head BatchInfo, run []byte, n int) {
		got = append(got, fmt.Sprintf("%s [%d,%d] %d", part, head.BaseOffset, head.LastOffset, n))
	}))
	require.Equal(t, []string{
		"p0 [100,226] 64", "p1 [100,102] 2", "p0 [227,232] 3", "p1 [101,102] 1",
	}, got)
}

// TestRunBuilderRunBytes: a run's bytes are its batches' own, whether
// it grew as the last run started (sharing the builder's backing) or
// after a later run started (moved to its own slice), and a later
// append to the backing does not overwrite a run's batches.
func TestRunBuilderRunBytes(t *testing.T) {
	a, b, c := runBatches(5), runBatches(3), runBatches(2)
	var rb RunBuilder[string]
	rb.Add("a", a[0])
	rb.Add("a", a[1])
	rb.Add("b", b[0]) // a's run no longer the last started
	rb.Add("a", a[2]) // a moves to its own slice
	rb.Add("b", b[1]) // b is still the last: grows in place
	rb.Add("c", c[0])
	rb.Add("a", a[3])
	rb.Add("b", b[2]) // b moves too
	rb.Add("c", c[1])
	rb.Add("a", a[4])
	want := map[string][]BatchInfo{"a": a, "b": b, "c": c}
	var order []string
	require.NoError(t, rb.Rows(func(part string, head BatchInfo, run []byte, n int) {
		order = append(order, part)
		wantHead, wantRun, err := JoinRun(want[part])
		require.NoError(t, err)
		require.Equal(t, wantHead, head, part)
		require.Equal(t, wantRun, run, part)
		require.Equal(t, len(want[part]), n, part)
	}))
	require.Equal(t, []string{"a", "b", "c"}, order)
}

// FuzzSplitRun: any bytes either split into batches that tile the row
// and join back to the same bytes, or are a *RunCorruptionError; never a
// panic.
func FuzzSplitRun(f *testing.F) {
	head, run, _ := JoinRun(runBatches(4))
	f.Add(run, head.LastOffset-head.BaseOffset, head.Size, head.MaxTimestamp)
	f.Add([]byte{1, 2}, int64(1), int64(2), int64(0))
	f.Fuzz(func(t *testing.T, run []byte, span, size, maxTs int64) {
		h := head
		h.LastOffset, h.Size, h.MaxTimestamp = h.BaseOffset+span, size, maxTs
		got, err := SplitRun(h, run)
		if err != nil {
			require.ErrorIs(t, err, ErrCorruption)
			return
		}
		h2, run2, err := JoinRun(got)
		require.NoError(t, err)
		if h2.Binding == h.Binding {
			require.Equal(t, h, h2)
		}
		again, err := SplitRun(h2, run2)
		require.NoError(t, err)
		require.Equal(t, got, again)
	})
}
