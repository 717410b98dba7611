// Command multibroker runs the diskless WAL as a cluster does: two
// brokers' writers produce into the same partitions at once, each with its
// own connections to one shared PostgreSQL control plane (wal/pgcp) and
// one object store, and a reader then reads every partition back and
// checks that the offsets the two brokers were given are contiguous and
// unique.
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
//
// Consolidation into a classic leader's log is not part of the WAL
// package yet, so the example stops at the reader.
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

	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/remote/objstore/fs"
	"github.com/tierlog/tierlog/remote/objstore/s3"
	"github.com/tierlog/tierlog/wal"
	"github.com/tierlog/tierlog/wal/pgcp"
)

type config struct {
	postgres   string
	schema     string
	storeDir   string
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

	// 2. Two brokers, each its own pool and writer, producing at once.
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
	fmt.Fprintf(out, "2. broker 1 and broker 2: %d and %d records acknowledged\n", acked[1], acked[2])

	// 3. Read every partition back from where this run started.
	r, err := wal.NewReader(wal.ReaderOptions{Store: store, ControlPlane: admin})
	if err != nil {
		return err
	}
	total := 0
	for p := range c.partitions {
		byBroker := map[byte]int{}
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
		fmt.Fprintf(out, "3. partition %d: offsets [%d, %d) contiguous, %d from broker 1, %d from broker 2\n",
			p, start[p], next, byBroker['1'], byBroker['2'])
	}
	if total != acked[1]+acked[2] {
		return fmt.Errorf("read %d records, %d were acknowledged", total, acked[1]+acked[2])
	}
	fmt.Fprintf(out, "3. reader: %d records, every acknowledged record once\n", total)
	return nil
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
