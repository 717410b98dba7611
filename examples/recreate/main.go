// Command recreate runs the first example of Inkless pull request 857
// (https://github.com/aiven/inkless/pull/857) on the embedded defaults
// (a temporary directory, a directory object store, Pebble metadata; no
// server): a phase-2 replica whose log holds records the partition never
// committed is recreated and rebuilt from remote storage, never truncated
// in place.
//
//	offset                    0           80          100 = seal
//	A, C, and remote storage  [ epoch 0   | epoch 2   ]  diskless records from 100 on
//	B (offline)               [ epoch 0   | epoch 1   ]  B never replicated [80, 100)
//
// Broker B leads epoch 1 and appends [80, 100), which no follower fetches
// before B goes offline. A leads epoch 2 and appends its own [80, 100),
// seals the partition at 100, uploads the classic prefix and records
// lastClassicLeaderEpoch = 2. B comes back in phase 2 and is made leader in
// epoch 5: its log ends at the seal, so it looks complete, but its epoch at
// 99 is 1. B's replica driver (replica.Replica) applies the delta: the
// replica check fails it; B stops its fetchers, cancels its
// remote tasks (keeping the remote metadata), deletes its log, starts an
// empty one, rebuilds from the remote segment holding 99 in epoch 2, starts
// at 100 with epochs 0 and 2, and serves A's records.
//
// Run it with: go run ./examples/recreate
// With S3: go run ./examples/recreate -s3-endpoint https://host:port -s3-bucket b
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/tierlog/tierlog/internal/harness/demo"
)

func main() {
	set := flag.NewFlagSet("recreate", flag.ExitOnError)
	var cfg config
	set.StringVar(&cfg.dir, "dir", "", "directory for the logs and the object store (default: a new temporary directory, removed at exit)")
	cfg.store.Register(set)
	_ = set.Parse(os.Args[1:])
	if _, err := run(context.Background(), os.Stdout, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "recreate:", err)
		os.Exit(1)
	}
}

type config struct {
	dir   string
	store demo.StoreFlags
}

// outcome is the state the run verified, for the test.
type outcome struct {
	beforeEpochs, afterEpochs string
	failures                  []string
	rebuiltAt                 int64
	logStart, localLogStart   int64
	value80, value99          string
}

func run(ctx context.Context, out io.Writer, cfg config) (outcome, error) {
	c, what, closeAll, err := demo.Setup(ctx, cfg.dir, cfg.store, out)
	if err != nil {
		return outcome{}, err
	}
	defer closeAll()
	return recreate(ctx, c, what)
}
