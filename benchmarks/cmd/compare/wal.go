package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote/objstore"
	"github.com/tierlog/tierlog/remote/objstore/fs"
	"github.com/tierlog/tierlog/remote/objstore/s3"
	"github.com/tierlog/tierlog/wal"
	"github.com/tierlog/tierlog/wal/pebblecp"
)

// The tierlog-only diskless-WAL rows: produce through wal.Writer (the
// Pebble control plane on vfs.Default, real fsyncs) into each object
// store of the run, beside a raw objstore Put of the same bytes in
// objects of the size the writer made, in the same repetition, the two
// in alternating order.

const (
	rowWALRaw    = "raw store: Put of objects of the writer's mean size, 8 at a time"
	rowWALWriter = "tierlog wal.Writer + Pebble control plane"

	// walUploads is the writer's default UploadConcurrency, and the raw
	// row's Puts at a time.
	walUploads = 8
	// walMaxBytes is the writer's default MaxBytes; walMaxBytes *
	// (walUploads+1) its default MaxBytesInFlight.
	walMaxBytes = 8 << 20
	// walCommitInterval replaces the 250 ms default, so that the tail of
	// a run does not wait for it.
	walCommitInterval = 5 * time.Millisecond
	walPartitions     = 64

	walRatioMetric = "MB/s ÷ raw, same repetition"
)

var (
	walBatchSizes = []int{16 << 10, 1 << 20}
	walRows       = []string{rowWALRaw, rowWALWriter}
	walMetrics    = []metricSpec{
		{"MB/s", true}, {"CPU s/GB", false}, {"p50 ack ms", false}, {"p99 ack ms", false},
		{"MiB/object", false}, {"commit ms (mean)", false}, {"commit p99 ms", false}, {"server CPU s/GB", false}, {"cores busy", false},
	}
	walTopic = wal.TopicID{0xC0, 0x3E}
)

// walTarget is one object store the WAL rows produce into.
type walTarget struct {
	name       string
	durability string
	store      objstore.Store
	err        error
	// serverCPU, when the store's server runs on this machine (the
	// tests' S3 server), is its CPU time so far: the rows charge it its
	// share, since it takes the same cores.
	serverCPU func() (time.Duration, error)
}

// walOptions are the WAL rows' own flags.
type walOptions struct {
	// cpuProfile, if set, is the stem of the CPU profile files of the
	// WAL rows: one per row, FILE.<store>-<batch size>.pprof for the
	// writer's and FILE.<store>-<batch size>-raw.pprof for the raw Put's,
	// each covering the row's timed region (of the last repetition).
	cpuProfile string
	// verbose adds an object's life in percentiles to each writer row.
	verbose bool
	// memControlPlane puts the writer rows' Pebble control plane on
	// vfs.NewMem: its commits cost Pebble's CPU but no disk write and no
	// fsync wait (what separates the plane's commit latency from the
	// rest of the writer).
	memControlPlane bool
}

// walRun is the WAL part of a run.
type walRun struct {
	cfg     config
	opts    walOptions
	dir     string
	targets []*walTarget
	s3Note  string
	// objectBytes is the writer's mean object size per section, for the
	// raw row (which runs second every other repetition, and then uses
	// the previous repetition's).
	objectBytes map[string]int64
	// consol is the consolidation rows (consolidate.go), nil when
	// -consolidate-mib is 0.
	consol *consolRun
}

func newWALRun(dir string, cfg config, opts walOptions) *walRun {
	r := &walRun{cfg: cfg, opts: opts, dir: dir, objectBytes: map[string]int64{}}
	if consolBytes() > 0 {
		r.consol = newConsolRun(filepath.Join(dir, "consolidate"), cfg.reps)
	}
	fsT := &walTarget{name: "fs", durability: "objstore/fs default: temp file, fsync, rename, fsync of the directory before Put returns; " +
		"the control plane's commit is a synced Pebble batch"}
	fsT.store, fsT.err = fs.Open(filepath.Join(dir, "store"), fs.Options{})
	r.targets = append(r.targets, fsT)
	if r.cfg.s3.endpoint == "" {
		r.s3Note = "S3 rows not run: no -s3-endpoint and -s3-bucket, nor -s3-test-server, given."
		return r
	}
	s3T := &walTarget{name: "S3", durability: "the PUT acknowledged by " + cfg.s3.where() + "; the commit a synced Pebble batch"}
	prefix := fmt.Sprintf("tierlog-compare-wal-%d/", time.Now().UnixNano())
	var st *s3.Store
	if st, s3T.err = s3.Open(context.Background(), cfg.s3.options(prefix)); s3T.err == nil {
		s3T.store = st
	}
	if srv := cfg.s3.srv; srv != nil {
		s3T.serverCPU = srv.CPUTime
	}
	r.targets = append(r.targets, s3T)
	return r
}

// serverCPUTime is the store's server's CPU time so far, 0 without one
// (or when /proc cannot tell).
func (t *walTarget) serverCPUTime() time.Duration {
	if t.serverCPU == nil {
		return 0
	}
	d, err := t.serverCPU()
	if err != nil {
		return 0
	}
	return d
}

func walSection(t *walTarget, batchBytes int) string {
	return fmt.Sprintf("diskless WAL produce, %s batches over %d partitions, %s store", sizeName(batchBytes), walPartitions, t.name)
}

// printWALGoals prints the goals of one WAL section: the writer's MB/s
// at least 0.9x the raw Put's (0.95x on S3, where the Put dominates), its
// CPU per GB at most 2x the raw Put's, and its p99 ack at most the raw
// Put's p99 plus one commit's p99 (the writer's own commits, this run).
func printWALGoals(w io.Writer, t *walTarget, sec string, res *results) {
	want := 0.9
	if t.name == "S3" {
		want = 0.95
	}
	if v := res.vals[cellKey{rowKey{sec, rowWALWriter}, walRatioMetric}]; len(v) > 0 {
		x := median(v)
		fmt.Fprintf(w, "| %s: at least %.2fx the raw Put MB/s (same repetition, median) | %.3fx | %s |\n", sec, want, x, yesNo(x >= want))
	}
	cpu, ok1 := res.median(sec, rowWALWriter, "CPU s/GB")
	rawCPU, ok2 := res.median(sec, rowWALRaw, "CPU s/GB")
	if ok1 && ok2 && rawCPU > 0 {
		fmt.Fprintf(w, "| %s: CPU per GB at most 2x the raw Put's | %.2fx (%.2f / %.2f s/GB) | %s |\n", sec, cpu/rawCPU, cpu, rawCPU, yesNo(cpu <= 2*rawCPU))
	}
	p99, ok1 := res.median(sec, rowWALWriter, "p99 ack ms")
	rawP99, ok2 := res.median(sec, rowWALRaw, "p99 ack ms")
	commit, ok3 := res.median(sec, rowWALWriter, "commit p99 ms")
	if ok1 && ok2 && ok3 {
		fmt.Fprintf(w, "| %s: p99 ack at most the raw Put's p99 + one commit's p99 | %.1f ms (%.1f + %.1f = %.1f) | %s |\n",
			sec, p99, rawP99, commit, rawP99+commit, yesNo(p99 <= rawP99+commit))
	}
}

func sizeName(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d KiB", n>>10)
}

// runRep runs one repetition of every target's WAL rows.
func (r *walRun) runRep(rep int, res *results, stderr io.Writer, since func() float64) {
	for _, t := range r.targets {
		if t.err != nil {
			continue
		}
		for _, size := range walBatchSizes {
			sec := walSection(t, size)
			mbs := map[string]float64{}
			for k := range walRows {
				// The writer first in the first repetition, so that the
				// raw row has its object size from the start.
				row := walRows[(k+rep+1)%len(walRows)]
				fmt.Fprintf(stderr, "[%6.1fs] rep %d/%d %s: %s\n", since(), rep+1, r.cfg.reps, sec, row)
				dir := filepath.Join(r.dir, fmt.Sprintf("cp-%d-%s-%d", rep, t.name, size))
				if err := warmPageCache(r.dir, r.cfg.walBytes); err != nil {
					res.note(sec, row, "page-cache warm-up: "+err.Error())
				}
				v, err := r.runRow(t, row, sec, size, dir, res)
				_ = os.RemoveAll(dir)
				if err != nil {
					res.note(sec, row, "error: "+err.Error())
					continue
				}
				mbs[row] = v
			}
			if raw := mbs[rowWALRaw]; raw > 0 && mbs[rowWALWriter] > 0 {
				res.addRow(sec, rowWALWriter, walRatioMetric, mbs[rowWALWriter]/raw)
			}
		}
	}
	if r.consol != nil {
		r.consol.runRep(rep, res, stderr, since)
	}
}

// runRow produces cfg.walBytes through one row and records its figures;
// it returns the row's MB/s. What the row stored is deleted afterwards,
// outside the timed region.
func (r *walRun) runRow(t *walTarget, row, sec string, batchBytes int, cpDir string, res *results) (float64, error) {
	ctx := context.Background()
	n := max(1, int(r.cfg.walBytes/int64(batchBytes)))
	var keys []string
	var phases []wal.ObjectPhases
	var keysMu sync.Mutex
	defer func() {
		for _, k := range keys {
			_ = t.store.Delete(ctx, k)
		}
	}()
	var lat []time.Duration
	var latMu sync.Mutex
	var failed atomic.Value
	var elapsed, cpu, srvCPU time.Duration
	var objBytes, commitMs, commitP99Ms float64
	switch row {
	case rowWALWriter:
		cpFS := vfs.Default
		if r.opts.memControlPlane {
			cpFS = vfs.NewMem()
		}
		cp, err := pebblecp.Open(cpFS, cpDir, pebblecp.Options{})
		if err != nil {
			return 0, err
		}
		defer cp.Close()
		if err := cp.CreatePartitions(ctx, []wal.CreatePartitionsRequest{{TopicID: walTopic, Topic: "compare", NumPartitions: walPartitions}}); err != nil {
			return 0, err
		}
		w, err := wal.NewWriter(wal.WriterOptions{Store: t.store, ControlPlane: cp, CommitInterval: walCommitInterval,
			MaxBytes: walMaxBytes, UploadConcurrency: walUploads,
			Listener: wal.WriterListener{ObjectCommitted: func(o wal.ObjectInfo) {
				keysMu.Lock()
				keys = append(keys, o.Key)
				phases = append(phases, o.Phases)
				keysMu.Unlock()
			}}})
		if err != nil {
			return 0, err
		}
		data, err := walBatch(batchBytes)
		if err != nil {
			return 0, err
		}
		// A closed loop with the writer's whole in-flight budget
		// outstanding (72 MiB: every upload slot busy and one object
		// filling), one batch per call, as many callers as that takes.
		producers := max(16, walMaxBytes*(walUploads+1)/batchBytes)
		var next atomic.Int64
		stopProfile, err := r.startProfile(t, batchBytes, "")
		if err != nil {
			return 0, err
		}
		srv0, cpu0, start := t.serverCPUTime(), cpuTime(), time.Now()
		var wg sync.WaitGroup
		for range producers {
			wg.Go(func() {
				var mine []time.Duration
				defer func() {
					latMu.Lock()
					lat = append(lat, mine...)
					latMu.Unlock()
				}()
				for {
					i := next.Add(1) - 1
					if i >= int64(n) {
						return
					}
					t0 := time.Now()
					res, err := w.Produce(ctx, []wal.ProduceRequest{{Partition: wal.TopicIDPartition{TopicID: walTopic, Partition: int32(i % walPartitions)}, Batches: data}})
					if err == nil {
						err = res[0].Err
					}
					if err == nil {
						err = res[0].Batches[0].Err
					}
					if err != nil {
						failed.Store(err)
						return
					}
					mine = append(mine, time.Since(t0))
				}
			})
		}
		wg.Wait()
		elapsed, cpu, srvCPU = time.Since(start), cpuTime()-cpu0, t.serverCPUTime()-srv0
		stopProfile()
		if err := w.Close(); err != nil {
			return 0, err
		}
		m := w.Metrics()
		if m.ObjectsUploaded > 0 {
			r.objectBytes[sec] = m.BytesUploaded / m.ObjectsUploaded
			objBytes = float64(r.objectBytes[sec])
		}
		if m.ObjectsCommitted > 0 {
			commitMs = float64(m.CommitLatencySum.Microseconds()) / 1e3 / float64(m.ObjectsCommitted)
		}
		commits := make([]time.Duration, len(phases))
		for i, p := range phases {
			commits[i] = p.Commit
		}
		slices.Sort(commits)
		commitP99Ms = float64(percentile(commits, 0.99).Microseconds()) / 1e3
		if r.opts.verbose {
			res.note(sec, row, objectLife(phases, m, elapsed))
		}
	case rowWALRaw:
		size := r.objectBytes[sec]
		if size == 0 {
			size = walMaxBytes // the writer's run failed: its target size
		}
		objBytes = float64(size)
		data := bytes.Repeat([]byte{0xa5}, int(size))
		puts := max(1, int(int64(n)*int64(batchBytes)/size))
		n = int(int64(puts) * size / int64(batchBytes)) // bytes actually moved, in batch units
		var next atomic.Int64
		stopProfile, err := r.startProfile(t, batchBytes, "-raw")
		if err != nil {
			return 0, err
		}
		srv0, cpu0, start := t.serverCPUTime(), cpuTime(), time.Now()
		var wg sync.WaitGroup
		for range walUploads {
			wg.Go(func() {
				for next.Add(1) <= int64(puts) {
					key := wal.NewObjectKey("raw")
					t0 := time.Now()
					if err := t.store.Put(ctx, key, bytes.NewReader(data), size, objstore.PutOptions{}); err != nil {
						failed.Store(err)
						return
					}
					d := time.Since(t0)
					latMu.Lock()
					lat = append(lat, d)
					latMu.Unlock()
					keysMu.Lock()
					keys = append(keys, key)
					keysMu.Unlock()
				}
			})
		}
		wg.Wait()
		elapsed, cpu, srvCPU = time.Since(start), cpuTime()-cpu0, t.serverCPUTime()-srv0
		stopProfile()
	}
	if err, _ := failed.Load().(error); err != nil {
		return 0, err
	}
	total := float64(n) * float64(batchBytes)
	mbs := total / elapsed.Seconds() / 1e6
	slices.Sort(lat)
	res.addRow(sec, row, "MB/s", mbs)
	res.addRow(sec, row, "CPU s/GB", cpu.Seconds()/(total/1e9))
	res.addRow(sec, row, "p50 ack ms", float64(percentile(lat, 0.50).Microseconds())/1e3)
	res.addRow(sec, row, "p99 ack ms", float64(percentile(lat, 0.99).Microseconds())/1e3)
	res.addRow(sec, row, "MiB/object", objBytes/(1<<20))
	if t.serverCPU != nil {
		// The server's CPU per GB, and the cores both processes kept busy:
		// at the machine's core count the run is CPU-bound, and a
		// writer's extra CPU per GB costs throughput one for one.
		res.addRow(sec, row, "server CPU s/GB", srvCPU.Seconds()/(total/1e9))
		res.addRow(sec, row, "cores busy", (cpu+srvCPU).Seconds()/elapsed.Seconds())
	}
	if row == rowWALWriter {
		res.addRow(sec, row, "commit ms (mean)", commitMs)
		res.addRow(sec, row, "commit p99 ms", commitP99Ms)
	}
	return mbs, nil
}

// startProfile starts the CPU profile of a row if -cpuprofile is set
// (suffix "" for the writer's, "-raw" for the raw Put's); the returned
// func stops it and closes its file.
func (r *walRun) startProfile(t *walTarget, batchBytes int, suffix string) (func(), error) {
	if r.opts.cpuProfile == "" {
		return func() {}, nil
	}
	name := fmt.Sprintf("%s.%s-%s%s.pprof", r.opts.cpuProfile, t.name, strings.ReplaceAll(sizeName(batchBytes), " ", ""), suffix)
	f, err := os.Create(name)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}

// objectLife sums up the objects' phases: p50/p90/p99 of each in ms (the
// reservation's call overlaps filling and its wait), how
// busy the upload slots and the commit calls kept, and objects per call.
func objectLife(phases []wal.ObjectPhases, m wal.WriterMetrics, elapsed time.Duration) string {
	if len(phases) == 0 || m.CommitCalls == 0 {
		return "no object committed"
	}
	parts := []struct {
		name string
		get  func(wal.ObjectPhases) time.Duration
	}{
		{"fill", func(p wal.ObjectPhases) time.Duration { return p.Filling }},
		{"reserve call", func(p wal.ObjectPhases) time.Duration { return p.ReserveCall }},
		{"reserve wait", func(p wal.ObjectPhases) time.Duration { return p.ReserveWait }},
		{"slot wait", func(p wal.ObjectPhases) time.Duration { return p.SlotWait }},
		{"build", func(p wal.ObjectPhases) time.Duration { return p.Build }},
		{"put", func(p wal.ObjectPhases) time.Duration { return p.Put }},
		{"commit wait", func(p wal.ObjectPhases) time.Duration { return p.CommitWait }},
		{"commit", func(p wal.ObjectPhases) time.Duration { return p.Commit }},
		{"answer", func(p wal.ObjectPhases) time.Duration { return p.Answer }},
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d.Microseconds())/1e3) }
	var b strings.Builder
	fmt.Fprintf(&b, "object life, ms p50/p90/p99 of %d objects:", len(phases))
	var slotBusy time.Duration
	for _, p := range phases {
		slotBusy += p.Build + p.Put
	}
	for _, part := range parts {
		ds := make([]time.Duration, len(phases))
		for i, p := range phases {
			ds[i] = part.get(p)
		}
		slices.Sort(ds)
		fmt.Fprintf(&b, " %s %s/%s/%s;", part.name, ms(percentile(ds, 0.5)), ms(percentile(ds, 0.9)), ms(percentile(ds, 0.99)))
	}
	// CommitLatencySum counts a call once per object: the calls' own
	// time is the mean per object times the calls.
	callTime := time.Duration(float64(m.CommitLatencySum) / float64(m.ObjectsCommitted+m.CommitErrors) * float64(m.CommitCalls))
	fmt.Fprintf(&b, " upload slots busy %.0f%%, a commit call in flight %.0f%% of the time, %.1f objects per call, %d Produce calls waited for room",
		100*slotBusy.Seconds()/(float64(walUploads)*elapsed.Seconds()), 100*callTime.Seconds()/elapsed.Seconds(),
		float64(m.ObjectsCommitted)/float64(m.CommitCalls), m.BackPressureWaits)
	return b.String()
}

// walBatch builds one client batch of about size bytes from 1 KiB
// records of random (incompressible) values.
func walBatch(size int) ([]byte, error) {
	const recordValue = 1 << 10
	bld := record.NewBuilder(record.DefaultBuilderOptions())
	value := make([]byte, recordValue)
	for n := 0; n+recordValue+64 <= size || n == 0; n += recordValue + 20 {
		_, _ = rand.Read(value)
		bld.Add(1_700_000_000_000, nil, value)
	}
	return bld.Build()
}

func (r *walRun) close() {
	if r.consol != nil {
		r.consol.close()
	}
	for _, t := range r.targets {
		if t.store != nil {
			_ = t.store.Close()
		}
	}
	_ = os.RemoveAll(r.dir)
}

// printWAL prints the WAL rows' tables and their goal.
func printWAL(w io.Writer, r *walRun, res *results) {
	fmt.Fprint(w, "### tierlog only: diskless WAL produce beside the raw object-store Put\n\n")
	fmt.Fprintf(w, "Produce: %s per row and repetition, one batch of 1 KiB random records per Produce call, round-robin over %d "+
		"partitions, from enough callers to keep the writer's whole in-flight budget outstanding (%d MiB = MaxBytes %d MiB x "+
		"(UploadConcurrency %d + 1)): a closed loop, each caller waits for its ack (object stored and committed). The writer "+
		"runs with its defaults except CommitInterval %s, on a new Pebble control plane (vfs.Default, synced commits) per row. "+
		"Raw: the same bytes as Puts of objects of the writer's mean size (of this repetition, or of the previous one when "+
		"raw runs first), %d at a time (the writer's upload slots). p50/p99 ack: per Produce call (writer) or per Put (raw). "+
		"The rows alternate in order each repetition; what a row stored is deleted after it, untimed; before each row a "+
		"scratch file of the row's size is written and removed, untimed (so that both rows write into memory touched lately).\n\n",
		mib(r.cfg.walBytes), walPartitions, walMaxBytes*(walUploads+1)>>20, walMaxBytes>>20, walUploads, walCommitInterval, walUploads)
	fmt.Fprint(w, "Each cell: median (ratio to the raw row's median).\n\n")
	if r.s3Note != "" {
		fmt.Fprintf(w, "%s\n\n", r.s3Note)
	}
	for _, t := range r.targets {
		if t.err != nil {
			fmt.Fprintf(w, "#### WAL, %s store\n\nNot measured: opening the store failed: %s.\n\n", t.name, t.err)
			continue
		}
		for _, size := range walBatchSizes {
			sec := walSection(t, size)
			fmt.Fprintf(w, "#### %s\n\nDurability: %s.\n\n", sec, t.durability)
			printWALTable(w, sec, res)
		}
	}
	if r.consol != nil {
		printConsolidation(w, r.consol, res)
	}
	fmt.Fprint(w, "#### Goals (diskless WAL), checked against this run\n\n| goal | this run | met |\n|---|---|---|\n")
	for _, t := range r.targets {
		if t.err != nil {
			continue
		}
		for _, size := range walBatchSizes {
			sec := walSection(t, size)
			printWALGoals(w, t, sec, res)
		}
	}
	printConsolidationGoals(w, r.consol, res)
	fmt.Fprintln(w)
}

func printWALTable(w io.Writer, sec string, res *results) {
	cols := []string{"row"}
	for _, m := range walMetrics {
		cols = append(cols, m.name)
	}
	cols = append(cols, walRatioMetric+": median (each repetition)", "notes")
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(cols, " | "), strings.Repeat("---|", len(cols)))
	for _, name := range walRows {
		row := []string{name}
		for _, m := range walMetrics {
			v, ok := res.median(sec, name, m.name)
			if !ok {
				row = append(row, "–")
				continue
			}
			ref, okRef := res.median(sec, walRows[0], m.name)
			row = append(row, fmt.Sprintf("%s (%s)", formatNum(v), ratio(v, ref, okRef)))
		}
		row = append(row, walSameRep(res, sec, name))
		row = append(row, strings.Join(res.notes[rowKey{sec, name}], "; "))
		fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
	}
	fmt.Fprintln(w)
}

func walSameRep(res *results, sec, name string) string {
	if name == rowWALRaw {
		return "1 (reference)"
	}
	v := res.vals[cellKey{rowKey{sec, name}, walRatioMetric}]
	if len(v) == 0 {
		return "–"
	}
	each := make([]string, len(v))
	for i, x := range v {
		each[i] = fmt.Sprintf("%.3f", x)
	}
	return fmt.Sprintf("%.3fx (%s)", median(v), strings.Join(each, ", "))
}

// runWALOnly runs the WAL rows alone (-wal-only) and prints their tables.
func runWALOnly(stdout, stderr io.Writer, root string, cfg config, opts walOptions, args []string, loadStart string) error {
	res := newResults()
	start := time.Now()
	since := func() float64 { return time.Since(start).Seconds() }
	wr := newWALRun(filepath.Join(root, "wal"), cfg, opts)
	defer wr.close()
	for rep := 0; rep < cfg.reps; rep++ {
		wr.runRep(rep, res, stderr, since)
	}
	fmt.Fprintf(stderr, "[%6.1fs] done\n", since())
	fmt.Fprintf(stdout, "Run %s on %d CPUs (%s), %s %s/%s.\n\ntierlog measured: %s.\n\nCommand: `cd benchmarks && go run ./cmd/compare%s`\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), runtime.NumCPU(), cpuModel(), runtime.Version(), runtime.GOOS, runtime.GOARCH,
		tierlogVersion(), strings.Join(append([]string{""}, args...), " "))
	fmt.Fprintf(stdout, "Load average (1, 5, 15 min) at start: %s, at end: %s.\n\n", loadStart, loadAvg())
	printWAL(stdout, wr, res)
	fmt.Fprintf(stdout, "Wall time of the run: %s.\n", time.Since(start).Round(time.Second))
	return nil
}
