package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// workloadKind groups the workloads an impl may not support.
type workloadKind int

const (
	kindAppend workloadKind = iota
	kindSeqRead
	kindPointRead
	kindOpen
	kindPartitions
)

// config is the size of a run (flags).
type config struct {
	reps        int
	appendBytes int64 // per no-fsync append run, and the size of the read/open log
	syncBytes   int64 // per fsync-per-batch append run
	pointReads  int
	// pointReadsMax bounds the time of the point reads per impl and
	// repetition: a log that reloads a whole segment per miss (tidwall/wal
	// with its default 2-segment cache) would otherwise take hours.
	pointReadsMax time.Duration
	partitions    int
	partitionsMax time.Duration // per impl
	// partitionsHeapMax stops the partitions workload of an impl once the
	// heap grew by this many bytes.
	partitionsHeapMax int64
	dir               string

	// remoteSegmentBytes is the size of the segment the remote rows copy
	// and read; 0 skips them.
	remoteSegmentBytes int64
	remoteCopies       int           // copies per copy row and repetition, interleaved across rows
	remoteReads        int           // per read row and repetition
	remoteReadsMax     time.Duration // per read row and repetition
	s3                 s3Flags       // S3 rows when endpoint is set
	// walBytes is what each diskless-WAL row produces; 0 skips them.
	walBytes int64
	// cpCommits is the number of commits per control-plane row (0
	// skips those rows); cpFindBatches the batches of the FindBatches
	// partition (0 skips the find rows), cpFinds the finds per row.
	cpCommits, cpFindBatches, cpFinds int
}

// appendCase is one append workload.
type appendCase struct {
	name    string // table section
	records int    // per batch
	sync    bool
}

var appendCases = []appendCase{
	{"append 16 KiB batches, no fsync", 16, false},
	{"append 1 MiB batches, no fsync", 1024, false},
	{"append 16 KiB batches, fsync per batch", 16, true},
	{"append 1 MiB batches, fsync per batch", 1024, true},
}

// runAppend appends total bytes of batches of c.records records to a new
// log in dir and records throughput, CPU, allocations and batch latency.
// The log is left open; the caller closes it.
func runAppend(im impl, dir string, c appendCase, total int64, res *results) error {
	b, err := newBatch(c.records)
	if err != nil {
		return err
	}
	if err := im.Open(dir, c.sync); err != nil {
		return fmt.Errorf("open: %w", err)
	}
	n := int(max(1, total/int64(len(b.kafka))))
	lat := make([]time.Duration, 0, n)
	m0, cpu0 := mallocs(), cpuTime()
	start := time.Now()
	for i := 0; i < n; i++ {
		t := time.Now()
		if err := im.Append(b); err != nil {
			return fmt.Errorf("append %d: %w", i, err)
		}
		lat = append(lat, time.Since(t))
	}
	if f, ok := im.(finisher); ok {
		if err := f.Finish(); err != nil {
			return fmt.Errorf("finish: %w", err)
		}
	}
	elapsed := time.Since(start)
	cpu, allocs := cpuTime()-cpu0, mallocs()-m0
	bytes := float64(n) * float64(len(b.kafka))
	records := float64(n * c.records)
	slices.Sort(lat)
	res.add(c.name, im, "MB/s", bytes/elapsed.Seconds()/1e6)
	res.add(c.name, im, "records/s", records/elapsed.Seconds())
	res.add(c.name, im, "CPU s/GB", cpu.Seconds()/(bytes/1e9))
	res.add(c.name, im, "allocs/record", float64(allocs)/records)
	res.add(c.name, im, "p50 batch µs", micros(percentile(lat, 0.50)))
	res.add(c.name, im, "p99 batch µs", micros(percentile(lat, 0.99)))
	return nil
}

func micros(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

const (
	secSeqRead   = "sequential read from the start (warm page cache)"
	secPointRead = "point reads of random records (warm)"
	secOpen      = "open"
)

// runReadAndOpen runs, for one impl, the workloads that need a filled log:
// it fills dir (the 16 KiB no-fsync append case, whose figures it also
// records), takes a crash image of the open log, closes it cleanly, and
// measures the clean open, the sequential and point reads, and the open of
// the crash image.
func runReadAndOpen(im impl, dir string, cfg config, res *results) error {
	live, crashed := filepath.Join(dir, "live"), filepath.Join(dir, "crashed")
	if err := runAppend(im, live, appendCases[0], cfg.appendBytes, res); err != nil {
		return err
	}
	// The crash image: the files as the kernel has them while the log is
	// open and unflushed, as after kill -9.
	if err := copyDir(live, crashed); err != nil {
		return fmt.Errorf("crash image: %w", err)
	}
	if err := im.Close(); err != nil {
		return fmt.Errorf("close: %w", err)
	}

	if err := timedOpen(im, live, "open after clean close ms", res); err != nil {
		return err
	}
	if err := seqRead(im, res); err != nil {
		return err
	}
	if err := pointReads(im, cfg.pointReads, cfg.pointReadsMax, cfg.appendBytes, res); err != nil {
		return err
	}
	if err := im.Close(); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	if err := timedOpen(im, crashed, "open after crash ms", res); err != nil {
		return err
	}
	return im.Close()
}

func timedOpen(im impl, dir, metric string, res *results) error {
	start := time.Now()
	if err := im.Open(dir, false); err != nil {
		return fmt.Errorf("%s: %w", metric, err)
	}
	res.add(secOpen, im, metric, float64(time.Since(start).Microseconds())/1e3)
	return nil
}

func seqRead(im impl, res *results) error {
	r, ok := im.(seqReader)
	if !ok {
		return nil
	}
	m0, cpu0 := mallocs(), cpuTime()
	start := time.Now()
	bytes, records, err := r.ReadAll()
	if err != nil {
		return fmt.Errorf("sequential read: %w", err)
	}
	elapsed := time.Since(start)
	cpu, allocs := cpuTime()-cpu0, mallocs()-m0
	res.add(secSeqRead, im, "MB/s", float64(bytes)/elapsed.Seconds()/1e6)
	res.add(secSeqRead, im, "CPU s/GB", cpu.Seconds()/(float64(bytes)/1e9))
	if records > 0 {
		res.add(secSeqRead, im, "allocs/record", float64(allocs)/float64(records))
	}
	return nil
}

// pointReads reads n random records of the log filled by runReadAndOpen
// (16 records per batch) after a warm-up pass of n/10 reads, stopping
// each phase early (with a note) at its share of limit.
func pointReads(im impl, n int, limit time.Duration, logBytes int64, res *results) error {
	r, ok := im.(pointReader)
	if !ok || n == 0 {
		return nil
	}
	b, err := newBatch(appendCases[0].records)
	if err != nil {
		return err
	}
	records := max(1, logBytes/int64(len(b.kafka))) * int64(b.records())
	rng := rand.New(rand.NewPCG(7, 11))
	warm := time.Now()
	for i := 0; i < n/10 && time.Since(warm) < limit/4; i++ { // indexes loaded, caches filled
		if _, err := r.ReadRecord(rng.Int64N(records)); err != nil {
			return fmt.Errorf("point read warm-up: %w", err)
		}
	}
	lat := make([]time.Duration, 0, n)
	var got int64 // bytes returned
	m0 := mallocs()
	start := time.Now()
	for len(lat) < n {
		o := rng.Int64N(records)
		t := time.Now()
		k, err := r.ReadRecord(o)
		if err != nil {
			return fmt.Errorf("point read of record %d: %w", o, err)
		}
		lat = append(lat, time.Since(t))
		got += int64(k)
		if len(lat)%64 == 0 && time.Since(start) > limit*3/4 {
			res.note(secPointRead, im.Name(), fmt.Sprintf("time-capped (flag -point-reads-max, %s): fewer reads than asked", limit))
			break
		}
	}
	elapsed := time.Since(start)
	n = len(lat)
	allocs := mallocs() - m0
	slices.Sort(lat)
	res.add(secPointRead, im, "p50 µs", micros(percentile(lat, 0.50)))
	res.add(secPointRead, im, "p99 µs", micros(percentile(lat, 0.99)))
	res.add(secPointRead, im, "p99.9 µs", micros(percentile(lat, 0.999)))
	res.add(secPointRead, im, "ops/s", float64(n)/elapsed.Seconds())
	res.add(secPointRead, im, "allocs/op", float64(allocs)/float64(n))
	// What one read returns differs: the whole 16 KiB batch (tierlog, as a
	// Kafka fetch, and the raw file) or the one 1 KiB record (the peers).
	res.add(secPointRead, im, "KiB returned/op", float64(got)/float64(n)/1024)
	return nil
}

// runAppendOnly runs one of the other append cases on a fresh log and
// removes it.
func runAppendOnly(im impl, dir string, c appendCase, total int64, res *results) error {
	if err := runAppend(im, dir, c, total, res); err != nil {
		_ = im.Close()
		return err
	}
	if err := im.Close(); err != nil {
		return err
	}
	return os.RemoveAll(dir)
}
