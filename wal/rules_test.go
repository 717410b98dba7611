package wal

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestRules runs the pure rules' scenario files: testdata/sequence (the
// idempotent-producer check) and testdata/prune (the WAL start after a
// prune).
func TestRules(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		producers := map[int64]*ProducerState{}
		hw := int64(0)
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "batch":
				return runBatch(t, d, producers, &hw)
			case "state":
				return printStates(producers)
			case "prune":
				var w, hwArg, h, minBase int64
				d.ScanArgs(t, "w", &w)
				d.ScanArgs(t, "hw", &hwArg)
				d.ScanArgs(t, "h", &h)
				remain := d.HasArg("min-base")
				if remain {
					d.ScanArgs(t, "min-base", &minBase)
				}
				return fmt.Sprintf("w=%d\n", PrunedLogStart(w, hwArg, h, remain, minBase))
			case "retention":
				return runRetention(t, d)
			case "list-offsets":
				var ts, w, hw, x int64
				d.ScanArgs(t, "ts", &ts)
				d.ScanArgs(t, "w", &w)
				d.ScanArgs(t, "hw", &hw)
				d.ScanArgs(t, "x", &x)
				res, ok := FixedListOffset(ListOffsetsRequest{Timestamp: ts},
					LogInfo{LogStartOffset: w, HighWatermark: hw, CrossTierLogStartOffset: x})
				if !ok {
					return "reads the batches\n"
				}
				return fmt.Sprintf("offset=%d timestamp=%d err=%v\n", res.Offset, res.Timestamp, res.Err)
			case "increment":
				var n int64
				d.ScanArgs(t, "n", &n)
				return fmt.Sprintf("%d\n", IncrementSequence(seqArg(t, d, "seq"), int32(n)))
			}
			return "unknown command " + d.Cmd
		})
	})
}

// seqArg reads a sequence argument; "max" is MaxInt32.
func seqArg(t *testing.T, d *datadriven.TestData, key string) int32 {
	var s string
	d.ScanArgs(t, key, &s)
	if s == "max" {
		return math.MaxInt32
	}
	var v int32
	if _, err := fmt.Sscan(s, &v); err != nil {
		t.Fatalf("%s=%q: %v", key, s, err)
	}
	return v
}

func runBatch(t *testing.T, d *datadriven.TestData, producers map[int64]*ProducerState, hw *int64) string {
	var pid int64
	var epoch int
	d.ScanArgs(t, "pid", &pid)
	d.ScanArgs(t, "epoch", &epoch)
	base, last := seqArg(t, d, "seq"), seqArg(t, d, "last")
	c := CheckSequence(producers[pid], int16(epoch), base, last)
	switch {
	case c.Err == nil:
		count := int64(last) - int64(base) + 1
		if last < base {
			count = int64(math.MaxInt32) - int64(base) + 1 + int64(last) + 1
		}
		next := AcceptSequence(producers[pid], pid, int16(epoch),
			ProducerBatch{BaseSequence: base, LastSequence: last, AssignedOffset: *hw})
		producers[pid] = &next
		out := fmt.Sprintf("accepted offset=%d\n", *hw)
		*hw += count
		return out
	case errors.Is(c.Err, ErrDuplicateSequence):
		return fmt.Sprintf("duplicate of offset=%d\n", c.Duplicate.AssignedOffset)
	default:
		return fmt.Sprintf("%v: %s\n", c.Err, c.Detail)
	}
}

// runRetention: sizes and timestamps of the batches oldest first; prints
// how many go.
func runRetention(t *testing.T, d *datadriven.TestData) string {
	var sizes, stamps []int
	var bytes, ms, now int64
	maxBatches := 0
	d.ScanArgs(t, "sizes", &sizes)
	d.ScanArgs(t, "ts", &stamps)
	d.ScanArgs(t, "bytes", &bytes)
	d.ScanArgs(t, "ms", &ms)
	d.ScanArgs(t, "now", &now)
	d.MaybeScanArgs(t, "cap", &maxBatches)
	total := int64(0)
	for _, s := range sizes {
		total += int64(s)
	}
	scan := NewRetentionScan(total, bytes, ms, now, maxBatches)
	n := 0
	for n < len(sizes) && scan.Delete(int64(sizes[n]), int64(stamps[n])) {
		n++
	}
	return fmt.Sprintf("delete %d\n", n)
}

func printStates(producers map[int64]*ProducerState) string {
	var b strings.Builder
	for pid := int64(0); pid < 100; pid++ {
		st := producers[pid]
		if st == nil {
			continue
		}
		fmt.Fprintf(&b, "pid=%d epoch=%d:", pid, st.ProducerEpoch)
		for _, pb := range st.Batches {
			fmt.Fprintf(&b, " %d..%d@%d", pb.BaseSequence, pb.LastSequence, pb.AssignedOffset)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// TestCommitAnswer checks the answer both control planes build from their
// stored results: marked for deletion iff nothing was accepted, each
// refusal a BatchRejectedError with its reason, a duplicate answered with
// its first commit's offset.
func TestCommitAnswer(t *testing.T) {
	tp := TopicIDPartition{TopicID: TopicID{1}, Partition: 3}
	req := &CommitFileRequest{Batches: []CommitBatch{{Partition: tp}, {Partition: tp}}}
	dup := RejectedResult(SequenceCheck{Err: ErrDuplicateSequence, Duplicate: ProducerBatch{AssignedOffset: 40, Timestamp: 7}}, 10)
	res := CommitAnswer(req, []StoredBatchResult{UnknownPartitionResult(), dup})
	if !res.MarkedForDeletion {
		t.Fatalf("nothing accepted, yet not marked: %+v", res)
	}
	var rej *BatchRejectedError
	if !errors.As(res.Batches[0].Err, &rej) || !errors.Is(rej.Reason, ErrUnknownTopicOrPartition) || rej.Index != 0 {
		t.Fatalf("batch 0: %v", res.Batches[0].Err)
	}
	if !errors.Is(res.Batches[1].Err, ErrDuplicateSequence) || res.Batches[1].BaseOffset != 40 || res.Batches[1].LogAppendTime != 7 {
		t.Fatalf("batch 1: %+v", res.Batches[1])
	}
	res = CommitAnswer(req, []StoredBatchResult{{Status: BatchAccepted, BaseOffset: 5}, dup})
	if res.MarkedForDeletion || res.Batches[0].Err != nil || res.Batches[0].BaseOffset != 5 {
		t.Fatalf("one accepted: %+v", res)
	}
	for s := BatchAccepted; s < numBatchStatuses; s++ {
		if !s.Valid() {
			t.Fatalf("%d not valid", s)
		}
	}
	if numBatchStatuses.Valid() {
		t.Fatal("out-of-range status valid")
	}
}
