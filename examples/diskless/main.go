// Command diskless switches a classic partition to diskless and runs its
// records through every tier, on the embedded defaults (a temporary
// directory, a directory object store, Pebble for the remote metadata and
// for the WAL's control plane; no server):
//
//	offset            0          80       99 100 = S            160      180
//	A (epochs 0, 2)   [ epoch 0  | epoch 2  |m]   classic, sealed at 100 (m: the ABORT marker)
//	B (led epoch 1)   [ epoch 0  | epoch 1    ]   never replicated, offline
//	WAL                                       [ 100..159 ]      [160..179]
//	remote storage    [ [0, 99] from A        ][ [100, 159] from B ]
//
// The steps it prints:
//
//  1. Broker A leads epochs 0 and 2 and writes [0, 99) classically, with
//     a transaction left open at 98; broker B led epoch 1 in between and
//     wrote [80, 100) that nobody replicated.
//  2. The switch on A, driven by A's replica driver (replica.Replica) from
//     the deltas the controller commits: classic appends are refused, the
//     open transaction is aborted (the marker at 99), the active segment
//     rolled, the seal S = 100 proposed once C caught up and committed,
//     the WAL row created with W = 0 and HW = S, the pruner armed at
//     S - 1; A's remote-log manager copies [0, 99], and A asks for phase 2
//     with R = 2 (E_d = 3).
//  3. Records are produced through the WAL from 100, A consolidates them
//     into its log in E_d (consolidate.Fetcher), and the first prune at
//     S - 1 = 99 moves W to the seal.
//  4. The first example of github.com/aiven/inkless/pull/857: B comes back
//     as leader in epoch 5; its driver runs the replica check (its epoch
//     at 99 is 1, not R = 2) and recreates it; its empty log's
//     consolidation fetch at 0 is redirected, the phase-2 rebuild starts
//     the log at the seal with the epochs below it, and consolidation
//     resumes there; only then does the driver arm B's pruner. B tiers
//     [100, 159] and prunes: W = 160.
//  5. Every record from 0 to the end is read back through B: remote
//     storage, then the WAL.
//  6. The seal-lowering prune of github.com/aiven/inkless/pull/855 on
//     orders-1: the operator lowers the seal from 1000 to 600 because
//     remote storage holds only [0, 599]; the prune at 599 leaves W = 600,
//     not 1000.
//
// Run it with: go run ./examples/diskless
// With S3: go run ./examples/diskless -s3-endpoint https://host:port -s3-bucket b
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
	set := flag.NewFlagSet("diskless", flag.ExitOnError)
	var cfg config
	set.StringVar(&cfg.dir, "dir", "", "directory for the logs, the object store and the control plane (default: a new temporary directory, removed at exit)")
	cfg.store.Register(set)
	_ = set.Parse(os.Args[1:])
	if _, err := run(context.Background(), os.Stdout, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "diskless:", err)
		os.Exit(1)
	}
}

type config struct {
	dir   string
	store demo.StoreFlags
}

func run(ctx context.Context, out io.Writer, cfg config) (outcome, error) {
	c, what, closeAll, err := demo.Setup(ctx, cfg.dir, cfg.store, out)
	if err != nil {
		return outcome{}, err
	}
	defer closeAll()
	return story(ctx, c, what)
}
