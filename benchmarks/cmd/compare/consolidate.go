package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tierlog/tierlog/consolidate"
	"github.com/tierlog/tierlog/epochcache"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/remote"
	"github.com/tierlog/tierlog/remote/objstore/fs"
	"github.com/tierlog/tierlog/tierstate"
	"github.com/tierlog/tierlog/wal"
	"github.com/tierlog/tierlog/wal/pebblecp"
)

// The tierlog-only consolidation rows: the batches of a diskless
// partition, produced through wal.Writer into the fs store beforehand
// (untimed), copied into local logs by consolidate.Fetcher (the
// consolidation fetcher: consolidate.Endpoint over a wal.Reader and the
// Pebble control plane), beside a follower append (AppendAsFollower) of
// the same bytes, in the same appends, from memory into the same kind of
// log. The two rows alternate in order each repetition.

const (
	rowConsolFollower = "follower append: AppendAsFollower of the same appends from memory"
	rowConsolFetcher  = "tierlog consolidation: consolidate.Fetcher from the WAL (fs store, Pebble control plane)"

	consolBatchBytes  = 16 << 10
	consolRatioMetric = "MB/s ÷ follower append, same repetition"
)

// Flags of the consolidation rows, registered by consolidateFlags.
var (
	// consolMiB is what each consolidation row copies, in MiB; 0
	// skips them.
	consolMiB int64
	// consolProfile, if set, is the prefix of a CPU profile of each
	// consolidation row's timed region.
	consolProfile string
)

var (
	consolPartitions = []int{64, 1}
	consolRows       = []string{rowConsolFollower, rowConsolFetcher}
	consolMetrics    = []metricSpec{
		{"MB/s", true}, {"CPU s/GB", false}, {"allocs/batch", false}, {"alloc bytes/byte", false}, {"page faults/MiB", false}, {"KiB/append", true}, {"GETs/fetch", false}, {"bytes read/byte", false},
	}
	consolTopic = remote.UUID{0xC0, 0x50}
)

func consolBytes() int64 { return consolMiB << 20 }

// consolidateFlags registers the consolidation rows' flags on fl.
func consolidateFlags(fl interface {
	Int64Var(p *int64, name string, value int64, usage string)
	StringVar(p *string, name string, value string, usage string)
}) {
	fl.Int64Var(&consolMiB, "consolidate-mib", 256, "MiB per consolidation row and repetition, produced once to the WAL beforehand (0 skips the consolidation rows)")
	fl.StringVar(&consolProfile, "consolidate-cpuprofile", "", "write a CPU profile of each consolidation row's timed region to PREFIX-<partitions>p-rep<n>.pprof")
}

// consolSection is one partition count's data: the WAL it was produced
// into and what the untimed first consolidation appended.
type consolSection struct {
	name       string
	partitions int
	dir        string
	store      *fs.Store
	cp         *pebblecp.ControlPlane
	meta       *remote.MetadataManager
	// reader is the section's one WAL reader, made by the untimed first
	// consolidation and kept by the timed rows, as a broker keeps its
	// reader: its answer pool is warm (a new reader's first fetches
	// allocate their answers, which on the 2-vCPU VM cost from 0.56x to
	// 1.2x the follower row between repetitions of one run).
	reader *wal.Reader
	// ends is each partition's log end offset once consolidated.
	ends []int64
	// appends is every append of the untimed first consolidation, in
	// order: the follower row replays them.
	appends []consolAppend
	bytes   int64
	batches int64
	err     error
}

type consolAppend struct {
	part    int
	batches []byte
}

// consolRun is the consolidation part of a run.
type consolRun struct {
	dir       string
	reps      int
	sections  []*consolSection
	loadStart string
	loadEnd   string
}

func newConsolRun(dir string, reps int) *consolRun {
	r := &consolRun{dir: dir, reps: reps}
	for _, n := range consolPartitions {
		r.sections = append(r.sections, &consolSection{name: consolSectionName(n), partitions: n,
			dir: filepath.Join(dir, fmt.Sprintf("p%d", n))})
	}
	return r
}

func consolSectionName(partitions int) string {
	over := fmt.Sprintf("over %d partitions", partitions)
	if partitions == 1 {
		over = "one partition"
	}
	return fmt.Sprintf("consolidation, %s batches, %s, fs store", sizeName(consolBatchBytes), over)
}

// runRep runs one repetition of every section's rows; the first
// repetition first produces each section's data.
func (r *consolRun) runRep(rep int, res *results, stderr io.Writer, since func() float64) {
	if rep == 0 {
		r.loadStart = loadAvg()
	}
	for _, s := range r.sections {
		if rep == 0 {
			fmt.Fprintf(stderr, "[%6.1fs] %s: producing %s to the WAL, one untimed consolidation\n", since(), s.name, mib(consolBytes()))
			s.err = s.setup()
		}
		if s.err != nil {
			res.note(s.name, rowConsolFetcher, "error: "+s.err.Error())
			continue
		}
		mbs := map[string]float64{}
		for k := range consolRows {
			row := consolRows[(k+rep)%len(consolRows)]
			fmt.Fprintf(stderr, "[%6.1fs] rep %d/%d %s: %s\n", since(), rep+1, r.reps, s.name, row)
			v, err := s.runRow(row, rep, res)
			if err != nil {
				res.note(s.name, row, "error: "+err.Error())
				continue
			}
			mbs[row] = v
		}
		if ref := mbs[rowConsolFollower]; ref > 0 && mbs[rowConsolFetcher] > 0 {
			res.addRow(s.name, rowConsolFetcher, consolRatioMetric, mbs[rowConsolFetcher]/ref)
		}
	}
	if rep == r.reps-1 {
		r.loadEnd = loadAvg()
	}
}

// setup produces consolBytes of 16 KiB batches round-robin over the
// section's partitions through a wal.Writer (as the WAL produce rows do:
// the writer's whole in-flight budget outstanding), then consolidates
// them once, untimed, recording every append for the follower row.
func (s *consolSection) setup() error {
	ctx := context.Background()
	var err error
	if s.store, err = fs.Open(filepath.Join(s.dir, "store"), fs.Options{}); err != nil {
		return err
	}
	if s.cp, err = pebblecp.Open(vfs.Default, filepath.Join(s.dir, "cp"), pebblecp.Options{}); err != nil {
		return err
	}
	if s.meta, err = remote.Open(vfs.Default, filepath.Join(s.dir, "meta"), remote.MetadataOptions{}); err != nil {
		return err
	}
	if err := s.cp.CreatePartitions(ctx, []wal.CreatePartitionsRequest{{TopicID: wal.TopicID(consolTopic), Topic: "consolidate",
		NumPartitions: int32(s.partitions)}}); err != nil {
		return err
	}
	w, err := wal.NewWriter(wal.WriterOptions{Store: s.store, ControlPlane: s.cp, CommitInterval: walCommitInterval,
		MaxBytes: walMaxBytes, UploadConcurrency: walUploads})
	if err != nil {
		return err
	}
	data, err := walBatch(consolBatchBytes)
	if err != nil {
		_ = w.Close()
		return err
	}
	n := max(1, consolBytes()/int64(len(data)))
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	for range max(16, walMaxBytes*(walUploads+1)/consolBatchBytes) {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= n {
					return
				}
				tp := wal.TopicIDPartition{TopicID: wal.TopicID(consolTopic), Partition: int32(i % int64(s.partitions))}
				res, err := w.Produce(ctx, []wal.ProduceRequest{{Partition: tp, Batches: data}})
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
			}
		})
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		return err
	}
	if err, _ := failed.Load().(error); err != nil {
		return err
	}
	s.ends = make([]int64, s.partitions)
	for i := range s.ends {
		info, err := s.cp.LogInfo(ctx, wal.TopicIDPartition{TopicID: wal.TopicID(consolTopic), Partition: int32(i)})
		if err != nil {
			return err
		}
		s.ends[i] = info.HighWatermark
	}
	// The untimed first consolidation: it checks that the rows have
	// something to do and records the appends the follower row makes.
	var mu sync.Mutex
	_, _, err = s.consolidate(filepath.Join(s.dir, "first"), func(part int, batches []byte) {
		mu.Lock()
		defer mu.Unlock()
		s.appends = append(s.appends, consolAppend{part: part, batches: append([]byte(nil), batches...)})
		s.bytes += int64(len(batches))
	})
	if err != nil {
		return err
	}
	for _, a := range s.appends {
		s.batches += int64(countBatches(a.batches))
	}
	return nil
}

// countBatches counts the whole batches framed in buf.
func countBatches(buf []byte) int {
	n := 0
	for pos := 0; pos < len(buf); n++ {
		b, err := record.ReadBatch(buf[pos:])
		if err != nil {
			break
		}
		pos += b.Size()
	}
	return n
}

func consolTP(i int) remote.TopicIDPartition {
	return remote.TopicIDPartition{TopicID: consolTopic, Topic: "consolidate", Partition: int32(i)}
}

// openConsolLogs opens the section's empty local logs under dir, the
// same options for both rows.
func (s *consolSection) openConsolLogs(dir string) ([]*log.UnifiedLog, func(), error) {
	logs := make([]*log.UnifiedLog, 0, s.partitions)
	closeAll := func() {
		for _, l := range logs {
			_ = l.Close()
		}
		_ = os.RemoveAll(dir)
	}
	for i := range s.partitions {
		l, err := log.Open(filepath.Join(dir, fmt.Sprintf("consolidate-%d", i)), log.Options{FS: vfs.Default, RemoteStorageEnabled: true})
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		logs = append(logs, l)
	}
	return logs, closeAll, nil
}

// consolStats is what a timed consolidation reports beside its time.
type consolStats struct {
	fetches, gets, getBytes int64
	appends, appended       int64
}

// consolidate copies every partition's WAL batches into new logs under
// dir with a consolidate.Fetcher's Run (its defaults: one worker, which
// fetches the next round while it appends the last), from its start
// until every log ends where the WAL does, and checks each log. onAppend,
// if set, sees every append. timed, if set, is called around the timed
// region (start, then stop).
func (s *consolSection) consolidate(dir string, onAppend func(part int, batches []byte), timed ...func()) (time.Duration, consolStats, error) {
	ctx := context.Background()
	logs, closeAll, err := s.openConsolLogs(dir)
	if err != nil {
		return 0, consolStats{}, err
	}
	defer closeAll()
	if s.reader == nil {
		if s.reader, err = wal.NewReader(wal.ReaderOptions{Store: s.store, ControlPlane: s.cp}); err != nil {
			return 0, consolStats{}, err
		}
	}
	reader, rm0 := s.reader, s.reader.Metrics()
	born := tierstate.State{}.WithConsolidating(true)
	src := &consolSource{logs: logs, state: born}
	ep, err := consolidate.NewEndpoint(consolidate.EndpointOptions{ControlPlane: s.cp, WAL: reader, Remote: s.meta, Partitions: src})
	if err != nil {
		return 0, consolStats{}, err
	}
	m, err := tierstate.NewMachine(tierstate.MachineOptions{Leader: ep, Metadata: s.meta, Data: noRemoteData{}})
	if err != nil {
		return 0, consolStats{}, err
	}
	f, err := consolidate.NewFetcher(consolidate.FetcherOptions{Endpoint: ep, Machine: m})
	if err != nil {
		return 0, consolStats{}, err
	}
	var left atomic.Int64
	left.Store(int64(len(logs)))
	done := make(chan struct{})
	for i, l := range logs {
		w := &watchedLog{UnifiedLog: l, part: i, end: s.ends[i], onAppend: onAppend, left: &left, done: done}
		if s.ends[i] == 0 {
			w.reached = true
			if left.Add(-1) == 0 {
				close(done)
			}
		}
		if err := f.Add(consolidate.FetcherPartition{Partition: consolTP(i), Log: w, State: born}); err != nil {
			return 0, consolStats{}, err
		}
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	if len(timed) > 0 {
		timed[0]()
	}
	start := time.Now()
	ran := make(chan error, 1)
	go func() { ran <- f.Run(runCtx) }()
	select {
	case <-done:
	case <-time.After(10 * time.Minute):
	}
	elapsed := time.Since(start)
	if len(timed) > 1 {
		timed[1]()
	}
	stop()
	<-ran
	for i, l := range logs {
		if l.LogEndOffset() != s.ends[i] {
			return 0, consolStats{}, fmt.Errorf("partition %d consolidated to %d, the WAL ends at %d (failed: %v, fetcher %+v)",
				i, l.LogEndOffset(), s.ends[i], f.Failed(consolTP(i)), f.Metrics())
		}
	}
	rm, fm := reader.Metrics(), f.Metrics()
	return elapsed, consolStats{fetches: rm.Fetches - rm0.Fetches, gets: rm.Gets - rm0.Gets, getBytes: rm.GetBytes - rm0.GetBytes,
		appends: fm.Appends, appended: fm.AppendedBytes}, nil
}

// runRow runs one timed row and records its figures; it returns MB/s.
func (s *consolSection) runRow(row string, rep int, res *results) (float64, error) {
	dir := filepath.Join(s.dir, fmt.Sprintf("rep%d-%d", rep, len(row)))
	// Untimed: write back what earlier rows left dirty, so that neither
	// row is throttled by the kernel for the other's 256 MiB (without it
	// the follower row alone moved between 600 and 2,240 MB/s from one
	// repetition to the next on the 2-vCPU VM).
	syscall.Sync()
	var elapsed, cpu time.Duration
	var allocs, allocBytes uint64
	var faults int64
	var stats consolStats
	switch row {
	case rowConsolFetcher:
		var cpu0 time.Duration
		var m0, b0 uint64
		var f0 int64
		var prof *os.File
		start := func() {
			if consolProfile != "" {
				var err error
				if prof, err = os.Create(fmt.Sprintf("%s-%dp-rep%d.pprof", consolProfile, s.partitions, rep+1)); err == nil {
					_ = pprof.StartCPUProfile(prof)
				}
			}
			m0, b0 = mallocs(), heapAllocated()
			f0 = minorFaults()
			cpu0 = cpuTime()
		}
		stop := func() {
			cpu = cpuTime() - cpu0
			faults = minorFaults() - f0
			allocs, allocBytes = mallocs()-m0, heapAllocated()-b0
			if prof != nil {
				pprof.StopCPUProfile()
				_ = prof.Close()
			}
		}
		var err error
		if elapsed, stats, err = s.consolidate(dir, nil, start, stop); err != nil {
			return 0, err
		}
	case rowConsolFollower:
		logs, closeAll, err := s.openConsolLogs(dir)
		if err != nil {
			return 0, err
		}
		defer closeAll()
		m0, b0 := mallocs(), heapAllocated()
		f0 := minorFaults()
		cpu0, t0 := cpuTime(), time.Now()
		for _, a := range s.appends {
			l := logs[a.part]
			if _, err := l.AppendAsFollower(a.batches, 0); err != nil {
				return 0, err
			}
			l.UpdateHighWatermark(l.LogEndOffset())
		}
		elapsed, cpu = time.Since(t0), cpuTime()-cpu0
		faults = minorFaults() - f0
		allocs, allocBytes = mallocs()-m0, heapAllocated()-b0
		for i, l := range logs {
			if l.LogEndOffset() != s.ends[i] {
				return 0, fmt.Errorf("partition %d appended to %d, the WAL ends at %d", i, l.LogEndOffset(), s.ends[i])
			}
		}
	}
	total := float64(s.bytes)
	mbs := total / elapsed.Seconds() / 1e6
	res.addRow(s.name, row, "MB/s", mbs)
	res.addRow(s.name, row, "CPU s/GB", cpu.Seconds()/(total/1e9))
	res.addRow(s.name, row, "allocs/batch", float64(allocs)/float64(s.batches))
	res.addRow(s.name, row, "alloc bytes/byte", float64(allocBytes)/total)
	res.addRow(s.name, row, "page faults/MiB", float64(faults)/(total/(1<<20)))
	appends := float64(len(s.appends))
	if row == rowConsolFetcher && stats.appends > 0 {
		appends = float64(stats.appends)
	}
	res.addRow(s.name, row, "KiB/append", total/appends/1024)
	if row == rowConsolFetcher && stats.fetches > 0 {
		res.addRow(s.name, row, "GETs/fetch", float64(stats.gets)/float64(stats.fetches))
		res.addRow(s.name, row, "bytes read/byte", float64(stats.getBytes)/total)
	}
	return mbs, nil
}

func (r *consolRun) close() {
	for _, s := range r.sections {
		if s.cp != nil {
			_ = s.cp.Close()
		}
		if s.meta != nil {
			_ = s.meta.Close()
		}
		if s.store != nil {
			_ = s.store.Close()
		}
	}
	_ = os.RemoveAll(r.dir)
}

// printConsolidation prints the consolidation rows' tables.
func printConsolidation(w io.Writer, r *consolRun, res *results) {
	fmt.Fprint(w, "### tierlog only: consolidation beside a follower append\n\n")
	fmt.Fprintf(w, "Before the first repetition, untimed: %s of %s batches of 1 KiB random records are produced round-robin "+
		"over the section's partitions through wal.Writer (as the WAL produce rows: fs store, Pebble control plane on "+
		"vfs.Default, the writer's in-flight budget outstanding), then consolidated once into throwaway logs, recording "+
		"each append. Consolidation row: new local logs (log.Open on vfs.Default, defaults, RemoteStorageEnabled), a "+
		"consolidate.Fetcher with its defaults (one worker, up to %d partitions a fetch, the next round fetched while the "+
		"last is appended) over a consolidate.Endpoint and a wal.Reader with theirs (the reader of the first consolidation, kept, as a broker keeps its reader: its answer pool warm), run (Fetcher.Run) until every log "+
		"ends where the WAL does; the objects are in the page cache. Alloc bytes/byte: heap bytes allocated per byte consolidated; page faults/MiB: the process's minor page faults (fresh memory touched) per MiB. KiB/append: the row's own appends. Bytes read/byte: what the reader's GETs read (the gaps of coalesced reads included) per byte consolidated. Follower row: new logs of the same options, AppendAsFollower of the recorded appends (the same bytes, "+
		"the same sizes, in the same order) from memory, each followed by UpdateHighWatermark, as the fetcher does. "+
		"Closing the logs is not timed; before each row, untimed, a sync(2) writes back what earlier rows left dirty. The rows alternate in order each repetition. Load average (1, 5, 15 min) at the "+
		"first repetition's start: %s, at the last one's end: %s.\n\n",
		mib(consolBytes()), sizeName(consolBatchBytes), 32, r.loadStart, r.loadEnd)
	fmt.Fprint(w, "Each cell: median (ratio to the follower row's median).\n\n")
	for _, s := range r.sections {
		fmt.Fprintf(w, "#### %s\n\n", s.name)
		if s.err != nil {
			fmt.Fprintf(w, "Not measured: %s.\n\n", s.err)
			continue
		}
		fmt.Fprintf(w, "%s in %d batches and %d appends per row.\n\n", mib(s.bytes), s.batches, len(s.appends))
		cols := []string{"row"}
		for _, m := range consolMetrics {
			cols = append(cols, m.name)
		}
		cols = append(cols, consolRatioMetric+": median (each repetition)", "notes")
		fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(cols, " | "), strings.Repeat("---|", len(cols)))
		for _, name := range consolRows {
			row := []string{name}
			for _, m := range consolMetrics {
				v, ok := res.median(s.name, name, m.name)
				if !ok {
					row = append(row, "–")
					continue
				}
				ref, okRef := res.median(s.name, rowConsolFollower, m.name)
				row = append(row, fmt.Sprintf("%s (%s)", formatNum(v), ratio(v, ref, okRef)))
			}
			row = append(row, consolSameRep(res, s.name, name))
			row = append(row, strings.Join(res.notes[rowKey{s.name, name}], "; "))
			fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
		}
		fmt.Fprintln(w)
	}
}

func consolSameRep(res *results, sec, name string) string {
	if name == rowConsolFollower {
		return "1 (reference)"
	}
	v := res.vals[cellKey{rowKey{sec, name}, consolRatioMetric}]
	if len(v) == 0 {
		return "–"
	}
	each := make([]string, len(v))
	for i, x := range v {
		each[i] = fmt.Sprintf("%.3f", x)
	}
	return fmt.Sprintf("%.3fx (%s)", median(v), strings.Join(each, ", "))
}

// printConsolidationGoals prints the consolidation rows of the diskless
// goals table.
func printConsolidationGoals(w io.Writer, r *consolRun, res *results) {
	if r == nil {
		return
	}
	for _, s := range r.sections {
		if v := res.vals[cellKey{rowKey{s.name, rowConsolFetcher}, consolRatioMetric}]; len(v) > 0 {
			x := median(v)
			fmt.Fprintf(w, "| %s: at least 0.9x the follower append MB/s (same repetition, median) | %.3fx | %s |\n", s.name, x, yesNo(x >= 0.9))
		}
	}
}

// runConsolidateOnly runs the consolidation rows alone (-consolidate-only)
// and prints their tables and goals.
func runConsolidateOnly(stdout, stderr io.Writer, root string, reps int, args []string, loadStart string) error {
	if consolBytes() <= 0 {
		return fmt.Errorf("-consolidate-only needs -consolidate-mib > 0")
	}
	res := newResults()
	start := time.Now()
	since := func() float64 { return time.Since(start).Seconds() }
	cr := newConsolRun(filepath.Join(root, "consolidate"), reps)
	defer cr.close()
	for rep := 0; rep < reps; rep++ {
		cr.runRep(rep, res, stderr, since)
	}
	fmt.Fprintf(stderr, "[%6.1fs] done\n", since())
	fmt.Fprintf(stdout, "Run %s on %d CPUs (%s), %s %s/%s.\n\ntierlog measured: %s.\n\nCommand: `cd benchmarks && go run ./cmd/compare%s`\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), runtime.NumCPU(), cpuModel(), runtime.Version(), runtime.GOOS, runtime.GOARCH,
		tierlogVersion(), strings.Join(append([]string{""}, args...), " "))
	fmt.Fprintf(stdout, "Load average (1, 5, 15 min) at start: %s, at end: %s.\n\n", loadStart, loadAvg())
	printConsolidation(stdout, cr, res)
	fmt.Fprint(stdout, "#### Goals (consolidation), checked against this run\n\n| goal | this run | met |\n|---|---|---|\n")
	printConsolidationGoals(stdout, cr, res)
	fmt.Fprintf(stdout, "\nWall time of the run: %s.\n", time.Since(start).Round(time.Second))
	return nil
}

// consolSource is the Endpoint's view of the section's partitions: all
// born diskless, with their local logs.
type consolSource struct {
	logs  []*log.UnifiedLog
	state tierstate.State
}

func (c *consolSource) Partition(tp remote.TopicIDPartition) (tierstate.State, consolidate.LocalLog, bool) {
	if tp.TopicID != consolTopic || tp.Partition < 0 || int(tp.Partition) >= len(c.logs) {
		return tierstate.State{}, nil, false
	}
	return c.state, c.logs[tp.Partition], true
}

// watchedLog is a consolidated log that passes every append to onAppend
// (if set) and closes done once every log of the row reached its end.
// Appends come from the Fetcher's one worker.
type watchedLog struct {
	*log.UnifiedLog
	part     int
	end      int64
	reached  bool
	onAppend func(part int, batches []byte)
	left     *atomic.Int64
	done     chan struct{}
}

func (l *watchedLog) AppendAsFollower(batches []byte, leaderEpoch int32) (log.AppendInfo, error) {
	if l.onAppend != nil {
		l.onAppend(l.part, batches)
	}
	info, err := l.UnifiedLog.AppendAsFollower(batches, leaderEpoch)
	if !l.reached && l.LogEndOffset() >= l.end {
		l.reached = true
		if l.left.Add(-1) == 0 {
			close(l.done)
		}
	}
	return info, err
}

// noRemoteData answers no remote read: born-diskless partitions are
// never rebuilt from remote storage.
type noRemoteData struct{}

var errNoRemote = errors.New("compare: no remote storage in the consolidation rows")

func (noRemoteData) FetchLeaderEpochs(context.Context, *remote.SegmentMetadata) ([]epochcache.Entry, error) {
	return nil, errNoRemote
}

func (noRemoteData) FetchIndex(context.Context, *remote.SegmentMetadata, remote.IndexType) ([]byte, error) {
	return nil, errNoRemote
}
