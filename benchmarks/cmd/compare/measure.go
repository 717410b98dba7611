package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"syscall"
	"time"
)

// cpuTime returns the process's user+system CPU time. Background
// goroutines of a library (pebble's flusher) are counted, which is the
// point: their work is part of the append's cost.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// minorFaults returns the process's minor page faults so far (a page
// of fresh memory touched for the first time).
func minorFaults() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Minflt
}

// heapAllocated returns the cumulative bytes of heap allocations
// (outside timed regions, as mallocs).
func heapAllocated() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

// mallocs returns the cumulative count of heap allocations. ReadMemStats
// stops the world, so it is called only outside timed regions.
func mallocs() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.Mallocs
}

// heapAfterGC returns the live heap after a full collection.
func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC() // the second cycle frees what the first one's finalizers released
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// openFDs counts this process's open file descriptors, or -1 where
// /proc/self/fd is not readable.
func openFDs() int {
	names, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(names) - 1 // ReadDir's own descriptor
}

// fdLimit returns the soft limit on open files after raising it to the
// hard limit.
func fdLimit() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 1024
	}
	if rl.Cur < rl.Max {
		rl.Cur = rl.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
		_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl)
	}
	return int(rl.Cur)
}

// percentile returns the p-th percentile (0 < p < 1) of sorted d.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)) * p)
	return sorted[min(i, len(sorted)-1)]
}

// median returns the median of xs (the mean of the middle two for an even
// count).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// copyDir copies the regular files of the tree src to dst while the log
// that owns them may still be open: what a machine crash (or kill -9)
// leaves is what the kernel had, without the library's user-space buffers.
//
// A crash leaves the files of one instant; a copy takes time, and a
// background flush of the log may rename, create or delete files during
// it (a checkpoint naming a producer snapshot that the listing came too
// early to see, a snapshot deleted before its turn). Such a mix is an
// image no crash leaves (it can cost a log a full replay it would never
// need), so the copy is taken again, into a fresh dst, until the tree's
// names are the same before and after it and none vanished: the appends
// have stopped, so the flushes they started settle within a few tries.
func copyDir(src, dst string) error {
	for try := 0; ; try++ {
		before, err := treeNames(src)
		if err != nil {
			return err
		}
		if err := os.RemoveAll(dst); err != nil {
			return err
		}
		vanished, err := copyTree(src, dst)
		if err != nil {
			return err
		}
		after, err := treeNames(src)
		if err != nil {
			return err
		}
		if !vanished && slices.Equal(before, after) {
			return nil
		}
		if try == 50 {
			return fmt.Errorf("copy of %s: the files kept changing", src)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// treeNames lists the paths under root, sorted.
func treeNames(root string) ([]string, error) {
	var names []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && path != root {
			return nil
		}
		if err != nil {
			return err
		}
		names = append(names, path)
		return nil
	})
	return names, err
}

// copyTree copies the regular files of src to dst and reports whether a
// file listed vanished before its copy.
func copyTree(src, dst string) (vanished bool, err error) {
	err = filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && path != src {
			vanished = true
			return nil
		}
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if err := copyFile(path, target); errors.Is(err, fs.ErrNotExist) {
			vanished = true
		} else if err != nil {
			return err
		}
		return nil
	})
	return vanished, err
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

func mkdirAll(dir string) error { return os.MkdirAll(dir, 0o755) }
