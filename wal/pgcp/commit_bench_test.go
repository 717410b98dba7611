package pgcp_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/wal"
	"github.com/tierlog/tierlog/wal/pebblecp"
	"github.com/tierlog/tierlog/wal/pgcp"
)

var benchTopic = wal.TopicID{0xBE, 0x4E}

// benchRequest is an object of n batches of one record each, spread
// round-robin over the partitions.
func benchRequest(key string, n int, partitions int32) wal.CommitFileRequest {
	return benchRequestFrom(key, n, 0, partitions)
}

// benchRequestFrom spreads the batches over partitions [first,
// first+partitions).
func benchRequestFrom(key string, n int, first, partitions int32) wal.CommitFileRequest {
	req := wal.CommitFileRequest{ObjectKey: key, ObjectSize: int64(n) * 100}
	for j := range n {
		req.Batches = append(req.Batches, wal.CommitBatch{
			Partition:  wal.TopicIDPartition{TopicID: benchTopic, Partition: first + int32(j)%partitions},
			ByteOffset: int64(j) * 100, Size: 100, LastOffset: 0, RecordCount: 1,
			MaxTimestamp: 1000, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
		})
	}
	return req
}

// BenchmarkCommit commits objects of 10 and 1000 batches (over 16
// partitions) from 1, 4, 8 and 16 concurrent writers, on pgcp (the test
// cluster: fsync off unless TIERLOG_PG_FSYNC=1) and on pebblecp
// (vfs.Default, real fsync) in the same run; it reports commits/s and the
// p50 and p99 of one CommitFile. Writers share the partitions, so commits
// contend on the same rows as brokers of one cluster do.
func BenchmarkCommit(b *testing.B) {
	ctx := context.Background()
	for _, batches := range []int{10, 1000} {
		for _, writers := range []int{1, 4, 8, 16} {
			for _, impl := range []string{"pgcp", "pebblecp"} {
				b.Run(fmt.Sprintf("batches=%d/writers=%d/impl=%s", batches, writers, impl), func(b *testing.B) {
					var cp wal.ControlPlane
					if impl == "pgcp" {
						cp = openFresh(b, time.Now)
						c := cp.(interface{ Close() error })
						defer c.Close()
					} else {
						p, err := pebblecp.Open(vfs.Default, b.TempDir(), pebblecp.Options{})
						require.NoError(b, err)
						defer p.Close()
						cp = p
					}
					require.NoError(b, cp.CreatePartitions(ctx, []wal.CreatePartitionsRequest{{TopicID: benchTopic, Topic: "bench", NumPartitions: 16}}))
					benchCommits(b, cp, writers, batches)
				})
			}
		}
	}
}

// BenchmarkCommitLayout separates the two costs of BenchmarkCommit's 16
// writers: layout=shared is its shape (every object over the same 16
// partitions, so commits wait for each other's partition rows), and
// layout=disjoint gives each writer 10 partitions of its own (160 in
// all), so commits conflict on no row. pgcp gets one connection per
// writer here, as 16 brokers would have.
func BenchmarkCommitLayout(b *testing.B) {
	ctx := context.Background()
	const writers, batches = 16, 10
	for _, layout := range []string{"shared", "disjoint"} {
		for _, impl := range []string{"pgcp", "pebblecp"} {
			b.Run(fmt.Sprintf("layout=%s/impl=%s", layout, impl), func(b *testing.B) {
				var cp wal.ControlPlane
				if impl == "pgcp" {
					p, err := pgcp.Open(ctx, pgcp.Options{ConnString: databaseURL(b), Schema: fmt.Sprintf("t%d", schemaSeq.Add(1)), MaxConns: writers})
					require.NoError(b, err)
					defer p.Close()
					cp = p
				} else {
					p, err := pebblecp.Open(vfs.Default, b.TempDir(), pebblecp.Options{})
					require.NoError(b, err)
					defer p.Close()
					cp = p
				}
				require.NoError(b, cp.CreatePartitions(ctx, []wal.CreatePartitionsRequest{{TopicID: benchTopic, Topic: "bench", NumPartitions: writers * batches}}))
				req := func(w int, key string) wal.CommitFileRequest { return benchRequestFrom(key, batches, 0, 16) }
				if layout == "disjoint" {
					req = func(w int, key string) wal.CommitFileRequest {
						return benchRequestFrom(key, batches, int32(w*batches), batches)
					}
				}
				benchCommitsWith(b, cp, writers, req)
			})
		}
	}
}

func benchCommits(b *testing.B, cp wal.ControlPlane, writers, batches int) {
	benchCommitsWith(b, cp, writers, func(_ int, key string) wal.CommitFileRequest { return benchRequest(key, batches, 16) })
}

func benchCommitsWith(b *testing.B, cp wal.ControlPlane, writers int, request func(w int, key string) wal.CommitFileRequest) {
	ctx := context.Background()
	var next atomic.Int64
	lats := make([][]time.Duration, writers)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				req := request(w, fmt.Sprintf("wal/bench-%d-%09d", w, i))
				t0 := time.Now()
				if _, err := cp.CommitFile(ctx, req); err != nil {
					errs <- err
					return
				}
				lats[w] = append(lats[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	slices.Sort(all)
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "commits/s")
	if m, ok := cp.(interface{ Metrics() pgcp.Metrics }); ok {
		mm := m.Metrics()
		b.ReportMetric(float64(mm.Retries), "retries")
		if mm.CommitGroups > 0 {
			b.ReportMetric(float64(mm.Commits+mm.CommitErrors)/float64(mm.CommitGroups), "commits/group")
		}
	}
	for _, q := range []struct {
		name string
		q    float64
	}{{"p50", 0.5}, {"p99", 0.99}} {
		b.ReportMetric(float64(all[min(len(all)-1, int(q.q*float64(len(all))))])/float64(time.Microsecond), "commit-"+q.name+"-us")
	}
}
