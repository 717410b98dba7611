package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The broker rows: the example broker (examples/broker, a process of its
// own) produced to by franz-go's kgo, beside the same broker with
// -baseline-plain-file, where Produce appends each partition's batches to
// a plain file and does nothing else. The broker's framing, kmsg decoding
// and connection loop are in both, so the ratio is what the library's
// append (validation, offsets, indexes, producer state, the high
// watermark) costs a broker.
const (
	secBroker        = "Broker produce (examples/broker, kgo, idempotent, acks=all)"
	brokerTierlog    = "broker on tierlog"
	brokerPlain      = "same broker, plain file"
	brokerPartitions = 8
	brokerRecord     = 1 << 10 // bytes per record value
)

// brokerRun holds the built broker binary.
type brokerRun struct {
	bin   string
	total int64
	err   error // the build failed: every row notes it
}

// newBrokerRun builds examples/broker from the tierlog tree the replace
// directive points at into dir.
func newBrokerRun(dir string, total int64) *brokerRun {
	br := &brokerRun{bin: filepath.Join(dir, "broker"), total: total}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		br.err = err
		return br
	}
	root, err := tierlogRoot()
	if err != nil {
		br.err = err
		return br
	}
	cmd := exec.Command("go", "build", "-o", br.bin, "./examples/broker")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		br.err = fmt.Errorf("go build ./examples/broker: %v: %s", err, out)
	}
	return br
}

// tierlogRoot is the directory the replace directive points at.
func tierlogRoot() (string, error) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "", errors.New("no build info")
	}
	for _, d := range bi.Deps {
		if d.Path == "github.com/tierlog/tierlog" && d.Replace != nil {
			return filepath.Abs(d.Replace.Path)
		}
	}
	return "", errors.New("tierlog is not replaced by a directory")
}

// runRep runs both rows once, in an order that alternates by repetition.
func (br *brokerRun) runRep(rep int, dir string, res *results, stderr io.Writer, elapsed func() float64) {
	rows := []string{brokerTierlog, brokerPlain}
	if rep%2 == 1 {
		rows[0], rows[1] = rows[1], rows[0]
	}
	for i, row := range rows {
		if br.err != nil {
			res.note(secBroker, row, "error: "+br.err.Error())
			continue
		}
		fmt.Fprintf(stderr, "[%6.1fs] rep %d broker produce: %s\n", elapsed(), rep+1, row)
		if err := br.runOne(filepath.Join(dir, fmt.Sprintf("broker%d", i)), row == brokerPlain, res, row); err != nil {
			res.note(secBroker, row, "error: "+err.Error())
		}
	}
}

// runOne starts a broker, produces br.total bytes of 1 KiB records to
// brokerPartitions partitions through one kgo client, and stops it.
// Figures: MB/s over the acknowledged bytes, each record's time from
// Produce to its acknowledgement (p50, p99), and the broker process's CPU
// per GB (its rusage at exit).
func (br *brokerRun) runOne(dir string, plain bool, res *results, row string) (err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	args := []string{"-addr", addr, "-dir", dir, "-partitions", strconv.Itoa(brokerPartitions)}
	if plain {
		args = append(args, "-baseline-plain-file")
	}
	cmd := exec.Command(br.bin, args...)
	var logs strings.Builder
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		return err
	}
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		_ = cmd.Process.Signal(syscall.SIGTERM)
		return cmd.Wait()
	}
	defer func() {
		if serr := stop(); err == nil && serr != nil {
			err = fmt.Errorf("broker exit: %v: %s", serr, logs.String())
		}
	}()
	if err := waitListening(addr, 10*time.Second); err != nil {
		return err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("bench"), kgo.AllowAutoTopicCreation(),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerBatchMaxBytes(1<<20))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// Create the topic and connect before the clock starts.
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("warm-up")}).FirstErr(); err != nil {
		return fmt.Errorf("warm-up produce: %w", err)
	}

	n := int(br.total / brokerRecord)
	value := make([]byte, brokerRecord)
	for i := range value {
		value[i] = byte(i * 7)
	}
	lat := make([]time.Duration, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	wg.Add(n)
	start := time.Now()
	for i := range n {
		t0 := time.Now()
		cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, perr error) {
			lat[i] = time.Since(t0)
			if perr != nil {
				mu.Lock()
				firstErr = firstOf(firstErr, perr)
				mu.Unlock()
			}
			wg.Done()
		})
	}
	wg.Wait()
	wall := time.Since(start)
	if firstErr != nil {
		return firstErr
	}
	cl.Close()
	if err := stop(); err != nil {
		return fmt.Errorf("broker exit: %v: %s", err, logs.String())
	}
	slices.Sort(lat)
	bytes := float64(n) * brokerRecord
	res.addRow(secBroker, row, "MB/s", bytes/1e6/wall.Seconds())
	res.addRow(secBroker, row, "ack p50 ms", float64(percentile(lat, 0.5))/1e6)
	res.addRow(secBroker, row, "ack p99 ms", float64(percentile(lat, 0.99))/1e6)
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		res.addRow(secBroker, row, "broker CPU s/GB", cpu.Seconds()/(bytes/1e9))
	}
	return nil
}

// firstOf keeps the first non-nil error.
func firstOf(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// freeAddr returns a 127.0.0.1 address no one listens on now.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// waitListening waits until addr accepts a connection.
func waitListening(addr string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			return c.Close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("broker not listening on %s after %s: %w", addr, limit, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var brokerMetrics = []string{"MB/s", "ack p50 ms", "ack p99 ms", "broker CPU s/GB"}

// printBroker prints the broker rows, each figure with its ratio to the
// plain-file row's median.
func printBroker(w io.Writer, res *results, total int64) {
	fmt.Fprintf(w, "### %s\n\n", secBroker)
	fmt.Fprintf(w, "%s of %d-byte records per repetition through one kgo client (round-robin over %d partitions, "+
		"batches up to 1 MiB, idempotent, acks=all) to examples/broker as its own process (`go build`, default "+
		"options: no fsync by count), beside the same broker with `-baseline-plain-file` (Produce appends each "+
		"partition's batches to a plain file, nothing else). Ack latency: from `Produce` to its promise, per record. "+
		"Each cell: median (ratio to the plain-file row).\n\n", mib(total), brokerRecord, brokerPartitions)
	fmt.Fprintf(w, "| row | %s | notes |\n|%s\n", strings.Join(brokerMetrics, " | "), strings.Repeat("---|", len(brokerMetrics)+2))
	for _, row := range []string{brokerTierlog, brokerPlain} {
		cells := []string{row}
		for _, m := range brokerMetrics {
			v, ok := res.median(secBroker, row, m)
			if !ok {
				cells = append(cells, "–")
				continue
			}
			ref, okRef := res.median(secBroker, brokerPlain, m)
			cells = append(cells, fmt.Sprintf("%s (%s)", formatNum(v), ratio(v, ref, okRef)))
		}
		cells = append(cells, strings.Join(res.notes[rowKey{secBroker, row}], "; "))
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
	fmt.Fprintln(w)
}
