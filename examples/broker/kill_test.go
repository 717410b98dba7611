package main

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The environment of a broker child process (TestKillDuringIdempotentProduce
// re-executes the test binary as the broker, to kill it with SIGKILL).
const (
	childEnv     = "TIERLOG_BROKER_CHILD"
	childAddrEnv = "TIERLOG_BROKER_CHILD_ADDR"
	childDirEnv  = "TIERLOG_BROKER_CHILD_DIR"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		runChild()
		return
	}
	os.Exit(m.Run())
}

// runChild serves as a broker with -partitions 3 on the address and
// directory from the environment, prints its address on stdout, and
// serves until killed (or a SIGTERM, which closes it cleanly).
//
// After a SIGUSR1 it answers no more Produce requests: the first one
// appended after it blocks before its answer and "held" is printed, so
// the test can kill the broker with batches written but unacknowledged.
func runChild() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	hold := make(chan os.Signal, 1)
	signal.Notify(hold, syscall.SIGUSR1)
	var holding atomic.Bool
	go func() { <-hold; holding.Store(true) }()
	var printHeld sync.Once
	s, err := Start(Options{
		Addr:       os.Getenv(childAddrEnv),
		Dir:        os.Getenv(childDirEnv),
		Partitions: testPartitions,
		Logger:     slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		beforeAnswer: func(key int16) {
			if key == kmsg.Produce.Int16() && holding.Load() {
				printHeld.Do(func() { fmt.Println("held") })
				select {} // until killed
			}
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "broker child:", err)
		os.Exit(1)
	}
	fmt.Println(s.Addr().String())
	<-stop
	_ = s.Close()
}

// child is a broker process.
type child struct {
	cmd *exec.Cmd
	out *bufio.Reader // its stdout
}

// startChild starts a broker process on addr and dir and waits for it to
// listen.
func startChild(ctx context.Context, t *testing.T, addr, dir string) child {
	t.Helper()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1", childAddrEnv+"="+addr, childDirEnv+"="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	c := child{cmd: cmd, out: bufio.NewReader(out)}
	line, err := c.out.ReadString('\n')
	require.NoError(t, err, "the broker child did not start")
	require.Equal(t, addr, strings.TrimSpace(line))
	return c
}

// kill kills the broker with SIGKILL; with hold, it first makes the
// broker hold back a Produce answer (runChild) and waits until one is
// held, so that batches are written but unacknowledged at the kill.
func (c child) kill(t *testing.T, hold bool) {
	t.Helper()
	if hold {
		require.NoError(t, c.cmd.Process.Signal(syscall.SIGUSR1))
		line, err := c.out.ReadString('\n') // ends when the test's context kills the child
		require.NoError(t, err, "no Produce answer held")
		require.Equal(t, "held", strings.TrimSpace(line))
	}
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGKILL))
	_ = c.cmd.Wait()
}

// freeLoopbackAddr returns a loopback address with a port no one listens
// on now: the broker is restarted on the same port so that the producer's
// client finds it again.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// TestKillDuringIdempotentProduce: kgo produces (idempotent, acks=all, 3
// partitions) to a broker process, which is killed with SIGKILL while
// batches are in flight, one Produce request of them written but not
// answered (runChild holds its answer back), and restarted on the same
// directory; the same kgo client retries its unanswered batches with the
// same producer id and sequences, and goes on producing. Every acknowledged record is read
// back once, byte-identical, in order: without -flush-messages the
// records are in the page cache, which survives a process kill, and the
// log's producer state, rebuilt from the log after the unclean
// shutdown, answers the retries of batches it already holds as
// duplicates.
func TestKillDuringIdempotentProduce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	dir, addr := t.TempDir(), freeLoopbackAddr(t)
	child := startChild(ctx, t, addr, dir)

	prod := newClientAt(t, addr, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }))
	createTopic(ctx, t, prod, testTopic)

	var (
		mu       sync.Mutex
		acked    = map[key]*kgo.Record{}
		failures []error
	)
	ackedCount := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	stop := make(chan struct{})
	produced := make(chan int, 1)
	go func() {
		i := 0
		defer func() { produced <- i }()
		for ; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			prod.Produce(ctx, testRecord(testTopic, i), func(r *kgo.Record, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failures = append(failures, err)
					return
				}
				k := key{r.Partition, r.Offset}
				if prev, ok := acked[k]; ok {
					failures = append(failures, fmt.Errorf("%v acknowledged twice: %s and %s", k, prev.Value, r.Value))
				}
				acked[k] = r
			})
		}
	}()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			require.NoError(t, ctx.Err(), "waiting for %s", what)
			time.Sleep(5 * time.Millisecond)
		}
	}

	waitFor("records acknowledged before the kill", func() bool { return ackedCount() >= 5_000 })
	child.kill(t, true)
	beforeKill := ackedCount()
	time.Sleep(100 * time.Millisecond) // the producer's requests now fail
	startChild(ctx, t, addr, dir)
	waitFor("records acknowledged after the restart", func() bool { return ackedCount() >= beforeKill+5_000 })
	close(stop)
	n := <-produced
	require.NoError(t, prod.Flush(ctx))

	mu.Lock()
	require.Empty(t, failures)
	require.Len(t, acked, n, "every record produced is acknowledged, each at its own offset")
	mu.Unlock()
	t.Logf("%d records acknowledged, %d of them before the kill", n, beforeKill)
	consumeAllAt(ctx, t, addr, testTopic, acked)
}

// TestKillAfterAcknowledgedProduce: every record is acknowledged, the
// broker process is killed with SIGKILL and restarted, and a consumer
// reads every record back with no produce in between: the high
// watermark checkpoint written before the kill is older than the
// records, and Start commits each log's end (commitLogEnds).
func TestKillAfterAcknowledgedProduce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dir, addr := t.TempDir(), freeLoopbackAddr(t)
	child := startChild(ctx, t, addr, dir)
	prod := newClientAt(t, addr, kgo.RequiredAcks(kgo.AllISRAcks()))
	createTopic(ctx, t, prod, testTopic)
	acked := produceAll(ctx, t, prod, testTopic, 3_000)
	child.kill(t, false)
	startChild(ctx, t, addr, dir)
	// Bounded: a consumer waits for records beyond the high watermark
	// until its context ends.
	cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
	defer ccancel()
	consumeAllAt(cctx, t, addr, testTopic, acked)
}
