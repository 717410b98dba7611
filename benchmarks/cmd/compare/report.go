package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"strings"
	"time"
)

// metricSpec is one column of a section's table.
type metricSpec struct {
	name         string
	higherBetter bool
}

// section is one table: a workload and its columns.
type section struct {
	name    string
	kind    workloadKind
	sync    bool // for the durability column of append sections
	metrics []metricSpec
}

var appendMetrics = []metricSpec{
	{"MB/s", true}, {"records/s", true}, {"CPU s/GB", false}, {"allocs/record", false},
	{"p50 batch µs", false}, {"p99 batch µs", false},
}

func sections() []section {
	var s []section
	for _, c := range appendCases {
		s = append(s, section{name: c.name, kind: kindAppend, sync: c.sync, metrics: appendMetrics})
	}
	return append(s,
		section{name: secSeqRead, kind: kindSeqRead, metrics: []metricSpec{
			{"MB/s", true}, {"CPU s/GB", false}, {"allocs/record", false}}},
		section{name: secPointRead, kind: kindPointRead, metrics: []metricSpec{
			{"p50 µs", false}, {"p99 µs", false}, {"p99.9 µs", false}, {"ops/s", true}, {"allocs/op", false},
			{"KiB returned/op", false}}},
		section{name: secOpen, kind: kindOpen, metrics: []metricSpec{
			{"open after clean close ms", false}, {"open after crash ms", false}}},
		section{name: secPartitions, kind: kindPartitions, metrics: []metricSpec{
			{"partitions", true}, {"heap MiB", false}, {"heap KiB/partition", false},
			{"fds/partition", false}, {"goroutines/partition", false}, {"open+append ms/partition (8 in parallel)", false}}},
	)
}

// header prints the machine, date and command.
func header(w io.Writer, cfg config, args []string, loadStart string) {
	fmt.Fprintf(w, "Run %s on %d CPUs (%s), %s %s/%s.\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"),
		runtime.NumCPU(), cpuModel(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(w, "tierlog measured: %s.\n\n", tierlogVersion())
	fmt.Fprintf(w, "Command: `cd benchmarks && go run ./cmd/compare%s`\n\n", strings.Join(append([]string{""}, args...), " "))
	fmt.Fprintf(w, "Size: %d repetitions (medians shown), %s per no-fsync append run and in the read/open log, "+
		"%s per fsync-per-batch run, %d point reads, up to %d partitions%s. Directory: %s.\n\n",
		cfg.reps, mib(cfg.appendBytes), mib(cfg.syncBytes), cfg.pointReads, cfg.partitions, remoteSize(cfg), cfg.dir)
	fmt.Fprintf(w, "Load average (1, 5, 15 min) at start: %s, at end: %s. The machine is shared with other "+
		"engineers' builds and tests, so differences of a few percent are noise.\n\n", loadStart, loadAvg())
	fmt.Fprintf(w, "Each cell: median (ratio to the raw file · ratio to the best peer). Ratios are value ÷ reference; "+
		"for MB/s, records/s and ops/s higher is better, for everything else lower is better. "+
		"MB = 10^6 bytes, GB = 10^9 bytes.\n\n")
}

func mib(n int64) string { return fmt.Sprintf("%d MiB", n>>20) }

// remoteSize is the remote rows' part of the header's size line.
func remoteSize(cfg config) string {
	if cfg.remoteSegmentBytes == 0 {
		return ", no remote rows"
	}
	s3 := "fs store only"
	if cfg.s3.endpoint != "" {
		s3 = "fs and S3 stores"
	}
	return fmt.Sprintf(", a %s remote segment and up to %d remote reads per row (%s)", mib(cfg.remoteSegmentBytes), cfg.remoteReads, s3)
}

func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "CPU model unknown"
	}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "CPU model unknown"
}

func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], ", ")
}

// printTables prints one markdown table per section.
func printTables(w io.Writer, res *results, impls []impl) {
	for _, s := range sections() {
		fmt.Fprintf(w, "### %s\n\n", s.name)
		cols := []string{"implementation"}
		if s.kind == kindAppend {
			cols = append(cols, "durability")
		}
		for _, m := range s.metrics {
			cols = append(cols, m.name)
		}
		cols = append(cols, "notes")
		fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(cols, " | "), strings.Repeat("---|", len(cols)))
		for _, im := range impls {
			row := []string{im.Name()}
			if s.kind == kindAppend {
				row = append(row, im.Durability(s.sync))
			}
			notes := res.notes[rowKey{s.name, im.Name()}]
			why := im.Unsupported(s.kind)
			for _, m := range s.metrics {
				v, ok := res.median(s.name, im.Name(), m.name)
				switch {
				case why != "":
					row = append(row, "n/a")
				case !ok:
					row = append(row, "–")
				default:
					row = append(row, cell(v, res, s, m, im, impls))
				}
			}
			if why != "" {
				notes = append([]string{"n/a: " + why}, notes...)
			}
			row = append(row, strings.Join(notes, "; "))
			fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
		}
		fmt.Fprintln(w)
	}
}

// cell formats a median with its ratios to the raw file and to the best
// peer (the best value among the peers for this metric).
func cell(v float64, res *results, s section, m metricSpec, im impl, impls []impl) string {
	out := formatNum(v)
	if s.kind == kindPartitions && m.name == "partitions" {
		return out
	}
	raw, okRaw := res.median(s.name, rawName, m.name)
	best, okPeer := bestPeer(res, s, m, impls)
	return fmt.Sprintf("%s (%s · %s)", out, ratio(v, raw, okRaw), ratio(v, best, okPeer))
}

func ratio(v, ref float64, ok bool) string {
	if !ok || ref == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2fx", v/ref)
}

// bestPeer returns the best median among the peers (not tierlog, not the
// raw file).
func bestPeer(res *results, s section, m metricSpec, impls []impl) (float64, bool) {
	best, found := 0.0, false
	for _, p := range impls {
		if p.Name() == tierlogName || p.Name() == rawName || p.Name() == rawPointsName || p.Unsupported(s.kind) != "" {
			continue
		}
		v, ok := res.median(s.name, p.Name(), m.name)
		if !ok {
			continue
		}
		if !found || (m.higherBetter && v > best) || (!m.higherBetter && v < best) {
			best, found = v, true
		}
	}
	return best, found
}

func formatNum(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 10000:
		return thousands(int64(math.Round(v)))
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 0.01 || a == 0:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}

func thousands(n int64) string {
	s := fmt.Sprintf("%d", n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 && c != '-' && s[i-1] != '-' {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
