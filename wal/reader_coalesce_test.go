package wal_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/wal"
)

// TestReaderCoalesce: a fetch of partitions 0 and 2 of an object whose
// partition 1 lies between them reads both with one GET when the gap
// (partition 1's batch) is at most MaxCoalesceGap, with two when it is
// larger or coalescing is off; what each partition is served is the same.
func TestReaderCoalesce(t *testing.T) {
	e := newBindEnv(t)
	_, batches := e.commit("wal/k",
		add{0, pbatch(t, 2, "a", 7, 0)}, add{1, pbatch(t, 50, "b", 8, 0)}, add{2, pbatch(t, 3, "c", 9, 0)})
	gap := batches[2].ByteOffset - (batches[0].ByteOffset + batches[0].Size)
	require.Positive(t, gap)
	for _, tc := range []struct {
		maxGap int64
		gets   int64
	}{{gap, 1}, {1 << 20, 1}, {gap - 1, 2}, {-1, 2}} {
		t.Run(fmt.Sprintf("maxGap=%d", tc.maxGap), func(t *testing.T) {
			r, err := wal.NewReader(wal.ReaderOptions{Store: e.store, ControlPlane: e.cp, MaxCoalesceGap: tc.maxGap})
			require.NoError(t, err)
			req := wal.FindBatchesRequest{MaxBytes: 1 << 30}
			for _, p := range []int32{0, 2} {
				req.Partitions = append(req.Partitions, wal.FindPartition{Partition: bindTP(p), MaxPartitionBytes: 1 << 30})
			}
			res, err := r.Fetch(e.ctx, req)
			require.NoError(t, err)
			require.NoError(t, res[0].Err)
			require.NoError(t, res[1].Err)
			require.Equal(t, []string{"0:a-0", "1:a-1"}, values(t, res[0].Records))
			require.Equal(t, []string{"0:c-0", "1:c-1", "2:c-2"}, values(t, res[1].Records))
			m := r.Metrics()
			require.Equal(t, tc.gets, m.Gets)
			want := batches[2].ByteOffset + batches[2].Size - batches[0].ByteOffset // both, and the gap
			if tc.gets == 2 {
				want = batches[0].Size + batches[2].Size
			}
			require.Equal(t, want, m.GetBytes)
		})
	}
}
