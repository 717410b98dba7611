package sim

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/tierstate"
)

// phaseOne is a committed seal at 20 on a consolidating partition.
func phaseOne(t *testing.T) tierstate.State {
	t.Helper()
	st, err := tierstate.State{}.WithConsolidating(true).ArmSwitch()
	require.NoError(t, err)
	st, err = st.CommitSeal(20, nil)
	require.NoError(t, err)
	return st
}

type kip966Row struct {
	isr, elr, lastKnown []int32
	leader              int32
	recovering          bool
}

func row(k *controller) kip966Row {
	r := k.rec
	norm := func(ids []int32) []int32 { // empty and nil print alike
		if len(ids) == 0 {
			return nil
		}
		return ids
	}
	return kip966Row{isr: norm(r.ISR), elr: norm(r.ELR), lastKnown: norm(r.LastKnownELR), leader: r.Leader,
		recovering: r.Recovering}
}

// The five steps of github.com/aiven/inkless/pull/871's table on the
// controller alone (its broker n is n+1 here): replicas [3, 1, 2],
// min.insync.replicas=2, phase 1.
func TestOperatorControllerLastKnownLeader(t *testing.T) {
	k := &controller{}
	k.init(Options{Brokers: 3, MinInsyncReplicas: 2})
	k.rec.State = phaseOne(t)
	up := map[int32]bool{1: true, 2: true, 3: true}
	running := func(id int32) bool { return up[id] }
	k.newLeader(3)
	require.Equal(t, kip966Row{isr: []int32{1, 2, 3}, leader: 3}, row(k), "step 1")

	up[2] = false
	k.brokerFenced(2, running)
	require.Equal(t, kip966Row{isr: []int32{1, 3}, leader: 3}, row(k), "ISR at min.insync.replicas: no ELR")
	up[1] = false
	k.brokerFenced(1, running)
	require.Equal(t, kip966Row{isr: []int32{3}, elr: []int32{1}, leader: 3}, row(k), "step 2")

	up[3] = false
	require.Equal(t, noLeaderElection, k.brokerFenced(3, running))
	require.Equal(t, kip966Row{elr: []int32{1, 3}, lastKnown: []int32{3}, leader: -1}, row(k), "step 3")

	up[1], up[2] = true, true
	require.Equal(t, noLeaderElection, k.brokerRegistered(1, running))
	require.Equal(t, noLeaderElection, k.brokerRegistered(2, running))
	require.Equal(t, kip966Row{elr: []int32{3}, lastKnown: []int32{3}, leader: -1}, row(k), "step 4")

	up[3] = true
	require.Equal(t, lastKnownLeader, k.brokerRegistered(3, running))
	require.Equal(t, kip966Row{isr: []int32{3}, leader: 3, recovering: true}, row(k), "step 5")
}

// A clean return keeps a replica in the ELR, and the ELR's running
// member leads (a clean election: it holds every committed record).
func TestOperatorControllerELRElection(t *testing.T) {
	k := &controller{}
	k.init(Options{Brokers: 3, MinInsyncReplicas: 2})
	k.rec.State = phaseOne(t)
	up := map[int32]bool{1: true, 2: true, 3: true}
	running := func(id int32) bool { return up[id] }
	for _, id := range []int32{2, 3, 1} {
		up[id] = false
		k.brokerFenced(id, running)
	}
	require.Equal(t, kip966Row{elr: []int32{1, 3}, lastKnown: []int32{1}, leader: -1}, row(k))
	k.cleanStop[3] = true
	up[3] = true
	require.Equal(t, elrElection, k.brokerRegistered(3, running))
	require.Equal(t, kip966Row{isr: []int32{3}, elr: []int32{1}, leader: 3}, row(k))
}

// Unclean elections: blocked in phase 1, allowed before the switch.
func TestOperatorControllerUncleanElection(t *testing.T) {
	for _, tc := range []struct {
		name  string
		state tierstate.State
		want  election
	}{
		{"classic", tierstate.State{}, uncleanElection},
		{"phase-1", phaseOne(t), noLeaderElection},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := &controller{}
			k.init(Options{Brokers: 3, UncleanLeaderElection: true})
			k.rec.State = tc.state
			up := map[int32]bool{1: true, 2: true, 3: true}
			running := func(id int32) bool { return up[id] }
			k.changeISR([]int32{1})
			up[2], up[1] = false, false
			k.brokerFenced(2, running)
			require.Equal(t, tc.want, k.brokerFenced(1, running))
			if tc.want == uncleanElection {
				require.Equal(t, kip966Row{isr: []int32{3}, leader: 3, recovering: true}, row(k))
			} else {
				require.Equal(t, int32(-1), k.rec.Leader)
			}
		})
	}
}
