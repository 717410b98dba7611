package main

import (
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/tierlog/tierlog/internal/harness/sim"
)

// soakOptions are a soak's length, first seed (0: a random one), the
// interval of its progress lines, its schedules and where a failure's
// shrunk script goes.
type soakOptions struct {
	duration time.Duration
	progress time.Duration
	first    uint64
	steps    int
	weights  map[string]int
	noSwarm  bool
	dir      string
	rerun    func(seed uint64) string // the command that reruns a seed
}

// faultActions are the scheduler's actions that inject a fault: the
// soak's progress line counts them by name.
var faultActions = []string{"crash", "lose-disk", "shrink-isr", "force-leader", "stop", "wipe-disk",
	"log-dir-failure", "restart-unclean", "unclean-elect", "partition", "clock-jump", "cp-outage", "cp-ambiguous",
	"task-lookup"}

// soakStats are the totals of a soak so far.
type soakStats struct {
	seeds, steps int
	actions      map[string]int
	store        sim.StoreFaults
	cp           sim.ControlPlaneFaults
	// swarm counts, per fault kind, the seeds whose swarm configuration
	// turned it off.
	swarmOff map[string]int
}

func (s *soakStats) add(res *sim.Result) {
	s.seeds++
	s.steps += res.Steps
	for _, a := range res.Actions {
		if slices.Contains(faultActions, a.Cmd) {
			s.actions[a.Cmd]++
		}
	}
	s.store.Failed += res.StoreFaults.Failed
	s.store.LostResponse += res.StoreFaults.LostResponse
	s.cp.Refused += res.ControlPlaneFaults.Refused
	s.cp.LostAnswer += res.ControlPlaneFaults.LostAnswer
	if res.Swarm != nil {
		for _, k := range res.Swarm.Kinds {
			if k.Factor == 0 {
				s.swarmOff[k.Name]++
			}
		}
	}
}

// line is a progress line: seeds, steps and their rate, the faults
// injected by kind, and the invariant checks (every invariant after
// every step).
func (s *soakStats) line(el time.Duration) string {
	var faults []string
	for _, name := range faultActions {
		if n := s.actions[name]; n > 0 {
			faults = append(faults, fmt.Sprintf("%s=%d", name, n))
		}
	}
	faults = append(faults, fmt.Sprintf("store-put/delete-failed=%d store-lost-response=%d",
		s.store.Failed, s.store.LostResponse), fmt.Sprintf("cp-refused=%d cp-lost-answer=%d",
		s.cp.Refused, s.cp.LostAnswer))
	line := fmt.Sprintf("%v: %d seeds, %d steps (%.0f steps/s); faults: %s; invariants checked after %d steps",
		el.Round(time.Second), s.seeds, s.steps, float64(s.steps)/el.Seconds(), strings.Join(faults, " "), s.steps)
	if len(s.swarmOff) > 0 {
		var off []string
		for _, k := range slices.Sorted(maps.Keys(s.swarmOff)) {
			off = append(off, fmt.Sprintf("%s=%d", k, s.swarmOff[k]))
		}
		line += "; swarm: seeds with a kind off: " + strings.Join(off, " ")
	}
	return line
}

// soak runs seeds from o.first (a random one if 0) on until o.duration
// is up, a progress line every o.progress, and stops at the first seed
// that breaks an invariant: it prints the seed and the violation,
// shrinks the schedule and writes the script. Exit 0 when the time ran
// out, 1 on a failure.
func soak(o soakOptions, stdout, stderr io.Writer) int {
	if o.first == 0 {
		o.first = rand.Uint64N(1<<53) + 1
	}
	fmt.Fprintf(stdout, "soak: seeds from %d for %v, %d steps each\n", o.first, o.duration, o.steps)
	start := time.Now()
	next := start.Add(o.progress)
	st := soakStats{actions: map[string]int{}, swarmOff: map[string]int{}}
	opts := sim.RunOptions{Steps: o.steps, Weights: o.weights, NoSwarm: o.noSwarm}
	for s := o.first; time.Since(start) < o.duration; s++ {
		res, err := sim.Run(s, opts)
		if err != nil {
			fmt.Fprintf(stderr, "seed %d: %v\n", s, err)
			return 1
		}
		st.add(res)
		if res.Failed() {
			fmt.Fprintln(stdout, st.line(time.Since(start)))
			fmt.Fprintf(stdout, "last steps:\n%sseed %d FAILED after %d steps: %v\n%srerun: %s\n",
				res.TraceTail(20), s, res.Steps, res.Violation, swarmLine(res), o.rerun(s))
			fmt.Fprint(stdout, shrinkTo(o.dir, "", res, opts, stderr))
			return 1
		}
		if now := time.Now(); !now.Before(next) {
			fmt.Fprintln(stdout, st.line(now.Sub(start)))
			next = now.Add(o.progress)
		}
	}
	fmt.Fprintf(stdout, "soak: done, no violation: %s\n", st.line(time.Since(start)))
	return 0
}

// shrinkTo shrinks res's schedule (at most two minutes) and writes the
// script to dir as shrunk_[LABEL_]seed_S. It returns the line to print
// (the steps before and after and the path), "" when it failed (said on
// stderr). label names the disabled guards.
func shrinkTo(dir, label string, res *sim.Result, opts sim.RunOptions, stderr io.Writer) string {
	co := opts.Cluster
	co.Seed = res.Seed
	s, err := sim.Shrink(res.Actions, res.Violation.Kind, sim.ShrinkOptions{Cluster: co,
		Deadline: time.Now().Add(2 * time.Minute)})
	if err != nil {
		fmt.Fprintf(stderr, "tierlog-sim: shrink seed %d: %v\n", res.Seed, err)
		return ""
	}
	name := fmt.Sprintf("shrunk_seed_%d", res.Seed)
	what := ""
	if label != "" {
		name = fmt.Sprintf("shrunk_%s_seed_%d", strings.NewReplacer(",", "_", "-", "_").Replace(label), res.Seed)
		what = " with " + label + " disabled"
	}
	path := filepath.Join(dir, name)
	header := fmt.Sprintf("Shrunk by tierlog-sim from random seed %d (%d steps%s) to %d steps:\n%v\n"+
		"Copy it to internal/harness/sim/testdata/scripts; go test ./internal/harness/sim -run TestScripts/%s\n"+
		"fails on it until the bug is fixed (add -rewrite then, to record the fixed output).",
		res.Seed, res.Steps, what, len(s.Applied), s.Violation, name)
	if err := os.WriteFile(path, []byte(s.Script(header)), 0o644); err != nil {
		fmt.Fprintf(stderr, "tierlog-sim: %v\n", err)
		return ""
	}
	prefix := ""
	if label != "" {
		prefix = label + ": "
	}
	return fmt.Sprintf("%sseed %d shrunk from %d to %d steps in %v (%d replays): %s\n", prefix, res.Seed, res.Steps,
		len(s.Applied), s.Elapsed.Round(time.Millisecond), s.Runs, path)
}

// swarmLine is a failing run's swarm configuration, as a line of its own
// ("" without one).
func swarmLine(res *sim.Result) string {
	if res.Swarm == nil {
		return ""
	}
	return res.Swarm.String() + "\n"
}
