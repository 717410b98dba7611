// Command compare runs tierlog's log, a raw-file baseline and peer
// libraries through the same workloads in one process, interleaved, and
// prints a markdown table of medians with each figure's ratio to the raw
// file and to the best peer. See ../../README.md.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/tierlog/tierlog/internal/harness/s3test"
	"go.etcd.io/etcd/server/v3/storage/wal"
)

const (
	tierlogName = "tierlog"
	rawName     = "raw file"
	// rawPointsName is the raw file with tierlog's background fsyncs
	// (impl_rawpoints.go), a baseline rather than a peer.
	rawPointsName = "raw file, background fdatasync"
)

// entry describes one implementation: how to make it for the main
// workloads and for the many-partitions workload, where some peers need
// smaller preallocated segments (their defaults would reserve 64 MB of
// disk per partition).
type entry struct {
	make           func() impl
	makePartition  func() impl
	prepPartitions func() (restore func())
}

func entries() []entry {
	return []entry{
		{make: func() impl { return &tierlogImpl{} }},
		{make: func() impl { return &rawImpl{} }},
		{make: func() impl { return &rawPointsImpl{} }},
		{make: func() impl { return &tidwallImpl{} }},
		{
			make: func() impl { return &etcdImpl{} },
			prepPartitions: func() func() {
				// etcd's segment size is a package variable: 1 MiB
				// instead of 64 MB preallocated per partition.
				old := wal.SegmentSizeBytes
				wal.SegmentSizeBytes = 1 << 20
				return func() { wal.SegmentSizeBytes = old }
			},
		},
		{
			make:          func() impl { return &raftwalImpl{} },
			makePartition: func() impl { return &raftwalImpl{segmentBytes: 1 << 20} },
		},
		{make: func() impl { return &pebbleImpl{} }},
		{make: func() impl { return &natsImpl{} }},
	}
}

func main() {
	if arg := os.Getenv(lifeChildEnv); arg != "" {
		// The kill phase of the broker's-life row: this process ends by
		// SIGKILL; returning is a failure.
		err := runLifeChild(arg)
		fmt.Fprintln(os.Stderr, "compare: broker-life child:", err)
		os.Exit(2)
	}
	if err := run(os.Stdout, os.Stderr, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

func run(stdout, stderr io.Writer, args []string) error {
	fl := flag.NewFlagSet("compare", flag.ContinueOnError)
	cfg := config{}
	var appendMiB, syncMiB int64
	fl.IntVar(&cfg.reps, "reps", 3, "repetitions of every workload (medians are printed)")
	fl.Int64Var(&appendMiB, "append-mib", 256, "MiB per no-fsync append run; also the size of the log read and reopened (1024 for a 1 GiB open test)")
	fl.Int64Var(&syncMiB, "sync-mib", 16, "MiB per fsync-per-batch append run")
	fl.IntVar(&cfg.pointReads, "point-reads", 100_000, "random point reads per repetition")
	fl.DurationVar(&cfg.pointReadsMax, "point-reads-max", 4*time.Second, "time limit per implementation and repetition for the point reads")
	fl.IntVar(&cfg.partitions, "partitions", 10_000, "open partitions for the memory and descriptor workload (0 skips it)")
	fl.DurationVar(&cfg.partitionsMax, "partitions-max", 40*time.Second, "time limit per implementation for opening the partitions")
	var heapMiB int64
	fl.Int64Var(&heapMiB, "partitions-heap-mib", 2048, "heap growth per implementation at which the partitions workload stops")
	fl.StringVar(&cfg.dir, "dir", os.TempDir(), "directory for the logs (on the disk to measure)")
	var remoteMiB int64
	fl.Int64Var(&remoteMiB, "remote-segment-mib", 64, "MiB of the segment the remote rows copy and read (0 skips them)")
	fl.IntVar(&cfg.remoteCopies, "remote-copies", 5, "copies per remote copy row and repetition (one copy of 64 MiB is tens of ms on fs: a single sample swings with writeback)")
	fl.IntVar(&cfg.remoteReads, "remote-reads", 5000, "16 KiB remote reads per read row and repetition")
	fl.DurationVar(&cfg.remoteReadsMax, "remote-reads-max", 4*time.Second, "time limit per remote read row and repetition")
	fl.StringVar(&cfg.s3.endpoint, "s3-endpoint", "", "S3 endpoint (host:port or URL) for the remote rows on S3; credentials from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN (none: no S3 rows)")
	fl.StringVar(&cfg.s3.bucket, "s3-bucket", "", "existing S3 bucket for the remote rows on S3 (objects go under a fresh prefix, deleted at the end)")
	fl.StringVar(&cfg.s3.region, "s3-region", "", "S3 region (default $AWS_REGION, $AWS_DEFAULT_REGION, us-east-1)")
	fl.BoolVar(&cfg.s3.testServer, "s3-test-server", false, "run the S3 rows against the tests' S3 server (versitygw, started on 127.0.0.1; $TIERLOG_VERSITYGW or a cached build) instead of -s3-endpoint")
	var walMiB int64
	fl.Int64Var(&walMiB, "wal-mib", 1024, "MiB per diskless-WAL produce row and repetition, at least 10x the writer's 72 MiB in-flight budget or a row is one burst (0 skips the WAL rows)")
	fl.IntVar(&cfg.cpCommits, "cp-commits", 2000, "CommitFile calls per control-plane commit row and repetition (0 skips the control-plane rows)")
	fl.IntVar(&cfg.cpFindBatches, "cp-find-batches", 1_000_000, "batches in the partition of the FindBatches rows (0 skips them)")
	fl.IntVar(&cfg.cpFinds, "cp-finds", 2000, "FindBatches calls per find row and repetition")
	var pgURL string
	var pgTestServer bool
	fl.StringVar(&pgURL, "pg-url", "", "PostgreSQL database (a postgres:// URL of a role that may create schemas and tables) for the PostgreSQL control-plane rows (none: Pebble rows only)")
	fl.BoolVar(&pgTestServer, "pg-test-server", false, "run the PostgreSQL rows against the PostgreSQL the tests start (a local cluster, here with fsync on) instead of -pg-url")
	var brokerMiB int64
	fl.Int64Var(&brokerMiB, "broker-mib", 64, "MiB per broker produce row and repetition (examples/broker built with go build, produced to by kgo; 0 skips the broker rows)")
	var lifeN int
	var lifeOnly bool
	fl.IntVar(&lifeN, "broker-life", 10_000, "partitions of the broker's-life row through logmanager: create, close, open, kill -9, open (0 skips it)")
	fl.BoolVar(&lifeOnly, "broker-life-only", false, "run the broker's-life row only")
	var tailMiB int64
	var tailOnly bool
	fl.Int64Var(&tailMiB, "tail-mib", 64, "MiB of the log of the tail-read and first-pass rows, mapped and DisableMmapReads (0 skips them)")
	fl.BoolVar(&tailOnly, "tail-only", false, "run the tail-read and first-pass rows only")
	var walOnly, consolOnly bool
	fl.BoolVar(&walOnly, "wal-only", false, "run the diskless-WAL rows only (with -wal-mib)")
	var walOpts walOptions
	fl.StringVar(&walOpts.cpuProfile, "cpuprofile", "", "write a CPU profile of each diskless-WAL row's timed region (only those) to FILE.<store>-<batch size>.pprof (wal.Writer) and FILE.<store>-<batch size>-raw.pprof (raw Put)")
	fl.BoolVar(&walOpts.memControlPlane, "wal-mem-cp", false, "put the WAL writer rows' Pebble control plane on vfs.NewMem (no disk write, no fsync wait: the plane's CPU only)")
	fl.BoolVar(&walOpts.verbose, "v", false, "print, per wal.Writer row, the percentiles of an object's life (fill, reservation, upload slot wait, build, put, wait for commit, commit, answer)")
	consolidateFlags(fl)
	fl.BoolVar(&consolOnly, "consolidate-only", false, "run the consolidation rows only (with -consolidate-mib)")
	if err := fl.Parse(args); err != nil {
		return err
	}
	cfg.appendBytes, cfg.syncBytes, cfg.partitionsHeapMax = appendMiB<<20, syncMiB<<20, heapMiB<<20
	cfg.remoteSegmentBytes = remoteMiB << 20
	if cfg.reps < 1 || cfg.appendBytes <= 0 || cfg.syncBytes <= 0 {
		return fmt.Errorf("-reps, -append-mib and -sync-mib must be positive")
	}
	if remoteMiB < 0 || remoteMiB > 2000 || cfg.remoteReads < 1 || cfg.remoteCopies < 1 {
		return fmt.Errorf("-remote-segment-mib must be 0 to 2000 and -remote-reads and -remote-copies positive")
	}
	if (cfg.s3.endpoint == "") != (cfg.s3.bucket == "") {
		return fmt.Errorf("-s3-endpoint and -s3-bucket go together")
	}
	if cfg.s3.testServer && cfg.s3.endpoint != "" {
		return fmt.Errorf("-s3-test-server replaces -s3-endpoint and -s3-bucket")
	}
	if walMiB < 0 {
		return fmt.Errorf("-wal-mib must not be negative")
	}
	cfg.walBytes = walMiB << 20
	if brokerMiB < 0 {
		return fmt.Errorf("-broker-mib must not be negative")
	}
	if tailMiB < 0 || (tailOnly && tailMiB == 0) {
		return fmt.Errorf("-tail-mib must not be negative, and -tail-only needs it positive")
	}
	if cfg.s3.testServer {
		fmt.Fprintf(stderr, "starting the tests' S3 server (versitygw)\n")
		srv, err := s3test.StartServer(context.Background())
		if err != nil {
			return fmt.Errorf("-s3-test-server: %w", err)
		}
		defer srv.Stop()
		cfg.s3.srv, cfg.s3.endpoint, cfg.s3.bucket = srv, srv.URL, "tierlog-compare"
	}
	if pgTestServer && pgURL != "" {
		return fmt.Errorf("-pg-test-server replaces -pg-url")
	}
	if cfg.cpCommits < 0 || cfg.cpFindBatches < 0 || (cfg.cpFindBatches > 0 && cfg.cpFindBatches < 2*cpFindRun) || cfg.cpFinds < 1 {
		return fmt.Errorf("-cp-commits must not be negative, -cp-find-batches 0 or at least %d, -cp-finds positive", 2*cpFindRun)
	}
	pgNote := ""
	if cfg.cpCommits > 0 && pgTestServer {
		fmt.Fprintf(stderr, "starting the tests' PostgreSQL server (fsync on)\n")
		srv, url, err := startPG(context.Background())
		if err != nil {
			return fmt.Errorf("-pg-test-server: %w", err)
		}
		defer srv.Stop()
		pgURL, pgNote = url, "PostgreSQL: the tests' server (internal/harness/pgtest), a local cluster on this machine's disk, fsync and synchronous_commit on."
	} else if cfg.cpCommits > 0 && pgURL == "" {
		pgNote = "PostgreSQL rows not run: no -pg-url nor -pg-test-server given."
	}
	loadStart := loadAvg()
	root, err := os.MkdirTemp(cfg.dir, "tierlog-compare-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	if lifeOnly {
		if lifeN <= 0 {
			return fmt.Errorf("-broker-life-only needs -broker-life > 0")
		}
		fmt.Fprintf(stdout, "Run %s on %d CPUs (%s), %s %s/%s.\n\ntierlog measured: %s.\n\nCommand: `cd benchmarks && go run ./cmd/compare%s`\n\n",
			time.Now().UTC().Format("2006-01-02 15:04 UTC"), runtime.NumCPU(), cpuModel(), runtime.Version(), runtime.GOOS, runtime.GOARCH,
			tierlogVersion(), strings.Join(append([]string{""}, args...), " "))
		return runBrokerLife(stdout, stderr, root, lifeN)
	}
	if tailOnly {
		return runTailOnly(stdout, stderr, root, cfg, args, loadStart, tailMiB<<20)
	}
	if consolOnly {
		return runConsolidateOnly(stdout, stderr, root, cfg.reps, args, loadStart)
	}
	if walOnly {
		if cfg.walBytes <= 0 {
			return fmt.Errorf("-wal-only needs -wal-mib > 0")
		}
		return runWALOnly(stdout, stderr, root, cfg, walOpts, args, loadStart)
	}

	ents := entries()
	impls := make([]impl, len(ents))
	for i, e := range ents {
		impls[i] = e.make()
	}
	res := newResults()
	start := time.Now()
	var rr *remoteRun
	if cfg.remoteSegmentBytes > 0 {
		fmt.Fprintf(stderr, "[%6.1fs] remote: building the %s segment and setting up the stores\n", time.Since(start).Seconds(), mib(cfg.remoteSegmentBytes))
		rr = newRemoteRun(filepath.Join(root, "remote"), cfg)
	}
	var wr *walRun
	if cfg.walBytes > 0 {
		wr = newWALRun(filepath.Join(root, "wal"), cfg, walOpts)
	}
	var cr *cpRun
	if cfg.cpCommits > 0 {
		cr = newCPRun(filepath.Join(root, "cp"), cfg, pgURL, pgNote)
	}
	var br *brokerRun
	if brokerMiB > 0 {
		fmt.Fprintf(stderr, "[%6.1fs] broker: go build ./examples/broker\n", time.Since(start).Seconds())
		br = newBrokerRun(filepath.Join(root, "broker-bin"), brokerMiB<<20)
	}
	for rep := 0; rep < cfg.reps; rep++ {
		// Round-robin over the implementations within each workload,
		// starting one implementation later each repetition, so that
		// load from other users of the machine spreads over all of them
		// and none always runs first on a cold cache.
		base := filepath.Join(root, fmt.Sprintf("r%d", rep))
		for k := range impls {
			im := impls[(k+rep)%len(impls)]
			fmt.Fprintf(stderr, "[%6.1fs] rep %d/%d fill, read, reopen: %s\n", time.Since(start).Seconds(), rep+1, cfg.reps, im.Name())
			runFilled(im, filepath.Join(base, fmt.Sprintf("read%d", k)), cfg, res)
		}
		// The tierlog-only producer rows, next to this repetition's plain
		// tierlog append of the same bytes, which they are compared with.
		runProducerRep(rep, base, cfg.appendBytes, res, stderr, func() float64 { return time.Since(start).Seconds() })
		for i, c := range appendCases[1:] {
			total := cfg.appendBytes
			if c.sync {
				total = cfg.syncBytes
			}
			fmt.Fprintf(stderr, "[%6.1fs] rep %d/%d %s\n", time.Since(start).Seconds(), rep+1, cfg.reps, c.name)
			for k := range impls {
				im := impls[(k+rep)%len(impls)]
				dir := filepath.Join(base, fmt.Sprintf("append%d-%d", i, k))
				if err := runAppendOnly(im, dir, c, total, res); err != nil {
					res.note(c.name, im.Name(), "error: "+err.Error())
				}
			}
		}
		// The tierlog-only remote rows, each beside the raw object-store
		// call.
		if rr != nil {
			rr.runRep(rep, res, stderr, func() float64 { return time.Since(start).Seconds() })
		}
		// The tierlog-only diskless-WAL rows, each beside the raw Put.
		if wr != nil {
			wr.runRep(rep, res, stderr, func() float64 { return time.Since(start).Seconds() })
		}
		// The control-plane rows, each beside its store's raw durable write.
		if cr != nil {
			cr.runRep(rep, res, stderr, func() float64 { return time.Since(start).Seconds() })
		}
		// The tierlog-only tail-read rows, mapped beside DisableMmapReads.
		if tailMiB > 0 {
			runTailRep(rep, base, tailMiB<<20, res, stderr, func() float64 { return time.Since(start).Seconds() })
		}
		// The broker rows: the example broker on tierlog beside the same
		// broker writing to a plain file.
		if br != nil {
			br.runRep(rep, base, res, stderr, func() float64 { return time.Since(start).Seconds() })
		}
		_ = os.RemoveAll(base)
	}
	if rr != nil {
		rr.close() // before the partitions workload measures heap and descriptors
	}
	if wr != nil {
		wr.close()
	}
	if cr != nil {
		cr.close()
	}
	if cfg.partitions > 0 {
		for i, e := range ents {
			fmt.Fprintf(stderr, "[%6.1fs] partitions %s\n", time.Since(start).Seconds(), impls[i].Name())
			mk := e.make
			if e.makePartition != nil {
				mk = e.makePartition
			}
			restore := func() {}
			if e.prepPartitions != nil {
				restore = e.prepPartitions()
			}
			if err := runPartitions(mk, filepath.Join(root, "partitions"), cfg, res); err != nil {
				res.note(secPartitions, impls[i].Name(), "error: "+err.Error())
			}
			restore()
		}
	}
	var life bytes.Buffer
	if lifeN > 0 {
		fmt.Fprintf(stderr, "[%6.1fs] broker's life, %d partitions\n", time.Since(start).Seconds(), lifeN)
		if err := runBrokerLife(&life, stderr, root, lifeN); err != nil {
			fmt.Fprintf(&life, "### broker's life with %d partitions\n\nerror: %v\n\n", lifeN, err)
		}
	}
	fmt.Fprintf(stderr, "[%6.1fs] done\n", time.Since(start).Seconds())

	header(stdout, cfg, args, loadStart)
	printTables(stdout, res, impls)
	printPointReadPeers(stdout, res)
	printProducer(stdout, res)
	if tailMiB > 0 {
		printTail(stdout, res, tailMiB<<20)
	}
	if rr != nil {
		printRemote(stdout, rr, res)
	}
	if wr != nil {
		printWAL(stdout, wr, res)
	}
	if cr != nil {
		printCP(stdout, cr, res)
	}
	if br != nil {
		printBroker(stdout, res, br.total)
	}
	printPending(stdout, rr != nil)
	_, _ = life.WriteTo(stdout)
	printGoals(stdout, res, impls, cfg.partitions)
	fmt.Fprintf(stdout, "Wall time of the run: %s.\n", time.Since(start).Round(time.Second))
	return nil
}

// runFilled runs the workloads that need a filled log for im. A failure
// is noted in the table and the run goes on.
func runFilled(im impl, dir string, cfg config, res *results) {
	defer os.RemoveAll(dir)
	if err := runReadAndOpen(im, dir, cfg, res); err != nil {
		_ = im.Close()
		res.note(appendCases[0].name, im.Name(), "error: "+err.Error())
		res.note(secSeqRead, im.Name(), "error: "+err.Error())
	}
}
