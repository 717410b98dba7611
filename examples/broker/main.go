package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	set := flag.NewFlagSet("broker", flag.ExitOnError)
	var opts Options
	var partitions int
	set.StringVar(&opts.Addr, "addr", "127.0.0.1:9092", "listen address")
	set.StringVar(&opts.Dir, "dir", "", "data directory (required): the log directory and the producer id block")
	set.IntVar(&partitions, "partitions", 1, "partition count of auto-created topics")
	set.Int64Var(&opts.FlushMessages, "flush-messages", 0, "fsync a log after this many records (1: before every acknowledgement; 0: never by count, as Kafka)")
	set.BoolVar(&opts.BaselinePlainFile, "baseline-plain-file", false, "benchmark baseline: Produce appends to plain files, not to the logs (see baseline.go)")
	_ = set.Parse(os.Args[1:])
	opts.Partitions = int32(partitions)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	if err := run(opts, stop); err != nil {
		fmt.Fprintln(os.Stderr, "broker:", err)
		os.Exit(1)
	}
}

// run serves until a signal arrives on stop (SIGINT or SIGTERM), then
// shuts down cleanly.
func run(opts Options, stop <-chan os.Signal) error {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	s, err := Start(opts)
	if err != nil {
		return err
	}
	got := <-stop
	opts.Logger.Info("shutting down", "signal", got.String())
	return s.Close()
}
