package pgcp_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/internal/harness/pgtest"
	"github.com/tierlog/tierlog/internal/harness/testseed"
	"github.com/tierlog/tierlog/wal"
	"github.com/tierlog/tierlog/wal/pgcp"
)

func execSQL(t testing.TB, url, sql string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgconn.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	require.NoError(t, conn.Exec(ctx, sql).Close())
}

// An unreachable server is ErrUnreachable, and no error carries the
// password.
func TestOpenUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	const secret = "hunter2-do-not-print"
	_, err = pgcp.Open(context.Background(), pgcp.Options{
		ConnString: "postgres://someone:" + secret + "@" + addr + "/db?sslmode=disable", ConnectTimeout: 2 * time.Second})
	require.ErrorIs(t, err, pgcp.ErrUnreachable)
	require.NotContains(t, err.Error(), secret)
}

func TestOpenWrongPassword(t *testing.T) {
	srv := pgtest.Start(t)
	if srv.External() {
		t.Skip("the password rules of an existing server are its own")
	}
	const secret = "wrong-password-do-not-print"
	_, err := pgcp.Open(context.Background(), pgcp.Options{ConnString: srv.URL, Password: secret})
	require.ErrorIs(t, err, pgcp.ErrUnreachable)
	require.NotContains(t, err.Error(), secret)
	require.NotContains(t, err.Error(), pgtest.Password)
}

// Migrations apply once, also under concurrent Opens, and record their
// version; a schema newer than the code is ErrSchemaTooNew.
func TestMigrations(t *testing.T) {
	url := databaseURL(t)
	const schema = "migrations_test"
	var wg sync.WaitGroup
	errs := make([]error, 4)
	cps := make([]*pgcp.ControlPlane, 4)
	for i := range cps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cps[i], errs[i] = pgcp.Open(context.Background(), pgcp.Options{ConnString: url, Schema: schema})
		}()
	}
	wg.Wait()
	for i := range cps {
		require.NoError(t, errs[i])
		require.NoError(t, cps[i].Close())
	}
	cp, err := pgcp.Open(context.Background(), pgcp.Options{ConnString: url, Schema: schema})
	require.NoError(t, err)
	require.NoError(t, cp.Close())
	require.ErrorIs(t, cp.Close(), wal.ErrClosed)

	ctx := context.Background()
	conn, err := pgconn.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	res := conn.ExecParams(ctx, "SELECT count(*), max(version) FROM "+schema+".schema_migrations", nil, nil, nil, nil).Read()
	require.NoError(t, res.Err)
	require.Equal(t, fmt.Sprintf("%d %d", pgcp.SchemaVersion(), pgcp.SchemaVersion()),
		string(res.Rows[0][0])+" "+string(res.Rows[0][1]))

	execSQL(t, url, "INSERT INTO "+schema+".schema_migrations (version, name) VALUES (99, 'from the future')")
	_, err = pgcp.Open(context.Background(), pgcp.Options{ConnString: url, Schema: schema})
	require.ErrorIs(t, err, pgcp.ErrSchemaTooNew)
	var sv *pgcp.SchemaVersionError
	require.ErrorAs(t, err, &sv)
	require.Equal(t, pgcp.SchemaVersionError{Found: 99, Supported: pgcp.SchemaVersion()}, *sv)
}

// The prune's W is computed in SQL; it must equal wal.PrunedLogStart on
// every shape: W moved inside a batch, a seal above remote storage (the
// cap), h below, inside and beyond the batches.
func TestPruneSQLMatchesRule(t *testing.T) {
	seed := testseed.Seed(t, 7)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	cp := openFresh(t, time.Now)
	defer cp.Close()
	ctx := context.Background()
	topic := wal.TopicID{0x70, 0x72}
	for i := range 60 {
		tp := wal.TopicIDPartition{TopicID: topic, Partition: int32(i)}
		w0 := rng.Int64N(50)
		seal := w0 + rng.Int64N(3)*rng.Int64N(400) // sometimes S == W
		res, err := cp.InitDisklessLog(ctx, []wal.InitDisklessLogRequest{{Partition: tp, Topic: "prune", LogStartOffset: w0, DisklessStartOffset: seal}})
		require.NoError(t, err)
		require.NoError(t, res[0].Err)
		req := wal.CommitFileRequest{ObjectKey: fmt.Sprintf("prune/%d", i)}
		for range rng.IntN(5) {
			n := 1 + rng.Int64N(20)
			req.Batches = append(req.Batches, wal.CommitBatch{Partition: tp, ByteOffset: req.ObjectSize, Size: n, LastOffset: n - 1,
				RecordCount: int32(n), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1})
			req.ObjectSize += n
		}
		_, err = cp.CommitFile(ctx, req)
		require.NoError(t, err)
		info, err := cp.LogInfo(ctx, tp)
		require.NoError(t, err)
		if rng.IntN(3) == 0 && info.HighWatermark > info.LogStartOffset {
			to := info.LogStartOffset + rng.Int64N(info.HighWatermark-info.LogStartOffset+1)
			_, err := cp.DeleteRecords(ctx, []wal.DeleteRecordsRequest{{Partition: tp, Offset: to}})
			require.NoError(t, err)
			info, err = cp.LogInfo(ctx, tp)
			require.NoError(t, err)
		}
		found, err := cp.FindBatches(ctx, wal.FindBatchesRequest{Partitions: []wal.FindPartition{
			{Partition: tp, Offset: info.LogStartOffset, MaxPartitionBytes: 1 << 30}}, MaxBytes: 1 << 30})
		require.NoError(t, err)
		h := rng.Int64N(info.HighWatermark+3) - 1
		if rng.IntN(10) == 0 {
			h = 1<<63 - 1
		}
		remain, minBase := false, int64(0)
		for _, b := range found[0].Batches {
			if b.LastOffset > min(h, info.HighWatermark) {
				remain, minBase = true, b.BaseOffset
				break
			}
		}
		want := wal.PrunedLogStart(info.LogStartOffset, info.HighWatermark, h, remain, minBase)
		got, err := cp.PruneDisklessLogs(ctx, []wal.PruneRequest{{Partition: tp, HighestOffsetInRemoteStorage: h}})
		require.NoError(t, err)
		require.NoError(t, got[0].Err)
		require.Equal(t, want, got[0].LogStartOffset, "W=%d HW=%d h=%d batches %v", info.LogStartOffset, info.HighWatermark, h, found[0].Batches)
	}
}

// Two transactions empty one object from two partitions at once. The
// first stops between its emptiness check (it saw the other partition's
// batch) and its commit (the hook); the second must wait for the first's
// lock on the object, then see its deletion and mark the object. Without
// the lock the second would see the first's batch, still there, and
// neither would mark it (github.com/aiven/inkless/pull/782).
func TestConcurrentEmptyingMarksObject(t *testing.T) {
	cp := openFresh(t, time.Now)
	defer cp.Close()
	ctx := context.Background()
	topic := wal.TopicID{0x78, 0x82}
	require.NoError(t, cp.CreatePartitions(ctx, []wal.CreatePartitionsRequest{{TopicID: topic, Topic: "shared", NumPartitions: 2}}))
	p0, p1 := wal.TopicIDPartition{TopicID: topic}, wal.TopicIDPartition{TopicID: topic, Partition: 1}
	mk := func(tp wal.TopicIDPartition, at int64) wal.CommitBatch {
		return wal.CommitBatch{Partition: tp, ByteOffset: at, Size: 5, LastOffset: 4, RecordCount: 5, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	}
	_, err := cp.CommitFile(ctx, wal.CommitFileRequest{ObjectKey: "shared/1", ObjectSize: 10, Batches: []wal.CommitBatch{mk(p0, 0), mk(p1, 5)}})
	require.NoError(t, err)

	paused, release := pauseOnce(pgcp.SetTestHookAfterEmptinessCheck)
	defer pgcp.SetTestHookAfterEmptinessCheck(nil)

	firstDone := make(chan error, 1)
	go func() {
		_, err := cp.DeleteRecords(ctx, []wal.DeleteRecordsRequest{{Partition: p0, Offset: -1}})
		firstDone <- err
	}()
	<-paused
	secondDone := make(chan error, 1)
	go func() {
		_, err := cp.DeleteRecords(ctx, []wal.DeleteRecordsRequest{{Partition: p1, Offset: -1}})
		secondDone <- err
	}()
	// The second either finished (the lock is missing) or waits on a lock.
	waitForLockWait(t, secondDone)
	release()
	require.NoError(t, <-firstDone)
	require.NoError(t, <-secondDone)
	files, err := cp.FilesToDelete(ctx, time.Now().Add(time.Hour), 0)
	require.NoError(t, err)
	require.Len(t, files, 1, "the emptied object must be marked")
	require.Equal(t, "shared/1", files[0].ObjectKey)
}

// Two brokers commit the same idempotent batch (a producer's retry sent
// to both) at once: the second waits on the partition lock while the
// first is between its decisions and its COMMIT, and must then see the
// first's producer state and answer DUPLICATE_SEQUENCE with the first's
// offset, not assign the sequence again (the producers are read under
// the lock, not before it).
//
// The brokers are two control planes on one schema: the commits of one
// plane would go as one group instead (see TestGroupCommitSeesProducerState).
func TestConcurrentIdempotentCommitSeesProducerState(t *testing.T) {
	ctx := context.Background()
	schema := fmt.Sprintf("t%d", schemaSeq.Add(1))
	cp, err := pgcp.Open(ctx, pgcp.Options{ConnString: databaseURL(t), Schema: schema})
	require.NoError(t, err)
	defer cp.Close()
	cp2, err := pgcp.Open(ctx, pgcp.Options{ConnString: databaseURL(t), Schema: schema})
	require.NoError(t, err)
	defer cp2.Close()
	topic := wal.TopicID{0x1D, 0xE4}
	tp := wal.TopicIDPartition{TopicID: topic}
	require.NoError(t, cp.CreatePartitions(ctx, []wal.CreatePartitionsRequest{{TopicID: topic, Topic: "idem", NumPartitions: 1}}))
	req := func(key string) wal.CommitFileRequest {
		return wal.CommitFileRequest{ObjectKey: key, ObjectSize: 5, Batches: []wal.CommitBatch{{
			Partition: tp, Size: 5, LastOffset: 2, RecordCount: 3, ProducerID: 7, ProducerEpoch: 0, BaseSequence: 0}}}
	}
	paused, release := pauseOnce(pgcp.SetTestHookBeforeCommit)
	defer pgcp.SetTestHookBeforeCommit(nil)
	type answer struct {
		res wal.CommitFileResult
		err error
	}
	firstDone, secondDone := make(chan answer, 1), make(chan answer, 1)
	go func() {
		res, err := cp.CommitFile(ctx, req("idem/1"))
		firstDone <- answer{res, err}
	}()
	<-paused
	go func() {
		res, err := cp2.CommitFile(ctx, req("idem/2"))
		secondDone <- answer{res, err}
	}()
	waitForLockWait(t, secondDone)
	release()
	a1, a2 := <-firstDone, <-secondDone
	require.NoError(t, a1.err)
	require.NoError(t, a2.err)
	require.NoError(t, a1.res.Batches[0].Err)
	require.ErrorIs(t, a2.res.Batches[0].Err, wal.ErrDuplicateSequence)
	require.Equal(t, a1.res.Batches[0].BaseOffset, a2.res.Batches[0].BaseOffset)
	info, err := cp.LogInfo(ctx, tp)
	require.NoError(t, err)
	require.Equal(t, int64(3), info.HighWatermark, "the sequence assigned once")
}

// pauseOnce installs a test hook through set that stops its first call
// until release (later calls pass); paused is closed once it stopped.
// The caller resets the hook.
func pauseOnce(set func(func())) (paused <-chan struct{}, release func()) {
	stopped, resume := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	set(func() {
		if !first.Swap(true) {
			close(stopped)
			<-resume
		}
	})
	var once sync.Once
	return stopped, func() { once.Do(func() { close(resume) }) }
}

// waitForLockWait returns once a call running behind a paused
// transaction either answered on done (the answer is put back; answered
// is true: nothing made it wait) or waits on a lock, as PostgreSQL's
// pg_stat_activity shows for a tierlog-pgcp session.
func waitForLockWait[T any](t testing.TB, done chan T) (answered bool) {
	url := databaseURL(t)
	for {
		select {
		case a := <-done:
			done <- a
			return true
		default:
		}
		if lockWaiters(t, url) > 0 {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func lockWaiters(t testing.TB, url string) int {
	ctx := context.Background()
	conn, err := pgconn.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	res := conn.ExecParams(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND application_name = 'tierlog-pgcp'`,
		nil, nil, nil, nil).Read()
	require.NoError(t, res.Err)
	var n int
	_, err = fmt.Sscan(string(res.Rows[0][0]), &n)
	require.NoError(t, err)
	return n
}

// IsSafeToDeleteObject of a key whose commit is in flight waits for that
// commit (the reservation's row is locked from the commit's first
// statement to its COMMIT) and then says the object is registered. Asked
// without the wait it would find no file row yet and call the object
// safe to delete: the cleaner would delete an object a moment before the
// control plane starts serving its batches.
func TestIsSafeToDeleteObjectWaitsForCommit(t *testing.T) {
	ctx := context.Background()
	cp := openFresh(t, time.Now)
	defer cp.Close()
	topic := wal.TopicID{0x5a, 0xfe}
	tp := wal.TopicIDPartition{TopicID: topic}
	require.NoError(t, cp.CreatePartitions(ctx, []wal.CreatePartitionsRequest{{TopicID: topic, Topic: "safe", NumPartitions: 1}}))
	req := wal.CommitFileRequest{ObjectKey: "safe/1", ObjectSize: 4, Batches: []wal.CommitBatch{{
		Partition: tp, Size: 4, LastOffset: 3, RecordCount: 4, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}}}
	require.NoError(t, cp.ReserveObject(ctx, req.ObjectKey))

	paused, release := pauseOnce(pgcp.SetTestHookBeforeCommit)
	defer pgcp.SetTestHookBeforeCommit(nil)
	committed := make(chan error, 1)
	go func() {
		_, err := cp.CommitFile(ctx, req)
		committed <- err
	}()
	<-paused
	type answer struct {
		safe bool
		err  error
	}
	asked := make(chan answer, 1)
	go func() {
		safe, err := cp.IsSafeToDeleteObject(ctx, req.ObjectKey)
		asked <- answer{safe, err}
	}()
	early := waitForLockWait(t, asked)
	release() // before any assertion: Close waits for the commit
	require.NoError(t, <-committed)
	require.False(t, early, "IsSafeToDeleteObject answered while the commit was in flight")
	a := <-asked
	require.NoError(t, a.err)
	require.False(t, a.safe, "the commit registered the object")
}

// A reaped key stays reaped after the cleaner deleted the orphan and
// DeleteFiles dropped its row: the tombstone refuses a late commit and a
// new reservation.
func TestReapedKeyTombstone(t *testing.T) {
	now := time.UnixMilli(1_767_225_600_000)
	cp := openFresh(t, func() time.Time { return now })
	defer cp.Close()
	ctx := context.Background()
	topic := wal.TopicID{0x7e, 0x4b}
	require.NoError(t, cp.CreatePartitions(ctx, []wal.CreatePartitionsRequest{{TopicID: topic, Topic: "reaped", NumPartitions: 1}}))
	require.NoError(t, cp.ReserveObject(ctx, "r/late"))
	now = now.Add(time.Minute)
	keys, err := cp.ExpireReservations(ctx, now, 0)
	require.NoError(t, err)
	require.Equal(t, []string{"r/late"}, keys)
	require.NoError(t, cp.DeleteFiles(ctx, keys))
	files, err := cp.FilesToDelete(ctx, now.Add(time.Hour), 0)
	require.NoError(t, err)
	require.Empty(t, files)

	late := wal.CommitFileRequest{ObjectKey: "r/late", ObjectSize: 3, Batches: []wal.CommitBatch{{
		Partition: wal.TopicIDPartition{TopicID: topic}, Size: 3, LastOffset: 2, RecordCount: 3,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}}}
	_, err = cp.CommitFile(ctx, late)
	require.ErrorIs(t, err, wal.ErrObjectKeyReused)
	require.ErrorIs(t, cp.ReserveObject(ctx, "r/late"), wal.ErrObjectKeyReused)
	info, err := cp.LogInfo(ctx, wal.TopicIDPartition{TopicID: topic})
	require.NoError(t, err)
	require.Equal(t, int64(0), info.HighWatermark)
}

// Options.TLS is enforced: against a server without TLS, Open fails
// rather than falling back to plaintext.
func TestTLSRequired(t *testing.T) {
	srv := pgtest.Start(t)
	if srv.External() {
		t.Skip("an existing server may speak TLS")
	}
	_, err := pgcp.Open(context.Background(), pgcp.Options{ConnString: databaseURL(t), TLS: &tls.Config{MinVersion: tls.VersionTLS12}})
	require.ErrorIs(t, err, pgcp.ErrUnreachable)
}

// A cancelled context fails the call with the context's error.
func TestContextCancelled(t *testing.T) {
	cp := openFresh(t, time.Now)
	defer cp.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := cp.CommitFile(ctx, wal.CommitFileRequest{ObjectKey: "k"})
	require.ErrorIs(t, err, context.Canceled)
	_, err = cp.LogInfo(ctx, wal.TopicIDPartition{TopicID: wal.TopicID{1}})
	require.ErrorIs(t, err, context.Canceled)
}

// A connection lost after COMMIT was sent is not retried inside the
// call: the server commits, the client cannot know, and the call fails
// with ErrOutcomeUnknown. IsSafeToDeleteObject says the object is
// registered, and the writer's retry of the same request gets the first
// commit's answer without assigning offsets twice. (The proxy cuts once
// the server has finished the COMMIT: pgx's CancelRequest after the cut
// then finds nothing to cancel.)
func TestLostCommitAnswer(t *testing.T) {
	srv := pgtest.Start(t)
	proxy := pgtest.NewCutProxy(t, net.JoinHostPort(srv.Host, strconv.Itoa(srv.Port)), 1, 0, 0)
	proxied := withHost(t, databaseURL(t), proxy.Addr)
	schema := fmt.Sprintf("t%d", schemaSeq.Add(1))
	cp, err := pgcp.Open(context.Background(), pgcp.Options{ConnString: proxied, Schema: schema})
	require.NoError(t, err)
	defer cp.Close()
	ctx := context.Background()
	topic := wal.TopicID{0x10, 0x57}
	tp := wal.TopicIDPartition{TopicID: topic}
	require.NoError(t, cp.CreatePartitions(ctx, []wal.CreatePartitionsRequest{{TopicID: topic, Topic: "lost", NumPartitions: 1}}))
	req := wal.CommitFileRequest{ObjectKey: "lost/1", ObjectSize: 4, Batches: []wal.CommitBatch{{
		Partition: tp, Size: 4, LastOffset: 3, RecordCount: 4, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}}}

	// A first commit prepares the statements (pgx caches them per
	// connection), so the next bytes out after the hook are the pipeline
	// that ends in COMMIT, not its statements' descriptions.
	warm := req
	warm.ObjectKey = "lost/0"
	_, err = cp.CommitFile(ctx, warm)
	require.NoError(t, err)
	require.NoError(t, cp.ReserveObject(ctx, req.ObjectKey)) // as the writer does
	var once atomic.Bool
	pgcp.SetTestHookBeforeCommit(func() {
		if !once.Swap(true) {
			proxy.LoseNextAnswer() // the next bytes out end in the COMMIT
		}
	})
	defer pgcp.SetTestHookBeforeCommit(nil)
	_, err = cp.CommitFile(ctx, req)
	require.ErrorIs(t, err, pgcp.ErrOutcomeUnknown)
	safe, err := cp.IsSafeToDeleteObject(ctx, req.ObjectKey)
	require.NoError(t, err)
	require.False(t, safe, "the COMMIT reached the server")
	res, err := cp.CommitFile(ctx, req)
	require.NoError(t, err)
	require.NoError(t, res.Batches[0].Err)
	require.Equal(t, int64(4), res.Batches[0].BaseOffset)
	info, err := cp.LogInfo(ctx, tp)
	require.NoError(t, err)
	require.Equal(t, int64(8), info.HighWatermark, "offsets assigned once")
	m := cp.Metrics()
	require.Equal(t, int64(2), m.Commits, "the warm-up and the retry")
	require.Equal(t, int64(1), m.CommitErrors)
	require.Equal(t, int64(1), m.OutcomeUnknown)
	require.Positive(t, m.CommitLatencySum)
	// Three group transactions ran (the warm-up, the lost one, the
	// retry); each stage's time is counted, and the stages fit inside
	// the calls' latency.
	st := m.CommitStages
	require.Equal(t, int64(3), st.Attempts)
	require.Positive(t, st.Read)
	require.Positive(t, st.Decide)
	require.Positive(t, st.Write)
	require.LessOrEqual(t, st.Acquire+st.Read+st.Decide+st.Write, m.CommitLatencySum)
}

// With no connection string, the standard PG* environment says where and
// as whom to connect, as libpq does.
func TestOpenFromEnvironment(t *testing.T) {
	u, err := url.Parse(databaseURL(t))
	require.NoError(t, err)
	pw, _ := u.User.Password()
	t.Setenv("PGHOST", u.Hostname())
	t.Setenv("PGPORT", u.Port())
	t.Setenv("PGUSER", u.User.Username())
	t.Setenv("PGPASSWORD", pw)
	t.Setenv("PGDATABASE", strings.TrimPrefix(u.Path, "/"))
	t.Setenv("PGSSLMODE", u.Query().Get("sslmode"))
	cp, err := pgcp.Open(context.Background(), pgcp.Options{Schema: fmt.Sprintf("t%d", schemaSeq.Add(1))})
	require.NoError(t, err)
	require.NoError(t, cp.Close())
}
