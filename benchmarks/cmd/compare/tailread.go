package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
)

// The tail-read rows (tierlog only): single 16 KiB reads where a mapped
// log is at its worst, each beside the same log with the mappings off
// (log.Options.DisableMmapReads), in the same repetition:
//
//   - tail read after append: a consumer at the tail. Each AppendAsLeader
//     of a 16 KiB batch (default options) is followed at once by a Read
//     of the batch (maxBytes 1, minOneMessage: the whole batch); the read
//     alone is timed.
//   - first pass, cold: the same log closed and reopened (page cache warm,
//     the process's mappings new), one untimed read to load the indexes,
//     then every batch read once in random order, each read timed.

const (
	secTailRead  = "Tail read after append (tierlog, 16 KiB batches)"
	secFirstPass = "First pass over a reopened log, cold mapping (tierlog, 16 KiB batches, random order)"

	tailMapped = "mapped (default)"
	tailPread  = "DisableMmapReads"
)

var tailModes = []string{tailMapped, tailPread}

var tailMetrics = []string{"p50 µs", "p99 µs", "p99.9 µs"}

// runTailRep runs both rows for both modes, the mode order alternating
// with the repetition.
func runTailRep(rep int, dir string, total int64, res *results, stderr io.Writer, since func() float64) {
	for k := range tailModes {
		mode := tailModes[(k+rep)%len(tailModes)]
		fmt.Fprintf(stderr, "[%6.1fs] tail reads: %s\n", since(), mode)
		if err := runTail(mode, filepath.Join(dir, fmt.Sprintf("tail%d", k)), total, res); err != nil {
			res.note(secTailRead, mode, "error: "+err.Error())
			res.note(secFirstPass, mode, "error: "+err.Error())
		}
	}
}

// runTail fills a log of total bytes, timing a read after every append,
// then reopens it and times a first pass.
func runTail(mode, dir string, total int64, res *results) error {
	defer os.RemoveAll(dir)
	o := log.Options{FS: vfs.Default, DisableMmapReads: mode == tailPread}
	l, err := log.Open(dir, o)
	if err != nil {
		return err
	}
	b, err := newBatch(16)
	if err != nil {
		return err
	}
	n := int(total / int64(len(b.kafka)))
	lat := make([]time.Duration, 0, n)
	buf := make([]byte, 0, 64<<10)
	for range n {
		info, err := l.AppendAsLeader(b.kafka, 0, log.OriginClient)
		if err != nil {
			_ = l.Close()
			return err
		}
		kb, err := record.ReadBatch(b.kafka)
		if err != nil {
			_ = l.Close()
			return err
		}
		kb.SetBaseOffset(0)
		start := time.Now()
		got, err := l.Read(buf, info.FirstOffset, 1, log.IsolationLogEnd, true)
		lat = append(lat, time.Since(start))
		if err != nil || len(got.Records) != len(b.kafka) {
			_ = l.Close()
			return fmt.Errorf("tail read at %d: %d bytes, %v", info.FirstOffset, len(got.Records), err)
		}
		buf = got.Records[:0]
	}
	addLatencies(res, secTailRead, mode, lat)
	if err := l.Close(); err != nil {
		return err
	}

	if l, err = log.Open(dir, o); err != nil {
		return err
	}
	defer l.Close()
	perBatch := int64(b.records())
	order := make([]int64, 0, n)
	for off := int64(0); off < l.LogEndOffset(); off += perBatch {
		order = append(order, off)
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	read := func(off int64) (time.Duration, error) {
		start := time.Now()
		got, err := l.Read(buf, off, 1, log.IsolationLogEnd, true)
		d := time.Since(start)
		if err != nil || len(got.Records) == 0 {
			return d, fmt.Errorf("first-pass read at %d: %d bytes, %v", off, len(got.Records), err)
		}
		buf = got.Records[:0]
		return d, nil
	}
	// The indexes load on the first read (milliseconds; not the mapping's
	// matter): untimed.
	if _, err := read(order[0]); err != nil {
		return err
	}
	lat = lat[:0]
	for _, off := range order {
		d, err := read(off)
		if err != nil {
			return err
		}
		lat = append(lat, d)
	}
	addLatencies(res, secFirstPass, mode, lat)
	return nil
}

// addLatencies records lat's percentiles in µs.
func addLatencies(res *results, sec, mode string, lat []time.Duration) {
	slices.Sort(lat)
	for i, p := range []float64{0.5, 0.99, 0.999} {
		res.addRow(sec, mode, tailMetrics[i], float64(percentile(lat, p).Nanoseconds())/1e3)
	}
}

// printTail prints the two tables (each cell: median over repetitions,
// with the ratio to the DisableMmapReads row's median) and the goals.
func printTail(w io.Writer, res *results, total int64) {
	for _, sec := range []string{secTailRead, secFirstPass} {
		fmt.Fprintf(w, "### %s\n\n", sec)
		fmt.Fprintf(w, "A %s log; each cell: median over repetitions (ratio to the DisableMmapReads row's median).\n\n", mib(total))
		cols := append([]string{"reads"}, tailMetrics...)
		cols = append(cols, "notes")
		fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(cols, " | "), strings.Repeat("---|", len(cols)))
		for _, mode := range tailModes {
			row := []string{mode}
			for _, m := range tailMetrics {
				v, ok := res.median(sec, mode, m)
				if !ok {
					row = append(row, "–")
					continue
				}
				ref, okRef := res.median(sec, tailPread, m)
				row = append(row, fmt.Sprintf("%s (%s)", formatNum(v), ratio(v, ref, okRef)))
			}
			row = append(row, strings.Join(res.notes[rowKey{sec, mode}], "; "))
			fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprint(w, "#### Goals (tail and first-pass reads), checked against this run\n\n| goal | this run | met |\n|---|---|---|\n")
	goal := func(name, sec, m string, limit float64, vsPread bool) {
		v, ok := res.median(sec, tailMapped, m)
		if !ok {
			fmt.Fprintf(w, "| %s | – | – |\n", name)
			return
		}
		met := v <= limit
		got := fmt.Sprintf("%s µs", formatNum(v))
		if vsPread {
			ref, okRef := res.median(sec, tailPread, m)
			met = okRef && v <= ref
			got = fmt.Sprintf("%s µs against %s µs", formatNum(v), formatNum(ref))
		}
		fmt.Fprintf(w, "| %s | %s | %s |\n", name, got, yesNo(met))
	}
	goal("tail read after append, mapped: p50 at most 3 µs", secTailRead, "p50 µs", 3, false)
	goal("tail read after append, mapped: p99 at most 10 µs", secTailRead, "p99 µs", 10, false)
	goal("tail read after append, mapped: p99 never above DisableMmapReads", secTailRead, "p99 µs", 0, true)
	goal("first pass, cold, mapped: p99 at most 5 µs", secFirstPass, "p99 µs", 5, false)
	fmt.Fprintln(w)
}

// runTailOnly is a run of the tail-read rows alone (-tail-only).
func runTailOnly(stdout, stderr io.Writer, root string, cfg config, args []string, loadStart string, total int64) error {
	res := newResults()
	start := time.Now()
	for rep := range cfg.reps {
		base := filepath.Join(root, fmt.Sprintf("r%d", rep))
		runTailRep(rep, base, total, res, stderr, func() float64 { return time.Since(start).Seconds() })
		_ = os.RemoveAll(base)
	}
	fmt.Fprintf(stdout, "Run %s on %d CPUs (%s), %s %s/%s.\n\ntierlog measured: %s.\n\nCommand: `cd benchmarks && go run ./cmd/compare%s`\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), runtime.NumCPU(), cpuModel(), runtime.Version(), runtime.GOOS, runtime.GOARCH,
		tierlogVersion(), strings.Join(append([]string{""}, args...), " "))
	fmt.Fprintf(stdout, "%d repetitions (medians shown). Load average (1, 5, 15 min) at start: %s, at end: %s.\n\n", cfg.reps, loadStart, loadAvg())
	printTail(stdout, res, total)
	fmt.Fprintf(stdout, "Wall time of the run: %s.\n", time.Since(start).Round(time.Second))
	return nil
}
