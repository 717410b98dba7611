package tierstate_test

import (
	"errors"
	"fmt"

	"github.com/tierlog/tierlog/tierstate"
)

// The switch of the example in https://github.com/aiven/inkless/pull/857:
// the controller arms the switch, the leader commits the seal at 100, then
// proves the classic prefix is in remote storage with its epoch at 99 (2).
// A broker replays the records.
func Example() {
	var s tierstate.State // classic
	s = s.WithConsolidating(true)

	armed, _ := s.ArmSwitch()
	sealed, _ := armed.CommitSeal(100, nil)
	phase2, _ := sealed.SetClassicPrefixInRemoteStorage(
		tierstate.ClassicPrefixRequest{BrokerID: 1, LeaderEpoch: 3, Seal: 100, LastClassicLeaderEpoch: 2},
		tierstate.Leadership{Leader: 1, LeaderEpoch: 3})
	fmt.Println(phase2)
	fmt.Println("record:", tierstate.ChangeTags(sealed, phase2))

	// A broker applies the same record to its copy.
	replayed, _ := sealed.ApplyChange(tierstate.ChangeTags(sealed, phase2))
	fmt.Println("replayed equal:", replayed == phase2, "replica check:", replayed.RunsReplicaCheck())

	// Phase 2 is final: an abort is refused.
	_, err := phase2.AbortSwitch()
	fmt.Println(errors.Is(err, tierstate.ErrSealCommitted))
	// Output:
	// phase-2 seal=100 recorded-epoch=2 diskless-epoch=4 consolidating
	// record: diskless-epoch=4 flag=true recorded-epoch=2
	// replayed equal: true replica check: true
	// true
}
