package pgcp_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/wal"
	"github.com/tierlog/tierlog/wal/pebblecp"
	"github.com/tierlog/tierlog/wal/pgcp"
)

// BenchmarkFindBatches finds 50 batches of 100 bytes from a random offset
// of one partition holding a million batches, on pgcp (filled by SQL) and
// on pebblecp (filled by 1,000 commits of 1,000 batches), and reports the
// p50 and p99 of one FindBatches.
func BenchmarkFindBatches(b *testing.B) {
	const n = 1_000_000
	ctx := context.Background()
	tp := wal.TopicIDPartition{TopicID: benchTopic}
	for _, impl := range []string{"pgcp", "pebblecp"} {
		b.Run(fmt.Sprintf("batches=%d/impl=%s", n, impl), func(b *testing.B) {
			var cp wal.ControlPlane
			if impl == "pgcp" {
				schema := fmt.Sprintf("t%d", schemaSeq.Add(1))
				p, err := pgcp.Open(ctx, pgcp.Options{ConnString: databaseURL(b), Schema: schema})
				require.NoError(b, err)
				defer p.Close()
				require.NoError(b, p.CreatePartitions(ctx, []wal.CreatePartitionsRequest{{TopicID: benchTopic, Topic: "find", NumPartitions: 1}}))
				execSQL(b, databaseURL(b), fmt.Sprintf(`
					INSERT INTO %[1]s.files (file_id, object_key, reason, state, size, committed_at) VALUES (1, 'wal/find', 1, 1, %[2]d, 0);
					INSERT INTO %[1]s.batches (topic_id, partition, last_offset, base_offset, file_id, byte_offset, byte_size,
						timestamp_type, batch_max_timestamp, log_append_timestamp)
						SELECT '%[3]s'::uuid, 0, g, g, 1, g * 100, 100, 0, 1000, 0 FROM generate_series(0, %[4]d) AS g;
					UPDATE %[1]s.logs SET high_watermark = %[5]d, byte_size = %[2]d;
					ANALYZE %[1]s.batches;`, schema, int64(n)*100, uuidText(benchTopic), n-1, n))
				cp = p
			} else {
				p, err := pebblecp.Open(vfs.Default, b.TempDir(), pebblecp.Options{})
				require.NoError(b, err)
				defer p.Close()
				require.NoError(b, p.CreatePartitions(ctx, []wal.CreatePartitionsRequest{{TopicID: benchTopic, Topic: "find", NumPartitions: 1}}))
				for i := range n / 1000 {
					_, err := p.CommitFile(ctx, benchRequest(fmt.Sprintf("wal/find-%d", i), 1000, 1))
					require.NoError(b, err)
				}
				cp = p
			}
			rng := rand.New(rand.NewPCG(1, 2))
			var lat []time.Duration
			b.ResetTimer()
			for b.Loop() {
				req := wal.FindBatchesRequest{MaxBytes: 1 << 20, Partitions: []wal.FindPartition{
					{Partition: tp, Offset: rng.Int64N(n - 100), MaxPartitionBytes: 50 * 100}}}
				t0 := time.Now()
				res, err := cp.FindBatches(ctx, req)
				lat = append(lat, time.Since(t0))
				if err != nil || res[0].Err != nil || len(res[0].Batches) != 50 {
					b.Fatalf("%v %v %d", err, res[0].Err, len(res[0].Batches))
				}
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2])/float64(time.Microsecond), "find-p50-us")
			b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)])/float64(time.Microsecond), "find-p99-us")
		})
	}
}

func uuidText(id wal.TopicID) string {
	const hex = "0123456789abcdef"
	var out []byte
	for i, c := range id {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			out = append(out, '-')
		}
		out = append(out, hex[c>>4], hex[c&15])
	}
	return string(out)
}

// BenchmarkFindRoundTrips compares, in one loop and on the same rows, a
// FindBatches of 50 batches in one round trip (the pipeline) with the
// paged find (BEGIN, the partition's row, a page, COMMIT: four round
// trips), over 100,000 batches stored as runs (rows=runs, committed as
// objects of 1,000 contiguous batches) or a row per batch (rows=single,
// filled by SQL as schema version 2 stored them).
func BenchmarkFindRoundTrips(b *testing.B) {
	const n = 100_000
	ctx := context.Background()
	tp := wal.TopicIDPartition{TopicID: benchTopic}
	for _, rows := range []string{"runs", "single"} {
		b.Run("rows="+rows, func(b *testing.B) {
			schema := fmt.Sprintf("t%d", schemaSeq.Add(1))
			p, err := pgcp.Open(ctx, pgcp.Options{ConnString: databaseURL(b), Schema: schema})
			require.NoError(b, err)
			defer p.Close()
			require.NoError(b, p.CreatePartitions(ctx, []wal.CreatePartitionsRequest{{TopicID: benchTopic, Topic: "find", NumPartitions: 1}}))
			if rows == "runs" {
				for i := range n / 1000 {
					_, err := p.CommitFile(ctx, benchRequest(fmt.Sprintf("wal/find-%d", i), 1000, 1))
					require.NoError(b, err)
				}
			} else {
				execSQL(b, databaseURL(b), fmt.Sprintf(`
					INSERT INTO %[1]s.files (file_id, object_key, reason, state, size, committed_at) VALUES (1, 'wal/find', 1, 1, %[2]d, 0);
					INSERT INTO %[1]s.batches (topic_id, partition, last_offset, base_offset, file_id, byte_offset, byte_size,
						timestamp_type, batch_max_timestamp, log_append_timestamp)
						SELECT '%[3]s'::uuid, 0, g, g, 1, g * 100, 100, 0, 1000, 0 FROM generate_series(0, %[4]d) AS g;
					UPDATE %[1]s.logs SET high_watermark = %[5]d, byte_size = %[2]d;`, schema, int64(n)*100, uuidText(benchTopic), n-1, n))
			}
			execSQL(b, databaseURL(b), fmt.Sprintf(`ANALYZE %s.batches`, schema))
			rng := rand.New(rand.NewPCG(1, 2))
			var pipelined, paged []time.Duration
			b.ResetTimer()
			for b.Loop() {
				req := wal.FindBatchesRequest{MaxBytes: 1 << 20, Partitions: []wal.FindPartition{
					{Partition: tp, Offset: rng.Int64N(n - 100), MaxPartitionBytes: 50 * 100}}}
				for k, find := range []func(context.Context, wal.FindBatchesRequest) ([]wal.FindBatchesResult, error){p.FindBatches, p.FindPagedForTesting} {
					t0 := time.Now()
					res, err := find(ctx, req)
					if k == 0 {
						pipelined = append(pipelined, time.Since(t0))
					} else {
						paged = append(paged, time.Since(t0))
					}
					if err != nil || res[0].Err != nil || len(res[0].Batches) != 50 {
						b.Fatalf("%v %v %d", err, res[0].Err, len(res[0].Batches))
					}
				}
			}
			for _, m := range []struct {
				name string
				lat  []time.Duration
			}{{"pipelined", pipelined}, {"paged", paged}} {
				slices.Sort(m.lat)
				b.ReportMetric(float64(m.lat[len(m.lat)/2])/float64(time.Microsecond), m.name+"-p50-us")
				b.ReportMetric(float64(m.lat[min(len(m.lat)-1, len(m.lat)*99/100)])/float64(time.Microsecond), m.name+"-p99-us")
			}
		})
	}
}
