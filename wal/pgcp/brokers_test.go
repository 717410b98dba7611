package pgcp_test

import (
	"bufio"
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/internal/harness/pgtest"
	"github.com/tierlog/tierlog/internal/harness/s3test"
	"github.com/tierlog/tierlog/internal/harness/testseed"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/remote/objstore/fs"
	"github.com/tierlog/tierlog/remote/objstore/s3"
	"github.com/tierlog/tierlog/wal"
	"github.com/tierlog/tierlog/wal/pgcp"
)

var brokerTopic = wal.TopicID{0xb0, 0x0c, 0xe5}

const brokerPartitions = 3

// brokerConfig is one broker's writer: its own pool, its own wal.Writer,
// the shared store and control plane.
type brokerConfig struct {
	id     int32
	url    string
	schema string
	store  string // storeSpec
	rounds int
}

type broker struct {
	cfg   brokerConfig
	cp    *pgcp.ControlPlane
	store objstore.Store
	w     *wal.Writer
}

// A store spec names the shared object store in one string a child can
// be given: "fs:<dir>" or "s3:<endpoint URL> <bucket> <CA PEM file>".
func fsSpec(dir string) string { return "fs:" + dir }

func s3Spec(endpoint, bucket, caFile string) string {
	return "s3:" + endpoint + " " + bucket + " " + caFile
}

func openStore(spec string) (objstore.Store, error) {
	kind, rest, _ := strings.Cut(spec, ":")
	switch kind {
	case "fs":
		return fs.Open(rest, fs.Options{NoSync: true})
	case "s3":
		f := strings.Fields(rest)
		if len(f) != 3 {
			return nil, fmt.Errorf("bad s3 store spec %q", spec)
		}
		pem, err := os.ReadFile(f[2])
		if err != nil {
			return nil, err
		}
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(pem)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return s3.Open(ctx, s3.Options{Endpoint: f[0], Bucket: f[1], Region: s3test.Region,
			AccessKeyID: s3test.AccessKeyID, SecretAccessKey: s3test.SecretAccessKey, RootCAs: roots,
			RequestTimeout: 10 * time.Second, PathSafeKeys: true,
			Retry: s3.RetryPolicy{BaseDelay: 5 * time.Millisecond, MaxDelay: 50 * time.Millisecond}})
	}
	return nil, fmt.Errorf("bad store spec %q", spec)
}

type ack struct {
	payload   string
	partition int32
	offset    int64
}

func openBroker(ctx context.Context, cfg brokerConfig) (*broker, error) {
	store, err := openStore(cfg.store)
	if err != nil {
		return nil, err
	}
	cp, err := pgcp.Open(ctx, pgcp.Options{ConnString: cfg.url, Schema: cfg.schema, MaxConns: 3, ConnectTimeout: 5 * time.Second})
	if err != nil {
		return nil, err
	}
	w, err := wal.NewWriter(wal.WriterOptions{Store: store, ControlPlane: cp, BrokerID: cfg.id, BrokerEpoch: 1,
		CommitInterval: 2 * time.Millisecond, CommitAttempts: 4})
	if err != nil {
		_ = cp.Close()
		return nil, err
	}
	return &broker{cfg: cfg, cp: cp, store: store, w: w}, nil
}

// run produces cfg.rounds calls from each of two goroutines, every call
// one batch per partition, and reports each acknowledged record. A call
// that fails (a cut connection, say) is not acknowledged and not retried:
// its records may or may not be in the log, at most once.
func (b *broker) run(ctx context.Context, onAck func(ack)) error {
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range b.cfg.rounds {
				var reqs []wal.ProduceRequest
				var payloads [][]string
				for p := range int32(brokerPartitions) {
					n := 1 + (r+int(p)+int(b.cfg.id)+g)%4 // sizes differ across brokers
					bld := record.NewBuilder(record.DefaultBuilderOptions())
					var ps []string
					for i := range n {
						v := fmt.Sprintf("b%d.g%d.r%d.p%d.%d", b.cfg.id, g, r, p, i)
						bld.Add(time.Now().UnixMilli(), nil, []byte(v))
						ps = append(ps, v)
					}
					raw, err := bld.Build()
					if err != nil {
						errs <- err
						return
					}
					reqs = append(reqs, wal.ProduceRequest{Partition: wal.TopicIDPartition{TopicID: brokerTopic, Partition: p}, Batches: raw})
					payloads = append(payloads, ps)
				}
				res, err := b.w.Produce(ctx, reqs)
				if err != nil {
					errs <- err
					return
				}
				for i, pr := range res {
					if pr.Err != nil || len(pr.Batches) != 1 || pr.Batches[0].Err != nil {
						continue
					}
					mu.Lock()
					for j, v := range payloads[i] {
						onAck(ack{payload: v, partition: int32(i), offset: pr.Batches[0].BaseOffset + int64(j)})
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func (b *broker) close() error {
	err := b.w.Close()
	if cerr := b.cp.Close(); err == nil {
		err = cerr
	}
	return err
}

// TestManyBrokers runs six brokers' writers against one PostgreSQL and
// one object store (a directory, then the S3 test server): three in this process (two through a proxy that cuts
// every connection after a few kilobytes), three as child processes, one
// of which kills itself between a commit's statements and its COMMIT and
// one of which this test kills after its tenth acknowledgement. Then
// every partition is read back: offsets contiguous from 0 to the high
// watermark, each exactly once, every record at most once, and every
// acknowledged record exactly once at its acknowledged offset.
func TestManyBrokers(t *testing.T) {
	t.Run("store=fs", func(t *testing.T) {
		rounds := 25
		if testing.Short() {
			rounds = 8
		}
		manyBrokers(t, fsSpec(t.TempDir()), "brokers_fs", rounds)
	})
	// The S3 test server (internal/harness/s3test): without one this fails, or
	// skips under TIERLOG_SKIP_S3=1, as every S3 test does.
	t.Run("store=s3", func(t *testing.T) {
		srv := s3test.Start(t)
		o := srv.StoreOptions(t)
		s3test.OpenStore(t, o) // creates the bucket
		caFile := filepath.Join(t.TempDir(), "ca.pem")
		require.NoError(t, os.WriteFile(caFile, srv.CertPEM, 0o600))
		manyBrokers(t, s3Spec(o.Endpoint, o.Bucket, caFile), "brokers_s3", 15)
	})
}

func manyBrokers(t *testing.T, storeSpec, schema string, rounds int) {
	seed := testseed.Seed(t, 5)
	srv := pgtest.Start(t)
	dbURL := databaseURL(t)
	ctx := context.Background()
	admin, err := pgcp.Open(ctx, pgcp.Options{ConnString: dbURL, Schema: schema})
	require.NoError(t, err)
	defer admin.Close()
	require.NoError(t, admin.CreatePartitions(ctx, []wal.CreatePartitionsRequest{{TopicID: brokerTopic, Topic: "brokers", NumPartitions: brokerPartitions}}))

	proxy := pgtest.NewCutProxy(t, net.JoinHostPort(srv.Host, strconv.Itoa(srv.Port)), seed, 4<<10, 24<<10)
	proxied := withHost(t, dbURL, proxy.Addr)

	var mu sync.Mutex
	var acks []ack
	record1 := func(a ack) {
		mu.Lock()
		acks = append(acks, a)
		mu.Unlock()
	}

	// The children first: each opens its store and says ready, and none
	// produces before all are ready (a store's Open removes the temp
	// files older than its process).
	type child struct {
		cmd      *exec.Cmd
		stdin    io.WriteCloser
		ready    chan struct{}
		done     chan error
		killAt   int // this test kills it after that many acks
		selfKill bool
	}
	var children []*child
	for _, c := range []struct {
		id, killCommit, killAfterAcks int
		url                           string
	}{{id: 4, killCommit: 4, url: dbURL}, {id: 5, killAfterAcks: 10, url: proxied}, {id: 6, url: proxied}} {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envBroker+"="+strconv.Itoa(c.id), envURL+"="+c.url, envSchema+"="+schema,
			envStore+"="+storeSpec, envRounds+"="+strconv.Itoa(rounds), envKillCommit+"="+strconv.Itoa(c.killCommit))
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		stdin, err := cmd.StdinPipe()
		require.NoError(t, err)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		require.NoError(t, cmd.Start())
		ch := &child{cmd: cmd, stdin: stdin, ready: make(chan struct{}), done: make(chan error, 1),
			killAt: c.killAfterAcks, selfKill: c.killCommit > 0}
		children = append(children, ch)
		go func() {
			sc := bufio.NewScanner(stdout)
			n := 0
			for sc.Scan() {
				f := strings.Fields(sc.Text())
				switch {
				case len(f) == 1 && f[0] == "ready":
					close(ch.ready)
				case len(f) == 4 && f[0] == "ack":
					p, _ := strconv.Atoi(f[2])
					o, _ := strconv.ParseInt(f[3], 10, 64)
					record1(ack{payload: f[1], partition: int32(p), offset: o})
					if n++; ch.killAt > 0 && n == ch.killAt {
						_ = cmd.Process.Kill()
					}
				}
			}
			err := cmd.Wait()
			if err != nil {
				err = fmt.Errorf("%w; stderr:\n%s", err, stderr.String())
			}
			ch.done <- err
		}()
	}
	for _, ch := range children {
		select {
		case <-ch.ready:
		case err := <-ch.done:
			t.Fatalf("a broker child ended before it was ready: %v", err)
		}
	}
	for _, ch := range children {
		_, err := io.WriteString(ch.stdin, "go\n")
		require.NoError(t, err)
	}

	// The brokers of this process.
	var wg sync.WaitGroup
	for _, c := range []brokerConfig{{id: 1, url: proxied}, {id: 2, url: proxied}, {id: 3, url: dbURL}} {
		c.schema, c.store, c.rounds = schema, storeSpec, rounds
		b, err := openBroker(ctx, c)
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			require.NoError(t, b.run(ctx, record1))
			require.NoError(t, b.close())
		}()
	}
	wg.Wait()
	for i, ch := range children {
		err := <-ch.done
		if ch.selfKill || ch.killAt > 0 {
			require.Error(t, err, "child %d was to be killed", i)
			require.Contains(t, err.Error(), "killed", "child %d", i)
		} else {
			require.NoError(t, err, "child %d", i)
		}
	}

	// Read everything back.
	store, err := openStore(storeSpec)
	require.NoError(t, err)
	defer store.Close()
	r, err := wal.NewReader(wal.ReaderOptions{Store: store, ControlPlane: admin})
	require.NoError(t, err)
	where := map[string]ack{}
	for p := range int32(brokerPartitions) {
		tp := wal.TopicIDPartition{TopicID: brokerTopic, Partition: p}
		info, err := admin.LogInfo(ctx, tp)
		require.NoError(t, err)
		next := int64(0)
		for next < info.HighWatermark {
			res, err := r.Fetch(ctx, wal.FindBatchesRequest{MaxBytes: 1 << 20,
				Partitions: []wal.FindPartition{{Partition: tp, Offset: next, MaxPartitionBytes: 1 << 20}}})
			require.NoError(t, err)
			require.NoError(t, res[0].Err)
			s := record.NewScanner(res[0].Records, record.ScannerOptions{})
			it := record.NewIter(record.IterOptions{})
			read := false
			for s.Next() {
				it.Reset(s.Batch())
				for it.Next() {
					rec := it.Record()
					off := s.Batch().BaseOffset() + int64(rec.OffsetDelta)
					require.Equal(t, next, off, "partition %d: offsets must be contiguous", p)
					v := string(rec.Value)
					_, dup := where[v]
					require.False(t, dup, "record %s read twice", v)
					where[v] = ack{payload: v, partition: p, offset: off}
					next++
					read = true
				}
				require.NoError(t, it.Err())
			}
			require.NoError(t, s.Err())
			require.True(t, read, "partition %d: nothing read at %d below the high watermark %d", p, next, info.HighWatermark)
		}
		require.Equal(t, info.HighWatermark, next)
	}
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, acks)
	for _, a := range acks {
		got, ok := where[a.payload]
		require.True(t, ok, "acknowledged record %s at %d/%d was not read back", a.payload, a.partition, a.offset)
		require.Equal(t, a, got, "acknowledged record %s", a.payload)
	}
	// The broker with a direct connection and no kill had no reason to
	// fail a single call.
	direct := 0
	for _, a := range acks {
		if strings.HasPrefix(a.payload, "b3.") {
			direct++
		}
	}
	require.Equal(t, recordsPerBroker(rounds), direct, "broker 3 (no faults) must have every record acknowledged")
	t.Logf("%d records in the log, %d acknowledged, %d connections cut", len(where), len(acks), proxy.Cuts())
	require.Positive(t, proxy.Cuts(), "the proxy cut no connection: the test tested no cut")
}

// withHost returns rawURL with its host:port replaced.
func withHost(t testing.TB, rawURL, hostPort string) string {
	u, err := url.Parse(rawURL)
	require.NoError(t, err)
	u.Host = hostPort
	return u.String()
}

// recordsPerBroker is how many records broker 3's run produces.
func recordsPerBroker(rounds int) int {
	n := 0
	for g := range 2 {
		for r := range rounds {
			for p := range brokerPartitions {
				n += 1 + (r+p+3+g)%4
			}
		}
	}
	return n
}
