package pgcp_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"

	"github.com/tierlog/tierlog/wal/pgcp"
)

// Environment of a broker child process (the test binary re-executed).
const (
	envBroker     = "PGCP_TEST_BROKER" // the broker id; set only in children
	envURL        = "PGCP_TEST_URL"
	envSchema     = "PGCP_TEST_SCHEMA"
	envStore      = "PGCP_TEST_STORE"
	envRounds     = "PGCP_TEST_ROUNDS"
	envKillCommit = "PGCP_TEST_KILL_AT_COMMIT" // SIGKILL itself before the COMMIT of its n-th commit
)

// helperMain runs a child process's role when the test binary is
// re-executed as one; it reports whether it did.
func helperMain() bool {
	id := os.Getenv(envBroker)
	if id == "" {
		return false
	}
	code := 0
	if err := childBroker(id); err != nil {
		fmt.Fprintln(os.Stderr, "broker:", err)
		code = 1
	}
	os.Exit(code)
	return true
}

// childBroker opens its store and control plane, says "ready", waits for
// a line on stdin, produces, and prints one "ack" line per acknowledged
// record.
func childBroker(idStr string) error {
	id, err := strconv.Atoi(idStr)
	if err != nil {
		return err
	}
	rounds, err := strconv.Atoi(os.Getenv(envRounds))
	if err != nil {
		return err
	}
	if n, _ := strconv.Atoi(os.Getenv(envKillCommit)); n > 0 {
		var commits atomic.Int64
		pgcp.SetTestHookBeforeCommit(func() {
			if commits.Add(1) == int64(n) {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {} // the signal is on its way
			}
		})
	}
	b, err := openBroker(context.Background(), brokerConfig{id: int32(id), url: os.Getenv(envURL),
		schema: os.Getenv(envSchema), store: os.Getenv(envStore), rounds: rounds})
	if err != nil {
		return err
	}
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintln(out, "ready")
	out.Flush()
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return err
	}
	err = b.run(context.Background(), func(a ack) {
		fmt.Fprintf(out, "ack %s %d %d\n", a.payload, a.partition, a.offset)
		out.Flush()
	})
	if cerr := b.close(); err == nil {
		err = cerr
	}
	return err
}
