// Command tierlog-sim runs random schedules of the deterministic cluster
// simulation (internal/sim, DESIGN.md section 12): three brokers, the
// controller, remote storage and the WAL in one process, with the
// invariants checked after every step.
//
// Usage:
//
//	tierlog-sim [-seed S] [-seeds N] [-steps K] [-trace]
//
// -seed S runs seed S alone; -seeds N runs seeds 1 to N (with -seed, N
// seeds from S on). -steps is the length of each schedule (default 500).
// -trace prints every step's trace line as it runs; without it only a
// failing seed's last steps are printed. The exit status is 1 when some
// seed breaks an invariant (the first failing seed ends the run), 2 for
// a usage error.
//
// A run's decisions depend only on its seed. The names of WAL objects
// and remote segments come from crypto/rand, which only a test can make
// deterministic, so they (and with them the bytes of a trace line that
// prints one) differ between runs of this command; the test rerun that
// the output names (go test ./internal/sim -run TestRandom -seed S)
// fixes them too.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/tierlog/tierlog/internal/sim"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tierlog-sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	seed := fs.Uint64("seed", 0, "run this seed (with -seeds: the first of N)")
	seeds := fs.Int("seeds", 0, "run N seeds (from 1, or from -seed)")
	steps := fs.Int("steps", 500, "steps per schedule")
	trace := fs.Bool("trace", false, "print every step as it runs")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 || *steps <= 0 || *seeds < 0 || (*seed == 0 && *seeds == 0) {
		fmt.Fprintln(stderr, "usage: tierlog-sim [-seed S] [-seeds N] [-steps K] [-trace]")
		return 2
	}
	first, n := *seed, uint64(*seeds)
	if first == 0 {
		first = 1
	}
	if n == 0 {
		n = 1
	}
	opts := sim.RunOptions{Steps: *steps}
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
			fmt.Fprintf(stdout, "seed %d FAILED: %v\nrerun: go test ./internal/sim -run TestRandom -seed %d\n",
				s, res.Violation, s)
			return 1
		}
		fmt.Fprintf(stdout, "seed %d: ok, %d steps, %d action errors\n", s, res.Steps, res.Errors)
	}
	el := time.Since(start)
	fmt.Fprintf(stdout, "%d seed(s), %d steps in %v (%.0f steps/s)\n", n, total, el.Round(time.Millisecond),
		float64(total)/el.Seconds())
	return 0
}
