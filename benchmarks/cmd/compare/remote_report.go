package main

import (
	"fmt"
	"io"
	"strings"
)

// describe says what the segment is, for the output. Called at setup,
// while the segment is open.
func (seg *remoteSegment) describe() string {
	d := seg.data
	return fmt.Sprintf("the first segment of a tierlog log (offsets %d to %d), rolled and pinned with log.OpenSegment "+
		"as the copy task does, its .log in the page cache: %s bytes in %d batches of %d records of about 1 KiB "+
		"whose values are JSON events with random fields (uncompressed by the producer; zstd's fastest level stores them in about a quarter of the bytes), with its offset index (%s bytes), "+
		"time index (%s bytes) and producer snapshot (%d bytes)",
		seg.meta.StartOffset, seg.meta.EndOffset, thousands(d.LogSize), seg.batches, appendCases[0].records,
		thousands(int64(len(d.OffsetIndex))), thousands(int64(len(d.TimeIndex))), len(d.ProducerSnapshot))
}

// printRemote prints what the remote rows are, then each target's copy and
// read tables, then the remote data-plane goals checked against them.
func printRemote(w io.Writer, r *remoteRun, res *results) {
	fmt.Fprintf(w, "### tierlog only: remote tier, copy and 16 KiB reads beside the raw object-store client\n\n")
	if r.err != nil {
		fmt.Fprintf(w, "Not measured: %s.\n\n", r.err)
		return
	}
	fmt.Fprintf(w, "Segment: %s.\n\n", r.segDesc)
	fmt.Fprintf(w, "Copy: raw is one objstore.PutLarge of the .log bytes from the pinned segment (multipart where the store "+
		"has it, else one Put), its object deleted before (untimed). tierlog is StorageManager.CopySegment under a fresh "+
		"segment id (the data object(s) and the indexes object uploaded at once, the chunk and block CRC-32Cs computed "+
		"from the bytes as the upload reads them, the manifest last), deleted "+
		"after (untimed), without and with Compression (zstd's fastest level per 1 MiB chunk, a chunk that does not "+
		"shrink stored raw); one manager per row for the run, each warmed by one copy at setup. MB/s counts the .log "+
		"bytes; CPU is the process's user+system time. Each repetition makes %d copies per row, the rows interleaved in a "+
		"rotating order; the ratio column is, per repetition, the row's median MB/s over the raw row's.\n\n", r.cfg.remoteCopies)
	fmt.Fprintf(w, "Reads: up to %d reads of 16 KiB per row and repetition at random positions of the segment (the same "+
		"positions for every row of a repetition), each checked against the segment outside the timed region; time "+
		"limit %s per row (flag -remote-reads-max). The tierlog rows read a copy made at setup with the default "+
		"StorageOptions (no compression, layout version 3: a CRC-32C trailer after every 4 KiB block of the data object, "+
		"read-ahead 2 MiB): a read fetches, in one read of the body, the four or five blocks the 16 KiB touch, with their trailers, and checks each before serving it. Cold: "+
		"a new StorageManager per read, made outside the timed region (a consumer's first fetch from a segment), with "+
		"the segment's metadata carrying the locator the copy returned, as the copy task stores it, so no manifest is "+
		"read; the row without the locator reads the manifest, its data GET issued beside the manifest's; warm: one StorageManager per repetition, after a warm-up of a tenth "+
		"as many reads. Cold and warm are the manager's manifest cache only: the store's own caches (the page cache "+
		"under the fs store, the server's for S3) hold the just-written objects. Raw: one ranged Get of exactly the "+
		"16 KiB from the same bytes stored as one object. reads/s = reads ÷ the sum of their latencies (one reader).\n\n",
		r.cfg.remoteReads, r.cfg.remoteReadsMax)
	fmt.Fprint(w, "Each cell: median (ratio to the raw row's median).\n\n")
	if r.s3Note != "" {
		fmt.Fprintf(w, "%s\n\n", r.s3Note)
	}
	for _, t := range r.targets {
		if t.err != nil {
			fmt.Fprintf(w, "#### %s store\n\nNot measured: setting up the store failed: %s.\n\n", t.name, t.err)
			continue
		}
		fmt.Fprintf(w, "#### %s\n\nDurability: %s.\n\n", t.copySection(r.cfg.remoteSegmentBytes), t.durability)
		printRemoteTable(w, t.copySection(r.cfg.remoteSegmentBytes), copyRows, copyMetrics, res, true)
		fmt.Fprintf(w, "#### %s\n\n", t.readSection())
		printRemoteTable(w, t.readSection(), readRows, readMetrics, res, false)
	}
	printRemoteGoals(w, r, res)
}

// printRemoteTable prints one remote table: rows[0] is the raw reference.
func printRemoteTable(w io.Writer, sec string, rows []string, metrics []metricSpec, res *results, sameRep bool) {
	cols := []string{"row"}
	for _, m := range metrics {
		cols = append(cols, m.name)
	}
	if sameRep {
		cols = append(cols, remoteRatioMetric+": median (each repetition)")
	}
	cols = append(cols, "notes")
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(cols, " | "), strings.Repeat("---|", len(cols)))
	for _, name := range rows {
		row := []string{name}
		for _, m := range metrics {
			v, ok := res.median(sec, name, m.name)
			if !ok {
				row = append(row, "–")
				continue
			}
			ref, okRef := res.median(sec, rows[0], m.name)
			row = append(row, fmt.Sprintf("%s (%s)", formatNum(v), ratio(v, ref, okRef)))
		}
		if sameRep {
			row = append(row, sameRepRatio(res, sec, name, name == rows[0]))
		}
		row = append(row, strings.Join(res.notes[rowKey{sec, name}], "; "))
		fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
	}
	fmt.Fprintln(w)
}

func sameRepRatio(res *results, sec, name string, reference bool) string {
	if reference {
		return "1 (reference)"
	}
	v := res.vals[cellKey{rowKey{sec, name}, remoteRatioMetric}]
	if len(v) == 0 {
		return "–"
	}
	each := make([]string, len(v))
	for i, x := range v {
		each[i] = fmt.Sprintf("%.3f", x)
	}
	return fmt.Sprintf("%.3fx (%s)", median(v), strings.Join(each, ", "))
}

// printRemoteGoals checks the remote data-plane goals against this run.
// The copy goal is stated against minio-go's direct multipart PUT on
// S3; here the reference is the same store's objstore.PutLarge (the
// adapter's own overhead over minio-go is in remote/objstore/s3's
// BenchmarkTierCopy64MiB).
func printRemoteGoals(w io.Writer, r *remoteRun, res *results) {
	fmt.Fprint(w, "#### Goals (remote data plane), checked against this run\n\n| goal | this run | met |\n|---|---|---|\n")
	for _, t := range r.targets {
		if t.err != nil {
			continue
		}
		sec := t.copySection(r.cfg.remoteSegmentBytes)
		if v := res.vals[cellKey{rowKey{sec, rowCopyPlain}, remoteRatioMetric}]; len(v) > 0 {
			x := median(v)
			fmt.Fprintf(w, "| %s store: CopySegment (no compression) at least 0.9x the raw PutLarge MB/s (same repetition, median) | %.3fx | %s |\n",
				t.name, x, yesNo(x >= 0.9))
		}
		rsec := t.readSection()
		if v, ok := res.median(rsec, rowReadWarm, "GETs/read"); ok {
			fmt.Fprintf(w, "| %s store: warm 16 KiB read, one ranged GET per read (the blocks it touches in one GET) | %.2f GETs/read | %s |\n",
				t.name, v, yesNo(v <= 1.001))
		}
		if v, ok := res.median(rsec, rowReadWarm, "KiB fetched/read"); ok {
			fmt.Fprintf(w, "| %s store: warm 16 KiB read fetches at most 4x the requested bytes | %.1f KiB/read | %s |\n",
				t.name, v, yesNo(v <= 64.001))
		}
		if v, ok := res.median(rsec, rowReadCold, "GETs/read"); ok {
			fmt.Fprintf(w, "| %s store: cold 16 KiB read with the segment's metadata (locator), one ranged GET | %.2f GETs/read | %s |\n",
				t.name, v, yesNo(v <= 1.001))
		}
		if v, ok := res.median(rsec, rowReadCold, "KiB fetched/read"); ok {
			fmt.Fprintf(w, "| %s store: cold 16 KiB read fetches at most 4x the requested bytes | %.1f KiB/read | %s |\n",
				t.name, v, yesNo(v <= 64.001))
		}
		warm, okw := res.median(rsec, rowReadWarm, "p50 µs")
		raw, okr := res.median(rsec, rowRawGet, "p50 µs")
		if okw && okr && raw > 0 {
			fmt.Fprintf(w, "| %s store: warm 16 KiB read p50 at most 1.5x the raw ranged GET's | %.2fx (%.0f / %.0f µs) | %s |\n",
				t.name, warm/raw, warm, raw, yesNo(warm/raw <= 1.5))
		}
	}
	fmt.Fprintln(w)
}
