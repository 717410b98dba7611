package consolidate_test

import (
	"fmt"

	"github.com/tierlog/tierlog/consolidate"
)

// The recreated leader of github.com/aiven/inkless/pull/857 before the
// first prune: seal 100, WAL start still at the classic log start 0, an
// empty local log. Its consolidation fetch at 0 is redirected to remote
// storage once remote storage holds 99; before that it waits; after the
// rebuild the fetch at the seal is served from the WAL.
func ExampleDecideFetch() {
	in := consolidate.FetchInput{FetchOffset: 0, Seal: 100, WALStart: 0, HighWatermark: 160,
		LocalLogAvailable: true, LocalLogStart: 0, RemoteStorageEnabled: true,
		CrossTierStart: 0, CrossTierKnown: true}
	a := consolidate.DecideFetch(in)
	fmt.Println("needs the remote lookup of 99:", a.NeedsCoverage)

	in.Coverage = consolidate.CoverageMissing
	fmt.Println(consolidate.DecideFetch(in).Error)
	in.Coverage = consolidate.CoverageHeld
	fmt.Println(consolidate.DecideFetch(in).Error)

	in.FetchOffset = 100
	a = consolidate.DecideFetch(in)
	fmt.Println(a.Error, "serve:", a.ServeRecords)

	// DeleteRecords at the seal moved X to 100: reset, without a lookup.
	in.FetchOffset, in.CrossTierStart, in.Coverage = 0, 100, consolidate.CoverageUnknown
	fmt.Println(consolidate.DecideFetch(in).Error)
	// Output:
	// needs the remote lookup of 99: true
	// NOT_LEADER_OR_FOLLOWER
	// OFFSET_MOVED_TO_TIERED_STORAGE
	// NONE serve: true
	// OFFSET_OUT_OF_RANGE
}
