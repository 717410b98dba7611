package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tierlog/tierlog/log"
	"github.com/tierlog/tierlog/log/record"
	"github.com/tierlog/tierlog/logmanager"
	"github.com/tierlog/tierlog/remote"
)

// The broker's-life row: N partitions through logmanager, each with a few
// batches, closed, opened after the clean shutdown, written and killed
// (a child process that SIGKILLs itself: what the kernel keeps after
// kill -9), opened after the crash. Beside it a baseline of plain files:
// one file per partition in its own directory, created and written,
// fsynced one by one (16 at a time: what a close that makes each
// partition durable on its own pays at least), and opened and read.

const (
	lifeBatches     = 3 // batches per partition at creation
	lifeChildEnv    = "TIERLOG_COMPARE_LIFE_CHILD"
	lifeFsyncers    = 16
	lifeGoalOpen    = 1.0 // seconds for 10,000 partitions
	lifeGoalCrash   = 5.0
	lifeGoalClose   = 5.0
	lifeGoalHeapKiB = 8.0
)

// lifePhase is one measured phase.
type lifePhase struct {
	name      string
	seconds   float64
	cpu       float64 // the process's user+system seconds
	baseline  float64 // seconds, 0: none
	goal10k   float64 // seconds for 10,000 partitions, 0: none
	baseNotes string
}

func lifeOptions(dir string) logmanager.Options {
	return logmanager.Options{Dirs: []string{dir}, FS: vfs.Default, NoBackgroundTasks: true,
		RecoveryThreadsPerDir: runtime.GOMAXPROCS(0)}
}

func lifeTP(p int) remote.TopicIDPartition {
	return remote.TopicIDPartition{Topic: "life", Partition: int32(p)}
}

// lifeBatch is a batch of one 100-byte record.
func lifeBatch() ([]byte, error) {
	b := record.NewBuilder(record.DefaultBuilderOptions())
	b.Add(time.Now().UnixMilli(), nil, make([]byte, 100))
	return b.Build()
}

// runLifeChild is the child process of the kill phase: it opens the
// directory, appends one batch to every partition, checkpoints the high
// watermarks and kills itself with SIGKILL, closing nothing.
func runLifeChild(arg string) error {
	dir, nStr, ok := cutLast(arg, ",")
	n, err := strconv.Atoi(nStr)
	if !ok || err != nil {
		return fmt.Errorf("bad %s=%q", lifeChildEnv, arg)
	}
	m, err := logmanager.Open(context.Background(), lifeOptions(dir))
	if err != nil {
		return err
	}
	batch, err := lifeBatch()
	if err != nil {
		return err
	}
	for p := range n {
		l, err := m.Get(lifeTP(p))
		if err != nil {
			return err
		}
		if _, err := l.AppendAsLeader(bytes.Clone(batch), 0, log.OriginClient); err != nil {
			return err
		}
		l.UpdateHighWatermark(l.LogEndOffset())
	}
	if err := m.RunTask(logmanager.TaskHighWatermarkCheckpoint); err != nil {
		return err
	}
	return syscall.Kill(os.Getpid(), syscall.SIGKILL)
}

func cutLast(s, sep string) (string, string, bool) {
	for i := len(s) - len(sep); i >= 0; i-- {
		if s[i:i+len(sep)] == sep {
			return s[:i], s[i+len(sep):], true
		}
	}
	return "", "", false
}

// runBrokerLife runs the row with n partitions under root and prints it.
func runBrokerLife(w, stderr io.Writer, root string, n int) error {
	loadStart := loadAvg()
	dir := filepath.Join(root, "broker-life")
	_ = os.RemoveAll(dir)
	defer os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	batch, err := lifeBatch()
	if err != nil {
		return err
	}
	opts := lifeOptions(dir)
	var phases []lifePhase
	timed := func(name string, goal float64, fn func() error) error {
		fmt.Fprintf(stderr, "broker life: %s\n", name)
		start, cpu0 := time.Now(), cpuTime()
		if err := fn(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		phases = append(phases, lifePhase{name: name, seconds: time.Since(start).Seconds(), cpu: (cpuTime() - cpu0).Seconds(), goal10k: goal})
		return nil
	}
	var m *logmanager.Manager
	err = timed("create (open empty, GetOrCreate, 3 batches each)", 0, func() error {
		var err error
		if m, err = logmanager.Open(context.Background(), opts); err != nil {
			return err
		}
		for p := range n {
			l, err := m.GetOrCreate(lifeTP(p), "")
			if err != nil {
				return err
			}
			for range lifeBatches {
				if _, err := l.AppendAsLeader(bytes.Clone(batch), 0, log.OriginClient); err != nil {
					return err
				}
			}
			l.UpdateHighWatermark(l.LogEndOffset())
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := timed("close (after the writes)", lifeGoalClose, m.Close); err != nil {
		return err
	}
	var heapPerPartition float64
	err = timed("open after a clean shutdown", lifeGoalOpen, func() error {
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		var err error
		if m, err = logmanager.Open(context.Background(), opts); err != nil {
			return err
		}
		if got := len(m.Partitions()); got != n {
			return fmt.Errorf("%d partitions open, want %d", got, n)
		}
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		heapPerPartition = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
		return nil
	})
	if err != nil {
		return err
	}
	if err := timed("close (idle since the open)", lifeGoalClose, m.Close); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "broker life: kill -9 (a child process writes a batch to each partition and SIGKILLs itself)\n")
	child := exec.Command(os.Args[0])
	child.Env = append(os.Environ(), lifeChildEnv+"="+dir+","+strconv.Itoa(n))
	child.Stderr = stderr
	var exitErr *exec.ExitError
	if err := child.Run(); !errors.As(err, &exitErr) || exitErr.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		return fmt.Errorf("kill -9 child: %v (want killed by SIGKILL)", err)
	}
	err = timed("open after kill -9", lifeGoalCrash, func() error {
		var err error
		if m, err = logmanager.Open(context.Background(), opts); err != nil {
			return err
		}
		for p := range n {
			l, err := m.Get(lifeTP(p))
			if err != nil {
				return err
			}
			if l.LogEndOffset() != lifeBatches+1 {
				return fmt.Errorf("partition %d ends at %d after the crash, want %d", p, l.LogEndOffset(), lifeBatches+1)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := timed("close (after the recovery)", lifeGoalClose, m.Close); err != nil {
		return err
	}
	base, err := plainFilesBaseline(filepath.Join(root, "broker-life-plain"), n, lifeBatches*len(batch))
	if err != nil {
		return err
	}
	for i := range phases {
		switch i {
		case 0:
			phases[i].baseline, phases[i].baseNotes = base.create, "mkdir, create, write"
		case 1, 3, 5:
			phases[i].baseline, phases[i].baseNotes = base.fsync, fmt.Sprintf("fsync each file, %d at a time", lifeFsyncers)
		case 2, 4:
			phases[i].baseline, phases[i].baseNotes = base.open, "open, read, close each file"
		}
	}
	printBrokerLife(w, n, phases, heapPerPartition, loadStart, loadAvg())
	return nil
}

type plainTimes struct{ create, fsync, open float64 }

// plainFilesBaseline times n plain files, each in its own directory.
func plainFilesBaseline(dir string, n, size int) (plainTimes, error) {
	_ = os.RemoveAll(dir)
	defer os.RemoveAll(dir)
	var t plainTimes
	data := make([]byte, size)
	path := func(p int) string { return filepath.Join(dir, "p-"+strconv.Itoa(p), "data") }
	start := time.Now()
	for p := range n {
		if err := os.MkdirAll(filepath.Dir(path(p)), 0o755); err != nil {
			return t, err
		}
		if err := os.WriteFile(path(p), data, 0o644); err != nil {
			return t, err
		}
	}
	t.create = time.Since(start).Seconds()
	start = time.Now()
	if err := forAll(n, lifeFsyncers, func(p int) error {
		f, err := os.OpenFile(path(p), os.O_RDWR, 0)
		if err != nil {
			return err
		}
		return errors.Join(f.Sync(), f.Close())
	}); err != nil {
		return t, err
	}
	t.fsync = time.Since(start).Seconds()
	start = time.Now()
	if err := forAll(n, runtime.GOMAXPROCS(0), func(p int) error {
		_, err := os.ReadFile(path(p))
		return err
	}); err != nil {
		return t, err
	}
	t.open = time.Since(start).Seconds()
	return t, nil
}

// forAll runs fn(0..n-1), workers at a time, and returns the first error.
func forAll(n, workers int, fn func(int) error) error {
	jobs := make(chan int)
	var (
		once  sync.Once
		first error
		wg    sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for p := range jobs {
				if err := fn(p); err != nil {
					once.Do(func() { first = err })
				}
			}
		})
	}
	for p := range n {
		jobs <- p
	}
	close(jobs)
	wg.Wait()
	return first
}

func printBrokerLife(w io.Writer, n int, phases []lifePhase, heap float64, loadStart, loadEnd string) {
	fmt.Fprintf(w, "### broker's life with %s partitions (logmanager, tierlog only, beside plain files)\n\n", thousands(int64(n)))
	fmt.Fprintf(w, "One log directory, %d partitions created through logmanager with %d batches of one 100-byte record each "+
		"(RecoveryThreadsPerDir = GOMAXPROCS = %d), closed, opened after the clean shutdown, closed idle, written "+
		"(one more batch each) by a child process that then kills itself with SIGKILL (the page cache survives, as after "+
		"kill -9), opened after the crash (each partition checked to hold all %d batches) and closed. The baseline is "+
		"the same number of plain files, each in its own directory, holding the same bytes. Load average (1, 5, 15 min) "+
		"at start: %s, at end: %s.\n\n", n, lifeBatches, runtime.GOMAXPROCS(0), lifeBatches+1, loadStart, loadEnd)
	fmt.Fprintf(w, "CPU is the process's user+system time in the phase (garbage collection included): on a loaded machine "+
		"the wall time stretches, the CPU time much less.\n\n")
	fmt.Fprintf(w, "| phase | seconds | ms/partition | goal for 10,000 (ms/partition) | CPU seconds | plain files: seconds (what) | ratio to plain |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|\n")
	for _, p := range phases {
		per := p.seconds * 1000 / float64(n)
		goal := "-"
		if p.goal10k > 0 {
			g := p.goal10k * 1000 / 10_000
			verdict := "met"
			if per > g {
				verdict = fmt.Sprintf("%.1fx over", per/g)
			}
			goal = fmt.Sprintf("%.2f: %s", g, verdict)
		}
		base, ratio := "-", "-"
		if p.baseline > 0 {
			base = fmt.Sprintf("%.2f (%s)", p.baseline, p.baseNotes)
			ratio = fmt.Sprintf("%.1f", p.seconds/p.baseline)
		}
		fmt.Fprintf(w, "| %s | %.2f | %.3f | %s | %.2f | %s | %s |\n", p.name, p.seconds, per, goal, p.cpu, base, ratio)
	}
	verdict := "met"
	if heap/1024 > lifeGoalHeapKiB {
		verdict = "over"
	}
	fmt.Fprintf(w, "\nHeap per idle open partition (live heap after GC, after the clean open, over the heap before it): "+
		"%.0f bytes (goal <= %.0f KiB: %s).\n\n", heap, lifeGoalHeapKiB, verdict)
}
