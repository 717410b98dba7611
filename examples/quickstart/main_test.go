package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestQuickstart runs the example and checks the state it reports: the
// epochs recovered from the batches, the checkpoint after truncation, and
// the OffsetsForLeaderEpoch answers.
func TestQuickstart(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(&out, t.TempDir()))
	got := out.String()
	require.True(t, strings.HasPrefix(got, "Notation:\n"), "the legend comes first")
	for _, want := range []string{
		"scanned 622 valid bytes, 18 records, log end offset 18\n",
		"epochs  0@0 3@8 4@12 (persisted to leader-epoch-checkpoint)\n",
		"reload  0@0 3@8 4@12\n",
		`truncated to 10: epochs 0@0 3@8, checkpoint file "0\n2\n0 0\n3 8\n"` + "\n",
		"OffsetsForLeaderEpoch(2) = epoch 0, end offset 8\n",
		"OffsetsForLeaderEpoch(3) = epoch 3, end offset 10\n",
		"OffsetsForLeaderEpoch(4) = epoch -1, end offset -1\n",
	} {
		require.Contains(t, got, want)
	}
}
