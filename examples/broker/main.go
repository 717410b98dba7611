package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/logmanager"
)

func main() {
	set := flag.NewFlagSet("broker", flag.ExitOnError)
	var opts Options
	var partitions int
	set.StringVar(&opts.Addr, "addr", "127.0.0.1:9092", "listen address")
	set.StringVar(&opts.Dir, "dir", "", "data directory (required): the log directory, the producer id block, the remote tier's metadata (and objects, without S3)")
	set.IntVar(&partitions, "partitions", 1, "partition count of auto-created topics")
	set.Int64Var(&opts.FlushMessages, "flush-messages", 0, "fsync a log after this many records (1: before every acknowledgement; 0: never by count, as Kafka)")
	set.BoolVar(&opts.BaselinePlainFile, "baseline-plain-file", false, "benchmark baseline: Produce appends to plain files, not to the logs (see baseline.go)")
	set.Int64Var(&opts.SegmentBytes, "segment-bytes", log.DefaultSegmentBytes, "roll a log's active segment at this size (Kafka: segment.bytes)")
	set.DurationVar(&opts.RetentionCheckInterval, "retention-check-interval", logmanager.DefaultRetentionCheckInterval, "how often local retention runs (Kafka: log.retention.check.interval.ms)")
	remoteOn := set.Bool("remote", true, "tier rolled segments to remote storage (DIR/remote, or S3 with -s3-bucket) and serve fetches below the local log start from it")
	set.StringVar(&opts.S3.Endpoint, "s3-endpoint", "", "S3 endpoint host:port for the remote tier (credentials: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)")
	set.StringVar(&opts.S3.Bucket, "s3-bucket", "", "S3 bucket for the remote tier (default: the directory DIR/remote)")
	set.StringVar(&opts.S3.Region, "s3-region", "", "S3 region (default $AWS_REGION, then us-east-1)")
	set.BoolVar(&opts.S3.Insecure, "s3-insecure", false, "talk to S3 over plain HTTP")
	set.DurationVar(&opts.RemoteTaskInterval, "remote-task-interval", DefaultRemoteTaskInterval, "delay between two copy (and remote retention) runs of a partition (Kafka: remote.log.manager.task.interval.ms)")
	localMs := set.Int64("local-retention-ms", log.LocalRetentionDefault, "keep copied segments locally this long (-2: retention.ms, 7 days; Kafka: local.retention.ms)")
	localBytes := set.Int64("local-retention-bytes", log.LocalRetentionDefault, "keep at most this many bytes locally once copied (-2: retention.bytes, no limit; Kafka: local.retention.bytes)")
	set.Usage = func() {
		fmt.Fprintln(set.Output(), "usage: broker -dir DIR [-addr host:port] [-partitions N] [-flush-messages N] [-segment-bytes N]\n"+
			"    [-remote=false | -s3-endpoint host:port -s3-bucket B] [-local-retention-ms MS] [-local-retention-bytes N]")
		set.PrintDefaults()
	}
	_ = set.Parse(os.Args[1:])
	opts.Partitions = int32(partitions)
	opts.RemoteDisabled = !*remoteOn
	opts.LocalRetentionMs, opts.LocalRetentionBytes = kafkaRetention(*localMs), kafkaRetention(*localBytes)
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

// kafkaRetention turns a retention flag in Kafka's convention (0 keeps
// nothing) into the log's (0 is the default, log.RetentionNone keeps
// nothing).
func kafkaRetention(v int64) int64 {
	if v == 0 {
		return log.RetentionNone
	}
	return v
}
