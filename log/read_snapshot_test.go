package log

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
	"github.com/tierlog/tierlog/internal/invariants"
)

// TestReadOffsetsAreOneSnapshot truncates below the high watermark over
// and over while readers read with every isolation: every result must
// report offsets that held together at one instant (log start <= last
// stable offset <= high watermark <= log end offset). A read that loaded
// the offsets one by one could pair the high watermark from before a
// truncation with the log end offset after it.
func TestReadOffsetsAreOneSnapshot(t *testing.T) {
	rounds := 60000
	if testing.Short() {
		rounds = 20000
	}
	if invariants.Enabled { // -race: every round is several times slower
		rounds = 5000
	}
	// Small segments keep the rewrite of the truncated one short, so the
	// rounds come fast.
	l := openTestLog(t, vfs.NewMem(), Options{SegmentBytes: 1024})
	defer l.Close()
	batch := buildBatches(t, 1, 1, 10, 1_000_000, 0, -1)

	var stop atomic.Bool
	var bad atomic.Pointer[string]
	var reads atomic.Int64
	var wg sync.WaitGroup
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func(iso Isolation) {
			defer wg.Done()
			var buf []byte
			for !stop.Load() {
				info, err := l.Read(buf[:0], 0, 1, iso, true) // one batch: short reads, many of them
				if err != nil {
					continue // a truncation below offset 0 never happens; closed at the end
				}
				buf = info.Records
				reads.Add(1)
				if !(info.LogStartOffset <= info.LastStableOffset && info.LastStableOffset <= info.HighWatermark &&
					info.HighWatermark <= info.LogEndOffset) {
					msg := fmt.Sprintf("%s read: log start %d, last stable %d, high watermark %d, log end %d",
						iso, info.LogStartOffset, info.LastStableOffset, info.HighWatermark, info.LogEndOffset)
					bad.CompareAndSwap(nil, &msg)
				}
			}
		}(Isolation(r))
	}
	for i := 0; i < rounds && bad.Load() == nil; i++ {
		for j := 0; j < 2; j++ {
			_, err := l.AppendAsLeader(append([]byte(nil), batch...), 0, OriginClient) // offsets are stamped in place
			require.NoError(t, err)
		}
		l.UpdateHighWatermark(l.LogEndOffset())
		// Below the high watermark, back to where the round started, so
		// every round costs the same.
		_, err := l.TruncateTo(l.LogEndOffset() - 2)
		require.NoError(t, err)
	}
	stop.Store(true)
	wg.Wait()
	if msg := bad.Load(); msg != nil {
		t.Fatalf("offsets from different instants after %d reads: %s", reads.Load(), *msg)
	}
	t.Logf("%d reads", reads.Load())
}
