package log

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/log/internal/segment"
	"github.com/tierlog/tierlog/log/record"
)

// TestRecoveryNoticesLostSegmentWithItsIndexes: a rolled segment that
// lost its unsynced data, its .log and its index files alike (no flush
// per message: a later fsync of the directory made the next segment's
// entry durable, not this segment's data), in a log with later segments:
// all of it, or all but its first batch. The index bounds cannot tell
// (the index lost its entries too), but the segment ends below the next
// segment's base: recovery must end the log there, not keep the later
// segments after a gap of lost offsets that reads skip.
func TestRecoveryNoticesLostSegmentWithItsIndexes(t *testing.T) {
	for _, keepFirstBatch := range []bool{false, true} {
		name := "empty"
		if keepFirstBatch {
			name = "first-batch-kept"
		}
		t.Run(name, func(t *testing.T) {
			e, bases := segmentFiles(t, 40, 800)
			end := bases[1]
			e.rewriteFile(segment.LogFileName(bases[1]), func(b []byte) []byte {
				if !keepFirstBatch {
					return nil
				}
				bt, err := record.ReadBatch(b)
				require.NoError(t, err)
				end = bt.LastOffset() + 1
				return b[:bt.Size()]
			})
			for _, name := range []string{segment.IndexFileName(bases[1]), segment.TimeIndexFileName(bases[1])} {
				e.rewriteFile(name, func([]byte) []byte { return nil })
			}
			e.remove(OffsetsCheckpointFileName, CleanShutdownFileName)
			require.NoError(t, e.reopen())
			require.Equal(t, end, e.l.LogEndOffset())
			got, err := readAllRecords(e.l)
			require.NoError(t, err)
			require.Equal(t, offsetRange(0, end), got)
			require.Len(t, e.events, 1)
			require.True(t, errors.Is(e.events[0].Err, ErrCorruption))
			require.Equal(t, len(bases)-2, e.events[0].SegmentsMovedAside)
			require.Equal(t, []int64{0, bases[1]}, e.bases())
		})
	}
}
