package wal

import "github.com/tierlog/tierlog/internal/mutation"

// PrunedLogStart returns the WAL start W after a prune that deleted the
// batches with last offset <= h (h = highestOffsetInRemoteStorage,
// inclusive).
//
//   - Batches remain, the lowest starting at minBase:
//     max(oldW, min(minBase, h+1)). The cap at h+1 matters when the WAL
//     does not start where remote storage ends: a seal lowered from 1000
//     to 600 with remote storage holding [0, 599] leaves the first WAL
//     batch at 1000, and an uncapped prune would move W to 1000, past
//     offsets [600, 1000) that exist nowhere; capped, W = 600. Elsewhere
//     the batches are contiguous with remote storage and the cap changes
//     nothing.
//   - No batch remains: min(HW, max(h+1, oldW)).
//
// W never moves back: a W that DeleteRecords moved inside a remaining
// batch stays. An h at or beyond HW means everything is tiered (and keeps
// h+1 from overflowing).
func PrunedLogStart(oldW, hw, h int64, batchesRemain bool, minBase int64) int64 {
	h = min(h, hw)
	if batchesRemain {
		if mutation.Disabled(mutation.PrunerCap) {
			return max(oldW, minBase)
		}
		return max(oldW, min(minBase, h+1))
	}
	return min(hw, max(h+1, oldW))
}
