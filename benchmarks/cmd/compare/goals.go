package main

import (
	"fmt"
	"io"
	"strings"
)

// printPending lists the tierlog workloads this command does not measure,
// so the table shows them rather than leaving them out. remote says whether
// the remote rows ran (flag -remote-segment-mib 0 skips them).
func printPending(w io.Writer, remote bool) {
	fmt.Fprint(w, "### tierlog only, not measured\n\n| workload | status |\n|---|---|\n"+
		"| read_committed read of transactional batches | not measured by this command (the producer rows above measure the appends) |\n")
	if !remote {
		fmt.Fprint(w, "| remote copy throughput vs the raw object-store client | skipped by -remote-segment-mib 0 |\n"+
			"| cold remote read latency vs the raw object-store client | skipped by -remote-segment-mib 0 |\n")
	}
	fmt.Fprintln(w)
}

// printGoals checks the local log's performance goals against this run's medians and says
// which are met, with the numbers.
func printGoals(w io.Writer, res *results, impls []impl, partitions int) {
	fmt.Fprint(w, "### Goals (local log), checked against this run\n\n| goal | this run | met |\n|---|---|---|\n")
	row := func(goal, got string, met bool) {
		mark := "no"
		if met {
			mark = "yes"
		}
		fmt.Fprintf(w, "| %s | %s | %s |\n", goal, got, mark)
	}
	rawRatio := func(sec, metric string) (float64, bool) {
		t, ok1 := res.median(sec, tierlogName, metric)
		r, ok2 := res.median(sec, rawName, metric)
		if !ok1 || !ok2 || r == 0 {
			return 0, false
		}
		return t / r, true
	}
	for _, c := range appendCases {
		want := 0.85
		if c.sync {
			want = 0.95
		}
		if x, ok := rawRatio(c.name, "MB/s"); ok {
			row(fmt.Sprintf("%s: >= %.2fx raw MB/s", c.name, want), fmt.Sprintf("%.2fx", x), x >= want)
		}
	}
	// The no-fsync appends against the raw file that writes back as
	// tierlog's recovery point does (the plain raw file never does).
	for _, c := range appendCases[:2] {
		t, ok1 := res.median(c.name, tierlogName, "MB/s")
		r, ok2 := res.median(c.name, rawPointsName, "MB/s")
		if ok1 && ok2 && r > 0 {
			row(fmt.Sprintf("%s: >= 1.00x the raw file with the same background fdatasync", c.name),
				fmt.Sprintf("%.2fx", t/r), t/r >= 1)
		}
	}
	if x, ok := rawRatio(secSeqRead, "MB/s"); ok {
		row("sequential read >= 0.90x raw pread MB/s", fmt.Sprintf("%.2fx", x), x >= 0.9)
	}
	if v, ok := res.median(secPointRead, tierlogName, "p99 µs"); ok {
		row("point read p99 <= 2 µs warm", fmt.Sprintf("%.2f µs", v), v <= 2)
	}
	t, ok1 := res.median(secPointRead, tierlogName, "ops/s")
	n, ok2 := res.median(secPointRead, natsName, "ops/s")
	if ok1 && ok2 && n > 0 {
		row("point reads/s >= the NATS JetStream file store's", fmt.Sprintf("%s vs %s (%.2fx)", formatNum(t), formatNum(n), t/n), t >= n)
	}
	for _, s := range []struct{ sec, metric string }{
		{appendCases[0].name, "allocs/record"}, {appendCases[1].name, "allocs/record"},
		{secSeqRead, "allocs/record"}, {secPointRead, "allocs/op"},
	} {
		if v, ok := res.median(s.sec, tierlogName, s.metric); ok {
			row(fmt.Sprintf("0 %s: %s", s.metric, s.sec), formatNum(v), v < 0.005)
		}
	}
	if n, ok := res.median(secPartitions, tierlogName, "partitions"); ok {
		heap, _ := res.median(secPartitions, tierlogName, "heap MiB")
		fds, _ := res.median(secPartitions, tierlogName, "fds/partition")
		row(fmt.Sprintf("%d partitions in < 200 MiB heap", partitions),
			fmt.Sprintf("%s partitions: %s MiB", formatNum(n), formatNum(heap)), int(n) >= partitions && heap < 200)
		row("no descriptor per index file (<= 1 fd per one-segment partition)",
			fmt.Sprintf("%.2f fds/partition", fds), fds <= 1.01)
	}
	// Ahead of every peer on every workload it supports, judged on each
	// section's headline figures (the other columns explain them).
	var behind []string
	for _, s := range sections() {
		for _, m := range s.metrics {
			if !headline[m.name] {
				continue
			}
			t, ok := res.median(s.name, tierlogName, m.name)
			best, okPeer := bestPeer(res, s, m, impls)
			if !ok || !okPeer {
				continue
			}
			if (m.higherBetter && t < best) || (!m.higherBetter && t > best) {
				behind = append(behind, fmt.Sprintf("%s, %s: %s vs %s (%.2fx)", s.name, m.name, formatNum(t), formatNum(best), t/best))
			}
		}
	}
	got := "ahead everywhere"
	if len(behind) > 0 {
		got = "behind the best peer on: " + strings.Join(behind, "; ")
	}
	row("ahead of every peer on every workload it supports", got, len(behind) == 0)
	fmt.Fprintln(w)
}

// headline names the figures the "ahead of every peer" goal is judged on.
var headline = map[string]bool{
	"MB/s": true, "p99 batch µs": true, "p99 µs": true,
	"open after clean close ms": true, "open after crash ms": true,
	"heap KiB/partition": true, "fds/partition": true,
}
