// Command multibroker runs the diskless WAL as a cluster does: two
// brokers' writers produce into the same partitions at once, each with its
// own connections to one shared PostgreSQL control plane (wal/pgcp) and
// one object store; a consolidating leader (package consolidate: an
// Endpoint over the WAL and a Fetcher) copies every partition's records
// into its local log.UnifiedLog while they produce; a reader then reads
// every partition back from the WAL, checks that the offsets the two
// brokers were given are contiguous and unique, and that the leader's
// local logs hold the same records at the same offsets.
//
// Point it at your servers with flags:
//
//	go run ./examples/multibroker -postgres 'postgres://user@db.example:5432/tierlog?sslmode=verify-full' \
//	    -s3-endpoint s3.example:443 -s3-bucket wal-test -s3-region eu-west-1
//
// Without -postgres it connects as the PG* environment variables say
// (PGHOST, PGUSER, PGPASSWORD, ...); without -s3-bucket the objects go to
// a local directory (-store-dir, default a temporary one). S3 credentials
// come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY. The tables live
// in -schema (created if missing), so a rerun appends to the same log.
// The leader's local logs and remote metadata live in -leader-dir
// (default a temporary one); a leader whose local log is behind the
// records of this run (a new directory, or objects of earlier runs kept
// elsewhere) starts it at this run's first offset.
package main

import (
	"context"
	"crypto/sha256"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tierlog/tierlog/consolidate"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/remote/objstore/fs"
	"github.com/tierlog/tierlog/remote/objstore/s3"
	"github.com/tierlog/tierlog/tierstate"
	"github.com/tierlog/tierlog/wal"
	"github.com/tierlog/tierlog/wal/pgcp"
)

type config struct {
	postgres   string
	schema     string
	storeDir   string
	leaderDir  string
	s3Endpoint string
	s3Bucket   string
	s3Region   string
	s3NoTLS    bool
	calls      int
	partitions int
}

func main() {
	var c config
	flag.StringVar(&c.postgres, "postgres", "", "PostgreSQL connection string (default: the PG* environment)")
	flag.StringVar(&c.schema, "schema", "tierlog_multibroker", "schema for the control plane's tables")
	flag.StringVar(&c.storeDir, "store-dir", "", "directory for the objects when no -s3-bucket (default: a new temporary directory)")
	flag.StringVar(&c.leaderDir, "leader-dir", "", "directory for the consolidating leader's local logs (default: a new temporary directory)")
	flag.StringVar(&c.s3Endpoint, "s3-endpoint", "", "S3 endpoint host:port")
	flag.StringVar(&c.s3Bucket, "s3-bucket", "", "S3 bucket for the objects")
	flag.StringVar(&c.s3Region, "s3-region", "us-east-1", "S3 region")
	flag.BoolVar(&c.s3NoTLS, "s3-insecure", false, "talk to S3 over plain HTTP")
	flag.IntVar(&c.calls, "calls", 20, "produce calls per broker")
	flag.IntVar(&c.partitions, "partitions", 3, "partitions of the topic")
	flag.Parse()
	if err := run(context.Background(), os.Stdout, c); err != nil {
		fmt.Fprintln(os.Stderr, "multibroker:", err)
		os.Exit(1)
	}
}

func openStore(ctx context.Context, c config) (objstore.Store, func(), error) {
	if c.s3Bucket != "" {
		st, err := s3.Open(ctx, s3.Options{Endpoint: c.s3Endpoint, Bucket: c.s3Bucket, Region: c.s3Region,
			AccessKeyID: os.Getenv("AWS_ACCESS_KEY_ID"), SecretAccessKey: os.Getenv("AWS_SECRET_ACCESS_KEY"),
			DisableTLS: c.s3NoTLS})
		if err != nil {
			return nil, nil, err
		}
		return st, func() { _ = st.Close() }, nil
	}
	dir, cleanup := c.storeDir, func() {}
	if dir == "" {
		tmp, err := os.MkdirTemp("", "tierlog-multibroker-")
		if err != nil {
			return nil, nil, err
		}
		dir, cleanup = tmp, func() { _ = os.RemoveAll(tmp) }
	}
	st, err := fs.Open(dir, fs.Options{})
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	return st, func() { _ = st.Close(); cleanup() }, nil
}

func run(ctx context.Context, out io.Writer, c config) error {
	store, closeStore, err := openStore(ctx, c)
	if err != nil {
		return err
	}
	defer closeStore()
	admin, err := pgcp.Open(ctx, pgcp.Options{ConnString: c.postgres, Schema: c.schema})
	if err != nil {
		return err
	}
	defer admin.Close()
	var topic wal.TopicID
	sum := sha256.Sum256([]byte("multibroker"))
	copy(topic[:], sum[:])
	if err := admin.CreatePartitions(ctx, []wal.CreatePartitionsRequest{{TopicID: topic, Topic: "multibroker", NumPartitions: int32(c.partitions)}}); err != nil {
		return err
	}
	tp := func(p int) wal.TopicIDPartition { return wal.TopicIDPartition{TopicID: topic, Partition: int32(p)} }
	start := make([]int64, c.partitions)
	for p := range c.partitions {
		info, err := admin.LogInfo(ctx, tp(p))
		if err != nil {
			return err
		}
		start[p] = info.HighWatermark
	}
	fmt.Fprintf(out, "1. control plane on PostgreSQL (schema %s), topic multibroker: %d partitions\n", c.schema, c.partitions)

	// 2. The consolidating leader, running while the brokers produce.
	r, err := wal.NewReader(wal.ReaderOptions{Store: store, ControlPlane: admin})
	if err != nil {
		return err
	}
	ld, err := openLeader(ctx, c, store, admin, r, topic, start)
	if err != nil {
		return err
	}
	defer ld.close()
	leaderCtx, stopLeader := context.WithCancel(ctx)
	leaderDone := make(chan error, 1)
	go func() { leaderDone <- ld.fetcher.Run(leaderCtx) }()
	defer func() {
		stopLeader()
		<-leaderDone
	}()
	fmt.Fprintf(out, "2. consolidating leader: %d local logs in %s, fetching from the WAL\n", c.partitions, ld.dir)

	// 3. Two brokers, each its own pool and writer, producing at once.
	var wg sync.WaitGroup
	acked := make([]int, 3)
	errs := make(chan error, 2)
	for id := 1; id <= 2; id++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := runBroker(ctx, c, store, int32(id), tp)
			acked[id] = n
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "3. broker 1 and broker 2: %d and %d records acknowledged\n", acked[1], acked[2])

	// 4. Read every partition back from where this run started.
	total := 0
	values := make([]map[int64]string, c.partitions)
	for p := range c.partitions {
		byBroker := map[byte]int{}
		values[p] = map[int64]string{}
		next := start[p]
		info, err := admin.LogInfo(ctx, tp(p))
		if err != nil {
			return err
		}
		for next < info.HighWatermark {
			res, err := r.Fetch(ctx, wal.FindBatchesRequest{MaxBytes: 1 << 20,
				Partitions: []wal.FindPartition{{Partition: tp(p), Offset: next, MaxPartitionBytes: 1 << 20}}})
			if err != nil {
				return err
			}
			if res[0].Err != nil {
				return res[0].Err
			}
			s := record.NewScanner(res[0].Records, record.ScannerOptions{})
			it := record.NewIter(record.IterOptions{})
			for s.Next() {
				it.Reset(s.Batch())
				for it.Next() {
					rec := it.Record()
					if off := s.Batch().BaseOffset() + int64(rec.OffsetDelta); off != next {
						return fmt.Errorf("partition %d: offset %d where %d was due", p, off, next)
					}
					if len(rec.Value) > 0 {
						byBroker[rec.Value[0]]++
					}
					values[p][next] = string(rec.Value)
					next++
				}
				if err := it.Err(); err != nil {
					return err
				}
			}
			if err := s.Err(); err != nil {
				return err
			}
		}
		total += int(next - start[p])
		fmt.Fprintf(out, "4. partition %d: offsets [%d, %d) contiguous, %d from broker 1, %d from broker 2\n",
			p, start[p], next, byBroker['1'], byBroker['2'])
	}
	if total != acked[1]+acked[2] {
		return fmt.Errorf("read %d records, %d were acknowledged", total, acked[1]+acked[2])
	}
	fmt.Fprintf(out, "4. reader: %d records, every acknowledged record once\n", total)

	// 5. The leader's local logs hold the same records.
	for p := range c.partitions {
		l := ld.logs[p]
		hw := start[p] + int64(len(values[p]))
		if err := waitFor(ctx, func() bool { return l.LogEndOffset() >= hw }); err != nil {
			return fmt.Errorf("partition %d: the leader's log ends at %d, the WAL at %d: %w", p, l.LogEndOffset(), hw, err)
		}
		n, err := compareLocal(l, start[p], hw, values[p])
		if err != nil {
			return fmt.Errorf("partition %d: %w", p, err)
		}
		fmt.Fprintf(out, "5. leader: partition %d local log [%d, %d): %d records, as in the WAL\n", p, start[p], l.LogEndOffset(), n)
	}
	return nil
}

// leader is the consolidating leader of every partition: one local log
// each, an Endpoint serving them from the WAL and a Fetcher copying.
type leader struct {
	dir     string
	logs    []*log.UnifiedLog
	meta    *remote.MetadataManager
	fetcher *consolidate.Fetcher
	cleanup func()
}

// bornDiskless is the switch state of a partition created diskless: it
// consolidates, with no classic prefix and no seal.
var bornDiskless = tierstate.State{}.WithConsolidating(true)

// partitions is the leader's consolidate.PartitionSource.
type partitions map[remote.TopicIDPartition]*log.UnifiedLog

func (ps partitions) Partition(tp remote.TopicIDPartition) (tierstate.State, consolidate.LocalLog, bool) {
	l, ok := ps[tp]
	if !ok {
		return tierstate.State{}, nil, false
	}
	return bornDiskless, l, true
}

func openLeader(ctx context.Context, c config, store objstore.Store, cp wal.ControlPlane, r *wal.Reader,
	topic wal.TopicID, start []int64) (_ *leader, err error) {
	ld := &leader{dir: c.leaderDir, cleanup: func() {}}
	if ld.dir == "" {
		tmp, err := os.MkdirTemp("", "tierlog-multibroker-leader-")
		if err != nil {
			return nil, err
		}
		ld.dir, ld.cleanup = tmp, func() { _ = os.RemoveAll(tmp) }
	}
	defer func() {
		if err != nil {
			ld.close()
		}
	}()
	if ld.meta, err = remote.Open(vfs.Default, ld.dir+"/remote-metadata", remote.MetadataOptions{}); err != nil {
		return nil, err
	}
	// Remote storage is not enabled on the local logs here; the machine
	// needs its data source only to rebuild, which a born-diskless
	// partition whose WAL is not pruned never asks for.
	data, err := remote.NewStorageManager(store, remote.StorageOptions{KeyPrefix: "tiered/"})
	if err != nil {
		return nil, err
	}
	ps := partitions{}
	var fps []consolidate.FetcherPartition
	for p := range c.partitions {
		l, err := log.Open(fmt.Sprintf("%s/multibroker-%d", ld.dir, p), log.Options{FS: vfs.Default})
		if err != nil {
			return nil, err
		}
		ld.logs = append(ld.logs, l)
		if l.LogEndOffset() < start[p] {
			// Records before this run are not in this store: start here.
			if err := l.TruncateFullyAndStartAt(start[p], start[p]); err != nil {
				return nil, err
			}
		}
		tp := remote.TopicIDPartition{TopicID: remote.UUID(topic), Topic: "multibroker", Partition: int32(p)}
		ps[tp] = l
		fps = append(fps, consolidate.FetcherPartition{Partition: tp, Log: l, State: bornDiskless})
	}
	ep, err := consolidate.NewEndpoint(consolidate.EndpointOptions{ControlPlane: cp, WAL: r, Remote: ld.meta, Partitions: ps})
	if err != nil {
		return nil, err
	}
	m, err := tierstate.NewMachine(tierstate.MachineOptions{Leader: ep, Metadata: ld.meta, Data: data})
	if err != nil {
		return nil, err
	}
	ld.fetcher, err = consolidate.NewFetcher(consolidate.FetcherOptions{Endpoint: ep, Machine: m,
		IdleInterval: 10 * time.Millisecond, Backoff: 100 * time.Millisecond})
	if err != nil {
		return nil, err
	}
	for _, fp := range fps {
		if err := ld.fetcher.Add(fp); err != nil {
			return nil, err
		}
	}
	return ld, nil
}

func (ld *leader) close() {
	for _, l := range ld.logs {
		_ = l.Close()
	}
	if ld.meta != nil {
		_ = ld.meta.Close()
	}
	ld.cleanup()
}

// waitFor polls cond until it holds or a minute passes.
func waitFor(ctx context.Context, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// compareLocal reads the local log over [from, to) and checks each record
// against the WAL's value at its offset.
func compareLocal(l *log.UnifiedLog, from, to int64, want map[int64]string) (int, error) {
	n := 0
	for next := from; next < to; {
		info, err := l.Read(nil, next, 1<<20, log.IsolationLogEnd, true)
		if err != nil {
			return n, err
		}
		if len(info.Records) == 0 {
			return n, fmt.Errorf("local log: nothing at %d", next)
		}
		s := record.NewScanner(info.Records, record.ScannerOptions{})
		it := record.NewIter(record.IterOptions{})
		for s.Next() {
			it.Reset(s.Batch())
			for it.Next() {
				rec := it.Record()
				off := s.Batch().BaseOffset() + int64(rec.OffsetDelta)
				if off < next || off >= to {
					continue
				}
				if off != next {
					return n, fmt.Errorf("local log: offset %d where %d was due", off, next)
				}
				if got := string(rec.Value); got != want[off] {
					return n, fmt.Errorf("local log: offset %d holds %q, the WAL %q", off, got, want[off])
				}
				n++
				next++
			}
			if err := it.Err(); err != nil {
				return n, err
			}
		}
		if err := s.Err(); err != nil {
			return n, err
		}
	}
	return n, nil
}

// runBroker is one broker: its own connections, its own writer.
func runBroker(ctx context.Context, c config, store objstore.Store, id int32, tp func(int) wal.TopicIDPartition) (int, error) {
	cp, err := pgcp.Open(ctx, pgcp.Options{ConnString: c.postgres, Schema: c.schema, MaxConns: 2})
	if err != nil {
		return 0, err
	}
	defer cp.Close()
	w, err := wal.NewWriter(wal.WriterOptions{Store: store, ControlPlane: cp, BrokerID: id, BrokerEpoch: 1,
		CommitInterval: 5 * time.Millisecond})
	if err != nil {
		return 0, err
	}
	acked := 0
	for call := range c.calls {
		var reqs []wal.ProduceRequest
		for p := range c.partitions {
			b := record.NewBuilder(record.DefaultBuilderOptions())
			for i := range 1 + (call+p)%3 {
				b.Add(time.Now().UnixMilli(), nil, fmt.Appendf(nil, "%d-call%d-p%d-%d", id, call, p, i))
			}
			raw, err := b.Build()
			if err != nil {
				return acked, err
			}
			reqs = append(reqs, wal.ProduceRequest{Partition: tp(p), Batches: raw})
		}
		res, err := w.Produce(ctx, reqs)
		if err != nil {
			return acked, err
		}
		for i, r := range res {
			if r.Err != nil {
				return acked, r.Err
			}
			acked += 1 + (call+i)%3
		}
	}
	return acked, w.Close()
}
