// Command tierlog-sim runs random schedules of the deterministic cluster
// simulation (internal/harness/sim, docs/simulation.md): three brokers, the
// controller, remote storage and the WAL in one process, with the
// invariants checked after every step.
//
// Usage:
//
//	tierlog-sim [-seed S] [-seeds N] [-steps K] [-menu M] [-weights name=N,...] [-swarm=false] [-trace] [-shrink DIR]
//	tierlog-sim -duration D [-seed S] [-steps K] [-menu M] [-weights name=N,...] [-swarm=false] [-progress P] [-shrink DIR]
//	tierlog-sim -mutation GUARD[,GUARD...]|all -seeds N [-seed S] [-steps K] [-menu M] [-weights name=N,...] [-swarm=false] [-shrink DIR]
//
// -seed S runs seed S alone; -seeds N runs seeds 1 to N (with -seed, N
// seeds from S on). -steps is the length of each schedule (default 500).
// -weights replaces the weights of the scheduler's actions by name
// (sim.RunOptions.Weights; 0 removes one), for example
// lose-disk=4,crash=6; a name action@phase weighs the action only while
// the switch is in that phase (classic, seal-pending, phase-1, phase-2),
// for example lone-leader-lost@classic=4,restart@phase-1=1. -menu M
// starts from a named menu of the guard search (sim.MenuNames: default,
// lone-leader, move-across-the-seal, unclean, ...; docs/simulation.md)
// and -weights is put over it. Each seed also draws its swarm configuration
// (sim.DrawSwarm: which fault kinds are on, and how much each weighs,
// scaling the -weights menu), printed as its first trace line and with
// a failing seed; -swarm=false runs every seed on the menu itself (the
// test's rerun flag is then -no-swarm). -trace prints every step's trace line as it
// runs; without it only a failing seed's last steps are printed. The exit status is 1 when some
// seed breaks an invariant (the first failing seed ends the run), 2 for
// a usage error.
//
// -shrink DIR writes a failing seed's schedule, shrunk (sim.Shrink: steps
// dropped, counts and offsets lowered while the same invariant still
// breaks), as a script of internal/harness/sim/testdata/scripts into DIR, named
// shrunk_seed_S (shrunk_GUARD_seed_S in search mode), and prints a line
// with the steps before and after and the path. Shrinking stops after
// two minutes with the shortest schedule found.
//
// Soak mode, -duration D, runs seeds from S (-seed) or from a random
// seed it prints, until D is up, with a progress line every P (-progress,
// default 10s): seeds, steps and steps/s, the faults injected by kind
// (the scheduler's fault actions, the object-store Puts and Deletes
// failed or whose response was lost, and the control-plane calls refused
// or whose answer was lost), the steps after which every invariant was
// checked, and per fault kind the seeds whose swarm configuration turned
// it off. It stops at the first failing seed, prints it
// and writes its shrunk script (into DIR, default the current directory);
// exit 1 then, 0 when the time ran out.
//
// Search mode looks for a seed that a disabled safety guard breaks
// (internal/mutation; docs/reliability.md, "Mutation check"):
//
//	go run -tags tierlog_mutation ./cmd/tierlog-sim -mutation GUARD -seeds N [-seed S] [-steps K]
//
// runs seeds 1 to N (or N seeds from S) with GUARD disabled until one
// breaks an invariant that the same seed with every guard on does not (a
// seed that breaks with every guard on too meets another bug: it is
// skipped, with a line on stderr), and prints exactly one line: "GUARD: caught at
// seed S after K steps" or "GUARD: not caught in N seeds" (with -shrink,
// a caught seed's shrink line follows, the guard still disabled while it
// shrinks). A guard searched alone runs on its row's menu
// (sim.SearchPlan, the menus of docs/simulation.md's table) unless -menu
// or -weights names one, so -mutation GUARD -seeds 2000 finds the table's
// first catching seed. -mutation all
// searches every guard of the table in turn, one line each; a
// comma-separated list (GUARD,GUARD) disables those guards together, for
// a bug that two guards each stop (the line names the list). A guard
// searched alone (by name or in all) whose bug another guard stops one
// step later (mutation.Backups) is searched with those backups disabled
// too, and a seed counts only if it passes with the backups alone
// disabled; its line ends "(backups disabled too: B; they alone pass the
// seed)", or "(backups disabled too: B)" when not caught. Guards named
// in TIERLOG_MUTATION stay disabled throughout. The exit
// status is 0 whether or not a guard was caught, 1 for a usage error
// (an unknown guard, or a binary built without -tags tierlog_mutation,
// where no guard can be disabled) or a run that could not be set up.
//
// A run's decisions depend only on its seed. The names of WAL objects
// and remote segments come from crypto/rand, which only a test can make
// deterministic, so they (and with them the bytes of a trace line that
// prints one) differ between runs of this command; the test rerun that
// the output names (go test ./internal/harness/sim -run TestRandom -seed S)
// fixes them too.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/tierlog/tierlog/internal/harness/sim"
	"github.com/tierlog/tierlog/internal/mutation"
)

func main() {
	if os.Getenv("GOGC") == "" {
		// The simulation's heap is tens of MiB and mostly garbage of
		// short-lived reads: collecting a quarter as often costs
		// about 12 MiB more and runs 15-25% more steps a second.
		debug.SetGCPercent(400)
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tierlog-sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	seed := fs.Uint64("seed", 0, "run this seed (with -seeds: the first of N)")
	seeds := fs.Int("seeds", 0, "run N seeds (from 1, or from -seed)")
	steps := fs.Int("steps", 500, "steps per schedule")
	trace := fs.Bool("trace", false, "print every step as it runs")
	weights := fs.String("weights", "", "action weights replacing the default menu's, name=N,... (e.g. lose-disk=4,crash=6); name@phase=N weighs it in that switch phase only (classic, seal-pending, phase-1, phase-2)")
	guard := fs.String("mutation", "", "search mode: disable this guard (or all, one at a time) and look for a seed that breaks an invariant")
	duration := fs.Duration("duration", 0, "soak mode: run seeds (from -seed, or a random one) until this time is up")
	progress := fs.Duration("progress", 10*time.Second, "soak mode: the interval of the progress lines")
	shrinkDir := fs.String("shrink", "", "write a failing seed's shrunk schedule as a script into this directory (soak mode: default .)")
	menu := fs.String("menu", "", "start from this named menu (default, lone-leader, unclean, ...: sim.MenuNames), -weights then put over it; in search mode a guard searched alone runs on its row's menu (sim.SearchPlan) unless -menu or -weights is given")
	swarm := fs.Bool("swarm", true, "draw each seed's swarm configuration (which fault kinds are on, and their weights); -swarm=false runs the menu as -weights leaves it")
	if err := fs.Parse(args); err != nil {
		if *guard != "" {
			return 1
		}
		return 2
	}
	w, err := parseWeights(*weights)
	if err == nil && *menu != "" {
		m, ok := sim.Menu(*menu)
		if !ok {
			err = fmt.Errorf("-menu: unknown menu %q (menus: %s)", *menu, strings.Join(sim.MenuNames(), ", "))
		}
		w = sim.WithWeights(m, w)
	} else if err != nil {
		err = fmt.Errorf("-weights: %w", err)
	}
	if err != nil {
		fmt.Fprintf(stderr, "tierlog-sim: %v\n", err)
		if *guard != "" {
			return 1
		}
		return 2
	}
	if *guard != "" {
		return search(*guard, searchOptions{first: *seed, n: *seeds, steps: *steps, weights: w, noSwarm: !*swarm,
			dir: *shrinkDir, menuGiven: *menu != "" || *weights != ""},
			fs.NArg() > 0 || *trace || *duration != 0, stdout, stderr)
	}
	if *duration != 0 {
		if fs.NArg() > 0 || *steps <= 0 || *seeds != 0 || *trace || *duration < 0 || *progress <= 0 {
			fmt.Fprintln(stderr, soakUsage)
			return 2
		}
		if *shrinkDir == "" {
			*shrinkDir = "."
		}
		return soak(soakOptions{duration: *duration, progress: *progress, first: *seed, steps: *steps, weights: w,
			noSwarm: !*swarm, dir: *shrinkDir, rerun: func(s uint64) string {
				return rerunCommand(s, *menu, *weights, *steps, *swarm)
			}}, stdout, stderr)
	}
	if fs.NArg() > 0 || *steps <= 0 || *seeds < 0 || (*seed == 0 && *seeds == 0) {
		fmt.Fprintln(stderr, "usage: tierlog-sim [-seed S] [-seeds N] [-steps K] [-menu M] [-weights name=N,...] [-trace]")
		return 2
	}
	first, n := *seed, uint64(*seeds)
	if first == 0 {
		first = 1
	}
	if n == 0 {
		n = 1
	}
	opts := sim.RunOptions{Steps: *steps, Weights: w, NoSwarm: !*swarm}
	start, total := time.Now(), 0
	for s := first; s < first+n; s++ {
		if *trace {
			fmt.Fprintf(stdout, "seed %d\n", s)
			opts.Cluster.Trace = func(line string) { fmt.Fprintln(stdout, line) }
		}
		res, err := sim.Run(s, opts)
		if err != nil {
			fmt.Fprintf(stderr, "seed %d: %v\n", s, err)
			return 1
		}
		total += res.Steps
		if res.Failed() {
			if !*trace {
				fmt.Fprintf(stdout, "last steps:\n%s", res.TraceTail(40))
			}
			fmt.Fprintf(stdout, "seed %d FAILED: %v\n%srerun: %s\n",
				s, res.Violation, swarmLine(res), rerunCommand(s, *menu, *weights, *steps, *swarm))
			if *shrinkDir != "" {
				fmt.Fprint(stdout, shrinkTo(*shrinkDir, "", res, opts, stderr))
			}
			return 1
		}
		fmt.Fprintf(stdout, "seed %d: ok, %d steps, %d action errors\n", s, res.Steps, res.Errors)
	}
	el := time.Since(start)
	fmt.Fprintf(stdout, "%d seed(s), %d steps in %v (%.0f steps/s)\n", n, total, el.Round(time.Millisecond),
		float64(total)/el.Seconds())
	return 0
}

const soakUsage = "usage: tierlog-sim -duration D [-seed S] [-steps K] [-menu M] [-weights name=N,...] [-progress P] [-shrink DIR]"

const searchUsage = "usage: tierlog-sim -mutation GUARD[,GUARD...]|all -seeds N [-seed S] [-steps K] [-menu M] [-weights name=N,...] [-shrink DIR] " +
	"(built with: go run -tags tierlog_mutation ./cmd/tierlog-sim ...)"

// searchOptions are a search's seeds (n from first) and schedules.
type searchOptions struct {
	first   uint64
	n       int
	steps   int
	weights map[string]int
	noSwarm bool
	// menuGiven: -menu or -weights named the menu. Otherwise a guard
	// searched alone runs on its row's menu (sim.SearchPlan).
	menuGiven bool
	// dir, if set, receives the shrunk script of a seed caught.
	dir string
}

// search is the search mode: for each guard named, the seeds from first
// on with that guard disabled until one breaks an invariant. Exit 0
// whether or not a guard is caught, 1 for a usage error or a failed run.
func search(name string, o searchOptions, extra bool, stdout, stderr io.Writer) int {
	if extra || o.n <= 0 || o.steps <= 0 {
		fmt.Fprintln(stderr, searchUsage)
		return 1
	}
	if !mutation.Enabled {
		fmt.Fprintf(stderr, "tierlog-sim: -mutation needs a binary built with -tags tierlog_mutation "+
			"(go run -tags tierlog_mutation ./cmd/tierlog-sim -mutation %s -seeds %d); without the tag "+
			"no guard can be disabled\n", name, o.n)
		return 1
	}
	// One search per element: every guard alone for all, else the
	// named guards together. A guard searched alone takes its backups
	// (mutation.Backups) with it.
	var searches []guardSearch
	if name == "all" {
		for _, g := range mutation.Guards() {
			searches = append(searches, searchOf(g))
		}
	} else {
		gs, err := mutation.ParseList(name)
		if err == nil && len(gs) == 0 {
			err = fmt.Errorf("no guard named")
		}
		if err != nil {
			fmt.Fprintf(stderr, "tierlog-sim: %v (guards: all, %s)\n", err, guardNames())
			return 1
		}
		if len(gs) == 1 {
			searches = []guardSearch{searchOf(gs[0])}
		} else {
			searches = []guardSearch{{label: joinGuards(gs), off: gs}}
		}
	}
	if o.first == 0 {
		o.first = 1
	}
	for _, gs := range searches {
		gs.weights = o.weights
		if plan, _, ok := sim.SearchPlan(gs.off[0]); ok && !o.menuGiven && len(gs.off) == 1+len(gs.backups) {
			gs.weights = plan
		}
		seed, at, shrunk, err := searchGuards(gs, o, stderr)
		switch {
		case err != nil:
			fmt.Fprintf(stderr, "tierlog-sim: %s: %v\n", gs.label, err)
			return 1
		case seed != 0:
			fmt.Fprintf(stdout, "%s: caught at seed %d after %d steps%s\n%s", gs.label, seed, at, gs.suffix(true), shrunk)
		default:
			fmt.Fprintf(stdout, "%s: not caught in %d seeds%s\n", gs.label, o.n, gs.suffix(false))
		}
	}
	return 0
}

// guardSearch is one search: the guards disabled together (off), and
// the backups among them, which alone must pass a seed for it to count.
type guardSearch struct {
	label   string
	off     []mutation.Guard
	backups []mutation.Guard
	weights map[string]int // the menu searched on
}

// searchOf is guard g's search: g with its backups.
func searchOf(g mutation.Guard) guardSearch {
	b := mutation.Backups(g)
	return guardSearch{label: g.String(), off: append([]mutation.Guard{g}, b...), backups: b}
}

// suffix is the end of the result line of a search with backups.
func (gs guardSearch) suffix(caught bool) string {
	switch {
	case len(gs.backups) == 0:
		return ""
	case caught:
		return fmt.Sprintf(" (backups disabled too: %s; they alone pass the seed)", joinGuards(gs.backups))
	}
	return fmt.Sprintf(" (backups disabled too: %s)", joinGuards(gs.backups))
}

// searchGuards runs o's seeds with gs.off disabled and returns the first
// that breaks an invariant and its step count (seed 0: none). A seed
// counts only if it passes with every guard on (else it meets another
// bug) and with the backups alone disabled (else the backups' own bug
// breaks it, not the guard's). The guards are on again when it returns
// (those TIERLOG_MUTATION names stay off).
func searchGuards(gs guardSearch, o searchOptions, stderr io.Writer) (seed uint64, at int, shrunk string, err error) {
	opts := sim.RunOptions{Steps: o.steps, Weights: gs.weights, NoSwarm: o.noSwarm}
	for s := o.first; s < o.first+uint64(o.n); s++ {
		res, err := runDisabled(s, opts, gs.off)
		if err != nil {
			return 0, 0, "", err
		}
		if !res.Failed() {
			continue
		}
		on, err := runDisabled(s, opts, nil)
		if err != nil {
			return 0, 0, "", err
		}
		if on.Failed() {
			fmt.Fprintf(stderr, "tierlog-sim: seed %d breaks with every guard on too (%v): skipped\n", s, on.Violation)
			continue
		}
		if len(gs.backups) > 0 {
			b, err := runDisabled(s, opts, gs.backups)
			if err != nil {
				return 0, 0, "", err
			}
			if b.Failed() {
				fmt.Fprintf(stderr, "tierlog-sim: seed %d breaks with %s alone disabled too (%v): skipped\n",
					s, joinGuards(gs.backups), b.Violation)
				continue
			}
		}
		if o.dir != "" {
			// Disabled again: the shrink's replays need the bug.
			sc, err := disable(gs.off)
			if err != nil {
				return 0, 0, "", err
			}
			shrunk = shrinkTo(o.dir, joinGuards(gs.off), res, opts, stderr)
			sc.close()
		}
		return s, res.Steps, shrunk, nil
	}
	return 0, 0, "", nil
}

// runDisabled runs seed s with gs disabled for the run alone.
func runDisabled(s uint64, opts sim.RunOptions, gs []mutation.Guard) (*sim.Result, error) {
	sc, err := disable(gs)
	if err != nil {
		return nil, err
	}
	defer sc.close()
	res, err := sim.Run(s, opts)
	if err != nil {
		return nil, fmt.Errorf("seed %d: %w", s, err)
	}
	return res, nil
}

// disable disables gs until the scope returned is closed.
func disable(gs []mutation.Guard) (*guardScope, error) {
	sc := &guardScope{}
	for _, g := range gs {
		mutation.Disable(sc, g)
	}
	if sc.skipped != "" {
		sc.close()
		return nil, fmt.Errorf("cannot disable: %s", sc.skipped)
	}
	return sc, nil
}

// parseWeights reads -weights: name=N pairs separated by commas (sim.Run
// checks the names).
func parseWeights(s string) (map[string]int, error) {
	if s == "" {
		return nil, nil
	}
	w := map[string]int{}
	for _, kv := range strings.Split(s, ",") {
		name, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		n, err := strconv.Atoi(v)
		if !ok || name == "" || err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not name=N", kv)
		}
		w[name] = n
	}
	return w, nil
}

// guardScope is the mutation.TB of one search: the guard is disabled
// until close runs the cleanups mutation.Disable registered.
type guardScope struct {
	cleanups []func()
	skipped  string
}

func (s *guardScope) Helper()          {}
func (s *guardScope) Cleanup(f func()) { s.cleanups = append(s.cleanups, f) }
func (s *guardScope) Skip(args ...any) { s.skipped = fmt.Sprint(args...) }

func (s *guardScope) close() {
	for i := len(s.cleanups) - 1; i >= 0; i-- {
		s.cleanups[i]()
	}
	s.cleanups = nil
}

func guardNames() string { return strings.ReplaceAll(joinGuards(mutation.Guards()), ",", ", ") }

// joinGuards spells gs as -mutation and TIERLOG_MUTATION take them.
func joinGuards(gs []mutation.Guard) string {
	names := make([]string, len(gs))
	for i, g := range gs {
		names[i] = g.String()
	}
	return strings.Join(names, ",")
}

// rerunCommand reruns one seed of a run: TestRandom for the default
// menu (it takes -steps and -no-swarm), else this command with the
// run's -menu and -weights, which TestRandom does not take.
func rerunCommand(seed uint64, menu, weights string, steps int, swarm bool) string {
	var flags string
	if menu == "" && weights == "" {
		if steps != 500 {
			flags += fmt.Sprintf(" -steps %d", steps)
		}
		if !swarm {
			flags += " -no-swarm"
		}
		return fmt.Sprintf("go test ./internal/harness/sim -run TestRandom -seed %d%s", seed, flags)
	}
	if menu != "" {
		flags += " -menu " + menu
	}
	if weights != "" {
		flags += " -weights " + weights
	}
	if steps != 500 {
		flags += fmt.Sprintf(" -steps %d", steps)
	}
	if !swarm {
		flags += " -swarm=false"
	}
	return fmt.Sprintf("go run ./cmd/tierlog-sim -seed %d -seeds 1%s", seed, flags)
}
