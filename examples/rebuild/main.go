// Command rebuild shows a follower coming back after losing its disk, on
// the embedded defaults (a temporary directory, a directory object store,
// Pebble metadata; no server):
//
//  1. a leader writes records in three leader epochs, rolling segments,
//     and a follower replicates them;
//  2. the leader's remote-log manager copies every rolled segment to the
//     object store, and local retention deletes them from the leader's
//     disk: its local log now starts above its log start;
//  3. the follower loses its log and starts again empty;
//  4. its first fetch, at offset 0, is answered
//     OFFSET_MOVED_TO_TIERED_STORAGE; the tier state machine rebuilds the
//     follower's state from the remote segment before the leader's local
//     log start (leader epochs, producer snapshot, log start) and the
//     follower fetches the rest;
//  5. every record is read back, from remote storage below the local log
//     start and locally above it, and checked.
//
// Run it with: go run ./examples/rebuild
// With S3: go run ./examples/rebuild -s3-endpoint https://host:port -s3-bucket b
// (credentials from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY).
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
	set := flag.NewFlagSet("rebuild", flag.ExitOnError)
	var cfg config
	set.StringVar(&cfg.dir, "dir", "", "directory for the logs and the object store (default: a new temporary directory, removed at exit)")
	set.IntVar(&cfg.perEpoch, "records-per-epoch", 200, "records the leader writes in each of its three epochs")
	cfg.store.Register(set)
	_ = set.Parse(os.Args[1:])
	if _, err := run(context.Background(), os.Stdout, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "rebuild:", err)
		os.Exit(1)
	}
}

type config struct {
	dir      string
	perEpoch int
	store    demo.StoreFlags
}

// outcome is what a run verified, for the test.
type outcome struct {
	records, fromRemote int
	rebuiltAt           int64
	epochs              string
}

func run(ctx context.Context, out io.Writer, cfg config) (outcome, error) {
	c, what, closeAll, err := demo.Setup(ctx, cfg.dir, cfg.store, out)
	if err != nil {
		return outcome{}, err
	}
	defer closeAll()
	return rebuild(ctx, c, what, cfg.perEpoch)
}
