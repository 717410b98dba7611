package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDisklessExample runs the example and checks what it reports: the
// offsets the control plane assigned, every record read back at its
// offset, one GET per object, and the cleanup.
func TestDisklessExample(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out, t.TempDir()), out.String())
	got := out.String()
	require.True(t, strings.HasPrefix(got, "Notation:\n"), "the legend comes first")
	for _, want := range []string{
		"2. produce call 0: orders-2: 4 records at base offset 0\n",
		"2. produce call 1: orders-0: 2 records at base offset 2\n",
		"2. produce call 1: orders-2: 4 records at base offset 4\n",
		"2. writer: 2 objects committed",
		"3. orders-0 (high watermark 4): 0=call0-p0-0 1=call0-p0-1 2=call1-p0-0 3=call1-p0-1 \n",
		"3. orders-2 (high watermark 8): 0=call0-p2-0 1=call0-p2-1 2=call0-p2-2 3=call0-p2-3 4=call1-p2-0 5=call1-p2-1 6=call1-p2-2 7=call1-p2-3 \n",
		"3. reader: 2 GETs for 3 partitions\n",
		"4. all records deleted; cleaner (an hour later) deleted 2 objects\n",
	} {
		require.Contains(t, got, want)
	}
}
