package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
)

// Swarm testing (Groce, Zhang, Eide, Chen and Regehr, "Swarm Testing",
// ISSTA 2012; the simulators of FoundationDB and TigerBeetle do the
// same): each random run also draws, from its seed, which fault kinds
// and features its schedule takes and how often. One menu with every
// fault on spreads each seed over all of them; a swarm configuration
// turns some off and weighs others up, so rare combinations (a remote
// task lagging across many truncations, a cluster partitioned for long
// with no crash to reset it) get whole runs of their own.
//
// The configuration changes only the scheduler's menu and the arguments
// it draws: every step is still a recorded action, so Replay and Shrink
// need no configuration, and a script of the run is the run.

// SwarmKind is one fault kind or feature of a swarm configuration and
// its factor: 0 turns its actions off, otherwise their weights are
// multiplied by it.
type SwarmKind struct {
	Name   string
	Factor int
}

// Swarm is a random run's configuration, drawn from the seed (DrawSwarm).
type Swarm struct {
	// Kinds are the fault kinds and features of swarmKinds, in order.
	Kinds []SwarmKind
	// StoreFaultRate is the probability of an injected object-store
	// fault per Put or Delete that the "faults" action turns on.
	StoreFaultRate float64
}

// swarmKinds are the kinds a configuration draws, each naming the
// scheduler actions (rows of choices) it switches. Actions of no kind
// (produce, replicate, the tiering and switch steps, restarts, and rows
// added without a kind) keep their weight on every seed.
var swarmKinds = []struct {
	name    string
	actions []string
}{
	{"crash", []string{"crash"}},
	{"lose-disk", []string{"lose-disk"}},
	{"isr-shrink", []string{"shrink-isr"}},
	{"store-faults", []string{"faults"}},
	{"elections", []string{"elect", "elect-preferred", "rebalance"}},
	{"operator", []string{"describe", "elect-replica", "start-phase-2", "reseal", "force-leader"}},
	{"switch", []string{"arm-switch", "undo-switch", "rearm-switch"}},
	{"task-split", []string{"task-lookup", "task-install"}},
	{"cp-faults", []string{"cp-outage", "cp-ambiguous"}},
	{"partition", []string{"partition"}},
	{"clock-jump", []string{"clock-jump"}},
	// Kinds from here on draw after the store fault rate, so that the
	// kinds above keep their draws for every seed.
	{"hw-checkpoint", []string{"checkpoint-hw"}},
	{"flush", []string{"flush"}},
	{"late-puts", []string{"late-puts"}},
	{"cp-step-fault", []string{"cp-step-fault"}},
}

// laterKinds is the index of the first kind drawn after the store fault
// rate.
const laterKinds = 11

// swarmFactors are the factors a kind draws from, uniformly: off in a
// quarter of the runs, at its menu weight, doubled, or four times it.
var swarmFactors = []int{0, 1, 2, 4}

// storeFaultRates are the object-store fault rates a configuration
// draws from.
var storeFaultRates = []float64{0.05, 0.2, 0.5}

// DrawSwarm is seed's swarm configuration (its own PCG stream: the
// schedule's and the cluster's draws do not move it).
func DrawSwarm(seed uint64) *Swarm {
	rng := rand.New(rand.NewPCG(seed, 0x737761726d)) // "swarm"
	s := &Swarm{}
	for _, k := range swarmKinds[:laterKinds] {
		s.Kinds = append(s.Kinds, SwarmKind{Name: k.name, Factor: swarmFactors[rng.IntN(len(swarmFactors))]})
	}
	s.StoreFaultRate = storeFaultRates[rng.IntN(len(storeFaultRates))]
	for _, k := range swarmKinds[laterKinds:] {
		s.Kinds = append(s.Kinds, SwarmKind{Name: k.name, Factor: swarmFactors[rng.IntN(len(swarmFactors))]})
	}
	return s
}

// defaultStoreFaultRate is the rate the "faults" action turns on
// without a swarm configuration.
const defaultStoreFaultRate = 0.2

// storeFaultRate is the rate the "faults" action turns on under s (nil:
// no configuration).
func (s *Swarm) storeFaultRate() float64 {
	if s == nil {
		return defaultStoreFaultRate
	}
	return s.StoreFaultRate
}

// Factor is kind's factor (1 for a kind the configuration does not name).
func (s *Swarm) Factor(kind string) int {
	i := slices.IndexFunc(s.Kinds, func(k SwarmKind) bool { return k.Name == kind })
	if i < 0 {
		return 1
	}
	return s.Kinds[i].Factor
}

// On reports whether kind is on.
func (s *Swarm) On(kind string) bool { return s.Factor(kind) > 0 }

// String is the configuration as the run's first trace line prints it:
// "swarm: crash=x2 lose-disk=off ... store-fault-rate=0.20".
func (s *Swarm) String() string {
	var sb strings.Builder
	sb.WriteString("swarm:")
	for _, k := range s.Kinds {
		if k.Factor == 0 {
			fmt.Fprintf(&sb, " %s=off", k.Name)
		} else {
			fmt.Fprintf(&sb, " %s=x%d", k.Name, k.Factor)
		}
	}
	fmt.Fprintf(&sb, " store-fault-rate=%.2f", s.StoreFaultRate)
	return sb.String()
}

// apply scales menu's weights by the configuration: each action of a
// kind gets its weight times the kind's factor.
func (s *Swarm) apply(menu []choice) {
	for _, k := range swarmKinds {
		f := s.Factor(k.name)
		for _, name := range k.actions {
			if i := slices.IndexFunc(menu, func(ch choice) bool { return ch.name == name }); i >= 0 {
				menu[i].weight *= f
			}
		}
	}
}
