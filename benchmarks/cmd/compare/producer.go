package main

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
)

// The tierlog-only producer workloads: the 16 KiB no-fsync append
// of 1 KiB records, by an idempotent producer and by a transactional one,
// run in every repetition right after the fill runs, which measured the
// plain tierlog append and the raw file of the same bytes.
//
// Batch construction is not measured: 64 batches (1 MiB) are built once,
// and before each chunk of 64 appends, outside the timed region (clock and
// CPU time stopped), their base offsets are reset, their base sequences
// advanced and their CRCs recomputed. A control row does the same with
// plain batches. A single 256 MiB buffer of prebuilt batches was tried
// first and rejected: on this shared machine appends from it ran at 0.17x
// to 0.85x of the main table's plain row even for plain batches (memory
// traffic, not producer state), while the main row reuses one cached
// buffer.

const (
	secProducer = "tierlog only: producer append, 16 KiB batches of 1 KiB records, no fsync"

	// plainPrebuilt, idempotent and transactional are the producer modes
	// and the row labels.
	modePlainPrebuilt = "tierlog plain, same loop as the producer rows (control)"
	modeIdempotent    = "tierlog idempotent"
	modeTransactional = "tierlog transactional"

	// txnBatches is the number of data batches per transaction: a COMMIT
	// marker follows every txnBatches batches (1 MiB of records).
	txnBatches = 64

	// The producer identity of the producer rows.
	benchProducerID    = 42
	benchProducerEpoch = 0

	// ratioMetric is the MB/s of a row divided by the MB/s of tierlog's
	// plain append (the main table's row) in the same repetition.
	ratioMetric = "MB/s ÷ tierlog plain, same repetition"
)

var producerModes = []string{modePlainPrebuilt, modeIdempotent, modeTransactional}

// producerBatches is chunkBatches batches of the producer mode in one
// buffer, whose base sequences next rewrites (with their CRCs) between
// chunks, outside the timed region.
type producerBatches struct {
	mode string
	buf  []byte
	size int   // bytes of one batch
	span int32 // records of one batch
	seq  int32 // next base sequence
}

// chunkBatches is the number of batches prebuilt at a time: 1 MiB, which
// stays in the CPU cache between its rewrite and its append, as the main
// table's single reused batch does.
const chunkBatches = txnBatches

func newProducerBatches(mode string, records int) (*producerBatches, error) {
	value := make([]byte, recordBytes)
	for i := range value {
		value[i] = byte(i * 7)
	}
	opts := record.DefaultBuilderOptions()
	if mode != modePlainPrebuilt {
		opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = benchProducerID, benchProducerEpoch, 0
		opts.Transactional = mode == modeTransactional
	}
	bl := record.NewBuilder(opts)
	for i := 0; i < records; i++ {
		bl.Add(1_700_000_000_000, nil, value[:kafkaValueBytes])
	}
	tmpl, err := bl.Build()
	if err != nil {
		return nil, err
	}
	kb, err := record.ReadBatch(tmpl)
	if err != nil {
		return nil, err
	}
	p := &producerBatches{mode: mode, size: len(tmpl), span: kb.LastOffsetDelta() + 1,
		buf: make([]byte, chunkBatches*len(tmpl))}
	for i := 0; i < chunkBatches; i++ {
		copy(p.batch(i), tmpl)
	}
	return p, nil
}

func (p *producerBatches) batch(i int) []byte { return p.buf[i*p.size : (i+1)*p.size] }

// next prepares the next chunk: every batch gets base offset 0 (the log
// stamped the previous offsets in place), the next base sequence (producer
// modes) and a recomputed CRC. The plain control row recomputes its
// unchanged CRC too, so every row touches the same bytes between chunks.
func (p *producerBatches) next() error {
	for i := 0; i < chunkBatches; i++ {
		b := p.batch(i)
		kb, err := record.ReadBatch(b)
		if err != nil {
			return err
		}
		kb.SetBaseOffset(0)
		if p.mode != modePlainPrebuilt {
			binary.BigEndian.PutUint32(b[53:], uint32(p.seq)) // BaseSequence, inside the CRC
			p.seq += p.span
		}
		binary.BigEndian.PutUint32(b[17:], kb.ComputeCRC())
	}
	return nil
}

// commitMarker is a COMMIT control batch of the benchmark's producer,
// appended with log.OriginCoordinator. The log stamps its base offset and
// leader epoch (outside the CRC), so one buffer serves every commit.
func commitMarker() ([]byte, error) {
	opts := record.DefaultBuilderOptions()
	opts.ProducerID, opts.ProducerEpoch = benchProducerID, benchProducerEpoch
	return record.AppendEndTxnBatch(nil, opts, 1_700_000_000_000, record.ControlCommit, 0)
}

// runProducer appends total bytes of prebuilt 16 KiB batches of mode to a
// new tierlog in dir, as runAppend does for the main table, and records
// the same figures under secProducer. A transactional run appends a COMMIT
// marker after every txnBatches batches and at the end, inside the timed
// loop (it is part of a transactional producer's appends); the markers'
// bytes are not counted and their latency is not among the batches'.
func runProducer(mode, dir string, total int64, res *results) (err error) {
	c := appendCases[0]
	pb, err := newProducerBatches(mode, c.records)
	if err != nil {
		return err
	}
	n := int(max(1, total/int64(pb.size)))
	var marker []byte
	if mode == modeTransactional {
		if marker, err = commitMarker(); err != nil {
			return err
		}
	}
	t := &tierlogImpl{}
	if err := t.Open(dir, false); err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer func() {
		if cerr := t.Close(); err == nil {
			err = cerr
		}
		_ = os.RemoveAll(dir)
	}()
	commit := func() error {
		info, err := t.l.AppendAsLeader(marker, 0, log.OriginCoordinator)
		if err == nil && info.Batches != 1 {
			err = fmt.Errorf("commit marker: %d batches written", info.Batches)
		}
		return err
	}
	lat := make([]time.Duration, 0, n)
	var elapsed, cpu time.Duration
	var written int64
	m0 := mallocs()
	for i := 0; i < n; {
		// Outside the timed region: the next chunk's sequences and CRCs.
		if err := pb.next(); err != nil {
			return err
		}
		cpu0, start := cpuTime(), time.Now()
		for j := 0; j < chunkBatches && i < n; j, i = j+1, i+1 {
			ts := time.Now()
			info, err := t.l.AppendAsLeader(pb.batch(j), 0, log.OriginClient)
			if err != nil {
				return fmt.Errorf("append %d: %w", i, err)
			}
			lat = append(lat, time.Since(ts))
			written += info.Records
		}
		if marker != nil { // one transaction per chunk
			if err := commit(); err != nil {
				return fmt.Errorf("commit after batch %d: %w", i-1, err)
			}
		}
		elapsed += time.Since(start)
		cpu += cpuTime() - cpu0
	}
	allocs := mallocs() - m0
	records := float64(n * c.records)
	if written != int64(records) {
		return fmt.Errorf("%d records written, want %.0f (duplicates?)", written, records)
	}
	bytes := float64(n) * float64(pb.size)
	slices.Sort(lat)
	res.addRow(secProducer, mode, "batches", float64(n))
	res.addRow(secProducer, mode, "MB/s", bytes/elapsed.Seconds()/1e6)
	res.addRow(secProducer, mode, "records/s", records/elapsed.Seconds())
	res.addRow(secProducer, mode, "CPU s/GB", cpu.Seconds()/(bytes/1e9))
	res.addRow(secProducer, mode, "allocs/record", float64(allocs)/records)
	res.addRow(secProducer, mode, "p50 batch µs", micros(percentile(lat, 0.50)))
	res.addRow(secProducer, mode, "p99 batch µs", micros(percentile(lat, 0.99)))
	return nil
}

// runProducerRep runs the producer modes of one repetition (starting one
// mode later each repetition) and records each one's MB/s ratio to the
// plain tierlog append of the same repetition, if it was measured.
func runProducerRep(rep int, dir string, total int64, res *results, stderr io.Writer, since func() float64) {
	plainKey := cellKey{rowKey{appendCases[0].name, tierlogName}, "MB/s"}
	plain := 0.0
	if v := res.vals[plainKey]; len(v) == rep+1 { // this repetition's plain run succeeded
		plain = v[rep]
	}
	for k := range producerModes {
		mode := producerModes[(k+rep)%len(producerModes)]
		fmt.Fprintf(stderr, "[%6.1fs] %s: %s\n", since(), secProducer, mode)
		key := cellKey{rowKey{secProducer, mode}, "MB/s"}
		before := len(res.vals[key])
		if err := runProducer(mode, filepath.Join(dir, fmt.Sprintf("producer%d", k)), total, res); err != nil {
			res.note(secProducer, mode, "error: "+err.Error())
			continue
		}
		if v := res.vals[key]; plain > 0 && len(v) == before+1 {
			res.addRow(secProducer, mode, ratioMetric, v[before]/plain)
		}
	}
}

// printProducer prints the producer table: each cell is the median over
// repetitions with its ratio to the plain tierlog row's median, then the
// MB/s ratio to the plain append of the same repetition (median, and each
// repetition's), then the producer goals.
func printProducer(w io.Writer, res *results) {
	fmt.Fprintf(w, "### %s\n\n", secProducer)
	fmt.Fprintf(w, "Batch construction is outside the timed region: %d batches of %d records (1 MiB) are built once; "+
		"before each chunk of %d appends, with the clock and CPU time stopped, their base offsets are reset, their "+
		"base sequences advanced (producer id %d, epoch %d, +%d per batch) and their CRCs recomputed. "+
		"Transactional: the same with the transactional bit, one transaction per chunk, ended by a COMMIT marker "+
		"(record.AppendEndTxnBatch, appended with log.OriginCoordinator) inside the timed region; marker bytes "+
		"not counted, marker latency not in the percentiles. The control row runs plain batches through the same "+
		"loop. Each cell: median (ratio to the tierlog plain row's median).\n\n",
		chunkBatches, appendCases[0].records, chunkBatches, benchProducerID, benchProducerEpoch, appendCases[0].records)
	cols := append([]string{"row"}, metricNames()...)
	cols = append(cols, ratioMetric+": median (each repetition)", "notes")
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(cols, " | "), strings.Repeat("---|", len(cols)))
	plainSec := appendCases[0].name
	rows := append([]string{tierlogName}, producerModes...)
	for _, name := range rows {
		sec := secProducer
		label := name
		if name == tierlogName {
			sec, label = plainSec, "tierlog plain (the main table's row)"
		}
		row := []string{label}
		for _, m := range appendMetrics {
			v, ok := res.median(sec, name, m.name)
			if !ok {
				row = append(row, "–")
				continue
			}
			ref, okRef := res.median(plainSec, tierlogName, m.name)
			row = append(row, fmt.Sprintf("%s (%s)", formatNum(v), ratio(v, ref, okRef)))
		}
		if name == tierlogName {
			row = append(row, "1 (reference)")
		} else if v := res.vals[cellKey{rowKey{sec, name}, ratioMetric}]; len(v) > 0 {
			each := make([]string, len(v))
			for i, x := range v {
				each[i] = fmt.Sprintf("%.3f", x)
			}
			row = append(row, fmt.Sprintf("%.3fx (%s)", median(v), strings.Join(each, ", ")))
		} else {
			row = append(row, "–")
		}
		row = append(row, strings.Join(res.notes[rowKey{sec, name}], "; "))
		fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
	}
	fmt.Fprintln(w)

	fmt.Fprint(w, "#### Goals (producer append), checked against this run\n\n| goal | this run | met |\n|---|---|---|\n")
	for _, mode := range []string{modeIdempotent, modeTransactional} {
		if v := res.vals[cellKey{rowKey{secProducer, mode}, ratioMetric}]; len(v) > 0 {
			x := median(v)
			fmt.Fprintf(w, "| %s: at most 10%% slower than tierlog plain (MB/s ratio, same repetition, median >= 0.90x) | %.3fx | %s |\n",
				mode, x, yesNo(x >= 0.9))
		}
		if v, ok := res.median(secProducer, mode, "allocs/record"); ok {
			fmt.Fprintf(w, "| %s: no per-record allocation (< 0.005 allocs/record) | %s | %s |\n", mode, formatNum(v), yesNo(v < 0.005))
		}
	}
	fmt.Fprintln(w)
}

func metricNames() []string {
	var s []string
	for _, m := range appendMetrics {
		s = append(s, m.name)
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
