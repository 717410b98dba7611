package demo

import (
	"fmt"
	"io"
	"strings"
)

// Note is one entry of an example's legend: how a piece of its output is
// written and what it means.
type Note struct{ Form, Meaning string }

// Common notes the examples share.
var (
	NoteHalfOpen = Note{"[a, b)", "offsets a to b-1 (b not included): a log or a batch"}
	NoteClosed   = Note{"[a, b]", "offsets a to b, both included: a remote segment (Kafka's start and end offset)"}
	NoteEpochAt  = Note{"E@O", "leader epoch E starts at offset O (one leader-epoch cache entry); " +
		"a list such as 0@0 1@200 is the whole cache"}
	NoteOffsets = Note{"log start, local log start, log end",
		"first offset of the partition (in any tier), first offset on this broker's disk, next offset to be written"}
	NoteMovedToTiered = Note{"OFFSET_MOVED_TO_TIERED_STORAGE",
		"Kafka's fetch error for an offset below the leader's local log start (KIP-405): the follower rebuilds from remote storage"}
	NoteOffsetsForLeaderEpoch = Note{"OffsetsForLeaderEpoch(e) = (E, O)",
		"Kafka's request: the largest epoch E <= e the leader knows and the offset O where it ends (the next epoch's start, or the log end)"}
	NotePartitionName = Note{PartitionName(), fmt.Sprintf("topic %s, partition %d (topic id %s)",
		Partition.Topic, Partition.Partition, Partition.TopicID)}
)

// PartitionName is the demo partition as the examples print it:
// topic-partition, the topic id said once in the legend.
func PartitionName() string { return fmt.Sprintf("%s-%d", Partition.Topic, Partition.Partition) }

// PrintLegend writes the notation an example's output uses, before the
// output itself.
func PrintLegend(w io.Writer, notes ...Note) {
	width := 0
	for _, n := range notes {
		width = max(width, len(n.Form))
	}
	var b strings.Builder
	b.WriteString("Notation:\n")
	for _, n := range notes {
		fmt.Fprintf(&b, "  %-*s  %s\n", width, n.Form, n.Meaning)
	}
	b.WriteString("\n")
	_, _ = io.WriteString(w, b.String())
}

// Legend is PrintLegend on the cluster's narration.
func (c *Cluster) Legend(notes ...Note) {
	if c.Out != nil {
		PrintLegend(c.Out, notes...)
	}
}
