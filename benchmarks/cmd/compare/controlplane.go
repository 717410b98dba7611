package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tierlog/tierlog/internal/harness/pgtest"
	"github.com/tierlog/tierlog/wal"
	"github.com/tierlog/tierlog/wal/pebblecp"
	"github.com/tierlog/tierlog/wal/pgcp"
)

// The tierlog-only control-plane rows: CommitFile of objects of 10
// batches and FindBatches in a long partition, on the Pebble control
// plane (vfs.Default, synced commits) and on the PostgreSQL one (fsync
// and synchronous_commit on), each beside the raw durable write of its
// store in the same repetition: a synced Pebble batch of as many keys as
// the commit writes rows, and a PostgreSQL INSERT of as many rows in one
// transaction.

const (
	cpBatches  = 10 // batches per committed object
	cpShared   = 16 // partitions the writers share
	cpWriters  = 16 // the PostgreSQL section's concurrent writers
	cpFindRun  = 50 // batches one FindBatches returns
	cpFillSize = 1000

	rowCPPebbleRaw = "raw Pebble: a synced batch of 11 keys"
	rowCPPebble    = "tierlog pebblecp CommitFile"
	rowCPPGRaw     = "raw PostgreSQL: INSERT of 11 rows, one transaction"
	rowCPPG        = "tierlog pgcp CommitFile"
	rowCPPGOne     = "raw PostgreSQL: INSERT of 1 row, one transaction (a synced commit's floor)"
	rowFindPebble  = "tierlog pebblecp FindBatches"
	rowFindPG      = "tierlog pgcp FindBatches"
)

var (
	cpMetrics   = []metricSpec{{"commits/s", true}, {"p50 ms", false}, {"p99 ms", false}, {"mean ms", false}}
	findMetrics = []metricSpec{{"p50 µs", false}, {"p99 µs", false}}
	// stageMetrics are the pgcp commit's stages, per group transaction.
	stageMetrics = []metricSpec{{"ms a group", false}, {"share", false}}
	cpTopic      = wal.TopicID{0xC0, 0x9E}
)

// cpSection is a commit section's title and shape.
type cpSection struct {
	title   string
	writers int
	pg      bool
}

// cpRun is the control-plane part of a run.
type cpRun struct {
	cfg     config
	dir     string
	pgURL   string // empty: no PostgreSQL rows
	pgNote  string
	schemas atomic.Int64
	// The FindBatches planes, filled once (first repetition) and read by
	// every repetition; fill is how long each fill took.
	findCP map[string]wal.ControlPlane
	fill   map[string]time.Duration
}

func (r *cpRun) sections() []cpSection {
	s := []cpSection{{fmt.Sprintf("Control plane commit, %d-batch objects, 1 writer, Pebble", cpBatches), 1, false}}
	if r.pgURL != "" {
		s = append(s, cpSection{fmt.Sprintf("Control plane commit, %d-batch objects, %d writers on %d shared partitions, PostgreSQL",
			cpBatches, cpWriters, cpShared), cpWriters, true})
	}
	return s
}

func (r *cpRun) findSection() string {
	return fmt.Sprintf("FindBatches, %s batches in one partition, %d a find", thousands(int64(r.cfg.cpFindBatches)), cpFindRun)
}

// runRep runs every control-plane row once, the raw row and tierlog's
// in alternating order.
func (r *cpRun) runRep(rep int, res *results, stderr io.Writer, since func() float64) {
	for _, s := range r.sections() {
		rows := []string{rowCPPebbleRaw, rowCPPebble}
		if s.pg {
			rows = []string{rowCPPGRaw, rowCPPG, rowCPPGOne}
		}
		for k := range rows {
			row := rows[(k+rep)%len(rows)]
			fmt.Fprintf(stderr, "[%6.1fs] rep %d/%d %s: %s\n", since(), rep+1, r.cfg.reps, s.title, row)
			if err := r.commitRow(s, row, rep, res); err != nil {
				res.note(s.title, row, "error: "+err.Error())
			}
		}
	}
	if r.cfg.cpFindBatches > 0 {
		sec := r.findSection()
		for _, row := range r.findRows() {
			fmt.Fprintf(stderr, "[%6.1fs] rep %d/%d %s: %s\n", since(), rep+1, r.cfg.reps, sec, row)
			if err := r.findRow(row, res); err != nil {
				res.note(sec, row, "error: "+err.Error())
			}
		}
	}
}

func (r *cpRun) findRows() []string {
	if r.pgURL != "" {
		return []string{rowFindPebble, rowFindPG}
	}
	return []string{rowFindPebble}
}

// commitRow runs cfg.cpCommits commits (or raw writes) of one row from
// s.writers goroutines on a new plane or store.
func (r *cpRun) commitRow(s cpSection, row string, rep int, res *results) error {
	ctx := context.Background()
	dir := filepath.Join(r.dir, fmt.Sprintf("commit-%d-%d", rep, len(row)))
	defer os.RemoveAll(dir)
	var op func(w int, i int64) error
	var after func() // runs after the writers, before the plane closes
	switch row {
	case rowCPPebble, rowCPPG:
		cp, closeCP, err := r.openPlane(row == rowCPPG, dir, s.writers)
		if err != nil {
			return err
		}
		defer closeCP()
		op = func(w int, i int64) error {
			_, err := cp.CommitFile(ctx, cpRequest(fmt.Sprintf("wal/c-%d-%09d", w, i), cpBatches, 0, cpShared))
			return err
		}
		if pg, ok := cp.(*pgcp.ControlPlane); ok {
			stopLocks := r.sampleLockWaits(ctx, s.title, res)
			after = func() {
				stopLocks()
				r.addStages(pg.Metrics(), res)
			}
		}
	case rowCPPebbleRaw:
		db, err := pebble.Open(dir, &pebble.Options{FS: vfs.Default})
		if err != nil {
			return err
		}
		defer db.Close()
		val := make([]byte, 64)
		op = func(w int, i int64) error {
			b := db.NewBatch()
			for k := range cpBatches + 1 {
				_ = b.Set(fmt.Appendf(nil, "k-%d-%09d-%02d", w, i, k), val, nil)
			}
			return b.Commit(pebble.Sync)
		}
	case rowCPPGRaw, rowCPPGOne:
		pool, table, err := r.rawTable(ctx, s.writers)
		if err != nil {
			return err
		}
		defer pool.Close()
		last := cpBatches
		if row == rowCPPGOne {
			last = 0
		}
		sql := "INSERT INTO " + table + " (w, i, k, v) SELECT $1, $2, g, repeat('x', 64) FROM generate_series(0, $3) AS g"
		op = func(w int, i int64) error {
			_, err := pool.Exec(ctx, sql, w, i, last)
			return err
		}
	}
	walStart := r.walLSN(ctx, s.pg)
	lats, elapsed, err := runWriters(s.writers, int64(r.cfg.cpCommits), op)
	if after != nil {
		after()
	}
	if walEnd := r.walLSN(ctx, s.pg); walStart != "" && walEnd != "" && err == nil {
		if kib, ok := r.walKiB(ctx, walStart, walEnd); ok {
			res.note(s.title, row, fmt.Sprintf("%.1f KiB of WAL a commit", kib/float64(len(lats))))
		}
	}
	if err != nil {
		return err
	}
	var sum time.Duration
	for _, l := range lats {
		sum += l
	}
	res.addRow(s.title, row, "commits/s", float64(len(lats))/elapsed.Seconds())
	res.addRow(s.title, row, "p50 ms", ms(percentile(lats, 0.5)))
	res.addRow(s.title, row, "p99 ms", ms(percentile(lats, 0.99)))
	res.addRow(s.title, row, "mean ms", ms(sum/time.Duration(len(lats))))
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// walLSN is the server's WAL insert position ("" without PostgreSQL or
// on an error: the WAL note is then left out).
func (r *cpRun) walLSN(ctx context.Context, pg bool) string {
	if !pg {
		return ""
	}
	conn, err := pgx.Connect(ctx, r.pgURL)
	if err != nil {
		return ""
	}
	defer conn.Close(ctx)
	var lsn string
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&lsn); err != nil {
		return ""
	}
	return lsn
}

// walKiB is the WAL written between two positions, in KiB.
func (r *cpRun) walKiB(ctx context.Context, from, to string) (float64, bool) {
	conn, err := pgx.Connect(ctx, r.pgURL)
	if err != nil {
		return 0, false
	}
	defer conn.Close(ctx)
	var b float64
	if err := conn.QueryRow(ctx, "SELECT pg_wal_lsn_diff($2::pg_lsn, $1::pg_lsn)::float8", from, to).Scan(&b); err != nil {
		return 0, false
	}
	return b / 1024, true
}

// stageSection is the title of the pgcp commit's breakdown.
func (r *cpRun) stageSection() string {
	return fmt.Sprintf("Where a pgcp commit's time goes, %d writers on %d shared partitions (per group transaction, client-side)", cpWriters, cpShared)
}

// stageRows are the breakdown's rows, in order.
var stageRows = []string{"queue: waiting for the groups before one's own", "acquire a pooled connection",
	"read pipeline: BEGIN, register, lock the partitions' rows, producers (1 round trip)",
	"decide in Go (and answer retried keys)", "write pipeline: rows, high watermarks, answers, COMMIT (1 round trip + WAL flush)"}

// addStages adds the breakdown of a pgcp commit row from the plane's
// counters: the group stages per attempt, and the queue wait as a
// call's mean latency less its group's stages.
func (r *cpRun) addStages(m pgcp.Metrics, res *results) {
	st := m.CommitStages
	calls := m.Commits + m.CommitErrors
	if st.Attempts == 0 || calls == 0 {
		return
	}
	per := func(d time.Duration) float64 { return ms(d) / float64(st.Attempts) }
	group := per(st.Acquire) + per(st.Read) + per(st.Decide) + per(st.Write)
	queue := max(0, ms(m.CommitLatencySum)/float64(calls)-group)
	vals := []float64{queue, per(st.Acquire), per(st.Read), per(st.Decide), per(st.Write)}
	total := queue + group
	sec := r.stageSection()
	for i, row := range stageRows {
		res.addRow(sec, row, "ms a group", vals[i])
		res.addRow(sec, row, "share", 100*vals[i]/total)
	}
	res.note(sec, stageRows[0], fmt.Sprintf("%.1f commits a group (%d groups)", float64(calls)/float64(max(m.CommitGroups, 1)), m.CommitGroups))
}

// sampleLockWaits counts, every millisecond until the returned stop is
// called, whether any lock of the server is waited for (pg_locks, not
// granted), and notes the share of samples that found one.
func (r *cpRun) sampleLockWaits(ctx context.Context, sec string, res *results) (stop func()) {
	conn, err := pgx.Connect(ctx, r.pgURL)
	if err != nil {
		res.note(sec, rowCPPG, "lock sampling: "+err.Error())
		return func() {}
	}
	done := make(chan struct{})
	var samples, waiting int
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			var n int
			if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE NOT granted").Scan(&n); err != nil {
				return
			}
			samples++
			if n > 0 {
				waiting++
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
		_ = conn.Close(ctx)
		if samples > 0 {
			res.note(r.stageSection(), stageRows[2], fmt.Sprintf("a lock waited for in %d of %d pg_locks samples (1 ms apart)", waiting, samples))
		}
	}
}

// runWriters calls op n times from writers goroutines and returns the
// sorted latencies and the elapsed time.
func runWriters(writers int, n int64, op func(w int, i int64) error) ([]time.Duration, time.Duration, error) {
	var next atomic.Int64
	lats := make([][]time.Duration, writers)
	errs := make([]error, writers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= n; i = next.Add(1) {
				t0 := time.Now()
				if err := op(w, i); err != nil {
					errs[w] = err
					return
				}
				lats[w] = append(lats[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	var all []time.Duration
	for w := range writers {
		if errs[w] != nil {
			return nil, 0, errs[w]
		}
		all = append(all, lats[w]...)
	}
	slices.Sort(all)
	return all, elapsed, nil
}

// openPlane opens a new, empty control plane with the shared partitions
// created: Pebble in dir, or PostgreSQL in a schema of its own.
func (r *cpRun) openPlane(pg bool, dir string, conns int) (wal.ControlPlane, func(), error) {
	ctx := context.Background()
	var cp wal.ControlPlane
	var closeCP func()
	if pg {
		p, err := pgcp.Open(ctx, pgcp.Options{ConnString: r.pgURL, Schema: fmt.Sprintf("cp%d", r.schemas.Add(1)),
			MaxConns: int32(max(conns, 8))})
		if err != nil {
			return nil, nil, err
		}
		cp, closeCP = p, func() { _ = p.Close() }
	} else {
		p, err := pebblecp.Open(vfs.Default, dir, pebblecp.Options{})
		if err != nil {
			return nil, nil, err
		}
		cp, closeCP = p, func() { _ = p.Close() }
	}
	err := cp.CreatePartitions(ctx, []wal.CreatePartitionsRequest{{TopicID: cpTopic, Topic: "compare", NumPartitions: cpShared}})
	if err != nil {
		closeCP()
		return nil, nil, err
	}
	return cp, closeCP, nil
}

// rawTable makes a new table for the raw PostgreSQL row.
func (r *cpRun) rawTable(ctx context.Context, conns int) (*pgxpool.Pool, string, error) {
	cfg, err := pgxpool.ParseConfig(r.pgURL)
	if err != nil {
		return nil, "", err
	}
	cfg.MaxConns = int32(max(conns, 8))
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, "", err
	}
	table := fmt.Sprintf("raw%d", r.schemas.Add(1))
	if _, err := pool.Exec(ctx, "CREATE TABLE "+table+" (w int, i bigint, k int, v text, PRIMARY KEY (w, i, k))"); err != nil {
		pool.Close()
		return nil, "", err
	}
	return pool, table, nil
}

// cpRequest is an object of n batches of one record each, spread
// round-robin over partitions [first, first+partitions).
func cpRequest(key string, n int, first, partitions int32) wal.CommitFileRequest {
	req := wal.CommitFileRequest{ObjectKey: key, ObjectSize: int64(n) * 100}
	for j := range n {
		req.Batches = append(req.Batches, wal.CommitBatch{
			Partition:  wal.TopicIDPartition{TopicID: cpTopic, Partition: first + int32(j)%partitions},
			ByteOffset: int64(j) * 100, Size: 100, LastOffset: 0, RecordCount: 1,
			MaxTimestamp: 1000, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
		})
	}
	return req
}

// findRow runs FindBatches of cpFindRun batches from random offsets of
// the filled partition (filling it by CommitFile of cpFillSize-batch
// objects the first time).
func (r *cpRun) findRow(row string, res *results) error {
	ctx := context.Background()
	sec, n := r.findSection(), int64(r.cfg.cpFindBatches)
	cp := r.findCP[row]
	if cp == nil {
		var err error
		var closeCP func()
		cp, closeCP, err = r.openPlane(row == rowFindPG, filepath.Join(r.dir, "find-pebble"), 8)
		if err != nil {
			return err
		}
		t0 := time.Now()
		for i := range (n + cpFillSize - 1) / cpFillSize {
			if _, err := cp.CommitFile(ctx, cpRequest(fmt.Sprintf("wal/fill-%09d", i), cpFillSize, 0, 1)); err != nil {
				closeCP()
				return fmt.Errorf("fill: %w", err)
			}
		}
		r.fill[row] = time.Since(t0)
		r.findCP[row] = cp
		res.note(sec, row, fmt.Sprintf("filled by %d commits of %d batches in %.1f s", (n+cpFillSize-1)/cpFillSize,
			cpFillSize, r.fill[row].Seconds()))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	tp := wal.TopicIDPartition{TopicID: cpTopic}
	lats := make([]time.Duration, 0, r.cfg.cpFinds)
	for range r.cfg.cpFinds {
		req := wal.FindBatchesRequest{MaxBytes: 1 << 20, Partitions: []wal.FindPartition{
			{Partition: tp, Offset: rng.Int64N(n - cpFindRun), MaxPartitionBytes: cpFindRun * 100}}}
		t0 := time.Now()
		out, err := cp.FindBatches(ctx, req)
		lats = append(lats, time.Since(t0))
		if err != nil {
			return err
		}
		if out[0].Err != nil || len(out[0].Batches) != cpFindRun {
			return fmt.Errorf("find: %v, %d batches, want %d", out[0].Err, len(out[0].Batches), cpFindRun)
		}
	}
	slices.Sort(lats)
	res.addRow(sec, row, "p50 µs", float64(percentile(lats, 0.5))/float64(time.Microsecond))
	res.addRow(sec, row, "p99 µs", float64(percentile(lats, 0.99))/float64(time.Microsecond))
	return nil
}

func (r *cpRun) close() {
	for _, cp := range r.findCP {
		if c, ok := cp.(io.Closer); ok {
			_ = c.Close()
		}
	}
	_ = os.RemoveAll(r.dir)
}

// newCPRun sets up the control-plane rows; pg is the PostgreSQL server
// (nil: Pebble rows only).
func newCPRun(dir string, cfg config, pgURL, pgNote string) *cpRun {
	return &cpRun{cfg: cfg, dir: dir, pgURL: pgURL, pgNote: pgNote,
		findCP: map[string]wal.ControlPlane{}, fill: map[string]time.Duration{}}
}

// startPG starts the tests' PostgreSQL server with fsync on (so that a
// commit pays for durability) and returns it and a new database's URL.
func startPG(ctx context.Context) (*pgtest.Server, string, error) {
	if err := os.Setenv(pgtest.EnvFsync, "1"); err != nil {
		return nil, "", err
	}
	srv, err := pgtest.StartServer(ctx)
	if err != nil {
		return nil, "", err
	}
	url, err := srv.CreateDatabase()
	if err != nil {
		srv.Stop()
		return nil, "", err
	}
	return srv, url, nil
}

// printCP prints the control-plane tables and their goals.
func printCP(w io.Writer, r *cpRun, res *results) {
	fmt.Fprint(w, "### tierlog only: control-plane commits and finds beside the raw durable write\n\n")
	fmt.Fprintf(w, "Commit: %d CommitFile calls per row and repetition, each an object of %d batches of one record over %d "+
		"shared partitions (so concurrent commits contend on the same partitions' rows, as brokers of one cluster do), "+
		"each call timed; a new plane per row (Pebble on vfs.Default, synced; PostgreSQL in a new schema, the server "+
		"with fsync and synchronous_commit on). Raw: the same number of durable writes of %d keys or rows from the same "+
		"number of writers, and for PostgreSQL a transaction of 1 row (the floor of one synced commit on this disk). "+
		"Find: %d FindBatches of %d batches from random offsets of one partition.\n\n",
		r.cfg.cpCommits, cpBatches, cpShared, cpBatches+1, r.cfg.cpFinds, cpFindRun)
	if r.pgNote != "" {
		fmt.Fprintf(w, "%s\n\n", r.pgNote)
	}
	for _, s := range r.sections() {
		fmt.Fprintf(w, "#### %s\n\n", s.title)
		rows := []string{rowCPPebbleRaw, rowCPPebble}
		if s.pg {
			rows = []string{rowCPPGRaw, rowCPPG, rowCPPGOne}
		}
		printRowsTable(w, s.title, rows, cpMetrics, res)
	}
	if len(r.sections()) > 1 {
		fmt.Fprintf(w, "#### %s\n\n", r.stageSection())
		printRowsTable(w, r.stageSection(), stageRows, stageMetrics, res)
	}
	if r.cfg.cpFindBatches > 0 {
		fmt.Fprintf(w, "#### %s\n\n", r.findSection())
		printRowsTable(w, r.findSection(), r.findRows(), findMetrics, res)
	}
	fmt.Fprint(w, "#### Goals (diskless control plane), checked against this run\n\n| goal | this run | met |\n|---|---|---|\n")
	goal := func(text, sec, row, metric string, ok func(float64) bool, format string) {
		if v, has := res.median(sec, row, metric); has {
			fmt.Fprintf(w, "| %s | "+format+" | %s |\n", text, v, yesNo(ok(v)))
		}
	}
	secs := r.sections()
	goal("Pebble commit, 1 writer: p99 < 1 ms", secs[0].title, rowCPPebble, "p99 ms", func(v float64) bool { return v < 1 }, "%.2f ms")
	if len(secs) > 1 {
		goal("PostgreSQL commit, 16 writers: at least 2,000 commits/s", secs[1].title, rowCPPG, "commits/s",
			func(v float64) bool { return v >= 2000 }, "%.0f/s")
		goal("PostgreSQL commit, 16 writers: p99 <= 10 ms", secs[1].title, rowCPPG, "p99 ms",
			func(v float64) bool { return v <= 10 }, "%.1f ms")
	}
	if r.cfg.cpFindBatches > 0 {
		for _, row := range r.findRows() {
			goal(row+": p99 <= 2 ms", r.findSection(), row, "p99 µs", func(v float64) bool { return v <= 2000 }, "%.0f µs")
		}
	}
	fmt.Fprintln(w)
}

// printRowsTable prints rows of one section: each metric's median, then
// each repetition's values, and the notes.
func printRowsTable(w io.Writer, sec string, rows []string, metrics []metricSpec, res *results) {
	cols := []string{"row"}
	for _, m := range metrics {
		cols = append(cols, m.name+": median (each repetition)")
	}
	cols = append(cols, "notes")
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(cols, " | "), strings.Repeat("---|", len(cols)))
	for _, name := range rows {
		row := []string{name}
		for _, m := range metrics {
			v := res.vals[cellKey{rowKey{sec, name}, m.name}]
			if len(v) == 0 {
				row = append(row, "–")
				continue
			}
			each := make([]string, len(v))
			for i, x := range v {
				each[i] = formatNum(x)
			}
			row = append(row, fmt.Sprintf("%s (%s)", formatNum(median(v)), strings.Join(each, ", ")))
		}
		row = append(row, strings.Join(res.notes[rowKey{sec, name}], "; "))
		fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
	}
	fmt.Fprintln(w)
}
