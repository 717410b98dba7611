package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"
)

const secPartitions = "many open partitions, one segment each"

// partitionWorkers open partitions in parallel: creating a log costs a
// few fsyncs on some implementations, and overlapping them keeps the
// default run within its time budget. Memory and descriptors, the figures
// of this workload, do not depend on it.
const partitionWorkers = 8

// runPartitions opens up to cfg.partitions logs with one 16 KiB batch
// each, all open at once, and records the live heap and the descriptors
// they hold. It stops early (and says so) before running out of file
// descriptors, past the heap cap or past cfg.partitionsMax.
func runPartitions(newImpl func() impl, dir string, cfg config, res *results) error {
	limit := fdLimit()
	heap0, fd0, g0 := heapAfterGC(), openFDs(), runtime.NumGoroutine()
	target := cfg.partitions
	var opened []impl
	var stopped string
	defer func() {
		closeAll(opened)
		_ = os.RemoveAll(dir)
	}()
	start := time.Now()
	for len(opened) < target {
		chunk := min(100, target-len(opened))
		ims, err := openChunk(newImpl, dir, len(opened), chunk)
		opened = append(opened, ims...)
		if err != nil {
			return err
		}
		n := len(opened)
		if n == 100 && fd0 >= 0 {
			// Stay clear of the descriptor limit: a library that holds
			// several descriptors per log is measured at a smaller N.
			per := float64(openFDs()-fd0) / 100
			if fit := int(float64(limit-fd0-256) / max(per, 0.01)); fit < target {
				target = fit / 100 * 100
				stopped = fmt.Sprintf("stopped at %d: %.1f fds per partition, fd limit %d", target, per, limit)
			}
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		if grown := int64(ms.HeapAlloc) - int64(heap0); grown > cfg.partitionsHeapMax && n < target {
			// A library that buffers per log would exhaust the shared
			// machine's memory at 10,000 logs: stop at the heap cap.
			target = n
			stopped = fmt.Sprintf("stopped at %d: heap grew past %d MiB (flag -partitions-heap-mib)", n, cfg.partitionsHeapMax>>20)
		}
		if time.Since(start) > cfg.partitionsMax && n < target {
			target = n
			stopped = fmt.Sprintf("stopped at %d after %s (flag -partitions-max)", n, cfg.partitionsMax)
		}
	}
	elapsed := time.Since(start)
	n := float64(len(opened))
	heap := float64(heapAfterGC()) - float64(heap0)
	fds := float64(openFDs() - fd0)
	g := float64(runtime.NumGoroutine() - g0)
	im := opened[0]
	res.add(secPartitions, im, "partitions", n)
	res.add(secPartitions, im, "heap MiB", heap/(1<<20))
	res.add(secPartitions, im, "heap KiB/partition", heap/1024/n)
	res.add(secPartitions, im, "fds/partition", fds/n)
	res.add(secPartitions, im, "goroutines/partition", g/n)
	res.add(secPartitions, im, "open+append ms/partition (8 in parallel)", float64(elapsed.Microseconds())/1e3/n)
	if stopped != "" {
		res.note(secPartitions, im.Name(), stopped)
	}
	return nil
}

// openChunk opens partitions [first, first+n) in parallel, each with one
// 16 KiB batch, and returns those it opened.
func openChunk(newImpl func() impl, dir string, first, n int) ([]impl, error) {
	ims := make([]impl, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < partitionWorkers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := newBatch(16) // one per worker: tierlog rewrites it in place
			for i := range next {
				if err != nil {
					errs[i] = err
					continue
				}
				im := newImpl()
				if err := im.Open(filepath.Join(dir, fmt.Sprintf("p%05d", first+i)), false); err != nil {
					errs[i] = fmt.Errorf("partition %d: %w", first+i, err)
					continue
				}
				ims[i] = im
				if err := im.Append(b); err != nil {
					errs[i] = fmt.Errorf("partition %d: append: %w", first+i, err)
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	var out []impl
	for _, im := range ims {
		if im != nil {
			out = append(out, im)
		}
	}
	return out, errors.Join(errs...)
}

// closeAll releases the partitions in parallel, without the clean-close
// work where the impl offers that (Abandon).
func closeAll(ims []impl) {
	var wg sync.WaitGroup
	next := make(chan impl)
	for w := 0; w < partitionWorkers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for im := range next {
				if a, ok := im.(interface{ Abandon() error }); ok {
					_ = a.Abandon()
				} else {
					_ = im.Close()
				}
			}
		}()
	}
	for _, im := range ims {
		next <- im
	}
	close(next)
	wg.Wait()
}
